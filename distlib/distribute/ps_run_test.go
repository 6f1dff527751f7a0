package distribute

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"godist/distlib/cell"
	"godist/distlib/data"
	"godist/distlib/tensor"
	"godist/internal/leakcheck"
)

// TestPSRunInScheduledFunctions: the parameter-server tutorial's step_fn calls
// strategy.run and strategy.reduce inside functions that the coordinator runs on several
// workers at once; each Run runs the replica function on its worker's replica, under the
// scheduled function's context, and Reduce(SUM) of its one replica's value is that value.
func TestPSRunInScheduledFunctions(t *testing.T) {
	leakcheck.Check(t)
	s, _ := psCluster(t, 1, 2)
	c := NewClusterCoordinator(s)
	defer c.Close()
	var inside, most atomic.Int32
	both := make(chan struct{})
	var once sync.Once
	step := func(w *WorkerContext) (*tensor.Tensor, error) {
		batch := data.Element{tensor.Scalar(float32(w.Worker() + 1))}
		losses := s.Run(func(ctx *ReplicaContext, in data.Element) *tensor.Tensor {
			if ctx.NumReplicasInSync() != 1 || ctx.Device() == "" {
				t.Errorf("replica context: %d replicas on %q, want 1 on this worker's device", ctx.NumReplicasInSync(), ctx.Device())
			}
			n := inside.Add(1)
			defer inside.Add(-1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			if n == 2 {
				once.Do(func() { close(both) })
			}
			// Wait (bounded) for the other worker's Run, so both are in progress at once.
			select {
			case <-both:
			case <-time.After(2 * time.Second):
			}
			return tensor.Scale(in[0], 10)
		}, NewDistributedValue(batch))
		return s.Reduce(ReduceSum, losses, -1), nil
	}
	var rvs []*RemoteValue
	for i := 0; i < 6; i++ {
		rvs = append(rvs, c.Schedule(step))
	}
	if err := c.Join(); err != nil {
		t.Fatalf("Join: %v (strategy.Run inside scheduled functions must run on their workers)", err)
	}
	for i, rv := range rvs {
		v, err := rv.Fetch()
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if want := float32(10 * (rv.Worker() + 1)); v.Item() != want {
			t.Errorf("step %d on worker %d returned %v, want %v", i, rv.Worker(), v.Item(), want)
		}
	}
	if most.Load() < 2 {
		t.Errorf("at most %d Runs were in progress at once, want the 2 workers' side by side", most.Load())
	}
	// On the coordinator Run still runs.
	out := s.Run(func(ctx *ReplicaContext, _ data.Element) *tensor.Tensor { return tensor.Scalar(3) }, nil)
	if got := s.Reduce(ReduceSum, out, -1).Item(); got != 3 {
		t.Errorf("Run on the coordinator reduced to %v, want 3", got)
	}
}

// TestPSRunUsesTheScheduledContext: a Run inside a scheduled function runs under the
// function's context, not the cell's: a function scheduled by an earlier cell, whose
// context has ended, still runs its replicas when a later Join waits for it.
func TestPSRunUsesTheScheduledContext(t *testing.T) {
	leakcheck.Check(t)
	s, _ := psCluster(t, 1, 1)
	c := NewClusterCoordinator(s)
	defer c.Close()
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	defer cell.Set(ended)()
	ran := false
	rv := c.ScheduleContext(context.Background(), func(w *WorkerContext) (*tensor.Tensor, error) {
		out := s.Run(func(rc *ReplicaContext, _ data.Element) *tensor.Tensor {
			ran = true
			return tensor.Scalar(1)
		}, nil)
		return s.Reduce(ReduceSum, out, -1), nil
	})
	if _, err := rv.FetchContext(context.Background()); err != nil || !ran {
		t.Fatalf("Run in a function scheduled with a live context while the cell's has ended: ran %v, %v", ran, err)
	}
}
