// Package collective holds the collective algorithms that synchronize replicas across
// processes and hosts: ring all-reduce (reduce-scatter then all-gather, chunked and
// pipelined), broadcast, all-gather, barrier, and a Bucketer that packs many small
// gradients into buckets and all-reduces each bucket as soon as it is full.
//
// The package does no I/O: every algorithm takes a Transport that moves bytes between
// ranks (distlib/transport provides an in-memory one and a gRPC one). Every wait is
// bounded by the caller's context and by CommunicationOptions.Timeout; a peer that does
// not answer in time makes the collective fail with a *PeerError naming that peer's rank.
//
// All ranks must call the same collectives in the same order with the same tags.
// Collectives that run at the same time on one transport need distinct tags (see Tag).
package collective

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Transport moves tagged byte messages between the ranks of a group. It is the only thing
// the algorithms need from the network.
//
// Messages from one sender with one tag are delivered in the order they were sent.
// Send does not retain b after it returns; Recv returns a slice the caller owns.
type Transport interface {
	// Rank is this endpoint's rank in [0, Size()).
	Rank() int
	// Size is the number of ranks in the group.
	Size() int
	// Send delivers b to rank to under tag; it may return before the peer receives it.
	Send(ctx context.Context, to int, tag string, b []byte) error
	// Recv waits for the next message from rank from under tag.
	Recv(ctx context.Context, from int, tag string) ([]byte, error)
}

// PeerWaiter is an optional upgrade of Transport for joining a group: WaitPeer waits until
// rank has been up (it answered or called this rank; one that has not started yet is waited
// for, until ctx ends). It returns nil at once for a rank seen before, even one lost since,
// whose messages may still be queued (receives report the loss once they are read), and
// fails for a rank the transport found lost without ever seeing it.
type PeerWaiter interface {
	WaitPeer(ctx context.Context, rank int) error
}

// ReduceOp says how all-reduce combines the values of the ranks.
type ReduceOp int

const (
	// Sum adds the values of all ranks.
	Sum ReduceOp = iota
	// Mean adds the values of all ranks and divides by the number of ranks.
	Mean
	// Max keeps the largest value.
	Max
	// Min keeps the smallest value.
	Min
)

// String returns the op's name ("sum", "mean", "max", "min").
func (op ReduceOp) String() string {
	switch op {
	case Sum:
		return "sum"
	case Mean:
		return "mean"
	case Max:
		return "max"
	case Min:
		return "min"
	}
	return fmt.Sprintf("ReduceOp(%d)", int(op))
}

// DefaultChunkBytes is the size of the pieces a ring step is cut into, so that reducing one
// piece overlaps with moving the next.
const DefaultChunkBytes = 1 << 20

// CommunicationOptions tunes a collective; the zero value works. It is itself an Option.
type CommunicationOptions struct {
	// Timeout bounds each wait for one peer (a send or a receive); 0 means only the
	// context bounds it. A peer that does not answer in time gives a *PeerError.
	Timeout time.Duration
	// ChunkBytes is the pipelining granularity of ring steps; 0 means DefaultChunkBytes.
	ChunkBytes int
}

func (o CommunicationOptions) apply(c *config) {
	c.timeout = o.Timeout
	if o.ChunkBytes > 0 {
		c.chunkBytes = o.ChunkBytes
	}
}

// An Option configures one collective call.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// Tag namespaces a collective's messages; collectives that run concurrently on one transport
// must use distinct tags, and all ranks must use the same tag for the same collective.
func Tag(tag string) Option { return optionFunc(func(c *config) { c.tag = tag }) }

type config struct {
	timeout    time.Duration
	chunkBytes int
	tag        string
	keepTerms  bool // KeepTerms (NewBucketer)
}

func newConfig(op string, opts []Option) config {
	c := config{chunkBytes: DefaultChunkBytes, tag: op}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	if c.chunkBytes < 4 {
		c.chunkBytes = 4
	}
	return c
}

// ErrBadArgument is wrapped by errors about the arguments of a collective (not the network).
var ErrBadArgument = errors.New("collective: bad argument")

// PeerError reports a peer that did not answer or whose link failed during a collective.
type PeerError struct {
	Rank int    // the peer's rank
	Op   string // the collective: "allreduce", "broadcast", "allgather", "barrier"
	Err  error  // the underlying error (context.DeadlineExceeded on a timeout)
}

// Error names the collective and the peer.
func (e *PeerError) Error() string {
	if errors.Is(e.Err, context.DeadlineExceeded) {
		return fmt.Sprintf("collective: %s: rank %d did not answer in time: %v", e.Op, e.Rank, e.Err)
	}
	return fmt.Sprintf("collective: %s: rank %d: %v", e.Op, e.Rank, e.Err)
}

// Unwrap returns the underlying error.
func (e *PeerError) Unwrap() error { return e.Err }

// peer wraps the transport with the op's timeout and error typing.
type peer struct {
	t   Transport
	c   config
	op  string
	tag string
}

func (p *peer) send(ctx context.Context, to int, suffix string, b []byte) error {
	if p.c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.c.timeout)
		defer cancel()
	}
	if err := p.t.Send(ctx, to, p.tag+suffix, b); err != nil {
		return p.wrap(to, err)
	}
	return nil
}

func (p *peer) recv(ctx context.Context, from int, suffix string) ([]byte, error) {
	if p.c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.c.timeout)
		defer cancel()
	}
	b, err := p.t.Recv(ctx, from, p.tag+suffix)
	if err != nil {
		return nil, p.wrap(from, err)
	}
	return b, nil
}

func (p *peer) wrap(rank int, err error) error {
	var pe *PeerError
	if errors.As(err, &pe) {
		return err
	}
	return &PeerError{Rank: rank, Op: p.op, Err: err}
}

func newPeer(t Transport, op string, opts []Option) (*peer, error) {
	if t == nil {
		return nil, fmt.Errorf("%w: %s: nil transport", ErrBadArgument, op)
	}
	if t.Size() < 1 || t.Rank() < 0 || t.Rank() >= t.Size() {
		return nil, fmt.Errorf("%w: %s: transport rank %d outside world size %d", ErrBadArgument, op, t.Rank(), t.Size())
	}
	c := newConfig(op, opts)
	return &peer{t: t, c: c, op: op, tag: c.tag}, nil
}
