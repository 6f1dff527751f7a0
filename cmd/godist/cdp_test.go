package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// This file is a small Chrome DevTools protocol client for the browser test. It talks to
// headless Chromium over --remote-debugging-pipe (the browser reads commands from its fd 3
// and writes replies and events to its fd 4, each message JSON ended by a NUL byte), so it
// needs no port and no websocket library.

// chromiumPath is Debian's Chromium (the chromium package).
const chromiumPath = "/usr/bin/chromium"

// browser is a headless Chromium driven over the DevTools pipe.
type browser struct {
	cmd  *exec.Cmd
	in   io.WriteCloser // the browser's fd 3: commands
	done chan struct{}  // closed when the reader ends (the browser closed fd 4 or exited)

	wmu sync.Mutex // one writer at a time: messages must not interleave

	mu      sync.Mutex
	nextID  int64
	pending map[int64]chan cdpMessage
	err     error    // why the reader ended
	console []string // console messages and exceptions of the pages, for failure reports
	stderr  bytes.Buffer
}

// cdpMessage is any message of the protocol: a reply (ID set) or an event (Method set).
type cdpMessage struct {
	ID        int64           `json:"id,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
	Method    string          `json:"method,omitempty"`
	Params    json.RawMessage `json:"params,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *cdpError       `json:"error,omitempty"`
}

type cdpError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    string `json:"data,omitempty"`
}

func (e *cdpError) Error() string {
	if e.Data != "" {
		return fmt.Sprintf("cdp error %d: %s (%s)", e.Code, e.Message, e.Data)
	}
	return fmt.Sprintf("cdp error %d: %s", e.Code, e.Message)
}

// needChromium skips the test when Chromium is not installed.
func needChromium(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Skipf("%s not found (installer/deps.sh installs the chromium package): %v", chromiumPath, err)
	}
}

// startBrowser starts headless Chromium with a new profile in a temporary directory and
// stops it (its whole process group) when the test ends. It skips the test when Chromium
// is not installed.
func startBrowser(t *testing.T) *browser {
	t.Helper()
	needChromium(t)
	profile := t.TempDir()
	cmdR, cmdW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(chromiumPath,
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-extensions", "--disable-default-apps", "--mute-audio", "--hide-scrollbars",
		"--user-data-dir="+profile, "--remote-debugging-pipe", "--window-size=1280,1600",
		"about:blank")
	cmd.ExtraFiles = []*os.File{cmdR, outW} // fd 3, fd 4
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Env = append(os.Environ(), "HOME="+profile)
	b := &browser{cmd: cmd, in: cmdW, done: make(chan struct{}), pending: map[int64]chan cdpMessage{}}
	cmd.Stderr = &lockedWriter{mu: &b.mu, w: &b.stderr}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", chromiumPath, err)
	}
	cmdR.Close()
	outW.Close()
	go b.read(outR)
	t.Cleanup(func() { b.close(t) })
	return b
}

// lockedWriter serializes writes to w under mu.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// close asks the browser to quit, then kills its process group if it is still there.
func (b *browser) close(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = b.call(ctx, "", "Browser.close", nil, nil)
	exited := make(chan error, 1)
	go func() { exited <- b.cmd.Wait() }()
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
	// Renderer and helper processes share the group; none may outlive the test.
	_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
	b.in.Close()
	if t.Failed() {
		b.mu.Lock()
		t.Logf("chromium stderr (last 4 KiB):\n%s", tail(b.stderr.String(), 4096))
		t.Logf("page console:\n%s", tail(strings.Join(b.console, "\n"), 8192))
		b.mu.Unlock()
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// read dispatches the browser's messages: replies to their callers, console events to the log.
func (b *browser) read(r io.ReadCloser) {
	defer r.Close()
	br := bufio.NewReaderSize(r, 1<<20)
	var err error
	for {
		var raw []byte
		raw, err = br.ReadBytes(0)
		if err != nil {
			break
		}
		var m cdpMessage
		if err = json.Unmarshal(raw[:len(raw)-1], &m); err != nil {
			err = fmt.Errorf("cdp: bad message %.200q: %w", raw, err)
			break
		}
		b.mu.Lock()
		if m.ID != 0 {
			if ch, ok := b.pending[m.ID]; ok {
				delete(b.pending, m.ID)
				ch <- m
			}
		} else {
			b.event(m)
		}
		b.mu.Unlock()
	}
	b.mu.Lock()
	if errors.Is(err, io.EOF) {
		err = errors.New("cdp: the browser closed the pipe")
	}
	b.err = err
	b.mu.Unlock()
	close(b.done)
}

// event keeps the pages' console output and uncaught exceptions (b.mu held).
func (b *browser) event(m cdpMessage) {
	switch m.Method {
	case "Runtime.consoleAPICalled":
		var p struct {
			Type string `json:"type"`
			Args []struct {
				Value       any    `json:"value"`
				Description string `json:"description"`
			} `json:"args"`
		}
		if json.Unmarshal(m.Params, &p) == nil {
			var parts []string
			for _, a := range p.Args {
				if a.Value != nil {
					parts = append(parts, fmt.Sprint(a.Value))
				} else {
					parts = append(parts, a.Description)
				}
			}
			b.console = append(b.console, "console."+p.Type+": "+strings.Join(parts, " "))
		}
	case "Runtime.exceptionThrown":
		var p struct {
			ExceptionDetails struct {
				Text      string `json:"text"`
				Exception struct {
					Description string `json:"description"`
				} `json:"exception"`
			} `json:"exceptionDetails"`
		}
		if json.Unmarshal(m.Params, &p) == nil {
			b.console = append(b.console, "exception: "+p.ExceptionDetails.Text+" "+p.ExceptionDetails.Exception.Description)
		}
	}
}

// call sends method with params to the target of session ("" is the browser) and decodes
// the result into result (when not nil).
func (b *browser) call(ctx context.Context, session, method string, params, result any) error {
	b.mu.Lock()
	if b.err != nil {
		err := b.err
		b.mu.Unlock()
		return fmt.Errorf("%s: %w", method, err)
	}
	b.nextID++
	id := b.nextID
	ch := make(chan cdpMessage, 1)
	b.pending[id] = ch
	b.mu.Unlock()
	msg := map[string]any{"id": id, "method": method}
	if params != nil {
		msg["params"] = params
	}
	if session != "" {
		msg["sessionId"] = session
	}
	raw, err := json.Marshal(msg)
	if err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	b.wmu.Lock()
	_, err = b.in.Write(append(raw, 0))
	b.wmu.Unlock()
	if err != nil {
		return fmt.Errorf("%s: write to the browser: %w", method, err)
	}
	select {
	case m := <-ch:
		if m.Error != nil {
			return fmt.Errorf("%s: %w", method, m.Error)
		}
		if result != nil {
			if err := json.Unmarshal(m.Result, result); err != nil {
				return fmt.Errorf("%s: decode %.200s: %w", method, m.Result, err)
			}
		}
		return nil
	case <-b.done:
		b.mu.Lock()
		defer b.mu.Unlock()
		return fmt.Errorf("%s: %w", method, b.err)
	case <-ctx.Done():
		b.mu.Lock()
		delete(b.pending, id)
		b.mu.Unlock()
		return fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

// page is one tab, attached with a flat session.
type page struct {
	b       *browser
	session string
}

// newPage opens a tab of width x height CSS pixels.
func (b *browser) newPage(ctx context.Context, width, height int) (*page, error) {
	var target struct {
		TargetID string `json:"targetId"`
	}
	if err := b.call(ctx, "", "Target.createTarget", map[string]any{"url": "about:blank"}, &target); err != nil {
		return nil, err
	}
	var attached struct {
		SessionID string `json:"sessionId"`
	}
	if err := b.call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &attached); err != nil {
		return nil, err
	}
	p := &page{b: b, session: attached.SessionID}
	for _, m := range []string{"Page.enable", "Runtime.enable"} {
		if err := b.call(ctx, p.session, m, nil, nil); err != nil {
			return nil, err
		}
	}
	err := b.call(ctx, p.session, "Emulation.setDeviceMetricsOverride",
		map[string]any{"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}, nil)
	return p, err
}

// navigate loads url in the page.
func (p *page) navigate(ctx context.Context, url string) error {
	var r struct {
		ErrorText string `json:"errorText"`
	}
	if err := p.b.call(ctx, p.session, "Page.navigate", map[string]any{"url": url}, &r); err != nil {
		return err
	}
	if r.ErrorText != "" {
		return fmt.Errorf("navigate %s: %s", url, r.ErrorText)
	}
	return nil
}

// bringToFront makes the page the browser's visible tab (a background tab's rendering and
// timers may be throttled).
func (p *page) bringToFront(ctx context.Context) error {
	return p.b.call(ctx, p.session, "Page.bringToFront", nil, nil)
}

// eval evaluates the JavaScript expression expr in the page (awaiting a promise) and decodes
// its JSON value into result (when not nil).
func (p *page) eval(ctx context.Context, expr string, result any) error {
	var r struct {
		Result struct {
			Type  string          `json:"type"`
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	params := map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true}
	if err := p.b.call(ctx, p.session, "Runtime.evaluate", params, &r); err != nil {
		return err
	}
	if e := r.ExceptionDetails; e != nil {
		return fmt.Errorf("javascript %.120q: %s %s", expr, e.Text, e.Exception.Description)
	}
	if result == nil {
		return nil
	}
	if len(r.Result.Value) == 0 {
		return fmt.Errorf("javascript %.120q returned %s, not a JSON value", expr, r.Result.Type)
	}
	return json.Unmarshal(r.Result.Value, result)
}

// waitFor evaluates expr (a JavaScript expression whose value is JSON) every 25ms until
// done reports true for its value or timeout passes; it returns the last value. The error
// names what was awaited (what) and shows the last value.
func (p *page) waitFor(ctx context.Context, what string, timeout time.Duration, expr string, done func(json.RawMessage) bool) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	var last json.RawMessage
	var lastErr error
	for {
		var v json.RawMessage
		err := p.eval(ctx, expr, &v)
		if err == nil && done(v) {
			return v, nil
		}
		if err == nil {
			last = v
		} else if ctx.Err() == nil {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			return last, fmt.Errorf("waiting %v for %s: %w; last value %s, last error %v", timeout, what, ctx.Err(), tail(string(last), 4000), lastErr)
		case <-tick.C:
		}
	}
}

// click presses and releases the left mouse button at (x, y), CSS pixels in the viewport:
// the browser dispatches real mousedown, mouseup and click events to what is there.
func (p *page) click(ctx context.Context, x, y float64) error {
	for _, typ := range []string{"mouseMoved", "mousePressed", "mouseReleased"} {
		params := map[string]any{"type": typ, "x": x, "y": y, "button": "left", "clickCount": 1}
		if typ == "mouseMoved" {
			params = map[string]any{"type": typ, "x": x, "y": y}
		}
		if err := p.b.call(ctx, p.session, "Input.dispatchMouseEvent", params, nil); err != nil {
			return err
		}
	}
	return nil
}

// screenshot saves a PNG of the viewport to dir/name and returns its path.
func (p *page) screenshot(ctx context.Context, dir, name string) (string, error) {
	var r struct {
		Data string `json:"data"`
	}
	if err := p.b.call(ctx, p.session, "Page.captureScreenshot", map[string]any{"format": "png"}, &r); err != nil {
		return "", err
	}
	png, err := base64.StdEncoding.DecodeString(r.Data)
	if err != nil {
		return "", fmt.Errorf("screenshot %s: %w", name, err)
	}
	path := filepath.Join(dir, name)
	return path, os.WriteFile(path, png, 0o644)
}
