package distribute

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"godist/distlib/cell"
	"godist/distlib/tensor"
	"godist/internal/leakcheck"
)

// spinStep reads v until its ps read fails (the function is stopped), like a long
// training step that only ends when it is cancelled.
func spinStep(v *ShardedVariable) WorkerFunc {
	return func(w *WorkerContext) (*tensor.Tensor, error) {
		for {
			if _, err := w.Read(v); err != nil {
				return nil, err
			}
		}
	}
}

// waitGoroutines waits (bounded) until at most n goroutines run and returns how many do.
func waitGoroutines(n int, d time.Duration) int {
	deadline := time.Now().Add(d)
	for runtime.NumGoroutine() > n && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	return runtime.NumGoroutine()
}

// Cancelling the context of Join (an interrupted cell) cancels the queued functions, stops
// the running ones at their next ps call, returns promptly with context.Canceled, leaves
// no goroutine behind and the coordinator usable for the next cell. The same through the
// Schedule ctx, and through the cell's context for the context-free Schedule and Join.
func TestCoordinatorContextCancel(t *testing.T) {
	leakcheck.Check(t)
	s, _ := psCluster(t, 1, 2)
	c := NewClusterCoordinator(s)
	defer c.Close()
	v := s.NewVariable("counter", tensor.Scalar(0), false)
	// Warm up: both workers connected, so the goroutine count is the idle one.
	for range 4 {
		c.Schedule(counterStep(v, nil))
	}
	if err := c.Join(); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name string
		// run schedules n spinning functions and waits for them under a context that ends
		// soon; it returns the wait's error and the RemoteValues.
		run func(ctx context.Context, n int) (error, []*RemoteValue)
	}{
		{"JoinContext", func(ctx context.Context, n int) (error, []*RemoteValue) {
			var rvs []*RemoteValue
			for range n {
				rvs = append(rvs, c.ScheduleContext(context.Background(), spinStep(v)))
			}
			return c.JoinContext(ctx), rvs
		}},
		{"ScheduleContext", func(ctx context.Context, n int) (error, []*RemoteValue) {
			var rvs []*RemoteValue
			for range n {
				rvs = append(rvs, c.ScheduleContext(ctx, spinStep(v)))
			}
			return c.JoinContext(context.Background()), rvs
		}},
		{"cell context", func(ctx context.Context, n int) (error, []*RemoteValue) {
			restore := cell.Set(ctx)
			defer restore()
			var rvs []*RemoteValue
			for range n {
				rvs = append(rvs, c.Schedule(spinStep(v)))
			}
			return c.Join(), rvs
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			idle := runtime.NumGoroutine()
			ctx, cancel := context.WithCancel(context.Background())
			var cancelled time.Time
			timer := time.AfterFunc(100*time.Millisecond, func() { cancelled = time.Now(); cancel() })
			defer timer.Stop()
			var err error
			var rvs []*RemoteValue
			withTimeout(t, 20*time.Second, func() { err, rvs = tc.run(ctx, 50) })
			returned := time.Now()
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("wait = %v, want an error wrapping context.Canceled", err)
			}
			if d := returned.Sub(cancelled); d > time.Second {
				t.Errorf("returned %v after the cancel, want well under 1s", d)
			}
			for i, rv := range rvs {
				if !rv.Done() {
					t.Fatalf("RemoteValue %d not done after the wait returned", i)
				}
				if _, err := rv.Fetch(); !errors.Is(err, context.Canceled) || !errors.Is(err, ErrClosureCancelled) {
					t.Fatalf("RemoteValue %d: %v, want ErrClosureCancelled wrapping context.Canceled", i, err)
				}
			}
			if n := waitGoroutines(idle, 5*time.Second); n > idle {
				buf := make([]byte, 1<<20)
				t.Errorf("%d goroutines after the cancel, %d before: the cancelled functions still run\n%s", n, idle, buf[:runtime.Stack(buf, true)])
			}
			// The next cell: the coordinator works, the error was reported once.
			before := v.Value().Item()
			for range 10 {
				c.Schedule(counterStep(v, nil))
			}
			if err := c.Join(); err != nil {
				t.Fatalf("Join after the cancel = %v, want nil", err)
			}
			if got := v.Value().Item(); got != before+10 {
				t.Errorf("counter %v after 10 more steps from %v", got, before)
			}
		})
	}
}

// A nil context is an error naming the call, not a panic.
func TestCoordinatorNilContext(t *testing.T) {
	leakcheck.Check(t)
	s, _ := psCluster(t, 1, 1)
	c := NewClusterCoordinator(s)
	defer c.Close()
	v := s.NewVariable("counter", tensor.Scalar(0), false)
	//lint:ignore SA1012 the nil context is the bad input under test
	if _, err := c.ScheduleContext(nil, counterStep(v, nil)).Fetch(); err == nil { //nolint:staticcheck
		t.Error("ScheduleContext(nil, ...) succeeded, want an error")
	}
	if err := c.JoinContext(nil); err == nil { //nolint:staticcheck
		t.Error("JoinContext(nil) succeeded, want an error")
	}
	if _, err := c.Schedule(counterStep(v, nil)).FetchContext(nil); err == nil { //nolint:staticcheck
		t.Error("FetchContext(nil) succeeded, want an error")
	}
}
