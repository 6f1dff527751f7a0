package transport

import (
	"context"
	"slices"
	"testing"
	"time"

	"godist/distlib/collective"
	"godist/internal/leakcheck"
)

// TestSharedMemoryAbsent: where no region can be made (macOS, a Linux without /dev/shm) the
// ranks agree on no shared memory without an error and all-reduce over TCP, and a ps client
// gives up its region and sends payloads, with the same results.
func TestSharedMemoryAbsent(t *testing.T) {
	leakcheck.Check(t)
	hideShm(t)
	const n = 3
	g := startGroupOpts(t, n, GRPCOptions{Token: "k", SharedMemoryBytes: 1 << 16})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sm, errs := agreeAll(ctx, g)
	for i := range sm {
		if errs[i] != nil || sm[i] != nil {
			t.Fatalf("call %d (rank %d): SharedMemory returned a region: %v, error %v; want none and no error", i, i%n, sm[i] != nil, errs[i])
		}
	}
	done := make(chan error, n)
	bufs := make([][]float32, n)
	for i := range g {
		bufs[i] = []float32{float32(i + 1), 10}
		go func() { done <- collective.AllReduce(ctx, g[i], bufs[i], collective.Sum) }()
	}
	for range g {
		if err := <-done; err != nil {
			t.Fatalf("AllReduce without shared memory: %v", err)
		}
	}
	for i := range g {
		if !slices.Equal(bufs[i], []float32{6, 30}) {
			t.Errorf("rank %d: AllReduce = %v, want [6 30]", i, bufs[i])
		}
	}

	s := startPSWith(t, PSServerOptions{Token: "tok"})
	c := dialPSWith(t, s, PSClientOptions{Token: "tok", Caller: 1})
	const m = 4096
	if err := c.Create(ctx, "v", []int{m}, make([]float32, m), false); err != nil {
		t.Fatal(err)
	}
	val := make([]float32, m)
	for i := range val {
		val[i] = float32(i%97) - 48.5
	}
	for step := range 2 {
		_, got, err := c.UpdateRead(ctx, "v", Update{Kind: UpdateAssign, Value: val}, nil)
		if err != nil || !slices.Equal(got, val) {
			t.Fatalf("step %d: UpdateRead = %v, want the value assigned", step, err)
		}
	}
	c.shm.mu.Lock()
	no := c.shm.no
	c.shm.mu.Unlock()
	if st := s.Stats(); st.SharedIn != 0 || !no {
		t.Errorf("SharedIn %d, client gave up shared memory: %v; want 0, true", st.SharedIn, no)
	}
}
