package collective_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"godist/distlib/collective"
	"godist/distlib/transport"
)

// A subgroup of ranks 0, 2 and 3 of a group of 4 all-reduces among them only, re-numbered,
// while a message that rank 0 sent rank 2 in an abandoned all-reduce of the previous view,
// under the same tag, is not read: the views' prefixes keep them apart. Over a view with
// the old prefix, the stale message spoils the sum (the test can tell).
func TestSubgroupAllReduce(t *testing.T) {
	for _, c := range []struct {
		prefix string
		stale  bool // the stale message is read: a wrong sum
	}{{"g1/", false}, {"g0/", true}} {
		t.Run(c.prefix, func(t *testing.T) {
			mems := transport.NewMem(4)
			defer func() {
				for _, m := range mems {
					m.Close()
				}
			}()
			members := []int{0, 2, 3}
			stale := make([]byte, 4)
			binary.LittleEndian.PutUint32(stale, math.Float32bits(1000))
			if err := mems[0].Send(context.Background(), 2, "g0/x/rs", stale); err != nil {
				t.Fatal(err)
			}
			mems[1].Close()
			group := make([]collective.Transport, len(members))
			for i, r := range members {
				v, err := collective.NewSubgroup(mems[r], members, c.prefix)
				if err != nil {
					t.Fatal(err)
				}
				if v.Rank() != i || v.Size() != 3 || v.Parent(i) != r || v.Parent(3) != -1 {
					t.Fatalf("view of rank %d: rank %d of %d, parent %d; want %d of 3, parent %d", r, v.Rank(), v.Size(), v.Parent(i), i, r)
				}
				group[i] = v
			}
			errs := runGroup(t, group, func(ctx context.Context, tr collective.Transport) error {
				buf := []float32{float32(members[tr.Rank()] + 1), 1, 2}
				if err := collective.AllReduce(ctx, tr, buf, collective.Sum, collective.Tag("x")); err != nil {
					return err
				}
				if buf[0] != 1+3+4 || buf[1] != 3 || buf[2] != 6 {
					return fmt.Errorf("view rank %d: sum %v, want [8 3 6]", tr.Rank(), buf)
				}
				return nil
			})
			if err := errors.Join(errs...); (err != nil) != c.stale {
				t.Fatalf("all-reduce over the view with prefix %q: %v (want an error: %v)", c.prefix, err, c.stale)
			}
		})
	}
}

func TestNewSubgroupErrors(t *testing.T) {
	mems := transport.NewMem(3)
	defer func() {
		for _, m := range mems {
			m.Close()
		}
	}()
	for _, c := range []struct {
		t     collective.Transport
		ranks []int
		want  string
	}{
		{nil, []int{0}, "nil transport"},
		{mems[0], []int{0, 3}, "rank 3 outside the group of 3"},
		{mems[0], []int{0, 2, 1}, "not ascending and distinct"},
		{mems[0], []int{0, 0}, "not ascending and distinct"},
		{mems[0], []int{1, 2}, "leave out this rank 0"},
	} {
		_, err := collective.NewSubgroup(c.t, c.ranks, "p/")
		if !errors.Is(err, collective.ErrBadArgument) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewSubgroup(%v): %v, want %q", c.ranks, err, c.want)
		}
	}
}
