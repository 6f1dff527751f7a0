package kernel

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
)

// wordExec is a small real Executor for the kernel's tests: each line of a cell is a
// command ("print:TEXT", "eprint:TEXT", "value:X", "fail:MSG", "panic", "sleep", "wait:MS",
// "block:NAME" (until the test calls release(NAME)), "input:PROMPT", "display:ID",
// "update:ID", "clear"), completion offers Go-like names,
// and braces decide completeness.
type wordExec struct{ closed bool }

var (
	gatesMu sync.Mutex
	gates   = map[string]chan struct{}{}
	gateSeq atomic.Int64
)

// newGate returns a fresh gate name for a "block:NAME" cell.
func newGate() string { return fmt.Sprintf("gate-%d", gateSeq.Add(1)) }

// gate returns the channel a "block:NAME" cell waits on; release(NAME) closes it.
func gate(name string) chan struct{} {
	gatesMu.Lock()
	defer gatesMu.Unlock()
	if gates[name] == nil {
		gates[name] = make(chan struct{})
	}
	return gates[name]
}

func release(name string) { close(gate(name)) }

func (e *wordExec) Execute(ctx context.Context, code string, out Output) (*Result, error) {
	var res *Result
	for _, line := range strings.Split(code, "\n") {
		cmd, arg, _ := strings.Cut(line, ":")
		res = nil
		switch cmd {
		case "print":
			out.Stream("stdout", arg+"\n")
		case "eprint":
			out.Stream("stderr", arg+"\n")
		case "value":
			res = &Result{Data: map[string]any{"text/plain": arg}}
		case "fail":
			return nil, &ExecError{Name: "TestError", Value: arg, Traceback: []string{"line 1: " + arg}}
		case "panic":
			panic("boom")
		case "sleep":
			<-ctx.Done()
			return nil, ctx.Err()
		case "wait": // milliseconds
			var ms int
			fmt.Sscan(arg, &ms)
			select {
			case <-time.After(time.Duration(ms) * time.Millisecond):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		case "block": // until the test calls release(arg)
			select {
			case <-gate(arg):
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(time.Minute):
				return nil, fmt.Errorf("block:%s was never released", arg)
			}
		case "input":
			v, err := out.Input(arg, false)
			if err != nil {
				return nil, err
			}
			out.Stream("stdout", "got "+v+"\n")
		case "display":
			out.Display(map[string]any{"text/plain": "shown"}, nil, arg, false)
		case "update":
			out.Display(map[string]any{"text/plain": "updated"}, nil, arg, true)
		case "clear":
			out.ClearOutput(false)
		case "":
		default:
			return nil, fmt.Errorf("unknown command %q", cmd)
		}
	}
	return res, nil
}

var words = []string{"Print", "Printf", "Println", "Sprint"}

func (e *wordExec) Complete(code string, cursor int) ([]string, int, int) {
	start := cursor
	for start > 0 && strings.ContainsRune("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", rune(code[start-1])) {
		start--
	}
	var m []string
	for _, w := range words {
		if strings.HasPrefix(w, code[start:cursor]) {
			m = append(m, w)
		}
	}
	return m, start, cursor
}

func (e *wordExec) Inspect(code string, cursor, detail int) (map[string]any, bool) {
	if strings.Contains(code, "Println") {
		return map[string]any{"text/plain": "func Println(a ...any) (n int, err error)"}, true
	}
	return nil, false
}

func (e *wordExec) IsComplete(code string) (string, string) {
	switch d := strings.Count(code, "{") - strings.Count(code, "}"); {
	case d > 0:
		return "incomplete", "\t"
	case d < 0:
		return "invalid", ""
	}
	return "complete", ""
}

func (e *wordExec) Close() error { e.closed = true; return nil }

// client is a Jupyter front end over real zmq4 sockets.
type client struct {
	t                     *testing.T
	key                   []byte
	shell, control, stdin zmq4.Socket
	iopub, hb             zmq4.Socket
	session               string
	in                    map[zmq4.Socket]chan zmq4.Msg // one reader goroutine per socket
	pending               []*Message                    // iopub messages of other requests
}

// readAll delivers the messages of s on a channel until s closes.
func (c *client) readAll(s zmq4.Socket) {
	ch := make(chan zmq4.Msg, 256)
	c.in[s] = ch
	go func() {
		defer close(ch)
		for {
			m, err := s.Recv()
			if err != nil {
				return
			}
			ch <- m
		}
	}()
}

type testKernel struct {
	k    *Kernel
	ex   *wordExec
	done chan error
	c    *client
}

// startKernel starts a kernel on loopback ports chosen by the system, and a client.
func startKernel(t *testing.T) *testKernel {
	t.Helper()
	base, _ := goroutines()
	ci := &ConnectionInfo{Transport: "tcp", IP: "127.0.0.1", SignatureScheme: "hmac-sha256", Key: string(testKey)}
	ex := &wordExec{}
	k, err := New(Config{Connection: ci, Executor: ex, Log: log.New(io.Discard, "", 0), ShutdownGrace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	tk := &testKernel{k: k, ex: ex, done: make(chan error, 1)}
	go func() { tk.done <- k.Run(context.Background()) }()
	tk.c = dial(t, k.Connection())
	t.Cleanup(func() {
		k.Shutdown()
		select {
		case err := <-tk.done:
			if err != nil {
				t.Errorf("Run = %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("Run did not return within 5s of Shutdown")
		}
		tk.c.close()
		checkLeaks(t, base)
	})
	return tk
}

// goroutines counts the running goroutines except zmq4's PUB writer, which zmq4 v0.17.0
// never stops (pubSocket.Close does not close its writer): one per kernel, not ours.
func goroutines() (int, string) {
	buf := make([]byte, 1<<20)
	all := string(buf[:runtime.Stack(buf, true)])
	n := 0
	var kept []string
	for _, g := range strings.Split(all, "\n\n") {
		if strings.Contains(g, "zmq4.(*pubMWriter).run") {
			continue
		}
		n++
		kept = append(kept, g)
	}
	return n, strings.Join(kept, "\n\n")
}

// checkLeaks waits for the goroutines to come back to base (zmq4 closes connections
// asynchronously), failing after a bound.
func checkLeaks(t *testing.T, base int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, stacks := goroutines()
		if n <= base {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("goroutine leak: %d running, %d before\n%s", n, base, stacks)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func dial(t *testing.T, ci ConnectionInfo) *client {
	t.Helper()
	ctx := context.Background()
	id := zmq4.WithID(zmq4.SocketIdentity("client-" + newID()[:8]))
	c := &client{t: t, key: []byte(ci.Key), session: newID(), in: map[zmq4.Socket]chan zmq4.Msg{}}
	c.shell = zmq4.NewDealer(ctx, id)
	c.control = zmq4.NewDealer(ctx, id)
	c.stdin = zmq4.NewDealer(ctx, id)
	c.iopub = zmq4.NewSub(ctx)
	c.hb = zmq4.NewReq(ctx)
	for _, d := range []struct {
		s    zmq4.Socket
		port int
	}{{c.shell, ci.ShellPort}, {c.control, ci.ControlPort}, {c.stdin, ci.StdinPort}, {c.iopub, ci.IOPubPort}, {c.hb, ci.HBPort}} {
		if err := d.s.Dial(ci.endpoint(d.port)); err != nil {
			t.Fatalf("dial %s: %v", ci.endpoint(d.port), err)
		}
	}
	if err := c.iopub.SetOption(zmq4.OptionSubscribe, ""); err != nil {
		t.Fatal(err)
	}
	for _, s := range []zmq4.Socket{c.shell, c.control, c.stdin, c.iopub} {
		c.readAll(s)
	}
	// Wait until iopub delivers: kernel_info until its status arrives.
	deadline := time.Now().Add(5 * time.Second)
	for {
		id := c.send(c.shell, "kernel_info_request", map[string]any{})
		c.recv(c.shell, time.Second)
		if m, ok := c.tryIOPub(200 * time.Millisecond); ok && parentID(m) == id {
			c.drain()
			return c
		}
		if time.Now().After(deadline) {
			t.Fatal("iopub never delivered a message")
		}
	}
}

func (c *client) close() {
	for _, s := range []zmq4.Socket{c.shell, c.control, c.stdin, c.iopub, c.hb} {
		s.Close()
	}
}

func (c *client) send(s zmq4.Socket, msgType string, content any) string {
	c.t.Helper()
	m, err := NewMessage(msgType, nil, c.session, "tester", content)
	if err != nil {
		c.t.Fatal(err)
	}
	if err := s.SendMulti(zmq4.NewMsgFrom(m.Encode(c.key)...)); err != nil {
		c.t.Fatalf("send %s: %v", msgType, err)
	}
	return m.Header.MsgID
}

// recvOn receives one message with a timeout; it fails the test on timeout.
func (c *client) recv(s zmq4.Socket, timeout time.Duration) *Message {
	c.t.Helper()
	m, ok := c.tryRecv(s, timeout)
	if !ok {
		c.t.Fatalf("no message within %v", timeout)
	}
	return m
}

func (c *client) tryRecv(s zmq4.Socket, timeout time.Duration) (*Message, bool) {
	c.t.Helper()
	select {
	case raw, ok := <-c.in[s]:
		if !ok {
			c.t.Fatalf("socket closed")
		}
		m, err := ParseFrames(raw.Frames, c.key, DefaultLimits)
		if err != nil {
			c.t.Fatalf("kernel sent a bad message: %v", err)
		}
		return m, true
	case <-time.After(timeout):
		return nil, false
	}
}

func (c *client) tryIOPub(timeout time.Duration) (*Message, bool) {
	return c.tryRecv(c.iopub, timeout)
}

func (c *client) drain() {
	for {
		if _, ok := c.tryIOPub(100 * time.Millisecond); !ok {
			return
		}
	}
}

func parentID(m *Message) string {
	var h Header
	_ = json.Unmarshal(m.ParentHeader, &h)
	return h.MsgID
}

func content(t *testing.T, m *Message) map[string]any {
	t.Helper()
	var c map[string]any
	if err := json.Unmarshal(m.Content, &c); err != nil {
		t.Fatalf("%s content: %v", m.Header.MsgType, err)
	}
	return c
}

// request sends a request and collects its reply and its iopub messages up to idle.
func (c *client) request(s zmq4.Socket, msgType string, cont any) (reply *Message, pub []*Message) {
	c.t.Helper()
	id := c.send(s, msgType, cont)
	return c.collect(s, id)
}

func (c *client) collect(s zmq4.Socket, id string) (reply *Message, pub []*Message) {
	c.t.Helper()
	reply = c.recv(s, 5*time.Second)
	if parentID(reply) != id {
		c.t.Fatalf("reply %s has parent %s, want %s", reply.Header.MsgType, parentID(reply), id)
	}
	return reply, c.iopubUntilIdle(id)
}

// iopubUntilIdle returns the iopub messages of request id up to its idle status, keeping
// those of other requests for later calls.
func (c *client) iopubUntilIdle(id string) []*Message {
	c.t.Helper()
	var pub []*Message
	next := func() *Message {
		for i, m := range c.pending {
			if parentID(m) == id {
				c.pending = append(c.pending[:i:i], c.pending[i+1:]...)
				return m
			}
		}
		for {
			m := c.recv(c.iopub, 5*time.Second)
			if parentID(m) == id {
				return m
			}
			c.pending = append(c.pending, m)
		}
	}
	for {
		m := next()
		pub = append(pub, m)
		if m.Header.MsgType == "status" && content(c.t, m)["execution_state"] == "idle" {
			return pub
		}
	}
}

func types(pub []*Message) []string {
	var s []string
	for _, m := range pub {
		t := m.Header.MsgType
		if t == "status" {
			var c map[string]any
			_ = json.Unmarshal(m.Content, &c)
			t = fmt.Sprint(c["execution_state"])
		}
		s = append(s, t)
	}
	return s
}

func exec(code string) map[string]any {
	return map[string]any{"code": code, "silent": false, "store_history": true,
		"user_expressions": map[string]any{}, "allow_stdin": true, "stop_on_error": true}
}

func TestKernelInfoAndHeartbeat(t *testing.T) {
	tk := startKernel(t)
	c := tk.c
	reply, pub := c.request(c.shell, "kernel_info_request", map[string]any{})
	if got := strings.Join(types(pub), ","); got != "busy,idle" {
		t.Errorf("iopub around kernel_info = %s, want busy,idle", got)
	}
	info := content(t, reply)
	li, _ := info["language_info"].(map[string]any)
	if info["protocol_version"] != "5.3" || info["implementation"] != "godist" || li["name"] != "go" ||
		li["file_extension"] != ".go" || li["mimetype"] != "text/x-go" {
		t.Errorf("kernel_info_reply = %v", info)
	}
	if reply.Header.Version != "5.3" || reply.Header.Session != tk.k.Session() || reply.Header.Username == "" {
		t.Errorf("reply header = %+v", reply.Header)
	}
	if _, err := time.Parse(time.RFC3339Nano, reply.Header.Date); err != nil {
		t.Errorf("header date %q: %v", reply.Header.Date, err)
	}
	// Heartbeat: REQ/REP echo.
	if err := c.hb.Send(zmq4.NewMsgString("ping")); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	go func() { m, _ := c.hb.Recv(); got <- string(m.Bytes()) }()
	select {
	case s := <-got:
		if s != "ping" {
			t.Errorf("heartbeat echoed %q, want ping", s)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no heartbeat echo")
	}
}

func TestExecute(t *testing.T) {
	tk := startKernel(t)
	c := tk.c
	tests := []struct {
		name, code string
		wantPub    string // iopub message types between busy and idle
		wantStatus string
		wantCount  float64
	}{
		{"print", "print:hello, world", "busy,execute_input,stream,idle", "ok", 1},
		{"result", "value:42", "busy,execute_input,execute_result,idle", "ok", 2},
		{"stderr then stdout", "eprint:e\nprint:o", "busy,execute_input,stream,stream,idle", "ok", 3},
		{"display", "display:d1\nupdate:d1\nclear", "busy,execute_input,display_data,update_display_data,clear_output,idle", "ok", 4},
		{"error", "print:before\nfail:bad thing", "busy,execute_input,stream,error,idle", "error", 5},
		{"panic", "panic", "busy,execute_input,error,idle", "error", 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reply, pub := c.request(c.shell, "execute_request", exec(tt.code))
			if got := strings.Join(types(pub), ","); got != tt.wantPub {
				t.Errorf("iopub = %s, want %s", got, tt.wantPub)
			}
			rc := content(t, reply)
			if rc["status"] != tt.wantStatus || rc["execution_count"] != tt.wantCount {
				t.Errorf("execute_reply = %v, want status %s count %v", rc, tt.wantStatus, tt.wantCount)
			}
			for _, m := range pub {
				mc := content(t, m)
				switch m.Header.MsgType {
				case "execute_input":
					if mc["code"] != tt.code {
						t.Errorf("execute_input code = %q, want %q", mc["code"], tt.code)
					}
				case "execute_result":
					if d, _ := mc["data"].(map[string]any); d["text/plain"] != "42" {
						t.Errorf("execute_result = %v", mc)
					}
				case "error":
					if tt.name == "error" && (mc["ename"] != "TestError" || mc["evalue"] != "bad thing" || rc["ename"] != "TestError") {
						t.Errorf("error = %v, reply %v", mc, rc)
					}
				case "update_display_data":
					if tr, _ := mc["transient"].(map[string]any); tr["display_id"] != "d1" {
						t.Errorf("update_display_data transient = %v", mc["transient"])
					}
				}
			}
		})
	}
	t.Run("stream order", func(t *testing.T) {
		_, pub := c.request(c.shell, "execute_request", exec("eprint:e\nprint:o"))
		var got []string
		for _, m := range pub {
			if m.Header.MsgType == "stream" {
				mc := content(t, m)
				got = append(got, fmt.Sprint(mc["name"], "=", mc["text"]))
			}
		}
		if strings.Join(got, "|") != "stderr=e\n|stdout=o\n" {
			t.Errorf("streams = %q", got)
		}
	})
}

func TestStopOnError(t *testing.T) {
	tk := startKernel(t)
	c := tk.c
	// The first cell runs long enough for the second request to be queued behind it.
	id1 := c.send(c.shell, "execute_request", exec("wait:200\nfail:first"))
	id2 := c.send(c.shell, "execute_request", exec("print:second"))
	r1, _ := c.collect(c.shell, id1)
	r2, pub2 := c.collect(c.shell, id2)
	if content(t, r1)["status"] != "error" {
		t.Errorf("first reply = %v, want error", content(t, r1))
	}
	rc := content(t, r2)
	if rc["status"] != "error" || rc["ename"] != "ExecutionAborted" {
		t.Errorf("queued reply = %v, want status error (ExecutionAborted), not aborted", rc)
	}
	if got := strings.Join(types(pub2), ","); got != "busy,idle" {
		t.Errorf("iopub of queued request = %s, want busy,idle", got)
	}
	// A request sent after the error reply runs normally, and the count did not move.
	r3, _ := c.request(c.shell, "execute_request", exec("print:third"))
	if rc := content(t, r3); rc["status"] != "ok" || rc["execution_count"] != float64(2) {
		t.Errorf("next reply = %v, want ok with count 2", rc)
	}
	// stop_on_error false: the queued request runs.
	req := exec("wait:200\nfail:again")
	req["stop_on_error"] = false
	id4 := c.send(c.shell, "execute_request", req)
	id5 := c.send(c.shell, "execute_request", exec("print:runs"))
	c.collect(c.shell, id4)
	if r5, _ := c.collect(c.shell, id5); content(t, r5)["status"] != "ok" {
		t.Errorf("after stop_on_error=false, reply = %v, want ok", content(t, r5))
	}
}

func TestInterruptDuringCell(t *testing.T) {
	tk := startKernel(t)
	c := tk.c
	id := c.send(c.shell, "execute_request", exec("sleep"))
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	irep, _ := c.request(c.control, "interrupt_request", map[string]any{})
	if content(t, irep)["status"] != "ok" {
		t.Errorf("interrupt_reply = %v", content(t, irep))
	}
	reply, pub := c.collect(c.shell, id)
	if d := time.Since(start); d > time.Second {
		t.Errorf("interrupted cell replied after %v, want < 1s", d)
	}
	rc := content(t, reply)
	if rc["status"] != "error" || rc["ename"] != "Interrupted" {
		t.Errorf("execute_reply = %v, want error Interrupted", rc)
	}
	if got := strings.Join(types(pub), ","); got != "busy,execute_input,error,idle" {
		t.Errorf("iopub = %s", got)
	}
	// Interrupt by the API (what SIGINT calls) too.
	id = c.send(c.shell, "execute_request", exec("sleep"))
	time.Sleep(100 * time.Millisecond)
	tk.k.Interrupt()
	if reply, _ := c.collect(c.shell, id); content(t, reply)["ename"] != "Interrupted" {
		t.Errorf("after Interrupt(), reply = %v", content(t, reply))
	}
}

func TestStdin(t *testing.T) {
	tk := startKernel(t)
	c := tk.c
	id := c.send(c.shell, "execute_request", exec("input:name? "))
	req := c.recv(c.stdin, 5*time.Second)
	if req.Header.MsgType != "input_request" || content(t, req)["prompt"] != "name? " || parentID(req) != id {
		t.Fatalf("stdin got %s %v", req.Header.MsgType, content(t, req))
	}
	rep, err := NewMessage("input_reply", req, c.session, "tester", map[string]any{"value": "gopher"})
	if err != nil {
		t.Fatal(err)
	}
	rep.Identities = nil
	if err := c.stdin.SendMulti(zmq4.NewMsgFrom(rep.Encode(c.key)...)); err != nil {
		t.Fatal(err)
	}
	reply, pub := c.collect(c.shell, id)
	if content(t, reply)["status"] != "ok" {
		t.Errorf("reply = %v", content(t, reply))
	}
	var text string
	for _, m := range pub {
		if m.Header.MsgType == "stream" {
			text += fmt.Sprint(content(t, m)["text"])
		}
	}
	if text != "got gopher\n" {
		t.Errorf("stream = %q, want %q", text, "got gopher\n")
	}
	// allow_stdin false: Input fails and the cell reports it.
	e := exec("input:x")
	e["allow_stdin"] = false
	reply, _ = c.request(c.shell, "execute_request", e)
	if rc := content(t, reply); rc["status"] != "error" || !strings.Contains(fmt.Sprint(rc["evalue"]), "stdin") {
		t.Errorf("reply without stdin = %v", rc)
	}
}

func TestForgedMessageDropped(t *testing.T) {
	tk := startKernel(t)
	c := tk.c
	good := c.key
	c.key = []byte("not the key")
	c.send(c.shell, "execute_request", exec("print:forged"))
	c.key = good
	// Unsigned, garbage and too many frames.
	c.shell.SendMulti(zmq4.NewMsgFrom([]byte("garbage")))
	c.shell.SendMulti(zmq4.NewMsgFrom(make([][]byte, 200)...))
	if m, ok := c.tryIOPub(300 * time.Millisecond); ok {
		t.Errorf("kernel published %s after a forged message", m.Header.MsgType)
	}
	reply, _ := c.request(c.shell, "execute_request", exec("print:real"))
	if rc := content(t, reply); rc["status"] != "ok" || rc["execution_count"] != float64(1) {
		t.Errorf("after forged messages, reply = %v, want ok with count 1", rc)
	}
}

func TestCompleteInspectIsComplete(t *testing.T) {
	tk := startKernel(t)
	c := tk.c
	// "é" is one code point and two bytes: offsets must come back in code points.
	code := "é := Pri"
	reply, _ := c.request(c.shell, "complete_request", map[string]any{"code": code, "cursor_pos": 8})
	rc := content(t, reply)
	if fmt.Sprint(rc["matches"]) != "[Print Printf Println]" || rc["cursor_start"] != float64(5) || rc["cursor_end"] != float64(8) {
		t.Errorf("complete_reply = %v, want Print* from 5 to 8", rc)
	}
	reply, _ = c.request(c.shell, "inspect_request", map[string]any{"code": "fmt.Println", "cursor_pos": 5, "detail_level": 0})
	if rc := content(t, reply); rc["found"] != true {
		t.Errorf("inspect_reply = %v", rc)
	}
	for code, want := range map[string]string{"func f() {": "incomplete", "x": "complete", "}": "invalid"} {
		reply, _ = c.request(c.shell, "is_complete_request", map[string]any{"code": code})
		if got := content(t, reply)["status"]; got != want {
			t.Errorf("is_complete(%q) = %v, want %s", code, got, want)
		}
	}
	// Help syntax pages the inspection.
	reply, _ = c.request(c.shell, "execute_request", exec("Println?"))
	pl, _ := content(t, reply)["payload"].([]any)
	if len(pl) != 1 || pl[0].(map[string]any)["source"] != "page" {
		t.Errorf("payload of Println? = %v", content(t, reply)["payload"])
	}
}

func TestHistory(t *testing.T) {
	tk := startKernel(t)
	c := tk.c
	for _, code := range []string{"value:1", "print:a", "value:2", "value:1"} {
		c.request(c.shell, "execute_request", exec(code))
	}
	hist := func(req map[string]any) []any {
		req["raw"] = true
		if _, ok := req["output"]; !ok {
			req["output"] = false
		}
		reply, _ := c.request(c.shell, "history_request", req)
		h, _ := content(t, reply)["history"].([]any)
		return h
	}
	if h := hist(map[string]any{"hist_access_type": "tail", "n": 2}); fmt.Sprint(h) != "[[1 3 value:2] [1 4 value:1]]" {
		t.Errorf("tail 2 = %v", h)
	}
	if h := hist(map[string]any{"hist_access_type": "tail", "n": 1, "output": true}); fmt.Sprint(h) != "[[1 4 [value:1 1]]]" {
		t.Errorf("tail with output = %v", h)
	}
	if h := hist(map[string]any{"hist_access_type": "range", "session": 0, "start": 2, "stop": 3}); fmt.Sprint(h) != "[[1 2 print:a]]" {
		t.Errorf("range = %v", h)
	}
	if h := hist(map[string]any{"hist_access_type": "search", "pattern": "value:*"}); len(h) != 3 {
		t.Errorf("search = %v, want 3 entries", h)
	}
	if h := hist(map[string]any{"hist_access_type": "search", "pattern": "value:*", "unique": true}); len(h) != 2 {
		t.Errorf("search unique = %v, want 2 entries", h)
	}
	if h := hist(map[string]any{"hist_access_type": "search", "pattern": "value:?", "n": 1}); fmt.Sprint(h) != "[[1 4 value:1]]" {
		t.Errorf("search n=1 = %v", h)
	}
}

func TestComms(t *testing.T) {
	tk := startKernel(t)
	tk.k.RegisterCommTarget("echo", EchoTarget{})
	c := tk.c
	open := map[string]any{"comm_id": "c1", "target_name": "echo", "data": map[string]any{}}
	c.iopubUntilIdle(c.send(c.shell, "comm_open", open))
	reply, _ := c.request(c.shell, "comm_info_request", map[string]any{})
	if comms, _ := content(t, reply)["comms"].(map[string]any); fmt.Sprint(comms) != "map[c1:map[target_name:echo]]" {
		t.Errorf("comm_info_reply comms = %v", comms)
	}
	id := c.send(c.shell, "comm_msg", map[string]any{"comm_id": "c1", "data": map[string]any{"x": 1.5}})
	pub := c.iopubUntilIdle(id)
	echoed := false
	for _, m := range pub {
		if m.Header.MsgType == "comm_msg" && fmt.Sprint(content(t, m)["data"]) == "map[x:1.5]" {
			echoed = true
		}
	}
	if !echoed {
		t.Errorf("no echoed comm_msg in %v", types(pub))
	}
	id = c.send(c.shell, "comm_close", map[string]any{"comm_id": "c1", "data": map[string]any{}})
	c.iopubUntilIdle(id)
	reply, _ = c.request(c.shell, "comm_info_request", map[string]any{})
	if comms, _ := content(t, reply)["comms"].(map[string]any); len(comms) != 0 {
		t.Errorf("after comm_close, comms = %v", comms)
	}
	// Unknown target: the kernel closes the comm.
	id = c.send(c.shell, "comm_open", map[string]any{"comm_id": "c2", "target_name": "nope", "data": map[string]any{}})
	pub = c.iopubUntilIdle(id)
	if got := strings.Join(types(pub), ","); got != "busy,comm_close,idle" {
		t.Errorf("iopub for unknown target = %s, want busy,comm_close,idle", got)
	}
}

func TestShutdown(t *testing.T) {
	tk := startKernel(t)
	c := tk.c
	id := c.send(c.shell, "execute_request", exec("sleep"))
	time.Sleep(50 * time.Millisecond)
	reply := c.recvAfter(c.control, "shutdown_request", map[string]any{"restart": true})
	if rc := content(t, reply); rc["status"] != "ok" || rc["restart"] != true {
		t.Errorf("shutdown_reply = %v", rc)
	}
	_ = id
	select {
	case err := <-tk.done:
		if err != nil {
			t.Errorf("Run = %v", err)
		}
		tk.done <- nil // for the cleanup
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after shutdown_request")
	}
	if !tk.k.Restart() || !tk.ex.closed {
		t.Errorf("Restart() = %v, executor closed = %v", tk.k.Restart(), tk.ex.closed)
	}
}

func (c *client) recvAfter(s zmq4.Socket, msgType string, cont any) *Message {
	c.t.Helper()
	id := c.send(s, msgType, cont)
	for {
		m := c.recv(s, 5*time.Second)
		if parentID(m) == id {
			return m
		}
	}
}
