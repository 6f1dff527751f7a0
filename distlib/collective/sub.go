package collective

import (
	"context"
	"fmt"
	"slices"
)

// Subgroup is a view of some ranks of a transport as a group of their own: rank i of the
// view is ranks[i] of t, and every tag carries prefix, so that the messages of one view
// never meet those of another over the same connections (an elastic job's generations: a
// collective abandoned when a worker was lost leaves messages that the next generation
// must not read). It passes WaitPeer, Release and Post through; it does not offer t's
// shared memory (a view's ranks may outlive the regions of the ranks it left out).
type Subgroup struct {
	t      Transport
	ranks  []int
	me     int
	prefix string
}

var (
	_ Transport  = (*Subgroup)(nil)
	_ PeerWaiter = (*Subgroup)(nil)
	_ Releaser   = (*Subgroup)(nil)
	_ Poster     = (*Subgroup)(nil)
)

// NewSubgroup returns the view of t's ranks (ascending, distinct, with t.Rank() among
// them) whose tags start with prefix.
func NewSubgroup(t Transport, ranks []int, prefix string) (*Subgroup, error) {
	if t == nil {
		return nil, fmt.Errorf("%w: subgroup: nil transport", ErrBadArgument)
	}
	me := -1
	for i, r := range ranks {
		if r < 0 || r >= t.Size() {
			return nil, fmt.Errorf("%w: subgroup: rank %d outside the group of %d", ErrBadArgument, r, t.Size())
		}
		if i > 0 && r <= ranks[i-1] {
			return nil, fmt.Errorf("%w: subgroup: ranks %v are not ascending and distinct", ErrBadArgument, ranks)
		}
		if r == t.Rank() {
			me = i
		}
	}
	if me < 0 {
		return nil, fmt.Errorf("%w: subgroup: ranks %v leave out this rank %d", ErrBadArgument, ranks, t.Rank())
	}
	return &Subgroup{t: t, ranks: slices.Clone(ranks), me: me, prefix: prefix}, nil
}

// Rank is this rank's index in the view.
func (g *Subgroup) Rank() int { return g.me }

// Size is the number of ranks in the view.
func (g *Subgroup) Size() int { return len(g.ranks) }

// Ranks returns the ranks of the underlying transport that the view holds, ascending.
func (g *Subgroup) Ranks() []int { return slices.Clone(g.ranks) }

// Parent returns the rank of the underlying transport of view rank r (-1 outside the view).
func (g *Subgroup) Parent(r int) int {
	if r < 0 || r >= len(g.ranks) {
		return -1
	}
	return g.ranks[r]
}

func (g *Subgroup) rank(r int) (int, error) {
	if r < 0 || r >= len(g.ranks) {
		return 0, fmt.Errorf("%w: rank %d outside the subgroup of %d", ErrBadArgument, r, len(g.ranks))
	}
	return g.ranks[r], nil
}

// Send sends b to view rank to.
func (g *Subgroup) Send(ctx context.Context, to int, tag string, b []byte) error {
	r, err := g.rank(to)
	if err != nil {
		return err
	}
	return g.t.Send(ctx, r, g.prefix+tag, b)
}

// Recv receives the next message from view rank from under tag.
func (g *Subgroup) Recv(ctx context.Context, from int, tag string) ([]byte, error) {
	r, err := g.rank(from)
	if err != nil {
		return nil, err
	}
	return g.t.Recv(ctx, r, g.prefix+tag)
}

// WaitPeer waits for view rank r as the underlying transport does (at once without a
// PeerWaiter).
func (g *Subgroup) WaitPeer(ctx context.Context, r int) error {
	pr, err := g.rank(r)
	if err != nil {
		return err
	}
	if w, ok := g.t.(PeerWaiter); ok {
		return w.WaitPeer(ctx, pr)
	}
	return nil
}

// Release hands b back to the underlying transport.
func (g *Subgroup) Release(b []byte) { release(g.t, b) }

// Post posts dst for a message from view rank from (ignored without a Poster below).
func (g *Subgroup) Post(from int, tag string, dst []byte) {
	if p, ok := g.t.(Poster); ok && from >= 0 && from < len(g.ranks) {
		p.Post(g.ranks[from], g.prefix+tag, dst)
	}
}

// Unpost withdraws the posts of (from, tag).
func (g *Subgroup) Unpost(from int, tag string) {
	if p, ok := g.t.(Poster); ok && from >= 0 && from < len(g.ranks) {
		p.Unpost(g.ranks[from], g.prefix+tag)
	}
}
