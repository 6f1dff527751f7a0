package transport

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Posted receives: a caller that knows where a coming message belongs (the all-gather's
// final chunks go straight into the tensor) posts that memory, and the data path's reader
// reads the payload into it instead of into a buffer of its own that the caller would copy.
//
// Posts and messages of one (from, tag) pair are matched in order: the k-th post not yet
// retired belongs to the k-th message that Recv has not yet returned. pending counts, per
// pair, the messages delivered to the mailbox and not yet returned by Recv; Recv retires the
// first post together with the message it returns.

type post struct {
	dst     []byte
	claimed bool          // the reader is writing into dst
	done    chan struct{} // closed when the reader no longer writes into dst
	abort   func()        // cuts the claiming reader's connection
	cut     atomic.Bool   // abort ran: the connection ended by this rank's choice
}

type posts struct {
	mu      sync.Mutex
	queued  map[key][]*post
	pending map[key]int
}

// Post asks that the next message from rank from under tag that no earlier post is matched
// to be received into dst, when it fits and has not arrived yet; Recv then returns a slice of
// dst. Messages that arrive over gRPC streams, or before the post, land elsewhere as usual.
func (g *GRPC) Post(from int, tag string, dst []byte) {
	g.posts.mu.Lock()
	defer g.posts.mu.Unlock()
	k := key{from, tag}
	g.posts.queued[k] = append(g.posts.queued[k], &post{dst: dst})
}

// Unpost withdraws the posts for (from, tag) that no Recv retired, and returns once the
// transport no longer writes into any of them (a reader in the middle of one has its
// connection cut: the stream cannot resume mid-message).
func (g *GRPC) Unpost(from int, tag string) {
	k := key{from, tag}
	g.posts.mu.Lock()
	ps := g.posts.queued[k]
	delete(g.posts.queued, k)
	var wait []*post
	for _, p := range ps {
		if p.claimed {
			p.abort()
			wait = append(wait, p)
		}
	}
	g.posts.mu.Unlock()
	for _, p := range wait {
		<-p.done
	}
}

// claim returns the post that the next message from (from, tag) of n bytes should be read
// into, or nil.
func (g *GRPC) claim(from int, tag string, n int, c net.Conn) *post {
	g.posts.mu.Lock()
	defer g.posts.mu.Unlock()
	k := key{from, tag}
	ps, j := g.posts.queued[k], g.posts.pending[k]
	if j >= len(ps) || ps[j].claimed || len(ps[j].dst) < n {
		return nil
	}
	p := ps[j]
	p.claimed, p.done = true, make(chan struct{})
	p.abort = func() {
		p.cut.Store(true)
		_ = c.SetReadDeadline(time.Unix(1, 0))
	}
	return p
}

// unclaim ends a claim; a message read in full counts as pending in the same step, so that
// no other claim can take the post in between.
func (g *GRPC) unclaim(p *post, from int, tag string, delivered bool) {
	g.posts.mu.Lock()
	if delivered {
		g.posts.pending[key{from, tag}]++
	}
	p.claimed = false
	close(p.done)
	g.posts.mu.Unlock()
}

// deliver counts a message as pending, then queues it for Recv.
func (g *GRPC) deliver(from int, tag string, b []byte) {
	g.posts.mu.Lock()
	g.posts.pending[key{from, tag}]++
	g.posts.mu.Unlock()
	g.box.put(from, tag, b)
}

// retire takes the message that Recv returns out of the pending count, with its post.
func (g *GRPC) retire(from int, tag string) {
	k := key{from, tag}
	g.posts.mu.Lock()
	defer g.posts.mu.Unlock()
	if n := g.posts.pending[k]; n > 1 {
		g.posts.pending[k] = n - 1
	} else {
		delete(g.posts.pending, k)
	}
	if ps := g.posts.queued[k]; len(ps) > 0 {
		ps[0] = nil
		if len(ps) == 1 {
			delete(g.posts.queued, k)
		} else {
			g.posts.queued[k] = ps[1:]
		}
	}
}

// recv is Recv: it waits for the message, then retires it.
func (g *GRPC) recv(ctx context.Context, from int, tag string) ([]byte, error) {
	b, err := g.box.get(ctx, from, tag)
	if err == nil {
		g.retire(from, tag)
	}
	return b, err
}
