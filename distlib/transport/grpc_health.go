package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// Peers of a GRPC endpoint: a peer is seen once it answered this rank's handshake or called
// it; a seen peer is lost when its connection to this rank ends or, with health checks, when
// it fails one. Receives from a lost peer fail (after its queued messages) instead of waiting
// for the communication timeout, so a dead task ends the collective at once.

// markSeen records that rank from answered or called this rank.
func (g *GRPC) markSeen(from int) {
	if from < 0 || from >= len(g.seen) || from == g.rank {
		return
	}
	g.seenOnce[from].Do(func() { close(g.seen[from]) })
}

// wasSeen reports whether rank r answered or called this rank before.
func (g *GRPC) wasSeen(r int) bool {
	select {
	case <-g.seen[r]:
		return true
	default:
		return false
	}
}

// linkLost marks rank from lost because a connection from it ended (how, with err), unless
// this endpoint is closing.
func (g *GRPC) linkLost(from int, how string, err error) {
	select {
	case <-g.done:
		return
	default:
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.EOF
	}
	g.box.markLost(from, fmt.Errorf("%w: rank %d at %s: %s (%v)", ErrPeerLost, from, g.addrs[from], how, err))
}

// WaitPeer waits until rank has answered a handshake on this endpoint's control connection
// or called this endpoint (a peer that has not started yet is waited for), or ctx ends. It
// returns nil at once for a peer seen before, even one lost since (its queued messages are
// still received; then receives fail), and fails for one that refuses the cluster token.
func (g *GRPC) WaitPeer(ctx context.Context, rank int) error {
	if rank < 0 || rank >= len(g.addrs) {
		return fmt.Errorf("transport: wait for rank %d outside group of %d", rank, len(g.addrs))
	}
	if rank == g.rank || g.wasSeen(rank) {
		return nil
	}
	// The peer may call this rank while the handshake waits for it (and may be gone by the
	// time the handshake would connect: a chief that broadcast and exited): either counts.
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- g.hello(hctx, rank, true) }()
	var err error
	select {
	case <-g.seen[rank]:
		return nil
	case err = <-done:
	}
	if err != nil {
		if g.wasSeen(rank) {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("transport: rank %d at %s did not answer: %w", rank, g.addrs[rank], ctx.Err())
		}
		return err
	}
	g.markSeen(rank)
	return nil
}

// hello runs one handshake with rank on the control connection.
func (g *GRPC) hello(ctx context.Context, rank int, waitForReady bool) error {
	md := callerMD(g.token, g.rank)
	var resp hello
	req := hello{rank: uint32(g.rank), size: uint32(len(g.addrs))}
	err := g.ctl[rank].Invoke(metadata.NewOutgoingContext(ctx, md), helloMethod, &req, &resp, grpc.WaitForReady(waitForReady))
	if err != nil {
		return g.rpcError(rank, err)
	}
	if int(resp.rank) != rank || int(resp.size) != len(g.addrs) {
		return fmt.Errorf("transport: %s answered as rank %d of %d, want rank %d of %d: the tasks disagree on the cluster",
			g.addrs[rank], resp.rank, resp.size, rank, len(g.addrs))
	}
	return nil
}

// watch checks rank every health interval once it has been seen, and marks it lost when a
// check fails, until the endpoint closes.
func (g *GRPC) watch(rank int) {
	defer g.watchWG.Done()
	select {
	case <-g.seen[rank]:
	case <-g.done:
		return
	}
	tick := time.NewTicker(g.health.interval)
	defer tick.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-g.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		select {
		case <-g.done:
			return
		case <-tick.C:
		}
		if g.box.lostErr(rank) != nil {
			continue
		}
		hctx, hcancel := context.WithTimeout(ctx, g.health.timeout)
		err := g.hello(hctx, rank, false)
		timedOut := hctx.Err() != nil
		hcancel()
		if err == nil {
			continue
		}
		select {
		case <-g.done:
			return
		default:
		}
		how := "it failed a health check"
		if timedOut {
			how = fmt.Sprintf("it did not answer a health check within %v", g.health.timeout)
		}
		g.box.markLost(rank, fmt.Errorf("%w: rank %d at %s: %s (%v)", ErrPeerLost, rank, g.addrs[rank], how, err))
	}
}
