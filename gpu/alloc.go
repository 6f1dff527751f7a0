package gpu

import (
	"fmt"
	"math/bits"
	"sync"
)

// Addr is a device address.
type Addr uint64

// backing is where a Pool gets device memory: cuMemAlloc/cuMemFree on a GPU.
type backing interface {
	alloc(bytes uint64) (Addr, error)
	free(a Addr) error
}

// Size classes: requests are rounded up to a power of two from minBlock to maxClass; larger
// ones to a multiple of largeRound. Free blocks are kept per rounded size and reused.
const (
	minBlock   = 256
	maxClass   = 1 << 20
	largeRound = 2 << 20
)

// roundSize returns the size class of a request.
func roundSize(n uint64) uint64 {
	switch {
	case n <= minBlock:
		return minBlock
	case n <= maxClass:
		return 1 << bits.Len64(n-1)
	default:
		return (n + largeRound - 1) / largeRound * largeRound
	}
}

// OOMError is an allocation that does not fit in a logical GPU's memory.
type OOMError struct {
	Device       string
	Request      uint64
	InUse, Limit uint64
	Growth       bool
	DeviceErr    error // the driver's error, when the device itself was full
}

// Error says how much was asked for, what is in use and what to do.
func (e *OOMError) Error() string {
	mode := "memory growth off: the limit was reserved up front"
	if e.Growth {
		mode = "memory growth on"
	}
	s := fmt.Sprintf("gpu: out of memory on %s: allocating %.1f MiB with %.1f MiB in use of a %.1f MiB limit (%s)",
		e.Device, mib(e.Request), mib(e.InUse), mib(e.Limit), mode)
	if e.DeviceErr != nil {
		s += ": " + e.DeviceErr.Error()
	}
	return s + "; use a smaller batch, a larger MemoryLimit in device.SetLogicalDeviceConfiguration, or fewer logical GPUs on this GPU"
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

// Pool is the memory allocator of one logical GPU: size-classed free lists over device
// memory, within a byte limit. With growth it asks the device for each new block and, when
// the device or the limit is full, returns its free blocks to the device and tries again.
// Without growth (TensorFlow's default) it reserves the whole limit in one device allocation
// at first use and carves blocks from it; freed blocks return to their size class's free
// list (there is no coalescing: memory carved for one size class stays in it).
//
// The bookkeeping is a state machine over device addresses; the device is behind backing.
type Pool struct {
	mu      sync.Mutex
	name    string
	dev     backing
	limit   uint64
	growth  bool
	free    map[uint64][]Addr // size class -> free blocks
	live    map[Addr]uint64   // allocated block -> its size class
	inUse   uint64            // bytes in live blocks
	held    uint64            // bytes taken from the device (growth) or carved (reserve)
	base    Addr              // reserve mode: the reservation
	reserve uint64            // reserve mode: its size; 0 until reserved
	peak    uint64
}

// newPool makes the pool of a logical GPU named name with a limit in bytes.
func newPool(name string, dev backing, limit uint64, growth bool) *Pool {
	return &Pool{name: name, dev: dev, limit: limit, growth: growth, free: map[uint64][]Addr{}, live: map[Addr]uint64{}}
}

// Alloc returns a block of at least n bytes.
func (p *Pool) Alloc(n uint64) (Addr, error) {
	if n == 0 {
		n = 1
	}
	sz := roundSize(n)
	p.mu.Lock()
	defer p.mu.Unlock()
	if fl := p.free[sz]; len(fl) > 0 {
		a := fl[len(fl)-1]
		p.free[sz] = fl[:len(fl)-1]
		return p.take(a, sz), nil
	}
	oom := &OOMError{Device: p.name, Request: n, InUse: p.inUse, Limit: p.limit, Growth: p.growth}
	if !p.growth {
		if p.reserve == 0 {
			a, err := p.dev.alloc(p.limit)
			if err != nil {
				oom.DeviceErr = err
				return 0, oom
			}
			p.base, p.reserve = a, p.limit
		}
		if p.held+sz > p.reserve {
			return 0, oom
		}
		a := p.base + Addr(p.held)
		p.held += sz
		return p.take(a, sz), nil
	}
	if p.held+sz > p.limit {
		p.releaseFree()
		if p.held+sz > p.limit {
			return 0, oom
		}
	}
	a, err := p.dev.alloc(sz)
	if err != nil {
		p.releaseFree()
		if a, err = p.dev.alloc(sz); err != nil {
			oom.DeviceErr = err
			return 0, oom
		}
	}
	p.held += sz
	return p.take(a, sz), nil
}

func (p *Pool) take(a Addr, sz uint64) Addr {
	p.live[a] = sz
	p.inUse += sz
	p.peak = max(p.peak, p.inUse)
	return a
}

// releaseFree gives the free blocks back to the device (growth mode).
func (p *Pool) releaseFree() {
	for sz, fl := range p.free {
		kept := fl[:0]
		for _, a := range fl {
			if err := p.dev.free(a); err != nil {
				kept = append(kept, a)
				continue
			}
			p.held -= sz
		}
		p.free[sz] = kept
	}
}

// Free returns a block from Alloc to its free list.
func (p *Pool) Free(a Addr) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	sz, ok := p.live[a]
	if !ok {
		return fmt.Errorf("gpu: Free of address %#x, which %s did not allocate or already freed", uint64(a), p.name)
	}
	delete(p.live, a)
	p.inUse -= sz
	p.free[sz] = append(p.free[sz], a)
	return nil
}

// Close returns all device memory; blocks still allocated are an error naming how many.
func (p *Pool) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var err error
	if len(p.live) > 0 {
		err = fmt.Errorf("gpu: %s closed with %d blocks (%.1f MiB) still allocated", p.name, len(p.live), mib(p.inUse))
	}
	if p.reserve != 0 {
		if e := p.dev.free(p.base); e != nil && err == nil {
			err = e
		}
		p.reserve, p.held = 0, 0
	} else {
		p.releaseFree()
		for a, sz := range p.live {
			if e := p.dev.free(a); e == nil {
				p.held -= sz
			}
		}
	}
	p.live, p.free, p.inUse = map[Addr]uint64{}, map[uint64][]Addr{}, 0
	return err
}

// PoolStats is a snapshot of a pool's counters, in bytes.
type PoolStats struct {
	InUse, Held, Peak, Limit uint64
	Growth                   bool
}

// Stats returns the pool's counters.
func (p *Pool) Stats() PoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	held := p.held
	if p.reserve != 0 {
		held = p.reserve
	}
	return PoolStats{InUse: p.inUse, Held: held, Peak: p.peak, Limit: p.limit, Growth: p.growth}
}
