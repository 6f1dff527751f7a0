package kernel

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
)

// commLog is a CommTarget that records what reaches it.
type commLog struct {
	mu  sync.Mutex
	got []string
}

func (l *commLog) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, s)
}

func (l *commLog) Open(c *Comm, data map[string]any) { l.add(fmt.Sprint("open ", data)) }
func (l *commLog) Message(c *Comm, data map[string]any, buffers [][]byte) {
	l.add(fmt.Sprint("msg ", data))
}
func (l *commLog) Close(c *Comm, data map[string]any) { l.add("close") }

func (l *commLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.got, "; ")
}

// nextIOPub returns the next iopub message of type msgType.
func nextIOPub(c *client, msgType string) *Message {
	c.t.Helper()
	for i, m := range c.pending {
		if m.Header.MsgType == msgType {
			c.pending = append(c.pending[:i:i], c.pending[i+1:]...)
			return m
		}
	}
	for {
		m := c.recv(c.iopub, 5*time.Second)
		if m.Header.MsgType == msgType {
			return m
		}
		c.pending = append(c.pending, m)
	}
}

func TestKernelOpenedComm(t *testing.T) {
	tk := startKernel(t)
	c := tk.c
	h := &commLog{}
	if _, err := tk.k.OpenComm("", nil, h); err == nil || !strings.Contains(err.Error(), "empty target") {
		t.Errorf("OpenComm with no target: %v", err)
	}
	comm, err := tk.k.OpenComm("jupyter.widget", map[string]any{"value": 1}, h)
	if err != nil {
		t.Fatal(err)
	}
	m := nextIOPub(c, "comm_open")
	if got := content(t, m); got["comm_id"] != comm.ID || got["target_name"] != "jupyter.widget" || fmt.Sprint(got["data"]) != "map[value:1]" {
		t.Errorf("comm_open content = %v", got)
	}
	if parentID(m) != "" || tk.k.CellMessageID() != "" {
		t.Errorf("between cells: comm_open parent %q, CellMessageID %q, want none", parentID(m), tk.k.CellMessageID())
	}
	reply, _ := c.request(c.shell, "comm_info_request", map[string]any{"target_name": "jupyter.widget"})
	if comms, _ := content(t, reply)["comms"].(map[string]any); comms[comm.ID] == nil {
		t.Errorf("comm_info_reply = %v, want %s", comms, comm.ID)
	}
	steps := []struct {
		name     string
		msgType  string
		content  map[string]any
		wantIO   string // iopub message types up to idle
		wantRecv string
	}{
		{"message reaches the handler", "comm_msg", map[string]any{"comm_id": comm.ID, "data": map[string]any{"method": "custom"}},
			"busy,idle", "msg map[method:custom]"},
		{"a reloaded page reattaches", "comm_open", map[string]any{"comm_id": comm.ID, "target_name": "jupyter.widget", "data": map[string]any{}},
			"busy,idle", "msg map[method:custom]"},
		{"front end closes", "comm_close", map[string]any{"comm_id": comm.ID, "data": map[string]any{}},
			"busy,idle", "msg map[method:custom]; close"},
	}
	for _, s := range steps {
		id := c.send(c.shell, s.msgType, s.content)
		if got := strings.Join(types(c.iopubUntilIdle(id)), ","); got != s.wantIO {
			t.Errorf("%s: iopub %s, want %s", s.name, got, s.wantIO)
		}
		if got := h.String(); got != s.wantRecv {
			t.Errorf("%s: handler got %q, want %q", s.name, got, s.wantRecv)
		}
	}
	if err := tk.k.PublishFor("model-7", "stream", map[string]any{"name": "stdout", "text": "hi\n"}); err != nil {
		t.Fatal(err)
	}
	if m := nextIOPub(c, "stream"); parentID(m) != "model-7" || content(t, m)["text"] != "hi\n" {
		t.Errorf("PublishFor: parent %q content %v", parentID(m), content(t, m))
	}
	if err := tk.k.PublishFor("", "stream", nil); err == nil {
		t.Error("PublishFor with no parent id: no error")
	}
}

// urgentLog is a commLog whose comm_msg are urgent.
type urgentLog struct{ commLog }

func (*urgentLog) Urgent(*Comm) bool { return true }

// TestUrgentCommWhileCellRuns: the comm_msg to an urgent comm reaches its handler while a
// cell runs; one to an ordinary comm waits for the cell to end.
func TestUrgentCommWhileCellRuns(t *testing.T) {
	tk := startKernel(t)
	c := tk.c
	urgent, plain := &urgentLog{}, &commLog{}
	uc, err := tk.k.OpenComm("jupyter.widget", nil, urgent)
	if err != nil {
		t.Fatal(err)
	}
	pc, err := tk.k.OpenComm("jupyter.widget", nil, plain)
	if err != nil {
		t.Fatal(err)
	}
	// The cell runs until the test releases it, after the urgent message has arrived.
	g := newGate()
	cell := c.send(c.shell, "execute_request", map[string]any{"code": "block:" + g, "silent": false})
	nextIOPub(c, "execute_input")
	c.send(c.shell, "comm_msg", map[string]any{"comm_id": pc.ID, "data": map[string]any{"method": "plain"}})
	c.send(c.shell, "comm_msg", map[string]any{"comm_id": uc.ID, "data": map[string]any{"method": "stop"}})
	deadline := time.Now().Add(30 * time.Second)
	for urgent.String() == "" && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := urgent.String(); got != "msg map[method:stop]" {
		t.Errorf("urgent comm got %q while the cell runs, want msg map[method:stop]", got)
	}
	if got := plain.String(); got != "" {
		t.Errorf("ordinary comm got %q while the cell runs, want nothing yet", got)
	}
	release(g)
	c.iopubUntilIdle(cell)
	deadline = time.Now().Add(5 * time.Second)
	for plain.String() == "" && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := plain.String(); got != "msg map[method:plain]" {
		t.Errorf("ordinary comm got %q after the cell, want msg map[method:plain]", got)
	}
}

// replyTarget answers each comm_msg with Reply and is urgent, as the widget control comm is.
type replyTarget struct{ commLog }

func (*replyTarget) Urgent(*Comm) bool { return true }
func (r *replyTarget) Message(c *Comm, data map[string]any, buffers [][]byte) {
	r.commLog.Message(c, data, buffers)
	c.Reply(map[string]any{"method": "answer"})
}

// TestUrgentTargetOpenedWhileCellRuns: a front end that connects while a cell runs opens a
// comm to an urgent target and gets its answer then, in reply to its own message.
func TestUrgentTargetOpenedWhileCellRuns(t *testing.T) {
	tk := startKernel(t)
	c := tk.c
	rt := &replyTarget{}
	tk.k.RegisterCommTarget("jupyter.widget.control", rt)
	// The cell runs until the test releases it, after the answer has come.
	g := newGate()
	cell := c.send(c.shell, "execute_request", map[string]any{"code": "block:" + g, "silent": false})
	nextIOPub(c, "execute_input")
	c.send(c.shell, "comm_open", map[string]any{"comm_id": "ctl-1", "target_name": "jupyter.widget.control", "data": map[string]any{}})
	req := c.send(c.shell, "comm_msg", map[string]any{"comm_id": "ctl-1", "data": map[string]any{"method": "request_states"}})
	m := nextIOPub(c, "comm_msg")
	if got := content(t, m); got["comm_id"] != "ctl-1" || fmt.Sprint(got["data"]) != "map[method:answer]" {
		t.Errorf("reply content %v", got)
	}
	if parentID(m) != req {
		t.Errorf("reply's parent %q, want the front end's request %q (not the running cell %q)", parentID(m), req, cell)
	}
	if got := rt.String(); got != "open map[]; msg map[method:request_states]" {
		t.Errorf("target saw %q", got)
	}
	release(g)
	c.iopubUntilIdle(cell)
}

// TestCommOpenMetadataAndExecuteObserver: OpenCommWithMetadata puts its metadata on the
// comm_open message; OnExecuteRequest sees each execute_request's metadata before it runs.
func TestCommOpenMetadataAndExecuteObserver(t *testing.T) {
	tk := startKernel(t)
	c := tk.c
	if _, err := tk.k.OpenCommWithMetadata("jupyter.widget", map[string]any{"state": map[string]any{}}, map[string]any{"version": "2.1.0"}, nil); err != nil {
		t.Fatal(err)
	}
	m := nextIOPub(c, "comm_open")
	var md map[string]any
	if err := json.Unmarshal(m.Metadata, &md); err != nil || md["version"] != "2.1.0" {
		t.Errorf("comm_open metadata %s (%v), want {version: 2.1.0}", m.Metadata, err)
	}
	seen := make(chan map[string]any, 1)
	tk.k.OnExecuteRequest(func(md map[string]any) { seen <- md })
	em, err := NewMessage("execute_request", nil, c.session, "tester", map[string]any{"code": "x", "silent": false})
	if err != nil {
		t.Fatal(err)
	}
	em.Metadata = json.RawMessage(`{"cellId":"vscode-notebook-cell:/a.ipynb#X1"}`)
	if err := c.shell.SendMulti(zmq4.NewMsgFrom(em.Encode(c.key)...)); err != nil {
		t.Fatal(err)
	}
	select {
	case md := <-seen:
		if md["cellId"] != "vscode-notebook-cell:/a.ipynb#X1" {
			t.Errorf("observer saw %v", md)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the execute observer was not called")
	}
	c.iopubUntilIdle(em.Header.MsgID)
}
