package distribute

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"godist/distlib/tensor"
)

// TestJoinContextCancel: a Join whose context ends (an interrupted notebook cell) cancels
// the queued functions, stops the running ones at their next ps call, returns promptly
// with the context's error and leaves nothing running; the coordinator keeps working.
func TestJoinContextCancel(t *testing.T) {
	captureLog(t)
	s, _ := psCluster(t, 1, 2)
	c := NewClusterCoordinator(s)
	defer c.Close()
	counter := s.NewVariable("counter", tensor.Scalar(0), false)
	step := func(w *WorkerContext) (*tensor.Tensor, error) {
		time.Sleep(5 * time.Millisecond)
		return nil, w.AssignAdd(counter, tensor.Scalar(1))
	}
	for i := 0; i < 4; i++ {
		c.Schedule(step)
	}
	if err := c.Join(); err != nil {
		t.Fatal(err)
	}
	base := runtime.NumGoroutine()

	var rvs []*RemoteValue
	for i := 0; i < 5000; i++ {
		rvs = append(rvs, c.Schedule(step))
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	err := c.JoinContext(ctx)
	if took := time.Since(start); !errors.Is(err, context.Canceled) || took > 2*time.Second {
		t.Fatalf("JoinContext = %v after %v, want context.Canceled well under 2s", err, took)
	}
	if _, err := rvs[len(rvs)-1].Fetch(); !errors.Is(err, ErrClosureCancelled) {
		t.Errorf("the last queued function's RemoteValue holds %v, want ErrClosureCancelled", err)
	}
	ran := counter.Value().Item()
	time.Sleep(100 * time.Millisecond)
	if after := counter.Value().Item(); after != ran || ran >= 5004 {
		t.Fatalf("counter %v after JoinContext returned, %v later: functions went on running", ran, after)
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > base+2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > base+2 {
		t.Errorf("%d goroutines after the cancelled Join, %d before", n, base)
	}
	// The next Join works and sees no error of the cancelled functions.
	for i := 0; i < 10; i++ {
		c.Schedule(step)
	}
	if err := c.Join(); err != nil {
		t.Fatalf("Join after a cancelled Join = %v", err)
	}
	if got := counter.Value().Item(); got != ran+10 {
		t.Errorf("counter %v after 10 more steps, want %v", got, ran+10)
	}
}
