package collective_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"godist/distlib/collective"
	"godist/distlib/transport"
	"godist/internal/leakcheck"
)

// runRanks runs fn for every rank of an in-memory group of n and returns the errors by rank.
func runRanks(t *testing.T, n int, fn func(ctx context.Context, tr collective.Transport) error) []error {
	t.Helper()
	g := transport.NewMem(n)
	group := make([]collective.Transport, n)
	for r := range g {
		group[r] = g[r]
	}
	return runGroup(t, group, fn)
}

// runGroup runs fn for every rank of group and returns the errors by rank.
func runGroup(t *testing.T, g []collective.Transport, fn func(ctx context.Context, tr collective.Transport) error) []error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n := len(g)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = fn(ctx, g[r])
		}()
	}
	wg.Wait()
	return errs
}

func value(rank, i int) float32 { return float32((rank+1)*(i%5+1)) - float32(rank*rank%3) }

func TestAllReduce(t *testing.T) {
	leakcheck.Check(t)
	ops := []collective.ReduceOp{collective.Sum, collective.Mean, collective.Max, collective.Min}
	for n := 1; n <= 8; n++ {
		for _, length := range []int{0, 1, n - 1, n, 3*n + 1, 1037} {
			for _, op := range ops {
				want := wantReduced(n, length, op)
				bufs := make([][]float32, n)
				errs := runRanks(t, n, func(ctx context.Context, tr collective.Transport) error {
					r := tr.Rank()
					bufs[r] = make([]float32, length)
					for i := range bufs[r] {
						bufs[r][i] = value(r, i)
					}
					// 64-byte chunks: several chunks per segment and pipelining across steps.
					return collective.AllReduce(ctx, tr, bufs[r], op, collective.CommunicationOptions{ChunkBytes: 64})
				})
				for r := range n {
					if errs[r] != nil {
						t.Fatalf("AllReduce(n=%d, len=%d, %v) rank %d: %v", n, length, op, r, errs[r])
					}
					for i := range want {
						if bufs[r][i] != want[i] {
							t.Fatalf("AllReduce(n=%d, len=%d, %v) rank %d [%d] = %v, want %v", n, length, op, r, i, bufs[r][i], want[i])
						}
					}
				}
			}
		}
	}
}

func TestAllReduceLengthMismatch(t *testing.T) {
	leakcheck.Check(t)
	errs := runRanks(t, 2, func(ctx context.Context, tr collective.Transport) error {
		return collective.AllReduce(ctx, tr, make([]float32, 10+tr.Rank()), collective.Sum,
			collective.CommunicationOptions{Timeout: 200 * time.Millisecond})
	})
	if errs[0] == nil && errs[1] == nil {
		t.Fatal("AllReduce with lengths 10 and 11 = nil errors, want a length mismatch")
	}
	if !errors.Is(errors.Join(errs...), collective.ErrBadArgument) {
		t.Errorf("AllReduce length mismatch errors = %v, want ErrBadArgument", errs)
	}
}

func TestBroadcast(t *testing.T) {
	leakcheck.Check(t)
	for n := 1; n <= 8; n++ {
		for _, length := range []int{0, 1, n + 1, 301} {
			root := (n * 7) % n
			if n > 2 {
				root = n - 2
			}
			bufs := make([][]float32, n)
			errs := runRanks(t, n, func(ctx context.Context, tr collective.Transport) error {
				r := tr.Rank()
				bufs[r] = make([]float32, length)
				for i := range bufs[r] {
					bufs[r][i] = value(r, i)
				}
				return collective.Broadcast(ctx, tr, bufs[r], root, collective.CommunicationOptions{ChunkBytes: 40})
			})
			for r := range n {
				if errs[r] != nil {
					t.Fatalf("Broadcast(n=%d, len=%d, root=%d) rank %d: %v", n, length, root, r, errs[r])
				}
				for i := range bufs[r] {
					if want := value(root, i); bufs[r][i] != want {
						t.Fatalf("Broadcast(n=%d, len=%d, root=%d) rank %d [%d] = %v, want %v", n, length, root, r, i, bufs[r][i], want)
					}
				}
			}
		}
	}
}

func TestAllGather(t *testing.T) {
	leakcheck.Check(t)
	for n := 1; n <= 8; n++ {
		outs := make([][][]float32, n)
		errs := runRanks(t, n, func(ctx context.Context, tr collective.Transport) error {
			r := tr.Rank()
			local := make([]float32, r%3) // lengths 0, 1, 2: uneven, some empty
			for i := range local {
				local[i] = value(r, i)
			}
			var err error
			outs[r], err = collective.AllGather(ctx, tr, local)
			return err
		})
		for r := range n {
			if errs[r] != nil {
				t.Fatalf("AllGather(n=%d) rank %d: %v", n, r, errs[r])
			}
			got := fmt.Sprint(outs[r])
			var want strings.Builder
			want.WriteString("[")
			for src := range n {
				if src > 0 {
					want.WriteString(" ")
				}
				vals := make([]float32, src%3)
				for i := range vals {
					vals[i] = value(src, i)
				}
				fmt.Fprint(&want, vals)
			}
			want.WriteString("]")
			if got != want.String() {
				t.Errorf("AllGather(n=%d) rank %d = %s, want %s", n, r, got, want.String())
			}
		}
	}
}

func TestBarrier(t *testing.T) {
	leakcheck.Check(t)
	for n := 1; n <= 8; n++ {
		var mu sync.Mutex
		entered := 0
		errs := runRanks(t, n, func(ctx context.Context, tr collective.Transport) error {
			time.Sleep(time.Duration(tr.Rank()) * time.Millisecond)
			mu.Lock()
			entered++
			mu.Unlock()
			if err := collective.Barrier(ctx, tr); err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			if entered != n {
				return fmt.Errorf("left the barrier when %d of %d ranks had entered", entered, n)
			}
			return nil
		})
		for r, err := range errs {
			if err != nil {
				t.Fatalf("Barrier(n=%d) rank %d: %v", n, r, err)
			}
		}
	}
}

// TestPeerTimeout: the last rank never joins; its ring neighbour (and rank 0 in the barrier)
// must fail in time with a *PeerError naming it.
func TestPeerTimeout(t *testing.T) {
	leakcheck.Check(t)
	const n = 3
	opts := collective.CommunicationOptions{Timeout: 100 * time.Millisecond}
	tests := []struct {
		name string
		run  func(ctx context.Context, tr collective.Transport) error
		who  int // the rank whose error must name rank n-1
	}{
		{"allreduce", func(ctx context.Context, tr collective.Transport) error {
			return collective.AllReduce(ctx, tr, make([]float32, 10), collective.Sum, opts)
		}, 0},
		{"broadcast", func(ctx context.Context, tr collective.Transport) error {
			return collective.Broadcast(ctx, tr, make([]float32, 10), n-1, opts)
		}, 0},
		{"allgather", func(ctx context.Context, tr collective.Transport) error {
			_, err := collective.AllGather(ctx, tr, make([]float32, 3), opts)
			return err
		}, 0},
		{"barrier", func(ctx context.Context, tr collective.Transport) error {
			return collective.Barrier(ctx, tr, opts)
		}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			errs := runRanks(t, n, func(ctx context.Context, tr collective.Transport) error {
				if tr.Rank() == n-1 {
					return nil // never answers
				}
				return tc.run(ctx, tr)
			})
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("%s with a silent peer took %v, want about the 100ms timeout", tc.name, d)
			}
			var pe *collective.PeerError
			if !errors.As(errs[tc.who], &pe) {
				t.Fatalf("%s rank %d error = %v, want *PeerError", tc.name, tc.who, errs[tc.who])
			}
			if pe.Rank != n-1 || pe.Op != tc.name || !errors.Is(pe, context.DeadlineExceeded) {
				t.Errorf("%s rank %d error = %+v, want rank %d, op %s, deadline exceeded", tc.name, tc.who, pe, n-1, tc.name)
			}
			if !strings.Contains(pe.Error(), fmt.Sprintf("rank %d did not answer", n-1)) {
				t.Errorf("%s error message %q does not name rank %d", tc.name, pe.Error(), n-1)
			}
		})
	}
}

func TestBadArguments(t *testing.T) {
	g := transport.NewMem(2)
	ctx := context.Background()
	tests := []struct {
		name string
		err  error
	}{
		{"unknown op", collective.AllReduce(ctx, g[0], nil, collective.ReduceOp(9))},
		{"root out of range", collective.Broadcast(ctx, g[0], nil, 2)},
		{"nil transport", collective.Barrier(ctx, nil)},
	}
	for _, tc := range tests {
		if !errors.Is(tc.err, collective.ErrBadArgument) {
			t.Errorf("%s: error = %v, want ErrBadArgument", tc.name, tc.err)
		}
	}
}
