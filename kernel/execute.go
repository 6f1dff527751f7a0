package kernel

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// This file runs execute_request: the cell, its output and error, user expressions, and
// the help syntax ("name?") answered with the pager.

// executeRequest is the content of execute_request.
type executeRequest struct {
	Code            string            `json:"code"`
	Silent          bool              `json:"silent"`
	StoreHistory    *bool             `json:"store_history"`
	UserExpressions map[string]string `json:"user_expressions"`
	AllowStdin      bool              `json:"allow_stdin"`
	StopOnError     *bool             `json:"stop_on_error"`
}

// execute runs a cell and replies; arrived is when the request reached the kernel (for
// stop_on_error's aborts).
func (k *Kernel) execute(m *Message, arrived time.Time) {
	var req executeRequest
	if err := json.Unmarshal(m.Content, &req); err != nil {
		k.log.Printf("execute_request: bad content: %v", err)
		k.send(k.shell, &k.shellMu, m, "execute_reply", executeErrorReply(k.execCount,
			&ExecError{Name: "BadRequest", Value: "execute_request content is not valid: " + err.Error()}))
		return
	}
	if k.queuedBeforeError(m, arrived) {
		// Queued behind a cell that failed with stop_on_error: not run, status error.
		k.send(k.shell, &k.shellMu, m, "execute_reply", executeErrorReply(k.execCount,
			&ExecError{Name: "ExecutionAborted", Value: "not executed: an earlier cell failed"}))
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
	// The cell is running before the front end hears so (execute_input): an urgent comm_msg
	// sent after it (a Stop button) is served at once, not after the cell.
	ctx, cancel := context.WithCancel(k.ctx)
	out := &cellOutput{k: k, parent: m, ctx: ctx, allowStdin: req.AllowStdin}
	k.execMu.Lock()
	k.execCancel, k.execCell = cancel, out
	k.execMu.Unlock()
	if !req.Silent {
		k.publish(m, "execute_input", executeInput{Code: req.Code, ExecutionCount: count})
	}

	k.observeExecute(m)
	var payload []pagePayload
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

	var userExpr map[string]userExpression
	if err == nil {
		userExpr = k.userExpressions(ctx, req.UserExpressions)
	}
	cancel()

	if err != nil {
		ee := asExecError(err, interrupted)
		if store {
			k.hist.Add(count, req.Code, nil)
		}
		k.publish(m, "error", ee.content())
		if stopOnError {
			// Before the reply: a request the front end sends once it has the reply
			// arrives after this instant and runs.
			k.abortBefore = time.Now()
		}
		k.send(k.shell, &k.shellMu, m, "execute_reply", executeErrorReply(count, ee))
		return
	}
	var text *string
	if res != nil && len(res.Data) > 0 {
		if s, ok := res.Data["text/plain"].(string); ok {
			text = &s
		}
		if !req.Silent {
			k.publish(m, "execute_result", executeResult{ExecutionCount: count,
				Data: res.Data, Metadata: orMap(res.Metadata)})
		}
	}
	if store {
		k.hist.Add(count, req.Code, text)
	}
	k.send(k.shell, &k.shellMu, m, "execute_reply", executeOKReply(count, userExpr, payload))
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
func (k *Kernel) userExpressions(ctx context.Context, exprs map[string]string) map[string]userExpression {
	out := map[string]userExpression{}
	for name, code := range exprs {
		res, err := k.run(ctx, code, discardOutput{})
		switch {
		case err != nil:
			ee := asExecError(err, false)
			out[name] = userExpression{Status: "error", errorContent: ee.content()}
		case res == nil:
			out[name] = userExpression{Status: "ok", mimeBundle: &mimeBundle{Data: map[string]any{}, Metadata: map[string]any{}}}
		default:
			out[name] = userExpression{Status: "ok", mimeBundle: &mimeBundle{Data: orMap(res.Data), Metadata: orMap(res.Metadata)}}
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
func (k *Kernel) page(name string, detail int, out Output) (payload []pagePayload, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &ExecError{Name: "panic", Value: fmt.Sprint(r), Traceback: []string{fmt.Sprintf("panic: %v", r)}}
		}
	}()
	data, found := k.cfg.Executor.Inspect(name, len(name), detail)
	if !found || len(data) == 0 {
		out.Stream("stdout", "no documentation found for "+name+"\n")
		return nil, nil
	}
	return []pagePayload{{Source: "page", Data: data}}, nil
}

// discardOutput is the output of user expressions: they are evaluated for their value.
type discardOutput struct{}

func (discardOutput) Stream(string, string)                                {}
func (discardOutput) Display(map[string]any, map[string]any, string, bool) {}
func (discardOutput) ClearOutput(bool)                                     {}
func (discardOutput) Input(string, bool) (string, error)                   { return "", ErrStdinNotAllowed }

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
