package kernel

import (
	"context"
	"errors"
	"strings"
)

// Executor runs cells. The kernel calls it from one goroutine at a time (Execute may run
// while Complete or Inspect are not called: the shell channel is sequential), and cancels
// Execute's context on interrupt and shutdown.
//
// Offsets (cursor, start, end) are byte offsets into code. The protocol counts code points;
// the kernel converts them on the way in and out (cursor.go), and no executor converts.
type Executor interface {
	// Execute runs code, sending its output to out. A non-nil *Result is the value of a
	// final expression, shown as execute_result. A returned *ExecError (or any error) is
	// shown as the cell's error.
	Execute(ctx context.Context, code string, out Output) (*Result, error)
	// Complete returns the completions at cursor and the byte range [start, end) of code
	// they replace.
	Complete(code string, cursor int) (matches []string, start, end int)
	// Inspect returns a MIME bundle describing the name at cursor (a byte offset); detail
	// is 0 or 1.
	Inspect(code string, cursor, detail int) (data map[string]any, found bool)
	// IsComplete reports "complete", "incomplete", "invalid" or "unknown", and for
	// incomplete code the indentation of the next line.
	IsComplete(code string) (status, indent string)
	// Close releases the executor.
	Close() error
}

// Output receives what a running cell produces.
type Output interface {
	// Stream appends text to "stdout" or "stderr".
	Stream(name, text string)
	// Display shows a MIME bundle; with update, it replaces the display named displayID.
	Display(data, metadata map[string]any, displayID string, update bool)
	// ClearOutput clears the cell's output; with wait, when the next output arrives.
	ClearOutput(wait bool)
	// Input asks the front end for a line; it fails when the request does not allow stdin
	// or the cell is interrupted.
	Input(prompt string, password bool) (string, error)
}

// Result is the value of a cell's final expression.
type Result struct {
	Data, Metadata map[string]any
}

// ExecError is an error a cell raised: a compile error, a panic, an interrupt.
type ExecError struct {
	Name      string
	Value     string
	Traceback []string
}

func (e *ExecError) Error() string {
	if e.Value == "" {
		return e.Name
	}
	return e.Name + ": " + e.Value
}

// ErrStdinNotAllowed is returned by Output.Input when the request did not allow stdin.
var ErrStdinNotAllowed = errors.New("kernel: input requested but the front end does not support stdin")

// asExecError turns any error of Execute into the error the front end shows.
func asExecError(err error, interrupted bool) *ExecError {
	var ee *ExecError
	if errors.As(err, &ee) {
		if len(ee.Traceback) == 0 {
			ee.Traceback = []string{ee.Error()}
		}
		return ee
	}
	if interrupted || errors.Is(err, context.Canceled) {
		return &ExecError{Name: "Interrupted", Value: "the cell was interrupted", Traceback: []string{"Interrupted: the cell was interrupted"}}
	}
	msg := err.Error()
	return &ExecError{Name: "Error", Value: msg, Traceback: strings.Split(msg, "\n")}
}
