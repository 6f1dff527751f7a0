package kernel

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/go-zeromq/zmq4"
)

// This file serves the shell, control and stdin channels' requests; execute_request is
// execute.go's.

// kernelInfo is the kernel_info_reply, on shell and control.
func (k *Kernel) kernelInfo() kernelInfoReply {
	info := k.cfg.Info
	links := info.HelpLinks
	if links == nil {
		links = []HelpLink{}
	}
	return kernelInfoReply{
		Status:                "ok",
		ProtocolVersion:       ProtocolVersion,
		Implementation:        info.Implementation,
		ImplementationVersion: info.ImplementationVersion,
		LanguageInfo: languageInfo{
			Name:           "go",
			Version:        info.LanguageVersion,
			Mimetype:       "text/x-go",
			FileExtension:  ".go",
			CodemirrorMode: "go",
			PygmentsLexer:  "go",
		},
		Banner:    info.Banner,
		HelpLinks: links,
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
		k.send(k.control, &k.controlMu, m, "interrupt_reply", statusReply{Status: "ok"})
	case "kernel_info_request":
		k.send(k.control, &k.controlMu, m, "kernel_info_reply", k.kernelInfo())
	default:
		k.log.Printf("control: ignored %s", m.Header.MsgType)
	}
}

// shutdown answers shutdown_request on its channel and on iopub, then stops Run; one
// queued for the kernel this one replaces is ignored.
func (k *Kernel) shutdown(sck zmq4.Socket, mu *sync.Mutex, m *Message) {
	var req struct {
		Restart bool `json:"restart"`
	}
	_ = json.Unmarshal(m.Content, &req)
	if k.forEarlierKernel(m) {
		k.log.Printf("ignored a shutdown_request sent at %s, before this kernel started (it was queued for the kernel this one replaces)", m.Header.Date)
		return
	}
	reply := shutdownReply{Status: "ok", Restart: req.Restart}
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
		k.send(k.shell, &k.shellMu, m, "connect_reply", connectReply{Status: "ok",
			ShellPort: ci.ShellPort, IOPubPort: ci.IOPubPort, StdinPort: ci.StdinPort,
			HBPort: ci.HBPort, ControlPort: ci.ControlPort})
	case "shutdown_request": // older front ends send it on shell
		k.shutdown(k.shell, &k.shellMu, m)
	default:
		k.log.Printf("shell: ignored %s", m.Header.MsgType)
	}
}

// completeRequest is the content of complete_request, and the start of inspect_request's.
type completeRequest struct {
	Code      string `json:"code"`
	CursorPos *int   `json:"cursor_pos"`
}

// complete answers complete_request with the executor's completions; none (or a panic)
// gives an empty list at the cursor.
func (k *Kernel) complete(m *Message) {
	var req completeRequest
	_ = json.Unmarshal(m.Content, &req)
	cursor := req.byteCursor()
	matches, start, end := safeComplete(k.cfg.Executor, req.Code, cursor)
	if matches == nil {
		matches = []string{}
		start, end = cursor, cursor
	}
	k.send(k.shell, &k.shellMu, m, "complete_reply", completeReply{Status: "ok",
		Matches: matches, CursorStart: codePoints(req.Code, start), CursorEnd: codePoints(req.Code, end)})
}

// safeComplete calls the executor's Complete, turning a panic into no matches.
func safeComplete(ex Executor, code string, cursor int) (matches []string, start, end int) {
	defer func() {
		if r := recover(); r != nil {
			matches = nil
		}
	}()
	return ex.Complete(code, cursor)
}

// inspect answers inspect_request with the executor's MIME bundle for the name at the
// cursor; a panic answers found: false.
func (k *Kernel) inspect(m *Message) {
	var req struct {
		completeRequest
		DetailLevel int `json:"detail_level"`
	}
	_ = json.Unmarshal(m.Content, &req)
	cursor := req.byteCursor()
	data, found := func() (data map[string]any, found bool) {
		defer func() {
			if r := recover(); r != nil {
				data, found = nil, false
			}
		}()
		return k.cfg.Executor.Inspect(req.Code, cursor, req.DetailLevel)
	}()
	k.send(k.shell, &k.shellMu, m, "inspect_reply", inspectReply{Status: "ok", Found: found, Data: orMap(data)})
}

// isComplete answers is_complete_request; a panic of the executor answers "unknown".
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
	reply := isCompleteReply{Status: status}
	if status == "incomplete" {
		reply.Indent = &indent
	}
	k.send(k.shell, &k.shellMu, m, "is_complete_reply", reply)
}

// history answers history_request from the kernel's History.
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
		k.send(k.shell, &k.shellMu, m, "history_reply", newErrorReply(&ExecError{Name: "BadRequest",
			Value: fmt.Sprintf("hist_access_type %q: want tail, range or search", req.HistAccessType)}))
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
	k.send(k.shell, &k.shellMu, m, "history_reply", historyReply{Status: "ok", History: hist})
}
