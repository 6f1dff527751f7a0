package transport

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"godist/distlib/collective"
	"godist/internal/leakcheck"
)

// TestDoorbell: over either transport's shared memory, a rank's Await on another rank's
// word returns at once when the word has reached the value (counted modulo 2^32), sleeps
// past its spin until the other rank rings, and fails when its context ends, when the rank
// it waits on is lost (ErrPeerLost) and when its own endpoint closes (ErrClosed).
func TestDoorbell(t *testing.T) {
	leakcheck.Check(t)
	for _, tc := range []struct {
		name  string
		group func(t *testing.T) ([]collective.Transport, []collective.SharedMemory)
	}{
		{"in process", func(t *testing.T) ([]collective.Transport, []collective.SharedMemory) {
			g := NewSharedMem(2, 1<<16)
			t.Cleanup(func() { g[0].Close(); g[1].Close() })
			sm := make([]collective.SharedMemory, 2)
			for i := range g {
				var err error
				if sm[i], err = g[i].SharedMemory(context.Background()); err != nil || sm[i] == nil {
					t.Fatalf("rank %d: SharedMemory = %v, %v", i, sm[i], err)
				}
			}
			return []collective.Transport{g[0], g[1]}, sm
		}},
		{"grpc", func(t *testing.T) ([]collective.Transport, []collective.SharedMemory) {
			needShm(t)
			g := startGroupOpts(t, 2, GRPCOptions{Token: "k", SharedMemoryBytes: 1 << 20})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			sm, errs := agreeAll(ctx, []*GRPC{g[0], g[1]})
			for i := range 2 {
				if errs[i] != nil || sm[i] == nil {
					t.Fatalf("rank %d: SharedMemory = %v, %v", i, sm[i], errs[i])
				}
			}
			return []collective.Transport{g[0], g[1]}, sm[:2]
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, sm := tc.group(t)
			db := []collective.Doorbell{sm[0].(collective.Doorbell), sm[1].(collective.Doorbell)}
			offs := make([]int, 2)
			for r := range 2 {
				b, err := sm[r].Alloc(16)
				if err != nil {
					t.Fatal(err)
				}
				offs[r], _ = sm[r].Offset(b)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := db[0].Await(ctx, 1, offs[1], 0); err != nil {
				t.Fatalf("Await of the value the word holds = %v", err)
			}
			// Rank 0 sleeps (past its spin) until rank 1 rings; the ring wakes it (GRPC's
			// Await would otherwise look again only after awaitPoll, here a minute).
			defer func(d time.Duration) { awaitPoll = d }(awaitPoll)
			awaitPoll = time.Minute
			done := make(chan error, 1)
			go func() { done <- db[0].Await(ctx, 1, offs[1], 1) }()
			select {
			case err := <-done:
				t.Fatalf("Await returned %v before the ring", err)
			case <-time.After(20*time.Millisecond + awaitSpinMax):
			}
			g, isGRPC := sm[0].(*grpcShared)
			if isGRPC {
				if c := atomic.LoadUint32(g.sleepers(0, 1)); c != 1 {
					t.Errorf("rank 0's count of Awaits sleeping on rank 1 = %d while one sleeps, want 1", c)
				}
			}
			if err := db[1].Ring(offs[1], 1); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("Await after the ring = %v", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Await still waits 5s after the ring")
			}
			awaitPoll = 2 * time.Millisecond
			if isGRPC {
				if c := atomic.LoadUint32(g.sleepers(0, 1)); c != 0 {
					t.Errorf("rank 0's count of Awaits sleeping on rank 1 = %d after the wait, want 0", c)
				}
			}
			// The counter wraps: 2^32-1 has reached 2^32-2, not 0; 2 (after the wrap) has.
			if err := db[1].Ring(offs[1], ^uint32(0)); err != nil {
				t.Fatal(err)
			}
			if err := db[0].Await(ctx, 1, offs[1], ^uint32(0)-1); err != nil {
				t.Fatalf("Await of a value the word went past = %v", err)
			}
			short, stop := context.WithTimeout(ctx, 30*time.Millisecond)
			start := time.Now()
			err := db[0].Await(short, 1, offs[1], 0)
			stop()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Await of a value not reached = %v, want the context's deadline", err)
			}
			if d := time.Since(start); d < 30*time.Millisecond || d > 5*time.Second {
				t.Errorf("Await returned after %v; want at its deadline of 30ms", d)
			}
			if err := db[1].Ring(offs[1], 2); err != nil {
				t.Fatal(err)
			}
			if err := db[0].Await(ctx, 1, offs[1], 0); err != nil {
				t.Fatalf("Await of 0 once the word wrapped to 2 = %v", err)
			}
			for _, bad := range []struct{ rank, off int }{{2, 0}, {-1, 0}, {1, -1}, {1, 1 << 30}} {
				if err := db[0].Await(ctx, bad.rank, bad.off, 0); err == nil {
					t.Errorf("Await(rank %d, offset %d) succeeded, want an error", bad.rank, bad.off)
				}
			}
			if err := db[0].Ring(-1, 0); err == nil {
				t.Error("Ring at offset -1 succeeded, want an error")
			}
			// Rank 1 closes while rank 0 waits on it: rank 0 learns it has lost rank 1. Then rank
			// 0 closes while it waits on its own word: ErrClosed.
			for _, c := range []struct {
				rank  int
				want  uint32
				close int
				err   error
			}{{1, 3, 1, ErrPeerLost}, {0, 1, 0, ErrClosed}} {
				go func() { done <- db[0].Await(ctx, c.rank, offs[c.rank], c.want) }()
				time.Sleep(10 * time.Millisecond)
				tr[c.close].(io.Closer).Close()
				select {
				case err := <-done:
					if !errors.Is(err, c.err) {
						t.Fatalf("Await on rank %d's word when rank %d closes = %v, want %v", c.rank, c.close, err, c.err)
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("Await on rank %d's word still waits 10s after rank %d closed", c.rank, c.close)
				}
			}
		})
	}
}

// TestSpinBudget: a GRPC group's Awaits watch their word for twice the last wait, between
// awaitSpin and awaitSpinMax, starting at awaitSpinMax, and for awaitSpin only after a wait
// longer than awaitSpinMax.
func TestSpinBudget(t *testing.T) {
	var b spinBudget
	if got := b.get(); got != awaitSpinMax {
		t.Fatalf("first budget %v, want awaitSpinMax %v", got, awaitSpinMax)
	}
	for _, c := range []struct{ waited, want time.Duration }{
		{0, awaitSpin},
		{10 * time.Microsecond, awaitSpin},
		{400 * time.Microsecond, 800 * time.Microsecond},
		{awaitSpinMax / 2, awaitSpinMax},
		{awaitSpinMax, awaitSpinMax},
		{awaitSpinMax + time.Microsecond, awaitSpin},
		{time.Second, awaitSpin},
		{300 * time.Microsecond, 600 * time.Microsecond},
	} {
		b.waited(c.waited)
		if got := b.get(); got != c.want {
			t.Errorf("after a wait of %v the budget is %v, want %v", c.waited, got, c.want)
		}
	}
}
