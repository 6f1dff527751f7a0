package collective

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
)

// DefaultBucketBytes is the bucket size NewBucketer uses when given 0 (25 MiB, as PyTorch DDP).
const DefaultBucketBytes = 25 << 20

// Bucketer all-reduces a fixed list of tensors (typically the gradients of a model, one
// []float32 each) packed into buckets of about a given size. A bucket is all-reduced in the
// background as soon as all of its tensors were added, so communication starts while later
// gradients are still being computed. Use it once per step:
//
//	for i, g := range grads { b.Add(i, g) } // in any order, from any goroutine
//	err := b.Wait(ctx)                      // every g now holds the reduced values
//
// The bucket layout depends only on the sizes, so every rank must create its Bucketer with the
// same sizes; the order in which tensors are added may differ between ranks.
//
// Made with the option KeepTerms, a Bucketer over shared memory does not reduce its large
// buckets: WaitTerms hands every rank's values over where they lie, for the caller to sum
// as it reads them (see WaitTerms). Only where each bucket lies travels then, so from its
// second step, once its ranks know that they share memory, such a Bucketer starts no bucket
// in the background: WaitTerms sends the first messages of all of them as one.
type Bucketer struct {
	t      Transport
	shared *sharedBuckets // the buckets moved to shared memory, freed with the Bucketer
	keep   bool           // KeepTerms
	op     ReduceOp
	opts   []Option
	tag    string
	sizes  []int
	where  []slot // tensor -> bucket and offset
	bucket []*bucket

	// KeepTerms: once a step has shown whether the ranks share memory (all of them learn
	// it together), sm is that memory, and the buckets of every later step all start in
	// WaitTerms, their first messages as one (sumSharedKept): one round of messages a step
	// instead of one per bucket, and no goroutine per bucket. Nothing travels but where each
	// bucket lies, so starting a bucket early would overlap nothing.
	sm      SharedMemory
	smKnown bool
	keptErr error    // the error of this step's sumSharedKept
	box     *postbox // sumSharedKept's, made at its first step

	mu     sync.Mutex
	grads  [][]float32
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type slot struct{ bucket, offset int }

type bucket struct {
	buf     []float32
	spare   []float32 // KeepTerms: the bucket's other shared buffer, this step's buf next step
	members []int
	pending int
	err     error
	placed  bool        // the move to shared memory was tried
	views   [][]float32 // KeepTerms: every rank's buf of this step, by rank (nil: buf holds the sums)
}

// sharedBuckets are the bucket buffers a Bucketer allocated in shared memory; a cleanup
// frees them once the Bucketer is unreachable.
type sharedBuckets struct {
	mu   sync.Mutex
	sm   SharedMemory
	bufs [][]float32
}

// keep records bufs, allocated in sm, for free.
func (s *sharedBuckets) keep(sm SharedMemory, bufs ...[]float32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sm = sm
	s.bufs = append(s.bufs, bufs...)
}

func (s *sharedBuckets) free() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range s.bufs {
		s.sm.Free(b)
	}
	s.bufs = nil
}

// KeepTerms is an option of NewBucketer (other collectives ignore it): the Bucketer leaves
// the ranks' values of its large buckets where they lie in shared memory, and WaitTerms hands
// them over for the caller to sum as it reads them, instead of reducing them into every
// rank's buffer. It takes the op Sum.
func KeepTerms() Option { return optionFunc(func(c *config) { c.keepTerms = true }) }

// NewBucketer lays out tensors of the given sizes (in index order) into buckets of at most
// bucketBytes (0: DefaultBucketBytes; a tensor larger than that gets a bucket of its own).
func NewBucketer(t Transport, sizes []int, bucketBytes int, op ReduceOp, opts ...Option) (*Bucketer, error) {
	if t == nil {
		return nil, fmt.Errorf("%w: bucketer: nil transport", ErrBadArgument)
	}
	if op < Sum || op > Min {
		return nil, fmt.Errorf("%w: bucketer: unknown reduce op %d (want Sum, Mean, Max or Min)", ErrBadArgument, int(op))
	}
	if bucketBytes < 0 {
		return nil, fmt.Errorf("%w: bucketer: bucket size %d bytes is negative", ErrBadArgument, bucketBytes)
	}
	if bucketBytes == 0 {
		bucketBytes = DefaultBucketBytes
	}
	cfg := newConfig("bucket", opts)
	if cfg.keepTerms && op != Sum {
		return nil, fmt.Errorf("%w: bucketer: KeepTerms with op %v (the terms are summed: use Sum)", ErrBadArgument, op)
	}
	capElems := max(bucketBytes/4, 1)
	b := &Bucketer{t: t, op: op, opts: opts, tag: cfg.tag, keep: cfg.keepTerms, sizes: append([]int{}, sizes...),
		where: make([]slot, len(sizes)), grads: make([][]float32, len(sizes)), shared: &sharedBuckets{}}
	var cur *bucket
	for i, n := range sizes {
		if n < 0 {
			return nil, fmt.Errorf("%w: bucketer: tensor %d has negative size %d", ErrBadArgument, i, n)
		}
		if cur == nil || (len(cur.buf) > 0 && len(cur.buf)+n > capElems) {
			cur = &bucket{}
			b.bucket = append(b.bucket, cur)
		}
		b.where[i] = slot{len(b.bucket) - 1, len(cur.buf)}
		cur.buf = append(cur.buf, make([]float32, n)...)
		cur.members = append(cur.members, i)
	}
	b.reset()
	runtime.AddCleanup(b, (*sharedBuckets).free, b.shared)
	return b, nil
}

// Buffer returns the memory that holds tensor i inside its bucket. A gradient computed
// into it (or copied there) and passed to Add is not copied again, and Wait leaves the
// reduced values there. It is the same memory from step to step, except that the first
// all-reduce of a bucket may move the bucket to the ranks' shared memory, and that a
// Bucketer made with KeepTerms then alternates between two buffers: ask for it again every
// step.
func (b *Bucketer) Buffer(i int) []float32 {
	if i < 0 || i >= len(b.sizes) {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.where[i]
	return b.bucket[s.bucket].buf[s.offset : s.offset+b.sizes[i] : s.offset+b.sizes[i]]
}

// place moves bucket bk into the ranks' shared memory once, when the transport has it,
// so that AllReduce reads it in place rather than through a scratch copy. With KeepTerms it
// allocates two buffers, one for even steps and one for odd ones, and runs after the
// bucket's first all-reduce rather than before it: the other ranks read this rank's
// buffers until their next all-reduce of the bucket, so memory a Bucketer freed may still be
// read by a peer finishing its last step; a bucket placed only after an all-reduce in which
// every rank took part writes into shared memory once every peer has gone past that.
func (b *Bucketer) place(ctx context.Context, bk *bucket) {
	b.mu.Lock()
	placed := bk.placed
	bk.placed = true
	b.mu.Unlock()
	sh, ok := b.t.(Sharer)
	if placed || !ok || 4*len(bk.buf) < sharedMinBytes {
		return
	}
	sm, err := sh.SharedMemory(ctx)
	if err != nil || sm == nil {
		return // AllReduce reports the error, or runs the ring
	}
	nb, err := sm.Alloc(len(bk.buf))
	if err != nil {
		return // no room: AllReduce runs the ring
	}
	var spare []float32
	if b.keep {
		if spare, err = sm.Alloc(len(bk.buf)); err != nil {
			sm.Free(nb)
			return
		}
	}
	b.shared.keep(sm, nb)
	if spare != nil {
		b.shared.keep(sm, spare)
	}
	b.mu.Lock()
	copy(nb, bk.buf)
	bk.buf, bk.spare = nb, spare
	b.mu.Unlock()
}

// NumBuckets reports how many buckets the tensors were packed into.
func (b *Bucketer) NumBuckets() int { return len(b.bucket) }

func (b *Bucketer) reset() {
	for i := range b.grads {
		b.grads[i] = nil
	}
	for _, bk := range b.bucket {
		bk.pending, bk.err, bk.views = len(bk.members), nil, nil
		if bk.spare != nil {
			bk.buf, bk.spare = bk.spare, bk.buf
		}
	}
	b.ctx, b.cancel = context.WithCancel(context.Background())
}

// Add hands tensor i's values to the bucketer for this step; it keeps grad until Wait, which
// writes the reduced values into it. When grad completes its bucket, that bucket's all-reduce
// starts in the background (except in a KeepTerms Bucketer over shared memory: see
// Bucketer).
func (b *Bucketer) Add(i int, grad []float32) error {
	if i < 0 || i >= len(b.sizes) {
		return fmt.Errorf("%w: bucketer: tensor index %d outside [0, %d)", ErrBadArgument, i, len(b.sizes))
	}
	if len(grad) != b.sizes[i] {
		return fmt.Errorf("%w: bucketer: tensor %d has %d values, want %d", ErrBadArgument, i, len(grad), b.sizes[i])
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.grads[i] != nil {
		return fmt.Errorf("%w: bucketer: tensor %d added twice in one step", ErrBadArgument, i)
	}
	if grad == nil {
		grad = []float32{}
	}
	b.grads[i] = grad
	s := b.where[i]
	bk := b.bucket[s.bucket]
	if !aliasesF(grad, bk.buf[s.offset:]) {
		copy(bk.buf[s.offset:], grad)
	}
	bk.pending--
	if bk.pending == 0 && b.sm == nil {
		b.wg.Add(1)
		go func(k int, bk *bucket, ctx context.Context) {
			defer b.wg.Done()
			if !b.keep {
				b.place(ctx, bk)
			}
			opts := append(append([]Option{}, b.opts...), Tag(fmt.Sprintf("%s/%d", b.tag, k)))
			views, err := allReduce(ctx, b.t, bk.buf, b.op, b.keep, opts)
			if err != nil {
				bk.err = fmt.Errorf("bucket %d: %w", k, err)
				return
			}
			bk.views = views
			if b.keep && views == nil {
				b.place(ctx, bk)
			}
		}(s.bucket, bk, b.ctx)
	}
	return nil
}

// Wait waits for every bucket's all-reduce, copies the results into the slices given to Add,
// and makes the bucketer ready for the next step. It fails when a tensor was never added,
// when a bucket's all-reduce failed (a *PeerError names the peer), or when ctx ends. A
// Bucketer made with KeepTerms is read with WaitTerms instead; its Wait fails.
func (b *Bucketer) Wait(ctx context.Context) error {
	err := b.wait(ctx)
	defer b.mu.Unlock()
	defer b.reset()
	if err != nil {
		return err
	}
	if b.keep {
		return fmt.Errorf("%w: bucketer: made with KeepTerms, its sums are read with WaitTerms, not Wait", ErrBadArgument)
	}
	for i, g := range b.grads {
		s := b.where[i]
		if src := b.bucket[s.bucket].buf[s.offset:]; !aliasesF(g, src) {
			copy(g, src)
		}
	}
	return nil
}

// WaitTerms is Wait for a Bucketer made with KeepTerms: it waits for every bucket and
// returns, for each tensor i, terms whose sum in order (terms[i][0] + terms[i][1] + ...)
// is the sum over the ranks, the same on every rank. A bucket whose ranks all hold it in
// shared memory gives one term per rank, by rank, read where it lies: this rank's is its
// Buffer, the others are the other ranks' memory, to be read and never written. Any other
// bucket gives one term, the sums, in the bucket (not in the slice given to Add). The
// terms stay valid until this rank's next step's Adds: every rank must have read them before
// it adds the tensors of the next step (a peer writes into the same memory again two steps
// later, once this rank's next all-reduce of the bucket has begun). It fails as Wait does.
// Without KeepTerms, every tensor has one term.
func (b *Bucketer) WaitTerms(ctx context.Context) ([][][]float32, error) {
	err := b.wait(ctx)
	defer b.mu.Unlock()
	defer b.reset()
	if err != nil {
		return nil, err
	}
	terms := make([][][]float32, len(b.sizes))
	for i, n := range b.sizes {
		s := b.where[i]
		bk := b.bucket[s.bucket]
		if bk.views == nil {
			terms[i] = [][]float32{bk.buf[s.offset : s.offset+n : s.offset+n]}
			continue
		}
		terms[i] = make([][]float32, len(bk.views))
		for q, v := range bk.views {
			terms[i][q] = v[s.offset : s.offset+n : s.offset+n]
		}
	}
	return terms, nil
}

// wait waits for every bucket's all-reduce and returns with b.mu held; the caller resets
// the bucketer for the next step and unlocks.
func (b *Bucketer) wait(ctx context.Context) error {
	b.mu.Lock()
	var missing error
	for i, g := range b.grads {
		if g == nil {
			missing = fmt.Errorf("%w: bucketer: tensor %d was never added in this step", ErrBadArgument, i)
			b.cancel()
			break
		}
	}
	b.mu.Unlock()
	stop := context.AfterFunc(ctx, b.cancel)
	b.wg.Wait()
	b.keptErr = nil
	if b.sm != nil && missing == nil {
		b.sumKept(b.ctx)
	}
	stop()
	b.mu.Lock()
	var errs []error
	if missing != nil {
		errs = append(errs, missing)
	}
	if b.keptErr != nil {
		errs = append(errs, b.keptErr)
	}
	for _, bk := range b.bucket {
		if bk.err != nil {
			errs = append(errs, bk.err)
		}
	}
	if len(errs) == 0 && b.keep && !b.smKnown {
		// Every rank's buckets took this step the same way and it succeeded on every rank:
		// all of them learn here whether they share memory (a transport gives every rank
		// the same answer, agreed at its first all-reduce, without a new round).
		if sh, ok := b.t.(Sharer); ok && b.t.Size() > 1 { // one rank: nothing to exchange
			sm, err := sh.SharedMemory(b.ctx)
			if err != nil {
				errs = append(errs, fmt.Errorf("bucketer: shared memory: %w", err))
			}
			b.sm = sm
		}
		b.smKnown = true
	}
	b.cancel()
	if len(errs) > 0 {
		if ctx.Err() != nil {
			errs = append([]error{ctx.Err()}, errs...)
		}
		return errors.Join(errs...)
	}
	return nil
}

// sumKept runs one step's buckets of a Bucketer made with KeepTerms over shared memory:
// their first messages as one round (sumSharedKept), then the ring for any bucket that some
// rank holds outside shared memory (every rank learns which from that round), which is then
// moved there (place).
func (b *Bucketer) sumKept(ctx context.Context) {
	bufs := make([][]float32, len(b.bucket))
	for k, bk := range b.bucket {
		bufs[k] = bk.buf
	}
	p, err := newPeer(b.t, "allreduce", append(append([]Option{}, b.opts...), Tag(b.tag+"/kept")))
	if err != nil {
		b.keptErr = err
		return
	}
	if b.box == nil {
		msg := 0
		for _, buf := range bufs {
			msg += len(appendPost(nil, b.sm, buf))
		}
		b.box = newPostbox(b.sm, msg)
		if b.box.mem != nil {
			b.shared.keep(b.sm, b.box.mem)
		}
	}
	views, ring, err := sumSharedKept(ctx, p, b.sm, b.box, bufs)
	if err != nil {
		b.keptErr = fmt.Errorf("buckets: %w", err)
		return
	}
	for k, bk := range b.bucket {
		bk.views = views[k]
		if !ring[k] {
			continue
		}
		rp, err := newPeer(b.t, "allreduce", append(append([]Option{}, b.opts...), Tag(fmt.Sprintf("%s/%d", b.tag, k))))
		if err == nil {
			err = ringAllReduce(ctx, rp, bk.buf, b.op)
		}
		if err != nil {
			bk.err = fmt.Errorf("bucket %d: %w", k, err)
			return
		}
		b.place(ctx, bk)
	}
}
