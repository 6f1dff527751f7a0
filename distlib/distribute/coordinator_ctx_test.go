package distribute

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"godist/distlib/cell"
	"godist/distlib/tensor"
	"godist/internal/leakcheck"
)

// spinStep reads v until its ps read fails (the function is stopped), like a long
// training step that only ends when it is cancelled; running counts the functions
// inside it.
func spinStep(v *ShardedVariable, running *atomic.Int64) WorkerFunc {
	return func(w *WorkerContext) (*tensor.Tensor, error) {
		running.Add(1)
		defer running.Add(-1)
		for {
			if _, err := w.Read(v); err != nil {
				return nil, err
			}
		}
	}
}

// waitZero waits (bounded) until n is 0 and returns its value.
func waitZero(n *atomic.Int64, d time.Duration) int64 {
	deadline := time.Now().Add(d)
	for n.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	return n.Load()
}

// Cancelling the context of Join (an interrupted cell) cancels the queued functions, stops
// the running ones at their next ps call, returns promptly with context.Canceled and
// leaves the coordinator usable for the next cell (leakcheck: no goroutine behind after
// Close). The same through the Schedule ctx, where the Join under a live context returns
// nil (a cancellation is not a Join's error; the RemoteValues say it), and through the
// cell's context for the context-free Schedule and Join.
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

	var running atomic.Int64
	for _, tc := range []struct {
		name string
		// joinCancelled: the wait returns context.Canceled (else nil).
		joinCancelled bool
		// run schedules n spinning functions and waits for them under a context that ends
		// soon; it returns the wait's error and the RemoteValues.
		run func(ctx context.Context, n int) ([]*RemoteValue, error)
	}{
		{"JoinContext", true, func(ctx context.Context, n int) ([]*RemoteValue, error) {
			var rvs []*RemoteValue
			for range n {
				rvs = append(rvs, c.ScheduleContext(context.Background(), spinStep(v, &running)))
			}
			return rvs, c.JoinContext(ctx)
		}},
		{"ScheduleContext", false, func(ctx context.Context, n int) ([]*RemoteValue, error) {
			var rvs []*RemoteValue
			for range n {
				rvs = append(rvs, c.ScheduleContext(ctx, spinStep(v, &running)))
			}
			return rvs, c.JoinContext(context.Background())
		}},
		{"cell context", true, func(ctx context.Context, n int) ([]*RemoteValue, error) {
			restore := cell.Set(ctx)
			defer restore()
			var rvs []*RemoteValue
			for range n {
				rvs = append(rvs, c.Schedule(spinStep(v, &running)))
			}
			return rvs, c.Join()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			var cancelled time.Time
			timer := time.AfterFunc(100*time.Millisecond, func() { cancelled = time.Now(); cancel() })
			defer timer.Stop()
			var err error
			var rvs []*RemoteValue
			withTimeout(t, 20*time.Second, func() { rvs, err = tc.run(ctx, 50) })
			returned := time.Now()
			if tc.joinCancelled && !errors.Is(err, context.Canceled) {
				t.Fatalf("wait = %v, want an error wrapping context.Canceled", err)
			}
			if !tc.joinCancelled && err != nil {
				t.Fatalf("wait = %v, want nil (the functions' own context ended, not the wait's)", err)
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
			if n := waitZero(&running, 5*time.Second); n > 0 {
				t.Errorf("%d cancelled functions still run 5s after the wait returned", n)
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
	if _, err := c.ScheduleContext(nil, counterStep(v, nil)).Fetch(); err == nil {
		t.Error("ScheduleContext(nil, ...) succeeded, want an error")
	}
	//lint:ignore SA1012 the nil context is the bad input under test
	if err := c.JoinContext(nil); err == nil {
		t.Error("JoinContext(nil) succeeded, want an error")
	}
	//lint:ignore SA1012 the nil context is the bad input under test
	if _, err := c.Schedule(counterStep(v, nil)).FetchContext(nil); err == nil {
		t.Error("FetchContext(nil) succeeded, want an error")
	}
}
