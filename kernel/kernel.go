// Package kernel implements the Jupyter messaging protocol (version 5.3) over ZeroMQ: the
// connection file, the five sockets (shell, control, stdin, iopub, heartbeat), HMAC-SHA256
// signatures, bounded frame parsing, busy/idle status, execution counting, history, comms
// and interrupts. It runs cells through an Executor and knows nothing of how cells are
// interpreted.
//
// A kernel is built with New, which binds the sockets, and served with Run:
//
//	k, err := kernel.New(kernel.Config{Connection: ci, Executor: ex})
//	...
//	err = k.Run(ctx) // returns after a shutdown_request or when ctx ends
package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/go-zeromq/zmq4"
)

// HelpLink is an entry of the front end's help menu.
type HelpLink struct {
	Text string `json:"text"`
	URL  string `json:"url"`
}

// Info describes the kernel in kernel_info_reply.
type Info struct {
	Implementation        string // default "godist"
	ImplementationVersion string
	LanguageVersion       string // default: the Go version the kernel was built with
	Banner                string
	HelpLinks             []HelpLink
}

// Config configures a Kernel.
type Config struct {
	// Connection gives the ports, transport and key. Ports of 0 are chosen by the system
	// and written back.
	Connection *ConnectionInfo
	// Executor runs the cells; the kernel closes it when Run returns.
	Executor Executor
	// Info is what kernel_info_reply says about the kernel.
	Info Info
	// History stores executed cells; nil keeps them in memory only.
	History *History
	// Log receives the kernel's own diagnostics; nil logs to standard error. Never
	// standard output: cells' output is captured there.
	Log *log.Logger
	// Limits bound incoming frames; the zero value means DefaultLimits.
	Limits Limits
	// ShutdownGrace is how long Run waits for a running cell to return after a shutdown
	// (default 2s).
	ShutdownGrace time.Duration
}

// Kernel serves the Jupyter protocol on its five sockets.
type Kernel struct {
	cfg     Config
	key     []byte
	session string
	user    string
	log     *log.Logger
	hist    *History
	limits  Limits

	shell, control, stdin, iopub, hb zmq4.Socket
	shellMu, controlMu, stdinMu      sync.Mutex
	iopubMu                          sync.Mutex

	ctx    context.Context // the kernel's life
	cancel context.CancelFunc

	execMu     sync.Mutex
	execCancel context.CancelFunc // the running cell's, nil when idle
	execCell   *cellOutput        // the running cell's output, nil when idle (comm.go)

	// Owned by the shell goroutine.
	execCount   int
	abortBefore time.Time

	inputMu sync.Mutex
	inputCh chan *Message

	commMu        sync.Mutex
	targets       map[string]CommTarget
	comms         map[string]*Comm
	execObservers []func(metadata map[string]any) // see each execute_request's metadata

	restart bool
	started time.Time // when Run began serving
}

// inbound is a shell request with the time it arrived.
type inbound struct {
	msg     *Message
	arrived time.Time
}

// New checks cfg, binds the five sockets and returns the kernel, ready to Run.
func New(cfg Config) (*Kernel, error) {
	if cfg.Connection == nil {
		return nil, errors.New("kernel: Config.Connection is nil")
	}
	if cfg.Executor == nil {
		return nil, errors.New("kernel: Config.Executor is nil")
	}
	if err := cfg.Connection.Validate(); err != nil {
		return nil, fmt.Errorf("kernel: connection: %w", err)
	}
	if cfg.Limits == (Limits{}) {
		cfg.Limits = DefaultLimits
	}
	if cfg.Log == nil {
		cfg.Log = log.New(os.Stderr, "godist kernel: ", log.LstdFlags)
	}
	if cfg.Info.Implementation == "" {
		cfg.Info.Implementation = "godist"
	}
	if cfg.Info.LanguageVersion == "" {
		cfg.Info.LanguageVersion = strings.TrimPrefix(runtime.Version(), "go")
	}
	if cfg.ShutdownGrace <= 0 {
		cfg.ShutdownGrace = 2 * time.Second
	}
	hist := cfg.History
	if hist == nil {
		hist, _ = NewHistory("")
	}
	user := os.Getenv("USER")
	if user == "" {
		user = "kernel"
	}
	ctx, cancel := context.WithCancel(context.Background())
	k := &Kernel{
		cfg:     cfg,
		key:     []byte(cfg.Connection.Key),
		session: newID(),
		user:    user,
		log:     cfg.Log,
		hist:    hist,
		limits:  cfg.Limits,
		ctx:     ctx,
		cancel:  cancel,
		inputCh: make(chan *Message, 1),
		targets: map[string]CommTarget{},
		comms:   map[string]*Comm{},
	}
	// A send to a ROUTER with no peer blocks until the timeout: keep it short so that a
	// front end that went away cannot stall the kernel for long.
	opt, logOpt := zmq4.WithTimeout(10*time.Second), zmq4.WithLogger(cfg.Log)
	ci := cfg.Connection
	k.shell = zmq4.NewRouter(ctx, opt, logOpt)
	k.control = zmq4.NewRouter(ctx, opt, logOpt)
	k.stdin = zmq4.NewRouter(ctx, opt, logOpt)
	k.iopub = zmq4.NewPub(ctx, opt, logOpt)
	k.hb = zmq4.NewRouter(ctx, opt, logOpt)
	binds := []struct {
		name string
		sck  zmq4.Socket
		port *int
	}{
		{"shell", k.shell, &ci.ShellPort}, {"control", k.control, &ci.ControlPort},
		{"stdin", k.stdin, &ci.StdinPort}, {"iopub", k.iopub, &ci.IOPubPort}, {"hb", k.hb, &ci.HBPort},
	}
	for _, b := range binds {
		if err := b.sck.Listen(ci.listenEndpoint(*b.port)); err != nil {
			k.closeSockets()
			cancel()
			return nil, fmt.Errorf("kernel: bind %s socket to %s: %w", b.name, ci.endpoint(*b.port), err)
		}
		if *b.port == 0 {
			if a, ok := b.sck.Addr().(*net.TCPAddr); ok {
				*b.port = a.Port
			}
		}
	}
	return k, nil
}

// Connection returns the connection information with the ports actually bound.
func (k *Kernel) Connection() ConnectionInfo { return *k.cfg.Connection }

// Session returns the kernel's session id, which its message headers carry.
func (k *Kernel) Session() string { return k.session }

// Restart reports whether the shutdown that ended Run asked for a restart.
func (k *Kernel) Restart() bool { return k.restart }

func (k *Kernel) closeSockets() {
	for _, s := range []zmq4.Socket{k.shell, k.control, k.stdin, k.iopub, k.hb} {
		if s != nil {
			_ = s.Close()
		}
	}
}

// Run serves requests until a shutdown_request arrives, Shutdown is called or ctx ends.
// It then interrupts the running cell, waits for it up to the shutdown grace, closes the
// sockets and the executor.
func (k *Kernel) Run(ctx context.Context) error {
	k.started = time.Now()
	var wg sync.WaitGroup
	shellQ := make(chan inbound, 64)
	start := func(f func()) {
		wg.Add(1)
		go func() { defer wg.Done(); f() }()
	}
	start(func() { k.heartbeat() })
	start(func() {
		k.readLoop("shell", k.shell, func(m *Message) {
			// Urgent comms are served now while a cell runs; between cells, in order with
			// busy/idle as every request.
			if k.runningCell() != nil && (m.Header.MsgType == "comm_msg" && k.urgentCommMsg(m) ||
				m.Header.MsgType == "comm_open" && k.urgentCommOpen(m)) {
				return // handled now, beside the running cell
			}
			select {
			case shellQ <- inbound{m, time.Now()}:
			case <-k.ctx.Done():
			}
		})
	})
	start(func() { k.readLoop("control", k.control, k.handleControl) })
	start(func() { k.readLoop("stdin", k.stdin, k.handleStdin) })
	shellDone := make(chan struct{})
	go func() {
		defer close(shellDone)
		for {
			select {
			case <-k.ctx.Done():
				return
			case in := <-shellQ:
				k.handleShell(in)
			}
		}
	}()

	select {
	case <-ctx.Done():
	case <-k.ctx.Done():
	}
	k.cancel()
	k.Interrupt()
	select {
	case <-shellDone:
	case <-time.After(k.cfg.ShutdownGrace):
		k.log.Printf("a cell did not stop within %v of the shutdown; exiting anyway", k.cfg.ShutdownGrace)
	}
	// Let the publisher send what is queued (the final idle, shutdown_reply).
	time.Sleep(20 * time.Millisecond)
	k.closeSockets()
	wg.Wait()
	if err := k.cfg.Executor.Close(); err != nil {
		return fmt.Errorf("kernel: close executor: %w", err)
	}
	return nil
}

// staleWindow is how long after Run starts a request dated before the start is taken for
// one queued for the kernel this one replaces (a restart reuses the ports, and a front
// end's sockets deliver what they queued while no kernel listened). Past it, an earlier
// date only means a front end's clock lags ours.
const staleWindow = 10 * time.Second

// forEarlierKernel reports whether m was sent before this kernel started serving, within
// staleWindow of the start.
func (k *Kernel) forEarlierKernel(m *Message) bool {
	sent, err := time.Parse(time.RFC3339Nano, m.Header.Date)
	return err == nil && sent.Before(k.started) && time.Since(k.started) < staleWindow
}

// Shutdown stops Run as a shutdown_request would.
func (k *Kernel) Shutdown() { k.cancel() }

// Interrupt cancels the running cell, if any. It is safe from any goroutine and from a
// signal handler's goroutine.
func (k *Kernel) Interrupt() {
	k.execMu.Lock()
	defer k.execMu.Unlock()
	if k.execCancel != nil {
		k.execCancel()
	}
}

// readLoop receives messages on sck, drops (and logs) those that fail to parse or verify,
// and hands the others to handle, until the socket closes.
func (k *Kernel) readLoop(name string, sck zmq4.Socket, handle func(*Message)) {
	for {
		raw, err := sck.Recv()
		if err != nil {
			if k.ctx.Err() == nil {
				k.log.Printf("%s: receive: %v", name, err)
				if errors.Is(err, context.Canceled) {
					return
				}
				continue
			}
			return
		}
		m, err := ParseFrames(raw.Frames, k.key, k.limits)
		if err != nil {
			k.log.Printf("%s: dropped message: %v", name, err)
			continue
		}
		handle(m)
	}
}

// heartbeat echoes every message back to its sender (a ROUTER serving REQ clients).
func (k *Kernel) heartbeat() {
	for {
		msg, err := k.hb.Recv()
		if err != nil {
			if k.ctx.Err() != nil || errors.Is(err, context.Canceled) {
				return
			}
			continue
		}
		if len(msg.Frames) > k.limits.MaxFrames {
			continue
		}
		if err := k.hb.SendMulti(zmq4.NewMsgFrom(msg.Frames...)); err != nil && k.ctx.Err() == nil {
			k.log.Printf("heartbeat: send: %v", err)
		}
	}
}

// send builds a message and sends it on a ROUTER socket to parent's identities.
func (k *Kernel) send(sck zmq4.Socket, mu *sync.Mutex, parent *Message, msgType string, content any) {
	m, err := NewMessage(msgType, parent, k.session, k.user, content)
	if err != nil {
		k.log.Printf("%v", err)
		return
	}
	mu.Lock()
	defer mu.Unlock()
	if err := sck.SendMulti(zmq4.NewMsgFrom(m.Encode(k.key)...)); err != nil && k.ctx.Err() == nil {
		k.log.Printf("send %s: %v", msgType, err)
	}
}

// publish sends a message on iopub.
func (k *Kernel) publish(parent *Message, msgType string, content any, buffers ...[]byte) {
	k.publishMeta(parent, msgType, content, nil, buffers...)
}

// publishMeta is publish with the message's metadata (nil: {}).
func (k *Kernel) publishMeta(parent *Message, msgType string, content any, metadata map[string]any, buffers ...[]byte) {
	m, err := NewMessage(msgType, parent, k.session, k.user, content)
	if err != nil {
		k.log.Printf("%v", err)
		return
	}
	if len(metadata) > 0 {
		raw, err := json.Marshal(metadata)
		if err != nil {
			k.log.Printf("publish %s: metadata: %v", msgType, err)
			return
		}
		m.Metadata = raw
	}
	topic := "kernel." + k.session + "." + msgType
	if msgType == "stream" {
		if c, ok := content.(map[string]any); ok {
			topic = fmt.Sprint("stream.", c["name"])
		}
	}
	m.Identities = [][]byte{[]byte(topic)}
	m.Buffers = buffers
	k.iopubMu.Lock()
	defer k.iopubMu.Unlock()
	if err := k.iopub.SendMulti(zmq4.NewMsgFrom(m.Encode(k.key)...)); err != nil && k.ctx.Err() == nil {
		k.log.Printf("publish %s: %v", msgType, err)
	}
}

func (k *Kernel) status(parent *Message, state string) {
	k.publish(parent, "status", map[string]any{"execution_state": state})
}

func (k *Kernel) kernelInfo() map[string]any {
	info := k.cfg.Info
	links := info.HelpLinks
	if links == nil {
		links = []HelpLink{}
	}
	return map[string]any{
		"status":                 "ok",
		"protocol_version":       ProtocolVersion,
		"implementation":         info.Implementation,
		"implementation_version": info.ImplementationVersion,
		"language_info": map[string]any{
			"name":            "go",
			"version":         info.LanguageVersion,
			"mimetype":        "text/x-go",
			"file_extension":  ".go",
			"codemirror_mode": "go",
			"pygments_lexer":  "go",
		},
		"banner":     info.Banner,
		"help_links": links,
		"debugger":   false,
	}
}

// handleControl serves the control channel; it runs beside a running cell.
func (k *Kernel) handleControl(m *Message) {
	k.status(m, "busy")
	defer k.status(m, "idle")
	switch m.Header.MsgType {
	case "shutdown_request":
		k.shutdown(k.control, &k.controlMu, m)
	case "interrupt_request":
		k.Interrupt()
		k.send(k.control, &k.controlMu, m, "interrupt_reply", map[string]any{"status": "ok"})
	case "kernel_info_request":
		k.send(k.control, &k.controlMu, m, "kernel_info_reply", k.kernelInfo())
	default:
		k.log.Printf("control: ignored %s", m.Header.MsgType)
	}
}

func (k *Kernel) shutdown(sck zmq4.Socket, mu *sync.Mutex, m *Message) {
	var req struct {
		Restart bool `json:"restart"`
	}
	_ = json.Unmarshal(m.Content, &req)
	if k.forEarlierKernel(m) {
		k.log.Printf("ignored a shutdown_request sent at %s, before this kernel started (it was queued for the kernel this one replaces)", m.Header.Date)
		return
	}
	reply := map[string]any{"status": "ok", "restart": req.Restart}
	k.send(sck, mu, m, "shutdown_reply", reply)
	k.publish(m, "shutdown_reply", reply)
	k.restart = req.Restart
	k.Interrupt()
	k.cancel()
}

// handleStdin passes input replies to the cell waiting for them.
func (k *Kernel) handleStdin(m *Message) {
	if m.Header.MsgType != "input_reply" {
		k.log.Printf("stdin: ignored %s", m.Header.MsgType)
		return
	}
	select {
	case k.inputCh <- m:
	default:
		k.log.Printf("stdin: dropped an input_reply nobody waits for")
	}
}

// handleShell serves one shell request, between busy and idle.
func (k *Kernel) handleShell(in inbound) {
	m := in.msg
	k.status(m, "busy")
	defer k.status(m, "idle")
	defer func() {
		if r := recover(); r != nil {
			k.log.Printf("shell: %s: panic: %v", m.Header.MsgType, r)
		}
	}()
	switch m.Header.MsgType {
	case "execute_request":
		k.execute(m, in.arrived)
	case "kernel_info_request":
		k.send(k.shell, &k.shellMu, m, "kernel_info_reply", k.kernelInfo())
	case "complete_request":
		k.complete(m)
	case "inspect_request":
		k.inspect(m)
	case "is_complete_request":
		k.isComplete(m)
	case "history_request":
		k.history(m)
	case "comm_info_request":
		k.commInfo(m)
	case "comm_open":
		k.commOpen(m)
	case "comm_msg":
		k.commMsg(m)
	case "comm_close":
		k.commClose(m)
	case "connect_request":
		ci := k.cfg.Connection
		k.send(k.shell, &k.shellMu, m, "connect_reply", map[string]any{"status": "ok",
			"shell_port": ci.ShellPort, "iopub_port": ci.IOPubPort, "stdin_port": ci.StdinPort,
			"hb_port": ci.HBPort, "control_port": ci.ControlPort})
	case "shutdown_request": // older front ends send it on shell
		k.shutdown(k.shell, &k.shellMu, m)
	default:
		k.log.Printf("shell: ignored %s", m.Header.MsgType)
	}
}

type executeRequest struct {
	Code            string            `json:"code"`
	Silent          bool              `json:"silent"`
	StoreHistory    *bool             `json:"store_history"`
	UserExpressions map[string]string `json:"user_expressions"`
	AllowStdin      bool              `json:"allow_stdin"`
	StopOnError     *bool             `json:"stop_on_error"`
}

func (k *Kernel) execute(m *Message, arrived time.Time) {
	var req executeRequest
	if err := json.Unmarshal(m.Content, &req); err != nil {
		k.log.Printf("execute_request: bad content: %v", err)
		k.send(k.shell, &k.shellMu, m, "execute_reply", map[string]any{"status": "error",
			"execution_count": k.execCount, "ename": "BadRequest",
			"evalue": "execute_request content is not valid: " + err.Error(), "traceback": []string{}})
		return
	}
	if k.queuedBeforeError(m, arrived) {
		// Queued behind a cell that failed with stop_on_error: not run, status error.
		k.send(k.shell, &k.shellMu, m, "execute_reply", map[string]any{"status": "error",
			"execution_count": k.execCount, "ename": "ExecutionAborted",
			"evalue": "not executed: an earlier cell failed", "traceback": []string{},
			"user_expressions": map[string]any{}, "payload": []any{}})
		return
	}
	store := req.StoreHistory == nil || *req.StoreHistory
	if req.Silent {
		store = false
	}
	stopOnError := req.StopOnError == nil || *req.StopOnError
	if store {
		k.execCount++
	}
	count := k.execCount
	if !req.Silent {
		k.publish(m, "execute_input", map[string]any{"code": req.Code, "execution_count": count})
	}

	k.observeExecute(m)
	ctx, cancel := context.WithCancel(k.ctx)
	k.execMu.Lock()
	k.execCancel = cancel
	k.execMu.Unlock()
	out := &cellOutput{k: k, parent: m, ctx: ctx, allowStdin: req.AllowStdin}
	k.execMu.Lock()
	k.execCell = out
	k.execMu.Unlock()
	payload := []any{}
	var res *Result
	var err error
	if name, detail, ok := helpRequest(req.Code); ok {
		payload, err = k.page(name, detail, out)
	} else {
		res, err = k.run(ctx, req.Code, out)
	}
	out.finish()
	interrupted := ctx.Err() != nil
	k.execMu.Lock()
	k.execCancel, k.execCell = nil, nil
	k.execMu.Unlock()

	var userExpr map[string]any
	if err == nil {
		userExpr = k.userExpressions(ctx, req.UserExpressions)
	}
	cancel()

	if err != nil {
		ee := asExecError(err, interrupted)
		if store {
			k.hist.Add(count, req.Code, nil)
		}
		k.publish(m, "error", map[string]any{"ename": ee.Name, "evalue": ee.Value, "traceback": ee.Traceback})
		if stopOnError {
			// Before the reply: a request the front end sends once it has the reply
			// arrives after this instant and runs.
			k.abortBefore = time.Now()
		}
		k.send(k.shell, &k.shellMu, m, "execute_reply", map[string]any{"status": "error",
			"execution_count": count, "ename": ee.Name, "evalue": ee.Value, "traceback": ee.Traceback,
			"user_expressions": map[string]any{}, "payload": []any{}})
		return
	}
	var text *string
	if res != nil && len(res.Data) > 0 {
		if s, ok := res.Data["text/plain"].(string); ok {
			text = &s
		}
		if !req.Silent {
			k.publish(m, "execute_result", map[string]any{"execution_count": count,
				"data": res.Data, "metadata": orMap(res.Metadata)})
		}
	}
	if store {
		k.hist.Add(count, req.Code, text)
	}
	k.send(k.shell, &k.shellMu, m, "execute_reply", map[string]any{"status": "ok",
		"execution_count": count, "payload": payload, "user_expressions": userExpr})
}

// queuedBeforeError reports whether an execute_request was sent before the error reply
// of a cell that failed with stop_on_error: it arrived before that reply went out, or its
// header's date is earlier (the front end sent it before it could see the reply, though
// it arrived a moment later). The date only counts within a second of the reply, so a
// front end whose clock lags ours cannot have later requests aborted.
func (k *Kernel) queuedBeforeError(m *Message, arrived time.Time) bool {
	if k.abortBefore.IsZero() {
		return false
	}
	if !arrived.After(k.abortBefore) {
		return true
	}
	sent, err := time.Parse(time.RFC3339Nano, m.Header.Date)
	return err == nil && sent.Before(k.abortBefore) && arrived.Before(k.abortBefore.Add(time.Second))
}

// run calls the executor, turning a panic into an error.
func (k *Kernel) run(ctx context.Context, code string, out Output) (res *Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &ExecError{Name: "panic", Value: fmt.Sprint(r), Traceback: []string{fmt.Sprintf("panic: %v", r)}}
		}
	}()
	return k.cfg.Executor.Execute(ctx, code, out)
}

// userExpressions evaluates the request's user_expressions after a successful cell.
func (k *Kernel) userExpressions(ctx context.Context, exprs map[string]string) map[string]any {
	out := map[string]any{}
	for name, code := range exprs {
		res, err := k.run(ctx, code, discardOutput{})
		switch {
		case err != nil:
			ee := asExecError(err, false)
			out[name] = map[string]any{"status": "error", "ename": ee.Name, "evalue": ee.Value, "traceback": ee.Traceback}
		case res == nil:
			out[name] = map[string]any{"status": "ok", "data": map[string]any{}, "metadata": map[string]any{}}
		default:
			out[name] = map[string]any{"status": "ok", "data": orMap(res.Data), "metadata": orMap(res.Metadata)}
		}
	}
	return out
}

var helpName = regexp.MustCompile(`^[\p{L}_][\p{L}\p{N}_]*(\.[\p{L}_][\p{L}\p{N}_]*)*$`)

// helpRequest recognises the help syntax "name?", "?name" (and "??" for more detail): Go
// code never ends or starts with a question mark.
func helpRequest(code string) (name string, detail int, ok bool) {
	t := strings.TrimSpace(code)
	if !strings.HasPrefix(t, "?") && !strings.HasSuffix(t, "?") {
		return "", 0, false
	}
	if strings.HasPrefix(t, "??") || strings.HasSuffix(t, "??") {
		detail = 1
	}
	name = strings.TrimSpace(strings.Trim(t, "?"))
	if !helpName.MatchString(name) {
		return "", 0, false
	}
	return name, detail, true
}

// page answers the help syntax with the executor's inspection, as a pager payload.
func (k *Kernel) page(name string, detail int, out Output) (payload []any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &ExecError{Name: "panic", Value: fmt.Sprint(r), Traceback: []string{fmt.Sprintf("panic: %v", r)}}
		}
	}()
	data, found := k.cfg.Executor.Inspect(name, len(name), detail)
	if !found || len(data) == 0 {
		out.Stream("stdout", "no documentation found for "+name+"\n")
		return []any{}, nil
	}
	return []any{map[string]any{"source": "page", "data": data, "start": 0}}, nil
}

type completeRequest struct {
	Code      string `json:"code"`
	CursorPos *int   `json:"cursor_pos"`
}

// byteOffset converts a code point offset into a byte offset of s, clamped to s.
func byteOffset(s string, cp int) int {
	if cp <= 0 {
		return 0
	}
	n := 0
	for i := range s {
		if n == cp {
			return i
		}
		n++
	}
	return len(s)
}

// codePoints converts a byte offset of s into a code point offset, clamped to s.
func codePoints(s string, b int) int {
	if b <= 0 {
		return 0
	}
	if b > len(s) {
		b = len(s)
	}
	return utf8.RuneCountInString(s[:b])
}

func (k *Kernel) complete(m *Message) {
	var req completeRequest
	_ = json.Unmarshal(m.Content, &req)
	cursor := len(req.Code)
	if req.CursorPos != nil {
		cursor = byteOffset(req.Code, *req.CursorPos)
	}
	matches, start, end := safeComplete(k.cfg.Executor, req.Code, cursor)
	if matches == nil {
		matches = []string{}
		start, end = cursor, cursor
	}
	k.send(k.shell, &k.shellMu, m, "complete_reply", map[string]any{"status": "ok",
		"matches": matches, "cursor_start": codePoints(req.Code, start),
		"cursor_end": codePoints(req.Code, end), "metadata": map[string]any{}})
}

func safeComplete(ex Executor, code string, cursor int) (matches []string, start, end int) {
	defer func() {
		if r := recover(); r != nil {
			matches = nil
		}
	}()
	return ex.Complete(code, cursor)
}

func (k *Kernel) inspect(m *Message) {
	var req struct {
		completeRequest
		DetailLevel int `json:"detail_level"`
	}
	_ = json.Unmarshal(m.Content, &req)
	cursor := len(req.Code)
	if req.CursorPos != nil {
		cursor = byteOffset(req.Code, *req.CursorPos)
	}
	data, found := func() (data map[string]any, found bool) {
		defer func() {
			if r := recover(); r != nil {
				data, found = nil, false
			}
		}()
		return k.cfg.Executor.Inspect(req.Code, cursor, req.DetailLevel)
	}()
	k.send(k.shell, &k.shellMu, m, "inspect_reply", map[string]any{"status": "ok",
		"found": found, "data": orMap(data), "metadata": map[string]any{}})
}

func (k *Kernel) isComplete(m *Message) {
	var req struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(m.Content, &req)
	status, indent := func() (status, indent string) {
		defer func() {
			if r := recover(); r != nil {
				status, indent = "unknown", ""
			}
		}()
		return k.cfg.Executor.IsComplete(req.Code)
	}()
	reply := map[string]any{"status": status}
	if status == "incomplete" {
		reply["indent"] = indent
	}
	k.send(k.shell, &k.shellMu, m, "is_complete_reply", reply)
}

func (k *Kernel) history(m *Message) {
	var req struct {
		Output         bool   `json:"output"`
		HistAccessType string `json:"hist_access_type"`
		Session        int    `json:"session"`
		Start          int    `json:"start"`
		Stop           int    `json:"stop"`
		N              int    `json:"n"`
		Pattern        string `json:"pattern"`
		Unique         bool   `json:"unique"`
	}
	_ = json.Unmarshal(m.Content, &req)
	var entries []HistoryEntry
	switch req.HistAccessType {
	case "tail":
		entries = k.hist.Tail(req.N)
	case "range":
		entries = k.hist.Range(req.Session, req.Start, req.Stop)
	case "search":
		entries = k.hist.Search(req.Pattern, req.N, req.Unique)
	default:
		k.send(k.shell, &k.shellMu, m, "history_reply", map[string]any{"status": "error",
			"ename": "BadRequest", "evalue": fmt.Sprintf("hist_access_type %q: want tail, range or search", req.HistAccessType),
			"traceback": []string{}})
		return
	}
	hist := make([]any, 0, len(entries))
	for _, e := range entries {
		if req.Output {
			var out any
			if e.Output != nil {
				out = *e.Output
			}
			hist = append(hist, []any{e.Session, e.Line, []any{e.Input, out}})
		} else {
			hist = append(hist, []any{e.Session, e.Line, e.Input})
		}
	}
	k.send(k.shell, &k.shellMu, m, "history_reply", map[string]any{"status": "ok", "history": hist})
}

func orMap(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// discardOutput is the output of user expressions: they are evaluated for their value.
type discardOutput struct{}

func (discardOutput) Stream(string, string)                                {}
func (discardOutput) Display(map[string]any, map[string]any, string, bool) {}
func (discardOutput) ClearOutput(bool)                                     {}
func (discardOutput) Input(string, bool) (string, error)                   { return "", ErrStdinNotAllowed }

func zmqMsg(frames [][]byte) zmq4.Msg { return zmq4.NewMsgFrom(frames...) }

// OnExecuteRequest makes f see the metadata of every execute_request before its cell runs
// (what the front end says of itself there: VS Code sends {"cellId": "vscode-notebook-cell:..."}).
func (k *Kernel) OnExecuteRequest(f func(metadata map[string]any)) {
	k.commMu.Lock()
	defer k.commMu.Unlock()
	k.execObservers = append(k.execObservers, f)
}

func (k *Kernel) observeExecute(m *Message) {
	k.commMu.Lock()
	fs := k.execObservers
	k.commMu.Unlock()
	if len(fs) == 0 {
		return
	}
	var meta map[string]any
	if err := json.Unmarshal(m.Metadata, &meta); err != nil || meta == nil {
		meta = map[string]any{}
	}
	for _, f := range fs {
		f(meta)
	}
}
