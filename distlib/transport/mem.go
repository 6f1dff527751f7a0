// Package transport moves the collectives' messages between ranks: Mem between goroutines of
// one process (tests, single-process replicas) and GRPC between processes and hosts, with a
// raw-bytes codec (no protobuf copies) and a shared cluster token that keeps processes
// outside the job from joining, reading or injecting tensors.
//
// Both implement collective.Transport. This is the only package of godist that imports gRPC.
package transport

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"godist/distlib/collective"
)

// ErrClosed is returned by Send and Recv on a closed transport.
var ErrClosed = errors.New("transport: closed")

// ErrPeerLost is wrapped by the errors of Send, Recv and WaitPeer about a peer whose link was
// lost: its connection closed (the process ended or was killed), it closed its endpoint, or
// it stopped answering health checks. Messages it sent before are still received.
var ErrPeerLost = errors.New("transport: peer lost")

// Mem is one rank's endpoint of an in-memory group made by NewMem. An endpoint is up from
// its first Send, Recv or WaitPeer (the way a process joins its cluster when it first talks)
// until Close, which the other endpoints see as the loss of that peer.
type Mem struct {
	rank  int
	group []*Mem
	box   *mailbox

	upOnce sync.Once
	up     chan struct{} // closed at the first Send, Recv or WaitPeer
	downMu sync.Once
	down   chan struct{} // closed by Close
}

var (
	_ collective.Transport  = (*Mem)(nil)
	_ collective.PeerWaiter = (*Mem)(nil)
)

// NewMem returns the n endpoints of an in-memory group; endpoint i has rank i.
func NewMem(n int) []*Mem {
	if n < 1 {
		panic(fmt.Sprintf("transport: NewMem: group size %d, want at least 1", n))
	}
	g := make([]*Mem, n)
	for i := range g {
		g[i] = &Mem{rank: i, group: g, box: newMailbox(), up: make(chan struct{}), down: make(chan struct{})}
	}
	return g
}

// Rank is this endpoint's rank.
func (m *Mem) Rank() int { return m.rank }

// Size is the number of endpoints in the group.
func (m *Mem) Size() int { return len(m.group) }

// Send copies b into rank to's mailbox; it never blocks.
func (m *Mem) Send(ctx context.Context, to int, tag string, b []byte) error {
	if to < 0 || to >= len(m.group) {
		return fmt.Errorf("transport: send to rank %d outside group of %d", to, len(m.group))
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	m.start()
	m.box.mu.Lock()
	closed := m.box.closed
	m.box.mu.Unlock()
	if closed != nil {
		return closed
	}
	if err := m.box.lostErr(to); err != nil {
		return err
	}
	m.group[to].box.put(m.rank, tag, append(make([]byte, 0, len(b)), b...))
	return nil
}

// Recv waits for the next message from rank from under tag.
func (m *Mem) Recv(ctx context.Context, from int, tag string) ([]byte, error) {
	if from < 0 || from >= len(m.group) {
		return nil, fmt.Errorf("transport: receive from rank %d outside group of %d", from, len(m.group))
	}
	m.start()
	return m.box.get(ctx, from, tag)
}

// WaitPeer waits until endpoint rank has been up (see Mem) or ctx ends; it fails at once,
// with an error wrapping ErrPeerLost, when rank closed its endpoint without ever being up.
// It also makes this endpoint up.
func (m *Mem) WaitPeer(ctx context.Context, rank int) error {
	if rank < 0 || rank >= len(m.group) {
		return fmt.Errorf("transport: wait for rank %d outside group of %d", rank, len(m.group))
	}
	m.start()
	p := m.group[rank]
	select {
	case <-p.up:
		return nil
	default:
	}
	select {
	case <-p.up:
		return nil
	case <-p.down:
		return p.lostErr()
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (m *Mem) start() { m.upOnce.Do(func() { close(m.up) }) }

func (m *Mem) lostErr() error {
	return fmt.Errorf("%w: rank %d closed its endpoint", ErrPeerLost, m.rank)
}

// Close makes this endpoint's pending and later Send and Recv fail with ErrClosed, and the
// other endpoints' receives from it (once its queued messages are read) and sends to it
// fail with an error wrapping ErrPeerLost.
func (m *Mem) Close() error {
	m.box.close(ErrClosed)
	m.downMu.Do(func() {
		close(m.down)
		for _, p := range m.group {
			if p != m {
				p.box.markLost(m.rank, m.lostErr())
			}
		}
	})
	return nil
}
