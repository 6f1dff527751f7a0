package main

import (
	"context"
	"errors"

	"godist/interp"
	"godist/kernel"
)

// sessionExecutor adapts an interp.Session to kernel.Executor. The session is created in
// the background while the kernel already answers (kernel_info does not need it); the
// methods wait for it.
type sessionExecutor struct {
	ready chan struct{}
	sess  *interp.Session
	err   error
}

var _ kernel.Executor = (*sessionExecutor)(nil)

// newSessionExecutor starts creating the session with opts.
func newSessionExecutor(opts interp.Options) *sessionExecutor {
	e := &sessionExecutor{ready: make(chan struct{})}
	go func() {
		defer close(e.ready)
		e.sess, e.err = interp.New(opts)
	}()
	return e
}

func (e *sessionExecutor) session() (*interp.Session, error) {
	<-e.ready
	return e.sess, e.err
}

// Execute implements kernel.Executor.
func (e *sessionExecutor) Execute(ctx context.Context, code string, out kernel.Output) (*kernel.Result, error) {
	s, err := e.session()
	if err != nil {
		return nil, &kernel.ExecError{Name: "SessionError", Value: err.Error(), Traceback: []string{"SessionError: " + err.Error()}}
	}
	res, err := s.Execute(ctx, code, out) // kernel.Output has interp.Output's methods
	if err != nil {
		var ee *interp.EvalError
		if errors.As(err, &ee) {
			return nil, &kernel.ExecError{Name: ee.Name, Value: ee.Value, Traceback: ee.Traceback}
		}
		return nil, err
	}
	if res == nil {
		return nil, nil
	}
	return &kernel.Result{Data: res.Data, Metadata: res.Metadata}, nil
}

// Complete implements kernel.Executor. The kernel and the session both take and give byte
// offsets: only the kernel converts the protocol's code points.
func (e *sessionExecutor) Complete(code string, cursor int) ([]string, int, int) {
	s, err := e.session()
	if err != nil {
		return nil, cursor, cursor
	}
	return s.Complete(code, cursor)
}

// Inspect implements kernel.Executor.
func (e *sessionExecutor) Inspect(code string, cursor, detail int) (map[string]any, bool) {
	s, err := e.session()
	if err != nil {
		return nil, false
	}
	return s.Inspect(code, cursor, detail)
}

// IsComplete implements kernel.Executor.
func (e *sessionExecutor) IsComplete(code string) (string, string) {
	s, err := e.session()
	if err != nil {
		return "unknown", ""
	}
	return s.IsComplete(code)
}

// Close implements kernel.Executor.
func (e *sessionExecutor) Close() error {
	s, err := e.session()
	if err != nil {
		return nil
	}
	return s.Close()
}
