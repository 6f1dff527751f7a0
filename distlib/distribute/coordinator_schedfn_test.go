package distribute

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"godist/distlib/tensor"
	"godist/internal/leakcheck"
)

type schedFnKey struct{}

// schedFnSeen is what "test.ctx_value" last saw as its ctx's schedFnKey value.
var schedFnSeen atomic.Value

// schedFnRunning counts the "test.ctx_wait" functions running.
var schedFnRunning atomic.Int64

func init() {
	// test.ctx_value returns 1 and records the value its context carries under schedFnKey.
	RegisterFunction("test.ctx_value", func(w *WorkerContext, _ []*tensor.Tensor) (*tensor.Tensor, error) {
		schedFnSeen.Store(fmt.Sprint(w.Context().Value(schedFnKey{})))
		return tensor.Scalar(1), nil
	})
	// test.ctx_wait waits until its function is stopped (its context ends).
	RegisterFunction("test.ctx_wait", func(w *WorkerContext, _ []*tensor.Tensor) (*tensor.Tensor, error) {
		schedFnRunning.Add(1)
		defer schedFnRunning.Add(-1)
		<-w.Context().Done()
		return nil, context.Cause(w.Context())
	})
}

// TestScheduleFunctionContext: a registered function scheduled with ScheduleFunctionContext
// runs under the given ctx (it sees its values), and cancelling that ctx stops JoinContext
// and the functions promptly, with context.Canceled; the coordinator stays usable.
func TestScheduleFunctionContext(t *testing.T) {
	leakcheck.Check(t)
	s, _ := psCluster(t, 1, 2)
	c := NewClusterCoordinator(s)
	defer c.Close()

	ctx := context.WithValue(context.Background(), schedFnKey{}, "the caller's")
	if _, err := c.ScheduleFunctionContext(ctx, "test.ctx_value").FetchContext(ctx); err != nil {
		t.Fatal(err)
	}
	if got := schedFnSeen.Load(); got != "the caller's" {
		t.Errorf("the scheduled function's context carries %v, want the value of ScheduleFunctionContext's ctx", got)
	}

	ctx, cancel := context.WithCancel(context.Background())
	var rvs []*RemoteValue
	for range 6 { // 2 running, the others queued
		rvs = append(rvs, c.ScheduleFunctionContext(ctx, "test.ctx_wait"))
	}
	deadline := time.Now().Add(10 * time.Second)
	for schedFnRunning.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := schedFnRunning.Load(); n != 2 {
		t.Fatalf("%d functions running, want 2 (one per worker)", n)
	}
	joined := make(chan error, 1)
	go func() { joined <- c.JoinContext(ctx) }()
	cancel()
	start := time.Now()
	select {
	case err := <-joined:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("JoinContext = %v, want an error wrapping context.Canceled", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("JoinContext returned %v after the cancel, want under 1s", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("JoinContext did not return within 10s of the cancel")
	}
	for i, rv := range rvs {
		if _, err := rv.FetchContext(context.Background()); !errors.Is(err, context.Canceled) {
			t.Errorf("function %d: %v, want an error wrapping context.Canceled", i, err)
		}
	}
	if n := waitZero(&schedFnRunning, 2*time.Second); n != 0 {
		t.Errorf("%d functions still running after JoinContext returned", n)
	}
	if _, err := c.ScheduleFunctionContext(context.Background(), "test.ctx_value").Fetch(); err != nil {
		t.Errorf("ScheduleFunctionContext after the cancel: %v", err)
	}
	//lint:ignore SA1012 the nil context is the bad input under test
	if _, err := c.ScheduleFunctionContext(nil, "test.ctx_value").Fetch(); err == nil {
		t.Error("ScheduleFunctionContext(nil, ...) succeeded, want an error")
	}
}
