package collective

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"unsafe"

	"godist/internal/simd"
)

// Releaser is an optional upgrade of Transport: Release hands back a slice that Recv
// returned once the caller no longer uses it, so that the transport can receive a later
// message into the same memory. The algorithms release every received chunk they do not
// forward.
type Releaser interface {
	Release(b []byte)
}

func release(t Transport, b []byte) {
	if r, ok := t.(Releaser); ok {
		r.Release(b)
	}
}

// Poster is an optional upgrade of Transport for receiving in place. Post asks that a coming
// message from rank from under tag be received into dst: posts and messages of one (from, tag)
// pair are matched in order, the k-th post not yet retired to the k-th message that Recv has
// not yet returned, and a message that fits its post and arrives after it lands in dst.
// Recv returns the message either way (a slice of dst when it landed there; such a slice is
// the caller's, not to be released) and retires its post. Unpost withdraws the posts of
// (from, tag) that no Recv retired and returns once the transport no longer writes into any
// of them.
type Poster interface {
	Post(from int, tag string, dst []byte)
	Unpost(from int, tag string)
}

// AllReduce combines buf across all ranks with op and leaves the result in buf on every rank.
// It runs a ring: reduce-scatter then all-gather, each step cut into chunks of
// CommunicationOptions.ChunkBytes so that reducing a chunk overlaps with moving the next.
// When the ranks share memory (the transport is a Sharer whose SharedMemory is not nil),
// a buffer allocated there (SharedMemory.Alloc) is instead read by the other ranks where it
// lies, and one under 64 KiB travels whole in one round of messages; other buffers take the
// ring. Every rank must pass a buffer of the same length (0 is allowed).
func AllReduce(ctx context.Context, t Transport, buf []float32, op ReduceOp, opts ...Option) error {
	_, err := allReduce(ctx, t, buf, op, false, opts)
	return err
}

// allReduce is AllReduce. With keep (op Sum), when every rank's buffer lies in shared memory
// it stops after the first round and returns every rank's buffer, by rank, unreduced (a
// Bucketer made with KeepTerms: allReduceShared says how long they stay valid); otherwise
// it returns nil and buf holds the reduction.
func allReduce(ctx context.Context, t Transport, buf []float32, op ReduceOp, keep bool, opts []Option) ([][]float32, error) {
	p, err := newPeer(t, "allreduce", opts)
	if err != nil {
		return nil, err
	}
	if op < Sum || op > Min {
		return nil, fmt.Errorf("%w: allreduce: unknown reduce op %d (want Sum, Mean, Max or Min)", ErrBadArgument, int(op))
	}
	n := t.Size()
	if n == 1 {
		return nil, nil
	}
	if sh, ok := t.(Sharer); ok {
		sm, err := p.sharedMemory(ctx, sh)
		if err != nil {
			return nil, err
		}
		if sm != nil {
			if views, done, err := allReduceShared(ctx, p, sm, buf, op, keep && op == Sum); done || err != nil {
				return views, err
			}
		}
	}
	return nil, ringAllReduce(ctx, p, buf, op)
}

// ringAllReduce is AllReduce's ring.
func ringAllReduce(ctx context.Context, p *peer, buf []float32, op ReduceOp) error {
	t := p.t
	n, r := t.Size(), t.Rank()
	right, left := (r+1)%n, (r-1+n)%n
	ce := pipelineChunk(p.c.chunkBytes/4, len(buf)/n)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s := startSender(ctx, cancel, p, right, 4*len(buf) <= inlineSendBytes)
	// The all-gather's last step writes its chunks into buf and forwards nothing: post them so
	// that a transport that can receives them in place, before the reduce-scatter starts
	// (they may arrive while it runs).
	if po, ok := t.(Poster); ok {
		agTag := p.tag + "/ag"
		for step := 0; step < n-2; step++ {
			for range chunks(segment(buf, (r-step+n)%n, n), ce) {
				po.Post(left, agTag, nil) // forwarded chunks: no destination
			}
		}
		for _, c := range chunks(segment(buf, (r+2)%n, n), ce) {
			po.Post(left, agTag, encode(c))
		}
		defer po.Unpost(left, agTag)
	}

	// Reduce-scatter: at step k this rank receives segment r-k-1 from the left, reduces it into
	// buf and passes it on; after n-1 steps it holds the full reduction of segment r+1.
	for _, c := range chunks(segment(buf, r, n), ce) {
		s.push("/rs", encode(c))
	}
	for step := 0; step < n-1; step++ {
		last := step == n-2
		for _, c := range chunks(segment(buf, (r-step-1+2*n)%n, n), ce) {
			b, err := p.recv(ctx, left, "/rs")
			if err != nil {
				return s.fail(err)
			}
			if len(b) != 4*len(c) {
				return s.fail(p.mismatch(left, len(b), len(c)))
			}
			reduce(op, c, b)
			release(t, b)
			if !last {
				s.push("/rs", encode(c))
				continue
			}
			if op == Mean {
				fn := float32(n)
				for i := range c {
					c[i] /= fn
				}
			}
			s.push("/ag", encode(c))
		}
	}
	// All-gather: pass the reduced segments around the ring, forwarding received bytes as is.
	for step := 0; step < n-1; step++ {
		last := step == n-2
		for _, c := range chunks(segment(buf, (r-step+n)%n, n), ce) {
			b, err := p.recv(ctx, left, "/ag")
			if err != nil {
				return s.fail(err)
			}
			if len(b) != 4*len(c) {
				return s.fail(p.mismatch(left, len(b), len(c)))
			}
			if !last {
				decode(c, b)
				s.push("/ag", b)
			} else if !aliases(b, c) {
				decode(c, b)
				release(t, b)
			}
		}
	}
	return s.wait()
}

// Broadcast copies root's buf into buf on every rank, along a pipelined chain
// root -> root+1 -> ... Every rank must pass a buffer of the same length.
func Broadcast(ctx context.Context, t Transport, buf []float32, root int, opts ...Option) error {
	p, err := newPeer(t, "broadcast", opts)
	if err != nil {
		return err
	}
	n, r := t.Size(), t.Rank()
	if root < 0 || root >= n {
		return fmt.Errorf("%w: broadcast: root %d outside world size %d", ErrBadArgument, root, n)
	}
	if n == 1 {
		return nil
	}
	d := (r - root + n) % n
	right, left := (r+1)%n, (r-1+n)%n
	ce := p.c.chunkBytes / 4
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var s *sender
	if d < n-1 {
		s = startSender(ctx, cancel, p, right, false)
	} else {
		s = startSender(ctx, cancel, p, -1, false)
	}
	for _, c := range chunks(buf, ce) {
		if d == 0 {
			s.push("", encode(c))
			continue
		}
		b, err := p.recv(ctx, left, "")
		if err != nil {
			return s.fail(err)
		}
		if len(b) != 4*len(c) {
			return s.fail(p.mismatch(left, len(b), len(c)))
		}
		decode(c, b)
		if d < n-1 {
			s.push("", b)
		} else {
			release(t, b)
		}
	}
	return s.wait()
}

// AllGather returns every rank's local slice, indexed by rank, on every rank. The slices may
// have different lengths; the result never aliases local.
func AllGather(ctx context.Context, t Transport, local []float32, opts ...Option) ([][]float32, error) {
	p, err := newPeer(t, "allgather", opts)
	if err != nil {
		return nil, err
	}
	n, r := t.Size(), t.Rank()
	out := make([][]float32, n)
	out[r] = append([]float32{}, local...)
	if n == 1 {
		return out, nil
	}
	right, left := (r+1)%n, (r-1+n)%n
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s := startSender(ctx, cancel, p, right, false)
	s.push("", encode(local))
	for step := 0; step < n-1; step++ {
		src := (r - step - 1 + n) % n
		b, err := p.recv(ctx, left, "")
		if err != nil {
			return nil, s.fail(err)
		}
		if len(b)%4 != 0 {
			return nil, s.fail(&PeerError{Rank: left, Op: p.op, Err: fmt.Errorf("message of %d bytes is not a float32 slice", len(b))})
		}
		out[src] = make([]float32, len(b)/4)
		decode(out[src], b)
		if step < n-2 {
			s.push("", b)
		}
	}
	if err := s.wait(); err != nil {
		return nil, err
	}
	return out, nil
}

// Barrier returns once every rank has entered it. It is a dissemination barrier: in round k
// each rank signals rank r+2^k and waits for rank r-2^k, so that after ceil(log2 n) rounds
// every rank has heard, directly or not, from every other, and all ranks leave at about the
// same time (no rank waits for a release message).
func Barrier(ctx context.Context, t Transport, opts ...Option) error {
	p, err := newPeer(t, "barrier", opts)
	if err != nil {
		return err
	}
	n, r := t.Size(), t.Rank()
	for k := 1; k < n; k *= 2 {
		suffix := "/" + strconv.Itoa(k)
		if err := p.send(ctx, (r+k)%n, suffix, nil); err != nil {
			return err
		}
		if _, err := p.recv(ctx, (r-k+n)%n, suffix); err != nil {
			return err
		}
	}
	return nil
}

func (p *peer) mismatch(from, gotBytes, wantElems int) error {
	return &PeerError{Rank: from, Op: p.op, Err: fmt.Errorf("%w: got a chunk of %d float32 values, want %d: every rank must pass a buffer of the same length",
		ErrBadArgument, gotBytes/4, wantElems)}
}

// segment returns the i-th of n nearly equal parts of buf (sizes differ by at most one).
func segment(buf []float32, i, n int) []float32 {
	l := len(buf)
	return buf[i*l/n : (i+1)*l/n]
}

// minPipelineElems is the smallest chunk (in float32 values) that pipelineChunk cuts a
// segment into: below it the per-message cost outweighs the overlap.
const minPipelineElems = 32 << 10

// pipelineChunk returns the chunk length for segments of seg values: ce, unless that leaves
// fewer than four chunks per segment, in which case smaller chunks (never below
// minPipelineElems) let sending, receiving and reducing overlap within a step.
func pipelineChunk(ce, seg int) int {
	if seg >= 4*ce || seg < 2*minPipelineElems {
		return ce
	}
	return max((seg+3)/4, minPipelineElems)
}

// chunks cuts s into pieces of at most ce values; an empty s gives one empty piece so that
// every ring step exchanges at least one message.
func chunks(s []float32, ce int) [][]float32 {
	if len(s) == 0 {
		return [][]float32{s}
	}
	out := make([][]float32, 0, (len(s)+ce-1)/ce)
	for len(s) > ce {
		out = append(out, s[:ce])
		s = s[ce:]
	}
	return append(out, s)
}

// encode returns f's bytes (little-endian hosts) without copying. Sending them is safe because
// Transport.Send does not retain them, and no rank writes a chunk again before everything it
// sent of that chunk was received: the data that overwrites it depends on that send.
func encode(f []float32) []byte {
	if len(f) == 0 {
		return []byte{}
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), 4*len(f))
}

// aliases reports whether b is f's memory (a chunk received in place).
func aliases(b []byte, f []float32) bool {
	return len(f) > 0 && len(b) > 0 && unsafe.Pointer(&b[0]) == unsafe.Pointer(&f[0])
}

// aliasesF reports whether a and b start at the same value.
func aliasesF(a, b []float32) bool {
	return len(a) > 0 && len(b) > 0 && &a[0] == &b[0]
}

// view returns b as float32 values without copying when b is 4-byte aligned.
func view(b []byte) ([]float32, bool) {
	if len(b) == 0 {
		return nil, true
	}
	if uintptr(unsafe.Pointer(&b[0]))%4 != 0 {
		return nil, false
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4), true
}

func decode(dst []float32, b []byte) {
	if v, ok := view(b); ok {
		copy(dst, v)
		return
	}
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
}

func reduce(op ReduceOp, dst []float32, b []byte) {
	src, ok := view(b)
	if !ok {
		src = make([]float32, len(dst))
		decode(src, b)
	}
	reduceF(op, dst, src)
}

// reduceF combines src into dst element-wise with op (len(src) >= len(dst)).
func reduceF(op ReduceOp, dst, src []float32) {
	src = src[:len(dst)]
	switch op {
	case Sum, Mean:
		simd.AddTo(dst, src)
	case Max:
		for i, v := range src {
			if v > dst[i] || dst[i] != dst[i] {
				dst[i] = v
			}
		}
	case Min:
		for i, v := range src {
			if v < dst[i] || dst[i] != dst[i] {
				dst[i] = v
			}
		}
	}
}

// inlineSendBytes is the largest all-reduce whose messages are sent from the caller's
// goroutine: small enough that they fit the transport's buffers, so that a send costs less
// than handing it to another goroutine and waking it.
const inlineSendBytes = 4 << 20

// sender sends queued messages to one peer in order from its own goroutine, so that the
// caller's receive-and-reduce loop overlaps with the network; an inline sender sends from
// the caller's goroutine instead.
type sender struct {
	p      *peer
	to     int
	ctx    context.Context
	cancel context.CancelFunc
	jobs   chan job
	done   chan struct{}
	mu     sync.Mutex
	err    error
	halted atomic.Bool // set by fail: later send errors are consequences, not causes
}

type job struct {
	suffix string
	b      []byte
}

func startSender(ctx context.Context, cancel context.CancelFunc, p *peer, to int, inline bool) *sender {
	s := &sender{p: p, to: to, ctx: ctx, cancel: cancel}
	if inline {
		return s
	}
	s.jobs, s.done = make(chan job, 64), make(chan struct{})
	go s.loop()
	return s
}

func (s *sender) loop() {
	defer close(s.done)
	for j := range s.jobs {
		s.send(j)
	}
}

func (s *sender) send(j job) {
	if s.halted.Load() || s.error() != nil {
		return
	}
	if err := s.p.send(s.ctx, s.to, j.suffix, j.b); err != nil && !s.halted.Load() {
		s.setErr(err)
		s.cancel()
	}
}

func (s *sender) error() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *sender) setErr(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.mu.Unlock()
}

func (s *sender) push(suffix string, b []byte) {
	if s.jobs == nil {
		s.send(job{suffix, b})
		return
	}
	select {
	case s.jobs <- job{suffix, b}:
	case <-s.ctx.Done():
	}
}

// wait flushes the queue and returns the first send error.
func (s *sender) wait() error {
	if s.jobs != nil {
		close(s.jobs)
		<-s.done
	}
	return s.error()
}

// fail stops the sender and returns the send error that caused err, if any, else err.
func (s *sender) fail(err error) error {
	s.halted.Store(true)
	s.cancel()
	if serr := s.wait(); serr != nil {
		return serr
	}
	return err
}
