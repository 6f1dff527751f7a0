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

// counting passes everything to a shared in-memory transport and counts the messages sent
// under each kind of tag (the suffix after the collective's tag), so that a test can tell
// which algorithm ran.
type counting struct {
	*transport.SharedMem
	mu   sync.Mutex
	sent map[string]int
}

func (c *counting) Send(ctx context.Context, to int, tag string, b []byte) error {
	c.mu.Lock()
	c.sent[tag[strings.LastIndex(tag, "/")+1:]]++
	c.mu.Unlock()
	return c.SharedMem.Send(ctx, to, tag, b)
}

func (c *counting) count(kind string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sent[kind]
}

func sharedGroup(n, bytesPerRank int) ([]collective.Transport, []*counting) {
	g := transport.NewSharedMem(n, bytesPerRank)
	group, cs := make([]collective.Transport, n), make([]*counting, n)
	for r := range g {
		cs[r] = &counting{SharedMem: g[r], sent: map[string]int{}}
		group[r] = cs[r]
	}
	return group, cs
}

// wantReduced is what an all-reduce with op of value(r, i) over n ranks gives: the values
// combined in rank order.
func wantReduced(n, length int, op collective.ReduceOp) []float32 {
	want := make([]float32, length)
	for i := range want {
		acc := value(0, i)
		for r := 1; r < n; r++ {
			v := value(r, i)
			switch op {
			case collective.Sum, collective.Mean:
				acc += v
			case collective.Max:
				acc = max(acc, v)
			case collective.Min:
				acc = min(acc, v)
			}
		}
		if op == collective.Mean {
			acc /= float32(n)
		}
		want[i] = acc
	}
	return want
}

// TestAllReduceShared checks the shared-memory all-reduce against the values summed in rank
// order: buffers allocated in shared memory (large ones read in place, three rounds; small
// ones sent inline, one round) and small ordinary buffers (inline), and that the ring did not
// run.
func TestAllReduceShared(t *testing.T) {
	leakcheck.Check(t)
	ops := []collective.ReduceOp{collective.Sum, collective.Mean, collective.Max, collective.Min}
	for _, n := range []int{2, 3, 4} {
		for _, length := range []int{0, 1, 1000, 16<<10 - 1, 16<<10 + 3, 100_003} {
			for _, op := range ops {
				for _, alloc := range []bool{true, false} {
					if !alloc && 4*length >= 64<<10 {
						continue // the ring: TestAllReduceSharedFallsBack
					}
					want := wantReduced(n, length, op)
					group, cs := sharedGroup(n, 8<<20)
					bufs := make([][]float32, n)
					errs := runGroup(t, group, func(ctx context.Context, tr collective.Transport) error {
						r := tr.Rank()
						if alloc {
							sm, err := tr.(collective.Sharer).SharedMemory(ctx)
							if err != nil || sm == nil {
								return errors.Join(errors.New("no shared memory"), err)
							}
							if bufs[r], err = sm.Alloc(length); err != nil {
								return err
							}
							defer sm.Free(bufs[r])
						} else {
							bufs[r] = make([]float32, length)
						}
						for i := range bufs[r] {
							bufs[r][i] = value(r, i)
						}
						return collective.AllReduce(ctx, tr, bufs[r], op)
					})
					for r := range n {
						if errs[r] != nil {
							t.Fatalf("n=%d len=%d %v alloc=%v rank %d: %v", n, length, op, alloc, r, errs[r])
						}
						for i := range want {
							if bufs[r][i] != want[i] {
								t.Fatalf("n=%d len=%d %v alloc=%v rank %d [%d] = %v, want %v", n, length, op, alloc, r, i, bufs[r][i], want[i])
							}
						}
						if rs, ag, shm := cs[r].count("rs"), cs[r].count("ag"), cs[r].count("shm"); rs+ag != 0 || shm != n-1 {
							t.Fatalf("n=%d len=%d rank %d sent %d ring messages and %d posts, want 0 and %d", n, length, r, rs+ag, shm, n-1)
						}
						// The rounds after the first go through the ranks' signal words.
						if rounds := cs[r].count("shm1") + cs[r].count("shm2"); rounds != 0 {
							t.Fatalf("n=%d len=%d rank %d sent %d messages after its post, want none (signal words)", n, length, r, rounds)
						}
					}
				}
			}
		}
	}
}

// allocated returns a buffer of length values in tr's shared memory, holding value(rank, i),
// and the function that frees it.
func allocated(ctx context.Context, tr collective.Transport, length int) ([]float32, func(), error) {
	sm, err := tr.(collective.Sharer).SharedMemory(ctx)
	if err != nil || sm == nil {
		return nil, nil, errors.Join(errors.New("no shared memory"), err)
	}
	buf, err := sm.Alloc(length)
	if err != nil {
		return nil, nil, err
	}
	for i := range buf {
		buf[i] = value(tr.Rank(), i)
	}
	return buf, func() { sm.Free(buf) }, nil
}

// TestAllReduceSharedSignalBusy: while one rank's signal word is lent to someone else, a
// shared all-reduce takes messages for its later rounds on every rank, with the same
// result; once it is given back, the words carry them again.
func TestAllReduceSharedSignalBusy(t *testing.T) {
	leakcheck.Check(t)
	const n, length = 3, 100_003
	group, cs := sharedGroup(n, 8<<20)
	want := wantReduced(n, length, collective.Sum)
	for _, busy := range []bool{true, false} {
		bufs := make([][]float32, n)
		before := make([]int, n)
		for r := range n {
			before[r] = cs[r].count("shm1") + cs[r].count("shm2")
		}
		errs := runGroup(t, group, func(ctx context.Context, tr collective.Transport) error {
			if busy && tr.Rank() == 1 {
				sm, err := tr.(collective.Sharer).SharedMemory(ctx)
				if err != nil {
					return err
				}
				_, release, ok := sm.(collective.Doorbell).Signal()
				if !ok {
					return errors.New("signal word not lent")
				}
				defer release()
			}
			buf, free, err := allocated(ctx, tr, length)
			if err != nil {
				return err
			}
			defer free()
			err = collective.AllReduce(ctx, tr, buf, collective.Sum)
			bufs[tr.Rank()] = append([]float32(nil), buf...)
			return err
		})
		for r := range n {
			if errs[r] != nil {
				t.Fatalf("busy %v: rank %d: %v", busy, r, errs[r])
			}
			for i := range want {
				if bufs[r][i] != want[i] {
					t.Fatalf("busy %v: rank %d [%d] = %v, want %v", busy, r, i, bufs[r][i], want[i])
				}
			}
			wantRounds := 0
			if busy {
				wantRounds = 2 * (n - 1)
			}
			if got := cs[r].count("shm1") + cs[r].count("shm2") - before[r]; got != wantRounds {
				t.Fatalf("busy %v: rank %d sent %d messages after its post, want %d", busy, r, got, wantRounds)
			}
		}
	}
}

// TestAllReduceSharedConcurrent runs shared all-reduces under several tags at once, again
// and again: one at a time per rank holds its signal word, a call that does not get every
// rank's takes messages, and every result is right.
func TestAllReduceSharedConcurrent(t *testing.T) {
	leakcheck.Check(t)
	const n, length, calls, rounds = 2, 40_000, 4, 25
	group, cs := sharedGroup(n, 16<<20)
	errs := runGroup(t, group, func(ctx context.Context, tr collective.Transport) error {
		var wg sync.WaitGroup
		errc := make(chan error, calls)
		for c := range calls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf, free, err := allocated(ctx, tr, length)
				if err != nil {
					errc <- err
					return
				}
				defer free()
				for k := range rounds {
					for i := range buf {
						buf[i] = value(tr.Rank(), i+c+k)
					}
					if err := collective.AllReduce(ctx, tr, buf, collective.Sum, collective.Tag(fmt.Sprintf("c%d", c))); err != nil {
						errc <- err
						return
					}
					for i, v := range buf {
						if w := value(0, i+c+k) + value(1, i+c+k); v != w {
							errc <- fmt.Errorf("call %d round %d [%d] = %v, want %v", c, k, i, v, w)
							return
						}
					}
				}
			}()
		}
		wg.Wait()
		close(errc)
		return <-errc
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	// Which calls got both words depends on the schedule: say how many did, not assert it
	// (TestAllReduceShared and TestAllReduceSharedSignalBusy check each way alone).
	t.Logf("%d of %d all-reduces sent their later rounds as messages", cs[0].count("shm1"), calls*rounds)
}

// TestAllReduceSharedFallsBack runs the ring, with the same results, where a rank's large
// buffer lies outside shared memory: every rank's, or one rank's only.
func TestAllReduceSharedFallsBack(t *testing.T) {
	leakcheck.Check(t)
	const n, length = 3, 100_000
	for _, ordinary := range []int{-1, 1} { // -1: every rank
		want := wantReduced(n, length, collective.Sum)
		group, cs := sharedGroup(n, 8<<20)
		bufs := make([][]float32, n)
		errs := runGroup(t, group, func(ctx context.Context, tr collective.Transport) error {
			r := tr.Rank()
			bufs[r] = make([]float32, length)
			if ordinary >= 0 && r != ordinary {
				sm, err := tr.(collective.Sharer).SharedMemory(ctx)
				if err != nil {
					return err
				}
				if bufs[r], err = sm.Alloc(length); err != nil {
					return err
				}
			}
			for i := range bufs[r] {
				bufs[r][i] = value(r, i)
			}
			return collective.AllReduce(ctx, tr, bufs[r], collective.Sum)
		})
		for r := range n {
			if errs[r] != nil {
				t.Fatalf("ordinary %d: rank %d: %v", ordinary, r, errs[r])
			}
			for i := range want {
				if bufs[r][i] != want[i] {
					t.Fatalf("ordinary %d: rank %d [%d] = %v, want %v", ordinary, r, i, bufs[r][i], want[i])
				}
			}
			if cs[r].count("rs") == 0 {
				t.Fatalf("ordinary %d: rank %d sent no ring message: the ring did not run", ordinary, r)
			}
		}
	}
}

// TestAllReduceSharedMatchesRing: with two ranks the shared path gives bit for bit what the
// ring gives (a sum of two values does not depend on their order).
func TestAllReduceSharedMatchesRing(t *testing.T) {
	leakcheck.Check(t)
	const length = 50_001
	run := func(group []collective.Transport) [][]float32 {
		bufs := make([][]float32, 2)
		errs := runGroup(t, group, func(ctx context.Context, tr collective.Transport) error {
			r := tr.Rank()
			bufs[r] = make([]float32, length)
			if sh, ok := tr.(collective.Sharer); ok {
				sm, err := sh.SharedMemory(ctx)
				if err != nil {
					return err
				}
				if bufs[r], err = sm.Alloc(length); err != nil {
					return err
				}
			}
			for i := range bufs[r] {
				bufs[r][i] = 1 / float32(i+r+3)
			}
			return collective.AllReduce(ctx, tr, bufs[r], collective.Mean)
		})
		for r, err := range errs {
			if err != nil {
				t.Fatalf("rank %d: %v", r, err)
			}
		}
		return bufs
	}
	shared, _ := sharedGroup(2, 8<<20)
	mem := transport.NewMem(2)
	got, want := run(shared), run([]collective.Transport{mem[0], mem[1]})
	for r := range 2 {
		for i := range want[r] {
			if got[r][i] != want[r][i] {
				t.Fatalf("rank %d [%d]: shared %v, ring %v", r, i, got[r][i], want[r][i])
			}
		}
	}
}

// closeAfterPost closes its endpoint once it has sent a shared all-reduce's first message.
type closeAfterPost struct{ *counting }

func (c closeAfterPost) Send(ctx context.Context, to int, tag string, b []byte) error {
	err := c.counting.Send(ctx, to, tag, b)
	if strings.HasSuffix(tag, "/shm") {
		c.Close()
	}
	return err
}

func TestAllReduceSharedErrors(t *testing.T) {
	leakcheck.Check(t)
	t.Run("length mismatch", func(t *testing.T) {
		group, _ := sharedGroup(2, 8<<20)
		errs := runGroup(t, group, func(ctx context.Context, tr collective.Transport) error {
			return collective.AllReduce(ctx, tr, make([]float32, 20_000+tr.Rank()), collective.Sum,
				collective.CommunicationOptions{Timeout: 5 * time.Second})
		})
		for r, err := range errs {
			if !errors.Is(err, collective.ErrBadArgument) || !strings.Contains(err.Error(), "same length") {
				t.Fatalf("rank %d: %v, want an error saying every rank must pass a buffer of the same length", r, err)
			}
		}
	})
	t.Run("lengths either side of the inline limit", func(t *testing.T) {
		group, _ := sharedGroup(2, 8<<20)
		errs := runGroup(t, group, func(ctx context.Context, tr collective.Transport) error {
			return collective.AllReduce(ctx, tr, make([]float32, 16<<10-1+2*tr.Rank()), collective.Sum,
				collective.CommunicationOptions{Timeout: 5 * time.Second})
		})
		for r, err := range errs {
			if !errors.Is(err, collective.ErrBadArgument) || !strings.Contains(err.Error(), "same length") {
				t.Fatalf("rank %d: %v, want an error saying every rank must pass a buffer of the same length", r, err)
			}
		}
	})
	t.Run("peer lost after its post", func(t *testing.T) {
		// Rank 1 closes its endpoint once its first message is sent: rank 0, waiting on rank
		// 1's signal word, learns at once that rank 1 is gone, not at its timeout.
		group, cs := sharedGroup(2, 8<<20)
		start := time.Now()
		errs := runGroup(t, group, func(ctx context.Context, tr collective.Transport) error {
			buf, free, err := allocated(ctx, tr, 100_000)
			if err != nil {
				return err
			}
			defer free()
			if tr.Rank() == 1 {
				tr = closeAfterPost{cs[1]}
			}
			return collective.AllReduce(ctx, tr, buf, collective.Sum, collective.CommunicationOptions{Timeout: 5 * time.Second})
		})
		if errs[1] == nil {
			t.Fatalf("rank 1 closed its endpoint, yet its all-reduce succeeded")
		}
		var pe *collective.PeerError
		if !errors.As(errs[0], &pe) || pe.Rank != 1 || !errors.Is(errs[0], transport.ErrPeerLost) {
			t.Fatalf("rank 0: %v, want a *PeerError naming rank 1, lost", errs[0])
		}
		if got := cs[0].count("shm1"); got != 0 {
			t.Fatalf("rank 0 sent %d round-2 messages, want none: it waits on rank 1's signal word", got)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("rank 0 took %v to see rank 1 gone", d)
		}
	})
	t.Run("peer never comes", func(t *testing.T) {
		group, _ := sharedGroup(2, 8<<20)
		errs := runGroup(t, group, func(ctx context.Context, tr collective.Transport) error {
			if tr.Rank() == 1 {
				return nil
			}
			return collective.AllReduce(ctx, tr, make([]float32, 100_000), collective.Sum,
				collective.CommunicationOptions{Timeout: 200 * time.Millisecond})
		})
		var pe *collective.PeerError
		if !errors.As(errs[0], &pe) || pe.Rank != 1 || !errors.Is(errs[0], context.DeadlineExceeded) {
			t.Fatalf("rank 0: %v, want a *PeerError naming rank 1 that did not answer in time", errs[0])
		}
	})
}

// TestBucketerShared: a Bucketer over shared memory moves its buckets there at their first
// all-reduce; gradients written into Buffer(i) are reduced in place, step after step.
func TestBucketerShared(t *testing.T) {
	leakcheck.Check(t)
	const n = 2
	sizes := []int{30_000, 7, 20_000}
	group, cs := sharedGroup(n, 8<<20)
	errs := runGroup(t, group, func(ctx context.Context, tr collective.Transport) error {
		r := tr.Rank()
		b, err := collective.NewBucketer(tr, sizes, 0, collective.Sum)
		if err != nil {
			return err
		}
		sm, err := tr.(collective.Sharer).SharedMemory(ctx)
		if err != nil {
			return err
		}
		for step := range 3 {
			for i, size := range sizes {
				g := b.Buffer(i)
				if len(g) != size {
					return errors.New("Buffer has the wrong length")
				}
				for j := range g {
					g[j] = float32((r + 1) * (i + j%7 + step))
				}
				if err := b.Add(i, g); err != nil {
					return err
				}
			}
			if err := b.Wait(ctx); err != nil {
				return err
			}
			for i, size := range sizes {
				g := b.Buffer(i)
				if _, ok := sm.Offset(g); !ok {
					return errors.New("a bucket is not in shared memory after its first all-reduce")
				}
				for j := range size {
					if want := float32(3 * (i + j%7 + step)); g[j] != want {
						t.Errorf("rank %d step %d tensor %d [%d] = %v, want %v", r, step, i, j, g[j], want)
						return nil
					}
				}
			}
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
		if cs[r].count("rs") != 0 {
			t.Fatalf("rank %d sent ring messages: the buckets were not reduced in shared memory", r)
		}
	}
}

// TestBucketerNoRoom: where shared memory has no room for a bucket, it stays where it was and
// is reduced by the ring.
func TestBucketerNoRoom(t *testing.T) {
	leakcheck.Check(t)
	sizes := []int{100_000, 3}
	group, cs := sharedGroup(2, 64<<10)
	errs := runGroup(t, group, func(ctx context.Context, tr collective.Transport) error {
		b, err := collective.NewBucketer(tr, sizes, 0, collective.Sum)
		if err != nil {
			return err
		}
		for step := range 2 {
			for i := range sizes {
				g := b.Buffer(i)
				for j := range g {
					g[j] = float32(tr.Rank() + j%3 + step)
				}
				if err := b.Add(i, g); err != nil {
					return err
				}
			}
			if err := b.Wait(ctx); err != nil {
				return err
			}
			for i := range sizes {
				for j, v := range b.Buffer(i) {
					if want := float32(1 + 2*(j%3+step)); v != want {
						return fmt.Errorf("step %d tensor %d [%d] = %v, want %v", step, i, j, v, want)
					}
				}
			}
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
		if cs[r].count("rs") == 0 {
			t.Fatalf("rank %d sent no ring message", r)
		}
	}
}

// TestBucketerKeepTerms: with KeepTerms over shared memory, the large buckets are reduced by
// the ring at their first step, then handed over as every rank's values where they lie (one
// round of messages, no reduction), in buffers that alternate from step to step; the small
// bucket is summed inline. From the second step on, the first messages of all buckets travel
// as one: one message to each peer at the second step, then none, through the ranks'
// postboxes in shared memory. Rank 0 reads its terms late, after rank 1 has already written
// its next step's gradients: they must still be this step's (a peer may only write a buffer
// again two steps later).
func TestBucketerKeepTerms(t *testing.T) {
	leakcheck.Check(t)
	sizes := []int{30_000, 7, 20_000, 100} // buckets [30000] [7 20000] (in shared memory), [100] (inline)
	for _, n := range []int{2, 3} {
		group, cs := sharedGroup(n, 8<<20)
		errs := runGroup(t, group, func(ctx context.Context, tr collective.Transport) error {
			r := tr.Rank()
			b, err := collective.NewBucketer(tr, sizes, 4*20_007, collective.Sum, collective.KeepTerms())
			if err != nil {
				return err
			}
			if b.NumBuckets() != 3 {
				return fmt.Errorf("%d buckets, want 3", b.NumBuckets())
			}
			var prev [][]float32
			for step := range 5 {
				bufs := make([][]float32, len(sizes))
				for i := range sizes {
					bufs[i] = b.Buffer(i)
					for j := range bufs[i] {
						bufs[i][j] = float32((r + 1) * (i + j%7 + step))
					}
					if err := b.Add(i, bufs[i]); err != nil {
						return err
					}
				}
				terms, err := b.WaitTerms(ctx)
				if err != nil {
					return err
				}
				if r == 0 {
					time.Sleep(20 * time.Millisecond) // the other ranks add their next step meanwhile
				}
				for i, size := range sizes {
					want := 1
					if step > 0 && i < 3 { // the buckets in shared memory, from their second step
						want = n
					}
					if len(terms[i]) != want {
						return fmt.Errorf("step %d tensor %d: %d terms, want %d", step, i, len(terms[i]), want)
					}
					if want == n && &terms[i][r][0] != &bufs[i][0] {
						return fmt.Errorf("step %d tensor %d: this rank's term is not its Buffer", step, i)
					}
					if want == n && step > 1 && &bufs[i][0] == &prev[i][0] {
						return fmt.Errorf("step %d tensor %d: the same buffer as the step before", step, i)
					}
					for j := range size {
						var sum float32
						for _, term := range terms[i] {
							sum += term[j]
						}
						if w := float32(n * (n + 1) / 2 * (i + j%7 + step)); sum != w {
							return fmt.Errorf("step %d tensor %d [%d]: terms sum to %v, want %v", step, i, j, sum, w)
						}
					}
				}
				prev = bufs
			}
			if err := b.Wait(ctx); !errors.Is(err, collective.ErrBadArgument) {
				return fmt.Errorf("Wait on a KeepTerms bucketer (no tensor added) = %v, want ErrBadArgument", err)
			}
			return nil
		})
		for r, err := range errs {
			if err != nil {
				t.Fatalf("%d ranks: rank %d: %v", n, r, err)
			}
			if c := cs[r].count("shm1") + cs[r].count("shm2"); c != 0 {
				t.Fatalf("%d ranks: rank %d sent %d messages of the reducing rounds", n, r, c)
			}
			// The first step: a message per bucket and peer; the second: one per peer, which
			// tells where the postboxes lie; the 3 others: none (through the boxes).
			if c, want := cs[r].count("shm"), (3+1)*(n-1); c != want {
				t.Fatalf("%d ranks: rank %d sent %d first messages, want %d", n, r, c, want)
			}
		}
	}
}

// TestBucketerKeepTermsOutOfStep: once the ranks exchange their first messages through
// their postboxes, a step that fails on one rank (its context ends while the other rank is
// away) leaves the ranks out of step; every later step of that rank fails at once, with an
// error that says so, instead of reading a message of the wrong step.
func TestBucketerKeepTermsOutOfStep(t *testing.T) {
	leakcheck.Check(t)
	sizes := []int{30_000, 100}
	group, _ := sharedGroup(2, 8<<20)
	failed := make(chan struct{})
	errs := runGroup(t, group, func(ctx context.Context, tr collective.Transport) error {
		b, err := collective.NewBucketer(tr, sizes, 0, collective.Sum, collective.KeepTerms())
		if err != nil {
			return err
		}
		step := func(ctx context.Context) error {
			for i := range sizes {
				if err := b.Add(i, b.Buffer(i)); err != nil {
					return err
				}
			}
			_, err := b.WaitTerms(ctx)
			return err
		}
		for k := range 3 { // the third step goes through the boxes
			if err := step(ctx); err != nil {
				return fmt.Errorf("step %d: %w", k, err)
			}
		}
		if tr.Rank() == 1 {
			<-failed
			return nil
		}
		short, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
		err = step(short)
		cancel()
		close(failed)
		if !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("a step without the other rank = %v, want the context's deadline", err)
		}
		start := time.Now()
		err = step(ctx)
		if err == nil || !strings.Contains(err.Error(), "out of step") || time.Since(start) > time.Second {
			return fmt.Errorf("the step after a failed one = %v after %v, want an error at once saying the ranks are out of step", err, time.Since(start))
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

// TestBucketerKeepTermsNoRoom: a KeepTerms bucketer whose large bucket finds no room in
// shared memory sums it by the ring at every step (every rank learns it from the one round
// of first messages), and the small one inline; WaitTerms gives one term each, the sums.
func TestBucketerKeepTermsNoRoom(t *testing.T) {
	leakcheck.Check(t)
	sizes := []int{100_000, 3}
	group, cs := sharedGroup(2, 64<<10)
	errs := runGroup(t, group, func(ctx context.Context, tr collective.Transport) error {
		b, err := collective.NewBucketer(tr, sizes, 0, collective.Sum, collective.KeepTerms())
		if err != nil {
			return err
		}
		return stepsWithSums(ctx, tr, b, sizes, 3, b.Buffer)
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
		if c := cs[r].count("rs"); c < 3 {
			t.Fatalf("rank %d sent %d ring messages, want the ring at each of the 3 steps", r, c)
		}
	}
}

// TestBucketerKeepTermsWithoutSharing: where the ranks share no memory, a KeepTerms
// bucketer reduces by the ring and WaitTerms gives each tensor one term, the sums; it needs
// the op Sum.
func TestBucketerKeepTermsWithoutSharing(t *testing.T) {
	leakcheck.Check(t)
	sizes := []int{30_000, 5}
	if _, err := collective.NewBucketer(transport.NewMem(2)[0], sizes, 0, collective.Mean, collective.KeepTerms()); !errors.Is(err, collective.ErrBadArgument) {
		t.Errorf("NewBucketer(Mean, KeepTerms) error = %v, want ErrBadArgument", err)
	}
	errs := runRanks(t, 2, func(ctx context.Context, tr collective.Transport) error {
		b, err := collective.NewBucketer(tr, sizes, 0, collective.Sum, collective.KeepTerms())
		if err != nil {
			return err
		}
		return stepsWithSums(ctx, tr, b, sizes, 2, func(i int) []float32 { return make([]float32, sizes[i]) })
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

// stepsWithSums runs steps of a KeepTerms bucketer over 2 ranks, each tensor's values
// written into slot(i) and added, and checks that WaitTerms gives each tensor one term
// holding the sums.
func stepsWithSums(ctx context.Context, tr collective.Transport, b *collective.Bucketer, sizes []int, steps int, slot func(i int) []float32) error {
	for step := range steps {
		for i := range sizes {
			g := slot(i)
			for j := range g {
				g[j] = float32(tr.Rank() + j%3 + step)
			}
			if err := b.Add(i, g); err != nil {
				return err
			}
		}
		terms, err := b.WaitTerms(ctx)
		if err != nil {
			return err
		}
		for i := range sizes {
			if len(terms[i]) != 1 {
				return fmt.Errorf("step %d tensor %d: %d terms, want 1", step, i, len(terms[i]))
			}
			for j, v := range terms[i][0] {
				if want := float32(1 + 2*(j%3+step)); v != want {
					return fmt.Errorf("step %d tensor %d [%d] = %v, want %v", step, i, j, v, want)
				}
			}
		}
	}
	return nil
}

// TestBucketerKeepTermsOneRank: a KeepTerms bucketer of one rank over shared memory gives
// its own values as the sums, step after step.
func TestBucketerKeepTermsOneRank(t *testing.T) {
	leakcheck.Check(t)
	sizes := []int{30_000, 5}
	group, _ := sharedGroup(1, 1<<20)
	b, err := collective.NewBucketer(group[0], sizes, 0, collective.Sum, collective.KeepTerms())
	if err != nil {
		t.Fatal(err)
	}
	for step := range 3 {
		for i := range sizes {
			g := b.Buffer(i)
			for j := range g {
				g[j] = float32(j%3 + step)
			}
			if err := b.Add(i, g); err != nil {
				t.Fatal(err)
			}
		}
		terms, err := b.WaitTerms(context.Background())
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		for i := range sizes {
			var sum float32
			for _, term := range terms[i] {
				sum += term[1]
			}
			if want := float32(1 + step); sum != want {
				t.Fatalf("step %d tensor %d: terms sum to %v, want %v", step, i, sum, want)
			}
		}
	}
}
