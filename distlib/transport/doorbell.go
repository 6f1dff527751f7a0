package transport

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"godist/distlib/collective"
)

var (
	_ collective.Doorbell = (*grpcShared)(nil)
	_ collective.Doorbell = (*memShared)(nil)
)

// awaitSpin and awaitSpinMax bound how long Await watches a word before it sleeps on it
// (spinBudget). Workers of one host in lockstep arrive at their all-reduce close together:
// a waiter that still watches sees the post at once, where a sleeping one halts its vCPU
// and is woken through the kernel and the hypervisor, so watching up to awaitSpinMax trains
// faster (bench/RESULTS.md, multiworker, "the waiter watches its word as long as the waits
// last"). Where workers outnumber cores the one a waiter spins for may need its core, so
// the budget follows the waits.
var (
	awaitSpin    = 50 * time.Microsecond
	awaitSpinMax = 3 * time.Millisecond
)

// spinBudget is how long a GRPC group's Awaits watch their word before they sleep: twice
// the last wait, between awaitSpin and awaitSpinMax, or awaitSpin after a wait longer than
// awaitSpinMax (a peer that long away is not in lockstep with this one, or shares its core).
type spinBudget struct{ d atomic.Int64 }

func (b *spinBudget) get() time.Duration {
	if d := b.d.Load(); d > 0 {
		return time.Duration(d)
	}
	return awaitSpinMax
}

// waited records how long an Await waited for its word.
func (b *spinBudget) waited(d time.Duration) {
	next := awaitSpin
	if d <= awaitSpinMax {
		next = min(awaitSpinMax, max(awaitSpin, 2*d))
	}
	b.d.Store(int64(next))
}

// awaitPoll is how long GRPC's Await sleeps at a time before it looks at ctx, at the
// transport's Close and at the peer's health again.
var awaitPoll = 2 * time.Millisecond

// wordOf returns the uint32 at offset off (in float32s) of rank's region.
func wordOf(region []float32, rank, off int) (*uint32, error) {
	v, err := viewRegion(region, rank, off, 1)
	if err != nil {
		return nil, err
	}
	return (*uint32)(unsafe.Pointer(&v[0])), nil
}

// awaitWord is Await's loop: it returns once *w has reached want (the difference, as an
// int32, is not negative), and how long it waited. It watches the word for spin, then calls
// sleep with the value it last saw until the word reaches want; sleep returns when the word
// may have moved, or with the error that ends the wait.
func awaitWord(w *uint32, want uint32, spin time.Duration, sleep func(v uint32) error) (time.Duration, error) {
	reached := func(v uint32) bool { return int32(v-want) >= 0 }
	if reached(atomic.LoadUint32(w)) {
		return 0, nil
	}
	start := time.Now()
	for i := 1; ; i++ {
		if reached(atomic.LoadUint32(w)) {
			return time.Since(start), nil
		}
		if i%256 == 0 && time.Since(start) >= spin {
			break
		}
	}
	for {
		v := atomic.LoadUint32(w)
		if reached(v) {
			return time.Since(start), nil
		}
		if err := sleep(v); err != nil {
			return time.Since(start), err
		}
	}
}

// A rank that sleeps in Await on another rank's words says so in its region's header: a
// counter per rank it may wait on, from byte shmSleepers on, which Ring reads so that it
// makes the wake-up's system call only when some rank sleeps. A group larger than the
// header has counters for wakes every time.
const shmSleepers = 64

// sleepers returns rank's counter of the Awaits sleeping on the words of rank on, or nil.
func (s *grpcShared) sleepers(rank, on int) *uint32 {
	at := shmSleepers + 4*on
	if d := s.headers[rank]; at+4 <= len(d) {
		return (*uint32)(unsafe.Pointer(&d[at]))
	}
	return nil
}

// Ring stores v in the word at off of this rank's region and wakes the ranks sleeping in
// Await on it (a futex on the shared page); see collective.Doorbell.
func (s *grpcShared) Ring(off int, v uint32) error {
	w, err := wordOf(s.regions[s.rank], s.rank, off)
	if err != nil {
		return err
	}
	atomic.StoreUint32(w, v)
	// The store above and the sleeper's count (Await) are both sequentially consistent: a
	// rank that counted itself before this load is woken, one that counts itself after it
	// sees v before it sleeps.
	for q := range s.headers {
		if q == s.rank {
			continue
		}
		if c := s.sleepers(q, s.rank); c == nil || atomic.LoadUint32(c) != 0 {
			return futexWake(w)
		}
	}
	return nil
}

// Await returns once the word at off of rank's region has reached want (see
// collective.Doorbell). Past its spin budget it sleeps on the word's futex, looking every
// awaitPoll at ctx, at Close and at rank's health: a rank the transport lost (its
// connection ended, its health checks failed) fails the wait with ErrPeerLost, as a Recv
// from it would.
func (s *grpcShared) Await(ctx context.Context, rank, off int, want uint32) error {
	if rank < 0 || rank >= len(s.regions) {
		return fmt.Errorf("transport: shared memory: word of rank %d outside group of %d", rank, len(s.regions))
	}
	w, err := wordOf(s.regions[rank], rank, off)
	if err != nil {
		return err
	}
	waited, err := awaitWord(w, want, s.spin.get(), func(v uint32) error {
		if isClosed(s.done) {
			return ErrClosed
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := s.lost(rank); err != nil {
			return err
		}
		if c := s.sleepers(s.rank, rank); c != nil {
			atomic.AddUint32(c, 1)
			defer atomic.AddUint32(c, ^uint32(0))
			if atomic.LoadUint32(w) != v { // rung before the count: Ring may not wake
				return nil
			}
		}
		if err := futexWait(w, v, awaitPoll); err != nil {
			return fmt.Errorf("transport: shared memory: wait on rank %d's word at %d: %w", rank, off, err)
		}
		return nil
	})
	if err == nil {
		s.spin.waited(waited)
	}
	return err
}

// memBell is the doorbell of an in-memory group: Ring closes the current channel, which
// wakes every Await of the group to look at its word again.
type memBell struct {
	mu sync.Mutex
	ch chan struct{}
}

func (b *memBell) wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch == nil {
		b.ch = make(chan struct{})
	}
	return b.ch
}

func (b *memBell) ring() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch != nil {
		close(b.ch)
		b.ch = nil
	}
}

// Ring stores v in the word at off of this rank's region and wakes the group's Awaits.
func (s *memShared) Ring(off int, v uint32) error {
	w, err := wordOf(s.mem, s.m.rank, off)
	if err != nil {
		return err
	}
	atomic.StoreUint32(w, v)
	s.m.bell.ring()
	return nil
}

// Await returns once the word at off of rank's region has reached want (see
// collective.Doorbell); it fails when ctx ends, when this endpoint closes, or when rank's
// has closed (ErrPeerLost).
func (s *memShared) Await(ctx context.Context, rank, off int, want uint32) error {
	if rank < 0 || rank >= len(s.m.group) {
		return fmt.Errorf("transport: shared memory: word of rank %d outside group of %d", rank, len(s.m.group))
	}
	p := s.m.group[rank]
	w, err := wordOf(p.arena().mem, rank, off)
	if err != nil {
		return err
	}
	// The ranks are goroutines of this process, which may have fewer Ps than ranks: a short
	// watch, not to hold a P the awaited rank needs.
	_, err = awaitWord(w, want, awaitSpin, func(v uint32) error {
		ch := s.m.bell.wait()
		if atomic.LoadUint32(w) != v { // rung before the channel was taken
			return nil
		}
		select {
		case <-ch:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-s.m.down:
			return ErrClosed
		case <-p.down:
			select {
			case <-s.m.down: // p is this endpoint
				return ErrClosed
			default:
				return p.lostErr()
			}
		}
	})
	return err
}
