package collective

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"unsafe"
)

// SharedMemory is memory that every rank of a group can read: each rank allocates buffers in
// its own region and reads the regions of the others. Processes on one host share it through
// files in /dev/shm (transport.GRPC); ranks in one process share their heap
// (transport.NewSharedMem). When every rank's buffer lies in it, AllReduce reads the other
// ranks' values where they are, with no message carrying them (see AllReduce).
type SharedMemory interface {
	// Alloc returns n zeroed float32s in this rank's region, 64-byte aligned, or an error when
	// the region has no room for them. Free gives them back.
	Alloc(n int) ([]float32, error)
	// Free gives back a slice Alloc returned; other slices are ignored.
	Free(b []float32)
	// Offset reports where b starts in this rank's region, counted in float32s; ok is false
	// when b does not lie wholly inside the region.
	Offset(b []float32) (off int, ok bool)
	// View returns n float32s of rank's region from offset off (rank may be this rank). It
	// fails when the range lies outside the region. Another rank's values are to be read,
	// never written.
	View(rank, off, n int) ([]float32, error)
}

// Sharer is an optional upgrade of Transport for ranks that can read each other's memory.
type Sharer interface {
	// SharedMemory returns the group's shared memory, or nil (and no error) when some rank
	// cannot read some other rank's region; then the algorithms move every byte with Send and
	// Recv. The first call agrees on the answer with the other ranks over the transport, so
	// every rank must make it (AllReduce does, before anything else) and every rank gets the
	// same answer; later calls return the first call's. An error (the context ended, a peer
	// was lost) is returned by every later call too.
	SharedMemory(ctx context.Context) (SharedMemory, error)
}

// sharedMinBytes is the smallest all-reduce that reads the other ranks' memory where it
// lies. A smaller one sends its values to every other rank in its first message and each
// rank reduces them all: one round of messages, where reading in place takes three.
const sharedMinBytes = 64 << 10

// sharedChunk is how many values the shared all-reduce sums at a time in a buffer of its own
// (it stays in the first-level cache), so that every segment sums the ranks in rank order
// whichever rank owns it.
const sharedChunk = 4 << 10

// The first message of a shared all-reduce: the buffer's length, then where it lies in the
// sender's shared memory, or one of these.
const (
	postNowhere = -1 // the buffer lies outside shared memory: every rank runs the ring
	postInline  = -2 // a small buffer: its values follow
)

// allReduceShared is AllReduce for ranks that share memory and whose buffers lie in it (from
// SharedMemory.Alloc, as the Bucketer's buckets do). Each rank tells the others where its
// buffer lies, reduces its own segment reading every rank's values where they are, and, once
// all have, copies the other segments from their owners. Three rounds order these steps:
// "here is my buffer" (a message), "my segment is reduced" and "I have read yours" (through
// the ranks' signal words where every rank's is free, else messages: see bells).
// A buffer under sharedMinBytes travels in the first message instead, and every rank reduces
// all of them: one round. Every segment sums the ranks in rank order, so all ranks hold the
// same values.
//
// The first round also checks that the lengths agree. It reports false, having changed
// nothing, when some rank's large buffer lies outside shared memory: every rank learns it
// from that round and runs the ring. (Copying such a buffer into shared memory and back costs
// more than the ring, which moves it a cache-sized chunk at a time: bench/RESULTS.md, cnn,
// "shared memory between the workers of one host".)
//
// With keep, a large buffer is not reduced: once the first round has shown that every rank's
// buffer lies in shared memory, it returns them all, by rank (this rank's is buf), and ends.
// The other ranks go on reading this rank's buffer, so it must not be written until the
// next all-reduce of the same buffer has exchanged its first round (the Bucketer made with
// KeepTerms alternates between two buffers: see WaitTerms).
func allReduceShared(ctx context.Context, p *peer, sm SharedMemory, buf []float32, op ReduceOp, keep bool) ([][]float32, bool, error) {
	n, r := p.t.Size(), p.t.Rank()
	small := 4*len(buf) < sharedMinBytes
	var bell *bells
	if !small && !keep {
		bell = lendBells(sm, r)
		defer bell.release()
	}
	posts, err := p.exchange(ctx, "/shm", bell.appendHead(appendPost(nil, sm, buf)))
	defer p.releaseAll(posts)
	if err != nil {
		return nil, false, err
	}
	if err := bell.read(p, posts); err != nil {
		return nil, false, err
	}
	views, placed, err := p.readPosts(sm, posts, [][]float32{buf})
	if err != nil {
		return nil, false, err
	}
	if small {
		reduceRanks(op, buf, views[0], 0, len(buf), nil)
		return nil, true, nil
	}
	if !placed[0] {
		return nil, false, nil
	}
	if keep {
		return views[0], true, nil
	}
	reduceRanks(op, buf, views[0], r*len(buf)/n, (r+1)*len(buf)/n, nil)
	if err := bell.signal(ctx, p, 1, "/shm1"); err != nil {
		return nil, false, err
	}
	for q := range n {
		if q != r {
			s, e := q*len(buf)/n, (q+1)*len(buf)/n
			copy(buf[s:e], views[0][q][s:e])
		}
	}
	if err := bell.signal(ctx, p, 2, "/shm2"); err != nil {
		return nil, false, err
	}
	return nil, true, nil
}

// bells carry the second and third rounds of a shared all-reduce ("my segment is reduced",
// "I have read yours") through the ranks' signal words (Doorbell.Signal) instead of
// messages: each rank's first message ends with its word's offset (or -1: it has none
// free) and the value the word holds, and, when every rank has one, a rank rings its word
// with that value plus the round and waits until every other rank's word shows its own
// value plus the round. A round of messages costs each rank a wake-up through the kernel
// and system calls (bench/RESULTS.md, allreduce, "rung on signal words").
//
// A rank holds its word from before its first message until it returns, so while any rank
// is still in an all-reduce that uses the words (waiting on a word that a rank which failed
// will never ring), no other all-reduce of the group gets every rank's word: it takes
// messages. So a wait is only ever met by the ring it waits for, and the words' values,
// which only grow, need no agreement between the ranks.
type bells struct {
	db   Doorbell
	off  int    // this rank's word, -1: none
	val  uint32 // its value at the first message
	free func()
	offs []int    // every rank's word, by rank, once all have one (nil: messages)
	vals []uint32 // their values at the first message
	rank int
}

// bellHeadBytes is what a shared all-reduce's first message ends with: the sender's word's
// offset and its value.
const bellHeadBytes = 16

// lendBells borrows this rank's signal word, when sm is a Doorbell and the word is free.
func lendBells(sm SharedMemory, rank int) *bells {
	b := &bells{off: -1, rank: rank}
	db, ok := sm.(Doorbell)
	if !ok {
		return b
	}
	off, free, ok := db.Signal()
	if !ok {
		return b
	}
	v, err := sm.View(rank, off, 1)
	if err != nil {
		free()
		return b
	}
	b.db, b.off, b.free = db, off, free
	b.val = atomic.LoadUint32((*uint32)(unsafe.Pointer(&v[0])))
	return b
}

// release gives the word back.
func (b *bells) release() {
	if b != nil && b.free != nil {
		b.free()
		b.free = nil
	}
}

// appendHead appends this rank's word and its value to a first message; with no bells (a
// small buffer, or keep), nothing.
func (b *bells) appendHead(dst []byte) []byte {
	if b == nil {
		return dst
	}
	dst = binary.LittleEndian.AppendUint64(dst, uint64(int64(b.off)))
	return binary.LittleEndian.AppendUint64(dst, uint64(b.val))
}

// read takes every other rank's word and value off the end of its first message, and
// decides whether the rounds take the words: only when every rank has one.
func (b *bells) read(p *peer, posts [][]byte) error {
	if b == nil {
		return nil
	}
	offs, vals := make([]int, len(posts)), make([]uint32, len(posts))
	all := b.off >= 0
	for q, m := range posts {
		if q == b.rank {
			offs[q], vals[q] = b.off, b.val
			continue
		}
		if len(m) < bellHeadBytes {
			return &PeerError{Rank: q, Op: p.op, Err: fmt.Errorf("shared memory: a first message of %d bytes, want at least %d", len(m), bellHeadBytes)}
		}
		t := m[len(m)-bellHeadBytes:]
		o, v := int64(binary.LittleEndian.Uint64(t)), binary.LittleEndian.Uint64(t[8:])
		if o < -1 || v > math.MaxUint32 {
			return &PeerError{Rank: q, Op: p.op, Err: fmt.Errorf("shared memory: a signal word at offset %d holding %d", o, v)}
		}
		offs[q], vals[q] = int(o), uint32(v)
		all = all && o >= 0
		posts[q] = m[:len(m)-bellHeadBytes]
	}
	if all {
		b.offs, b.vals = offs, vals
	} else {
		b.release() // another all-reduce may use it
	}
	return nil
}

// signal is peer.signal for round k (1 or 2) of a shared all-reduce: through the words
// when every rank has one, else as messages under suffix.
func (b *bells) signal(ctx context.Context, p *peer, k uint32, suffix string) error {
	if b == nil || b.offs == nil {
		return p.signal(ctx, suffix)
	}
	if err := b.db.Ring(b.off, b.val+k); err != nil {
		return fmt.Errorf("collective: %s: shared memory: %w", p.op, err)
	}
	if p.c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.c.timeout)
		defer cancel()
	}
	for q, off := range b.offs {
		if q == b.rank {
			continue
		}
		if err := b.db.Await(ctx, q, off, b.vals[q]+k); err != nil {
			return p.wrap(q, err)
		}
	}
	return nil
}

// sumSharedKept is allReduceShared with keep and the op Sum for several buffers at once (a
// Bucketer's buckets): their first messages travel as one, so that all of them take one
// round together instead of a round each, through pb's boxes once the ranks have learnt
// where those lie (see postbox). It returns, for each buffer, every rank's buffer by rank
// (it lay in shared memory on every rank), or nil when the buffer now holds the sums (a
// small one) or still has to take the ring (ring[k]: some rank's lies outside shared
// memory).
func sumSharedKept(ctx context.Context, p *peer, sm SharedMemory, pb *postbox, bufs [][]float32) (views [][][]float32, ring []bool, err error) {
	post := pb.msg[:0]
	for _, buf := range bufs {
		post = appendPost(post, sm, buf)
	}
	pb.msg = post
	posts, msgs, err := pb.exchange(ctx, p, post)
	defer p.releaseAll(msgs)
	if err != nil {
		return nil, nil, err
	}
	views, placed, err := p.readPosts(sm, posts, bufs)
	if err != nil {
		return nil, nil, err
	}
	ring = make([]bool, len(bufs))
	for k, buf := range bufs {
		switch {
		case 4*len(buf) < sharedMinBytes:
			reduceRanks(Sum, buf, views[k], 0, len(buf), pb.acc)
			views[k] = nil
		case !placed[k]:
			views[k], ring[k] = nil, true
		}
	}
	return views, ring, nil
}

// appendPost appends buf's part of a shared all-reduce's first message to dst: its length,
// then where it lies in this rank's shared memory (or postNowhere), or postInline followed
// by its values when it is under sharedMinBytes.
func appendPost(dst []byte, sm SharedMemory, buf []float32) []byte {
	small := 4*len(buf) < sharedMinBytes
	off := int64(postInline)
	if !small {
		if o, ok := sm.Offset(buf); ok {
			off = int64(o)
		} else {
			off = postNowhere
		}
	}
	dst = binary.LittleEndian.AppendUint64(dst, uint64(len(buf)))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(off))
	if small {
		dst = append(dst, encode(buf)...)
	}
	return dst
}

// readPosts reads the first messages that every other rank sent for bufs (appendPost's
// parts, in the order of bufs) and checks that the lengths agree. It returns, for each
// buffer, every rank's values by rank (this rank's is the buffer itself): a small buffer's
// values as they came in the message, a large one's where they lie in the rank's shared
// memory. placed[k] is false when some rank's buffer k lies outside shared memory (then
// its views are not read).
func (p *peer) readPosts(sm SharedMemory, posts [][]byte, bufs [][]float32) (views [][][]float32, placed []bool, err error) {
	n, r := p.t.Size(), p.t.Rank()
	views = make([][][]float32, len(bufs))
	placed = make([]bool, len(bufs))
	offs := make([][]int64, len(bufs)) // by buffer, then rank
	for k, buf := range bufs {
		views[k] = make([][]float32, n)
		views[k][r] = buf
		offs[k] = make([]int64, n)
		_, ok := sm.Offset(buf)
		placed[k] = ok && 4*len(buf) >= sharedMinBytes
	}
	for q, b := range posts {
		if q == r {
			continue
		}
		for k, buf := range bufs {
			if len(b) < 16 {
				return nil, nil, &PeerError{Rank: q, Op: p.op, Err: fmt.Errorf("shared memory: a first message with %d bytes left for buffer %d, want at least 16", len(b), k)}
			}
			l, o := int(binary.LittleEndian.Uint64(b)), int64(binary.LittleEndian.Uint64(b[8:]))
			small := 4*len(buf) < sharedMinBytes
			if l != len(buf) || (o == postInline) != small || (small && len(b) < 16+4*l) {
				return nil, nil, p.mismatch(q, 4*l, len(buf))
			}
			b = b[16:]
			offs[k][q] = o
			switch {
			case small:
				views[k][q] = floats(b[:4*l])
				b = b[4*l:]
			case o == postNowhere:
				placed[k] = false
			case o < 0:
				return nil, nil, &PeerError{Rank: q, Op: p.op, Err: fmt.Errorf("shared memory: buffer at offset %d", o)}
			}
		}
		if len(b) != 0 {
			return nil, nil, &PeerError{Rank: q, Op: p.op, Err: fmt.Errorf("shared memory: %d bytes after the first message's last buffer", len(b))}
		}
	}
	for k, buf := range bufs {
		for q := range n {
			if q == r || !placed[k] {
				continue
			}
			if views[k][q], err = sm.View(q, int(offs[k][q]), len(buf)); err != nil {
				return nil, nil, &PeerError{Rank: q, Op: p.op, Err: fmt.Errorf("shared memory: %w", err)}
			}
		}
	}
	return views, placed, nil
}

// reduceRanks writes into dst[lo:hi] the reduction of views[0..n-1][lo:hi] in rank order
// (dst may be one of the views), a cache-sized piece at a time, in acc when that holds a
// piece (else in a buffer of its own).
func reduceRanks(op ReduceOp, dst []float32, views [][]float32, lo, hi int, acc []float32) {
	if len(acc) < min(sharedChunk, hi-lo) {
		acc = make([]float32, min(sharedChunk, hi-lo))
	}
	for s := lo; s < hi; s += sharedChunk {
		e := min(s+sharedChunk, hi)
		a := acc[:e-s]
		copy(a, views[0][s:e])
		for q := 1; q < len(views); q++ {
			reduceF(op, a, views[q][s:e])
		}
		if op == Mean {
			fn := float32(len(views))
			for i := range a {
				a[i] /= fn
			}
		}
		copy(dst[s:e], a)
	}
}

// floats returns b's float32 values, in place when b is aligned.
func floats(b []byte) []float32 {
	if f, ok := view(b); ok {
		return f
	}
	f := make([]float32, len(b)/4)
	decode(f, b)
	return f
}

// exchange sends b to every other rank under suffix and returns what each sent, by rank
// (this rank's entry is nil). The caller releases them (releaseAll), also after an error.
func (p *peer) exchange(ctx context.Context, suffix string, b []byte) ([][]byte, error) {
	n, r := p.t.Size(), p.t.Rank()
	for q := range n {
		if q != r {
			if err := p.send(ctx, q, suffix, b); err != nil {
				return nil, err
			}
		}
	}
	out := make([][]byte, n)
	for q := range n {
		if q == r {
			continue
		}
		b, err := p.recv(ctx, q, suffix)
		if err != nil {
			return out, err
		}
		out[q] = b
	}
	return out, nil
}

// signal tells every other rank that this one reached suffix's point and waits until all
// have.
func (p *peer) signal(ctx context.Context, suffix string) error {
	got, err := p.exchange(ctx, suffix, nil)
	p.releaseAll(got)
	return err
}

func (p *peer) releaseAll(bs [][]byte) {
	for _, b := range bs {
		if b != nil {
			release(p.t, b)
		}
	}
}

// sharedMemory asks the transport for the group's shared memory, the wait bounded like any
// other of the collective's.
func (p *peer) sharedMemory(ctx context.Context, sh Sharer) (SharedMemory, error) {
	if p.c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.c.timeout)
		defer cancel()
	}
	sm, err := sh.SharedMemory(ctx)
	if err == nil {
		return sm, nil
	}
	var pe *PeerError
	if errors.As(err, &pe) {
		return nil, &PeerError{Rank: pe.Rank, Op: p.op, Err: fmt.Errorf("agreeing on shared memory: %w", pe.Err)}
	}
	return nil, fmt.Errorf("collective: %s: agreeing on shared memory: %w", p.op, err)
}
