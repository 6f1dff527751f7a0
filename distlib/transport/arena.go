package transport

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"unsafe"
)

// arenaAlign is the alignment of every allocation, in float32s (64 bytes: a cache line).
const arenaAlign = 16

// arena hands out float32 slices of one region: first fit over a free list sorted by
// offset, coalesced on free. Every allocation starts 64-byte aligned relative to the
// region's start, and the region's start itself is 64-byte aligned. It is safe for
// concurrent use.
type arena struct {
	mu     sync.Mutex
	mem    []float32 // the region, len a multiple of arenaAlign
	base   uintptr   // address of mem[0]
	free   []span    // sorted by off, never adjacent (coalesced)
	used   map[int]int
	high   int                                // high-water mark, in float32s: everything below was committed
	commit func(offFloats, nFloats int) error // nil: nothing to commit
	signal signalWord                         // Signal
}

// signalWord is the word a Doorbell lends (Signal): a cache line of the region, allocated at
// the first Signal and kept until the region goes, held by one borrower at a time.
type signalWord struct {
	once sync.Once
	off  int        // -1: the region had no room for it
	held sync.Mutex // held by the borrower
}

// Signal lends the region's signal word (collective.Doorbell): its offset, and the function
// that gives it back; ok is false while another caller holds it or when the region had no
// room for it.
func (a *arena) Signal() (off int, release func(), ok bool) {
	w := &a.signal
	w.once.Do(func() {
		w.off = -1
		if b, err := a.Alloc(arenaAlign); err == nil {
			w.off, _ = a.Offset(b)
		}
	})
	if w.off < 0 || !w.held.TryLock() {
		return -1, nil, false
	}
	return w.off, w.held.Unlock, true
}

type span struct{ off, n int }

// newArena returns an arena over mem, whose first element must be 64-byte aligned; the
// region is mem cut down to a multiple of 16 float32s. commit, if not nil, is called with
// the range an allocation adds above the high-water mark, before the allocation uses it.
func newArena(mem []float32, commit func(offFloats, nFloats int) error) (*arena, error) {
	a := &arena{used: map[int]int{}, commit: commit}
	if len(mem) > 0 {
		a.base = uintptr(unsafe.Pointer(unsafe.SliceData(mem)))
		if a.base%(4*arenaAlign) != 0 {
			return nil, fmt.Errorf("transport: shared memory: region at %#x is not 64-byte aligned", a.base)
		}
	}
	n := len(mem) &^ (arenaAlign - 1)
	a.mem = mem[:n:n]
	if n > 0 {
		a.free = []span{{0, n}}
	}
	return a, nil
}

// newHeapArena returns an arena over a fresh 64-byte aligned heap region of bytes bytes
// (rounded down to 64).
func newHeapArena(bytes int) *arena {
	n := (bytes / 4) &^ (arenaAlign - 1)
	raw := make([]float32, n+arenaAlign)
	skip := 0
	if rem := uintptr(unsafe.Pointer(unsafe.SliceData(raw))) % (4 * arenaAlign); rem != 0 {
		skip = int((4*arenaAlign - rem) / 4)
	}
	a, err := newArena(raw[skip:skip+n], nil)
	if err != nil {
		panic(err) // cannot happen: the region was aligned just above
	}
	return a
}

// size is the region's size in float32s.
func (a *arena) size() int { return len(a.mem) }

// Alloc returns n zeroed float32s of the region; an empty non-nil slice for n == 0.
func (a *arena) Alloc(n int) ([]float32, error) {
	b, err := a.allocDirty(n)
	clear(b)
	return b, err
}

// allocDirty is Alloc without the zeroing: the slice holds what the region held (for a
// buffer the caller writes whole before anyone reads it).
func (a *arena) allocDirty(n int) ([]float32, error) {
	if n < 0 {
		return nil, fmt.Errorf("transport: shared memory: allocation of %d float32s: negative size", n)
	}
	if n == 0 {
		return make([]float32, 0), nil
	}
	if n > len(a.mem) {
		return nil, a.noRoom(n, nil)
	}
	need := (n + arenaAlign - 1) &^ (arenaAlign - 1)
	a.mu.Lock()
	defer a.mu.Unlock()
	i := 0
	for i < len(a.free) && a.free[i].n < need {
		i++
	}
	if i == len(a.free) {
		return nil, a.noRoom(n, nil)
	}
	off := a.free[i].off
	if end := off + need; end > a.high {
		if a.commit != nil {
			if err := a.commit(a.high, end-a.high); err != nil {
				return nil, a.noRoom(n, err)
			}
		}
		a.high = end
	}
	if a.free[i].n == need {
		a.free = append(a.free[:i], a.free[i+1:]...)
	} else {
		a.free[i] = span{off + need, a.free[i].n - need}
	}
	a.used[off] = n
	return a.mem[off : off+n : off+n], nil
}

func (a *arena) noRoom(n int, cause error) error {
	msg := fmt.Sprintf("transport: shared memory: no room for %d float32s (%d bytes) in a region of %d bytes",
		n, 4*int64(n), 4*int64(len(a.mem)))
	if cause != nil {
		return fmt.Errorf("%s: committing the memory failed (is /dev/shm full?): %w", msg, cause)
	}
	return errors.New(msg + ": set GRPCOptions.SharedMemoryBytes larger, or free buffers")
}

// Free gives back a slice Alloc returned; any other slice, or one already freed, is ignored.
func (a *arena) Free(b []float32) {
	off, ok := a.Offset(b)
	if !ok || len(b) == 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if n, ok := a.used[off]; !ok || n != len(b) {
		return
	}
	delete(a.used, off)
	s := span{off, (len(b) + arenaAlign - 1) &^ (arenaAlign - 1)}
	i := sort.Search(len(a.free), func(i int) bool { return a.free[i].off > off })
	// merge with the next span, then with the previous one
	if i < len(a.free) && s.off+s.n == a.free[i].off {
		s.n += a.free[i].n
		a.free = append(a.free[:i], a.free[i+1:]...)
	}
	if i > 0 && a.free[i-1].off+a.free[i-1].n == s.off {
		a.free[i-1].n += s.n
		return
	}
	a.free = append(a.free, span{})
	copy(a.free[i+1:], a.free[i:])
	a.free[i] = s
}

// Offset reports where b starts in the region, in float32s; ok is false unless b lies
// wholly inside the region (an empty b never does).
func (a *arena) Offset(b []float32) (int, bool) {
	if len(b) == 0 || len(a.mem) == 0 {
		return 0, false
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	if p < a.base || (p-a.base)%4 != 0 {
		return 0, false
	}
	off := (p - a.base) / 4
	if off >= uintptr(len(a.mem)) || uintptr(len(b)) > uintptr(len(a.mem))-off {
		return 0, false
	}
	return int(off), true
}

// inUse reports the number of live allocations and the free list's length (for tests).
func (a *arena) inUse() (allocs, spans int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.used), len(a.free)
}

// viewRegion returns n float32s of region from off, checked against the region's size.
func viewRegion(region []float32, rank, off, n int) ([]float32, error) {
	if off < 0 || n < 0 || off > len(region) || n > len(region)-off {
		return nil, fmt.Errorf("transport: shared memory: view of %d float32s at offset %d of rank %d's region of %d float32s is out of range",
			n, off, rank, len(region))
	}
	return region[off : off+n : off+n], nil
}
