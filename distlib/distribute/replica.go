package distribute

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"godist/distlib/tensor"
)

// errAborted marks the failure of a replica that was waiting in a collective call when
// another replica failed or left.
var errAborted = errors.New("distribute: collective aborted")

// ReplicaContext is what a replica function of Strategy.Run receives, like
// tf.distribute.ReplicaContext: which replica it is and the collectives it can call.
type ReplicaContext struct {
	strategy Strategy
	b        *base
	replica  int
	group    *syncGroup
}

// ReplicaIDInSync returns the replica's index among all replicas in sync (across workers).
func (c *ReplicaContext) ReplicaIDInSync() int {
	return c.b.worker*len(c.b.devices) + c.replica
}

// LocalReplicaID returns the replica's index among this worker's replicas.
func (c *ReplicaContext) LocalReplicaID() int { return c.replica }

// NumReplicasInSync returns the number of replicas in sync.
func (c *ReplicaContext) NumReplicasInSync() int { return c.b.NumReplicasInSync() }

// Strategy returns the strategy running the replica.
func (c *ReplicaContext) Strategy() Strategy { return c.strategy }

// Device returns the replica's device.
func (c *ReplicaContext) Device() string { return c.b.devices[c.replica] }

// AllReduce reduces t across all replicas and returns the result on every replica. Every
// replica of the Run must call it, in the same order; otherwise it panics. The result does
// not carry gradients.
func (c *ReplicaContext) AllReduce(op ReduceOp, t *tensor.Tensor) *tensor.Tensor {
	return c.AllReduceList(op, []*tensor.Tensor{t})[0]
}

// AllReduceList is AllReduce of several tensors in one collective call.
func (c *ReplicaContext) AllReduceList(op ReduceOp, ts []*tensor.Tensor) []*tensor.Tensor {
	op, err := op.canonical()
	if err != nil {
		panic(err)
	}
	out, err := c.group.allReduce(c.replica, op, ts)
	if err != nil {
		panic(err)
	}
	return out
}

// String describes the context.
func (c *ReplicaContext) String() string {
	return fmt.Sprintf("ReplicaContext(replica_id_in_sync=%d, num_replicas_in_sync=%d, device=%s)",
		c.ReplicaIDInSync(), c.NumReplicasInSync(), c.Device())
}

// syncGroup is the rendezvous of the replicas of one Run for collective calls.
type syncGroup struct {
	ctx     context.Context
	b       *base
	n       int
	mu      sync.Mutex
	cond    *sync.Cond
	gen     int
	arrived int
	left    int
	op      ReduceOp
	pending [][]*tensor.Tensor
	results [][]*tensor.Tensor
	err     error
	outputs map[*tensor.Tensor]bool // every tensor an allReduce returned
}

func newSyncGroup(ctx context.Context, b *base, n int) *syncGroup {
	g := &syncGroup{ctx: ctx, b: b, n: n, pending: make([][]*tensor.Tensor, n), outputs: map[*tensor.Tensor]bool{}}
	g.cond = sync.NewCond(&g.mu)
	return g
}

// allReduce deposits replica r's tensors and waits until all replicas did, then returns
// replica r's share of the reduction.
func (g *syncGroup) allReduce(r int, op ReduceOp, ts []*tensor.Tensor) ([]*tensor.Tensor, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.err != nil {
		return nil, g.err
	}
	if g.arrived == 0 {
		g.op = op
	} else if op != g.op {
		g.err = fmt.Errorf("%w: replica %d called AllReduce with %v while others used %v", errAborted, r, op, g.op)
		g.cond.Broadcast()
		return nil, g.err
	}
	g.pending[r] = ts
	g.arrived++
	gen := g.gen
	if g.arrived == g.n {
		res, err := g.b.allReduce(g.ctx, op, g.pending)
		g.pending = make([][]*tensor.Tensor, g.n)
		g.arrived = 0
		if err != nil {
			g.err = fmt.Errorf("%w: %v", errAborted, err)
			g.cond.Broadcast()
			return nil, err
		}
		g.results = res
		for _, ts := range res {
			for _, t := range ts {
				g.outputs[t] = true
			}
		}
		g.gen++
		g.cond.Broadcast()
		return res[r], nil
	}
	g.checkStuck()
	for g.gen == gen && g.err == nil {
		g.cond.Wait()
	}
	if g.gen == gen {
		return nil, g.err
	}
	return g.results[r], nil
}

// reduced reports whether every non-nil tensor of ts was returned by one of the group's
// all-reduces (and at least one is non-nil): gradients the replica function reduced itself.
func (g *syncGroup) reduced(ts []*tensor.Tensor) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	any := false
	for _, t := range ts {
		if t == nil {
			continue
		}
		if !g.outputs[t] {
			return false
		}
		any = true
	}
	return any
}

// leave records that replica r's function returned (or panicked).
func (g *syncGroup) leave(r int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.left++
	g.checkStuck()
}

// checkStuck aborts waiting replicas when the ones still missing have all left.
func (g *syncGroup) checkStuck() {
	if g.arrived > 0 && g.arrived+g.left >= g.n && g.err == nil {
		g.err = fmt.Errorf("%w: %d of %d replicas are waiting in AllReduce but the others returned or failed "+
			"without calling it (every replica must call AllReduce the same number of times)", errAborted, g.arrived, g.n)
		g.cond.Broadcast()
	}
}
