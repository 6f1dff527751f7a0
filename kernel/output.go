package kernel

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Stream output is coalesced: a flush happens this long after the first unsent write, when
// the buffer reaches streamFlushBytes, before any other output, and when the cell ends.
const (
	streamFlushDelay = 30 * time.Millisecond
	streamFlushBytes = 64 << 10
)

// cellOutput is the Output of one execute_request.
type cellOutput struct {
	k          *Kernel
	parent     *Message
	ctx        context.Context
	allowStdin bool

	mu    sync.Mutex
	name  string // stream of the pending text
	buf   strings.Builder
	timer *time.Timer
	done  bool
}

var _ Output = (*cellOutput)(nil)

// Stream implements Output.
func (o *cellOutput) Stream(name, text string) {
	if name != "stderr" {
		name = "stdout"
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.name != name && o.buf.Len() > 0 {
		o.flushLocked(true)
	}
	o.name = name
	o.buf.WriteString(text)
	if o.buf.Len() >= streamFlushBytes {
		o.flushLocked(false)
		return
	}
	if o.timer == nil {
		o.timer = time.AfterFunc(streamFlushDelay, func() {
			o.mu.Lock()
			defer o.mu.Unlock()
			o.timer = nil
			o.flushLocked(o.done)
		})
	}
}

// flushLocked publishes the pending text. Unless all, a trailing incomplete UTF-8 sequence
// stays in the buffer for the next write to complete.
func (o *cellOutput) flushLocked(all bool) {
	s := o.buf.String()
	keep := ""
	if !all {
		s, keep = splitIncomplete(s)
	}
	o.buf.Reset()
	o.buf.WriteString(keep)
	if s == "" {
		return
	}
	o.k.publish(o.parent, "stream", streamContent{Name: o.name, Text: s})
}

// splitIncomplete splits off a trailing incomplete UTF-8 sequence.
func splitIncomplete(s string) (complete, rest string) {
	for i := len(s) - 1; i >= 0 && i >= len(s)-utf8.UTFMax; i-- {
		if utf8.RuneStart(s[i]) {
			if !utf8.FullRuneInString(s[i:]) {
				return s[:i], s[i:]
			}
			break
		}
	}
	return s, ""
}

func (o *cellOutput) flush() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.timer != nil {
		o.timer.Stop()
		o.timer = nil
	}
	o.flushLocked(true)
}

// finish flushes everything at the end of the cell; writes that come later (from
// goroutines the cell started) are still published, with a delay.
func (o *cellOutput) finish() {
	o.mu.Lock()
	o.done = true
	o.mu.Unlock()
	o.flush()
}

// Display implements Output.
func (o *cellOutput) Display(data, metadata map[string]any, displayID string, update bool) {
	o.flush()
	content := displayData{Data: orMap(data), Metadata: orMap(metadata), Transient: transient{DisplayID: displayID}}
	msgType := "display_data"
	if update {
		if displayID == "" {
			o.k.log.Printf("update_display_data without a display id: shown as a new display")
		} else {
			msgType = "update_display_data"
		}
	}
	o.k.publish(o.parent, msgType, content)
}

// ClearOutput implements Output.
func (o *cellOutput) ClearOutput(wait bool) {
	o.flush()
	o.k.publish(o.parent, "clear_output", clearOutput{Wait: wait})
}

// Input implements Output: an input_request on stdin, answered by an input_reply.
func (o *cellOutput) Input(prompt string, password bool) (string, error) {
	if !o.allowStdin {
		return "", ErrStdinNotAllowed
	}
	o.flush()
	k := o.k
	k.inputMu.Lock()
	defer k.inputMu.Unlock()
	select { // a stale reply to an earlier request
	case <-k.inputCh:
	default:
	}
	req, err := NewMessage("input_request", o.parent, k.session, k.user,
		inputRequest{Prompt: prompt, Password: password})
	if err != nil {
		return "", err
	}
	k.stdinMu.Lock()
	err = k.stdin.SendMulti(zmqMsg(req.Encode(k.key)))
	k.stdinMu.Unlock()
	if err != nil {
		return "", err
	}
	for {
		select {
		case <-o.ctx.Done():
			return "", o.ctx.Err()
		case rep := <-k.inputCh:
			var parent Header
			_ = json.Unmarshal(rep.ParentHeader, &parent)
			if parent.MsgID != "" && parent.MsgID != req.Header.MsgID {
				continue // a reply to another request
			}
			var c struct {
				Value string `json:"value"`
			}
			_ = json.Unmarshal(rep.Content, &c)
			return c.Value, nil
		}
	}
}
