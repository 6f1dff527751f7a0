package data

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
)

// ShuffleOption configures Shuffle.
type ShuffleOption interface{ apply(*shuffleConfig) }

type shuffleConfig struct{ reshuffle bool }

type reshuffleOption bool

func (r reshuffleOption) apply(c *shuffleConfig) { c.reshuffle = bool(r) }

// ReshuffleEachIteration sets whether each pass (each Iterator, each Repeat pass) uses a
// new order (true, the default, as TensorFlow) or the same order every time (false).
func ReshuffleEachIteration(on bool) ShuffleOption { return reshuffleOption(on) }

// Shuffle returns a dataset that shuffles d with a buffer of bufferSize elements, like
// tf.data's shuffle: the buffer is filled, then each output is a uniformly chosen buffer
// entry, replaced by the next input. A buffer as large as the dataset gives a uniform
// shuffle. The order is deterministic given seed: pass k over the dataset uses the k-th
// order derived from seed (or always the first with ReshuffleEachIteration(false)).
// It panics when bufferSize < 1.
func (d *Dataset) Shuffle(bufferSize int, seed int64, opts ...ShuffleOption) *Dataset {
	if bufferSize < 1 {
		panic(fmt.Errorf("%w: Shuffle: buffer size %d must be at least 1", ErrArgument, bufferSize))
	}
	cfg := shuffleConfig{reshuffle: true}
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	var passes atomic.Uint64
	return d.derive("ShuffleDataset", d.card, d.sameSpec(), func() iterator {
		pass := uint64(0)
		if cfg.reshuffle {
			pass = passes.Add(1) - 1
		}
		rng := rand.New(rand.NewPCG(uint64(seed), pass*0x9e3779b97f4a7c15+1))
		in := d.open()
		buf := make([]Element, 0, min(bufferSize, 1<<16))
		inDone := false
		return &funcIter{
			nextFn: func() (Element, bool) {
				for !inDone && len(buf) < bufferSize {
					el, ok := in.next()
					if !ok {
						inDone = true
						break
					}
					buf = append(buf, el)
					if target := bufferSize; d.card >= 0 && d.card < target {
						checkGrowth("Shuffle", "buffer", len(buf), d.card, el)
					} else {
						checkGrowth("Shuffle", "buffer", len(buf), target, el)
					}
				}
				if len(buf) == 0 {
					return nil, false
				}
				i := rng.IntN(len(buf))
				el := buf[i]
				if !inDone {
					if next, ok := in.next(); ok {
						buf[i] = next
						return el, true
					}
					inDone = true
				}
				last := len(buf) - 1
				buf[i] = buf[last]
				buf[last] = nil
				buf = buf[:last]
				return el, true
			},
			closeFn: in.close,
		}
	})
}

// Cache returns a dataset that keeps d's elements in memory: the first pass that reads d to
// its end stores them, later passes read the memory (so a Map before Cache runs once). A pass
// abandoned before the end stores nothing. Cache of an infinite dataset panics.
func (d *Dataset) Cache() *Dataset {
	if d.card == InfiniteCardinality {
		panic(fmt.Errorf("%w: Cache of an infinite dataset (%s) would never complete; cache before Repeat", ErrArgument, d.kind))
	}
	var (
		mu     sync.Mutex
		cached []Element
		done   bool
	)
	return d.derive("CacheDataset", d.card, d.sameSpec(), func() iterator {
		mu.Lock()
		isDone, els := done, cached
		mu.Unlock()
		if isDone {
			return newSliceIter(els)
		}
		in := d.open()
		var acc []Element
		return &funcIter{
			nextFn: func() (Element, bool) {
				if in == nil {
					return nil, false
				}
				el, ok := in.next()
				if !ok {
					in.close()
					in = nil
					mu.Lock()
					if !done {
						cached, done = acc, true
					}
					mu.Unlock()
					return nil, false
				}
				acc = append(acc, el)
				if d.card >= 0 {
					checkGrowth("Cache", "cache", len(acc), d.card, el)
				}
				return append(Element(nil), el...), true
			},
			closeFn: func() {
				if in != nil {
					in.close()
					in = nil
				}
			},
		}
	})
}

// Autotune lets Prefetch choose its buffer size (tf.data.AUTOTUNE).
const Autotune = -1

// autotuneBuffer is the buffer Prefetch(Autotune) uses: enough to overlap one step's
// computation with the production of the next batches.
const autotuneBuffer = 2

// Prefetch returns a dataset that produces up to bufferSize elements ahead of the consumer
// in a background goroutine, like tf.data's prefetch; Autotune (-1) picks the size and 0
// disables prefetching. The goroutine stops when the iterator reaches the end or is
// closed; a panic in the pipeline is re-raised by Iterator.Next. It panics when
// bufferSize < -1.
func (d *Dataset) Prefetch(bufferSize int) *Dataset {
	if bufferSize < Autotune {
		panic(fmt.Errorf("%w: Prefetch: buffer size %d must be >= 0 or Autotune (-1)", ErrArgument, bufferSize))
	}
	if bufferSize == 0 {
		return d.derive("PrefetchDataset", d.card, d.sameSpec(), d.open)
	}
	if bufferSize == Autotune {
		bufferSize = autotuneBuffer
	}
	checkBuffer("Prefetch", fmt.Sprintf("Dataset.Prefetch's buffer of %d elements", bufferSize), bufferSize, sizeofPrefetched)
	return d.derive("PrefetchDataset", d.card, d.sameSpec(), func() iterator {
		return startPrefetch(d.open(), bufferSize)
	})
}

type prefetched struct {
	el    Element
	panic any // non-nil: the pipeline panicked with this value
}

type prefetchIter struct {
	ch     chan prefetched
	stop   chan struct{}
	done   chan struct{}
	closed bool
	spare  chan Element // elements handed back (recycle) for the input, when it recycles
}

func startPrefetch(in iterator, n int) *prefetchIter {
	p := &prefetchIter{
		ch:   make(chan prefetched, n),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	if _, ok := in.(recycler); ok {
		p.spare = make(chan Element, 1)
	}
	go p.run(in)
	return p
}

// recycle passes el to the input (see Iterator.Recycle) in the goroutine that runs it, before
// its next element; one waits at a time, a second is dropped.
func (p *prefetchIter) recycle(el Element) {
	if p.spare == nil {
		return
	}
	select {
	case p.spare <- el:
	default:
	}
}

// run produces elements until the input ends, the pipeline panics or stop is closed. A
// panic must not escape a goroutine (it would kill the process, a notebook kernel): it is
// handed to the consumer instead.
func (p *prefetchIter) run(in iterator) {
	checkedPrefetch := false
	defer close(p.done)
	defer close(p.ch)
	defer in.close()
	for {
		select {
		case el := <-p.spare: // nil channel: the input does not recycle
			in.(recycler).recycle(el)
		default:
		}
		item, ok := safeNext(in)
		if !ok {
			return
		}
		if item.panic == nil && !checkedPrefetch {
			// The buffer will hold up to cap(p.ch) elements like the first.
			checkedPrefetch = true
			if err := safeCheck(func() { checkGrowth("Prefetch", "buffer", 1, cap(p.ch)+1, item.el) }); err != nil {
				item = prefetched{panic: err}
			}
		}
		select {
		case p.ch <- item:
		case <-p.stop:
			return
		}
		if item.panic != nil {
			return
		}
	}
}

// safeCheck runs check and returns what it panicked with.
func safeCheck(check func()) (p any) {
	defer func() { p = recover() }()
	check()
	return nil
}

func safeNext(in iterator) (item prefetched, ok bool) {
	defer func() {
		if r := recover(); r != nil {
			item, ok = prefetched{panic: r}, true
		}
	}()
	el, more := in.next()
	return prefetched{el: el}, more
}

func (p *prefetchIter) next() (Element, bool) {
	if p.closed {
		return nil, false
	}
	item, ok := <-p.ch
	if !ok {
		return nil, false
	}
	if item.panic != nil {
		p.close()
		panic(item.panic)
	}
	return item.el, true
}

func (p *prefetchIter) close() {
	if p.closed {
		return
	}
	p.closed = true
	close(p.stop)
	<-p.done
}
