package kernel

import (
	"encoding/json"
	"fmt"
	"sync"
	"time"
)

// CommTarget handles the comms a front end opens with its target name.
type CommTarget interface {
	// Open is called when the front end opens c, with the comm_open data.
	Open(c *Comm, data map[string]any)
	// Message is called for each comm_msg to c.
	Message(c *Comm, data map[string]any, buffers [][]byte)
	// Close is called when the front end closes c.
	Close(c *Comm, data map[string]any)
}

// Comm is an open comm between the kernel and a front end.
type Comm struct {
	ID     string
	Target string

	k       *Kernel
	handler CommTarget // for comms the kernel opened; nil: the target's
	mu      sync.Mutex
	parent  *Message // the latest message the front end sent on this comm
}

// Send sends a comm_msg to the front end. Its parent is the running cell's
// execute_request while a cell runs (as ipykernel does: the front end finds the cell of a
// widget's display message that way), else the latest message the front end sent on c.
// Text the cell printed before is flushed first, so that output keeps its order.
func (c *Comm) Send(data map[string]any, buffers ...[]byte) {
	c.k.publish(c.sendParent(), "comm_msg", commData{CommID: c.ID, Data: orMap(data)}, buffers...)
}

func (c *Comm) sendParent() *Message {
	if out := c.k.runningCell(); out != nil {
		out.flush()
		return out.parent
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.parent
}

// Reply sends a comm_msg whose parent is the latest message the front end sent on c, even
// while a cell runs: an answer the front end matches to its request (widget protocol 2's
// echo_update).
func (c *Comm) Reply(data map[string]any, buffers ...[]byte) {
	c.mu.Lock()
	parent := c.parent
	c.mu.Unlock()
	if out := c.k.runningCell(); out != nil {
		out.flush()
	}
	c.k.publish(parent, "comm_msg", commData{CommID: c.ID, Data: orMap(data)}, buffers...)
}

// Close closes the comm from the kernel's side.
func (c *Comm) Close(data map[string]any) {
	c.k.commMu.Lock()
	delete(c.k.comms, c.ID)
	c.k.commMu.Unlock()
	c.k.publish(c.sendParent(), "comm_close", commData{CommID: c.ID, Data: orMap(data)})
}

// runningCell returns the running cell's output, nil between cells.
func (k *Kernel) runningCell() *cellOutput {
	k.execMu.Lock()
	defer k.execMu.Unlock()
	return k.execCell
}

// OpenComm opens a comm from the kernel's side: it publishes comm_open for target with
// data, and returns the comm. The front end's comm_msg and comm_close on it
// reach h (h.Open is not called); h may be nil. While a cell runs the comm_open's parent
// is the cell's execute_request. An empty target is an error.
func (k *Kernel) OpenComm(target string, data map[string]any, h CommTarget) (*Comm, error) {
	return k.OpenCommWithMetadata(target, data, nil, h)
}

// OpenCommWithMetadata is OpenComm with the comm_open message's metadata (widget protocol
// 2 puts its version there: {"version": "2.1.0"}).
func (k *Kernel) OpenCommWithMetadata(target string, data, metadata map[string]any, h CommTarget) (*Comm, error) {
	if target == "" {
		return nil, fmt.Errorf("kernel: OpenComm: empty target name: pass the front end's target (e.g. \"jupyter.widget\")")
	}
	c := &Comm{ID: newID(), Target: target, k: k, handler: h}
	k.commMu.Lock()
	k.comms[c.ID] = c
	k.commMu.Unlock()
	var parent *Message
	if out := k.runningCell(); out != nil {
		out.flush()
		parent = out.parent
	}
	k.publishMeta(parent, "comm_open", commOpen{CommID: c.ID, TargetName: target, Data: orMap(data)}, metadata)
	return c, nil
}

// CellMessageID returns the msg_id of the running cell's execute_request, "" between
// cells. Front ends route the outputs whose parent has that id to the cell (or to a
// widget that captures them).
func (k *Kernel) CellMessageID() string {
	if out := k.runningCell(); out != nil {
		return out.parent.Header.MsgID
	}
	return ""
}

// PublishFor publishes an iopub message (stream, display_data, clear_output, ...) whose
// parent header has msg_id parentID: the front end routes it to whatever listens for that
// id, such as an Output widget registered under its model id. Text the running cell
// printed before is flushed first.
func (k *Kernel) PublishFor(parentID, msgType string, content map[string]any) error {
	if parentID == "" || msgType == "" {
		return fmt.Errorf("kernel: PublishFor: empty parent id %q or message type %q", parentID, msgType)
	}
	if out := k.runningCell(); out != nil {
		out.flush()
	}
	h := Header{MsgID: parentID, Session: k.session, Username: k.user,
		Date: time.Now().UTC().Format(dateLayout), MsgType: "comm_msg", Version: ProtocolVersion}
	rawH, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("kernel: PublishFor: %w", err)
	}
	parent := &Message{Header: h, RawHeader: rawH}
	k.publish(parent, msgType, orMap(content))
	return nil
}

// RegisterCommTarget makes comm_open requests for name reach t. A later registration of
// the same name replaces the earlier one.
func (k *Kernel) RegisterCommTarget(name string, t CommTarget) {
	k.commMu.Lock()
	defer k.commMu.Unlock()
	k.targets[name] = t
}

type commContent struct {
	CommID     string         `json:"comm_id"`
	TargetName string         `json:"target_name"`
	Data       map[string]any `json:"data"`
}

func (k *Kernel) commOpen(m *Message) {
	var c commContent
	if err := json.Unmarshal(m.Content, &c); err != nil || c.CommID == "" {
		k.log.Printf("comm_open: bad content (want comm_id and target_name): %v", err)
		return
	}
	k.commMu.Lock()
	t, ok := k.targets[c.TargetName]
	prev, dup := k.comms[c.CommID]
	if dup && prev.handler != nil && prev.Target == c.TargetName {
		// A reloaded page reattaches to a comm the kernel opened (a widget model): keep it;
		// the front end asks for its state next.
		k.commMu.Unlock()
		prev.mu.Lock()
		prev.parent = m
		prev.mu.Unlock()
		return
	}
	var comm *Comm
	if ok && !dup {
		comm = &Comm{ID: c.CommID, Target: c.TargetName, k: k, parent: m}
		k.comms[c.CommID] = comm
	}
	k.commMu.Unlock()
	if comm == nil {
		if !ok {
			k.log.Printf("comm_open: no target %q: closing comm %s", c.TargetName, c.CommID)
		} else {
			k.log.Printf("comm_open: comm %s is already open", c.CommID)
		}
		k.publish(m, "comm_close", commData{CommID: c.CommID, Data: map[string]any{}})
		return
	}
	t.Open(comm, orMap(c.Data))
}

func (k *Kernel) lookupComm(m *Message) (*Comm, CommTarget, commContent) {
	var c commContent
	if err := json.Unmarshal(m.Content, &c); err != nil {
		k.log.Printf("%s: bad content: %v", m.Header.MsgType, err)
		return nil, nil, c
	}
	k.commMu.Lock()
	defer k.commMu.Unlock()
	comm := k.comms[c.CommID]
	if comm == nil {
		k.log.Printf("%s: no open comm %q", m.Header.MsgType, c.CommID)
		return nil, nil, c
	}
	comm.mu.Lock()
	comm.parent = m
	comm.mu.Unlock()
	if comm.handler != nil {
		return comm, comm.handler, c
	}
	return comm, k.targets[comm.Target], c
}

// UrgentTarget is a CommTarget that may ask for its comm_msg to be handled as they
// arrive, beside a running cell, instead of queued after it (a Stop button that must stop
// the running cell). Its Message must be quick and must not run user code that expects to
// run between cells.
type UrgentTarget interface {
	CommTarget
	// Urgent reports whether the comm_msg to c are handled as they arrive; for a target,
	// Urgent(nil) says whether the comm_open that opens one is.
	Urgent(c *Comm) bool
}

// urgentCommMsg handles m at once if it is for a comm whose handler is urgent, and
// reports whether it did. Such a message gets no busy/idle status: the kernel stays busy
// with the running cell.
func (k *Kernel) urgentCommMsg(m *Message) bool {
	var c commContent
	if err := json.Unmarshal(m.Content, &c); err != nil {
		return false
	}
	k.commMu.Lock()
	comm := k.comms[c.CommID]
	k.commMu.Unlock()
	if comm == nil {
		return false
	}
	h := comm.handler
	if h == nil { // a comm the front end opened: its target decides
		k.commMu.Lock()
		h = k.targets[comm.Target]
		k.commMu.Unlock()
	}
	u, ok := h.(UrgentTarget)
	if !ok || !u.Urgent(comm) {
		return false
	}
	k.commMsg(m)
	return true
}

// urgentCommOpen handles m at once if it opens a comm whose target is urgent (asked with
// a nil comm), and reports whether it did: a widget manager that connects while a cell
// runs gets its answers then.
func (k *Kernel) urgentCommOpen(m *Message) bool {
	var c commContent
	if err := json.Unmarshal(m.Content, &c); err != nil {
		return false
	}
	k.commMu.Lock()
	t := k.targets[c.TargetName]
	k.commMu.Unlock()
	if u, ok := t.(UrgentTarget); !ok || !u.Urgent(nil) {
		return false
	}
	k.commOpen(m)
	return true
}

func (k *Kernel) commMsg(m *Message) {
	comm, t, c := k.lookupComm(m)
	if comm == nil || t == nil {
		return
	}
	t.Message(comm, orMap(c.Data), m.Buffers)
}

func (k *Kernel) commClose(m *Message) {
	comm, t, c := k.lookupComm(m)
	if comm == nil {
		return
	}
	k.commMu.Lock()
	delete(k.comms, comm.ID)
	k.commMu.Unlock()
	if t != nil {
		t.Close(comm, orMap(c.Data))
	}
}

func (k *Kernel) commInfo(m *Message) {
	var req struct {
		TargetName string `json:"target_name"`
	}
	_ = json.Unmarshal(m.Content, &req)
	comms := map[string]commInfo{}
	k.commMu.Lock()
	for id, c := range k.comms {
		if req.TargetName == "" || req.TargetName == c.Target {
			comms[id] = commInfo{TargetName: c.Target}
		}
	}
	k.commMu.Unlock()
	k.send(k.shell, &k.shellMu, m, "comm_info_reply", commInfoReply{Status: "ok", Comms: comms})
}

// EchoTarget is a comm target that sends every message back unchanged. Front ends and
// tests use it to check the comm channel of a running kernel.
type EchoTarget struct{}

// Open implements CommTarget.
func (EchoTarget) Open(c *Comm, data map[string]any) {}

// Message implements CommTarget: it echoes data and buffers.
func (EchoTarget) Message(c *Comm, data map[string]any, buffers [][]byte) {
	c.Send(data, buffers...)
}

// Close implements CommTarget.
func (EchoTarget) Close(c *Comm, data map[string]any) {}

// Logf writes to the kernel's log (the server's console), for code outside the package
// that serves the kernel's comms.
func (k *Kernel) Logf(format string, args ...any) { k.log.Printf(format, args...) }
