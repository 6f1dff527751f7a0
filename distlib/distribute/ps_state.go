package distribute

import (
	"context"
	"fmt"

	"godist/distlib/transport"
)

// OptimizerState is a sharded variable's optimizer state on the parameter servers,
// global: the rule's slots assembled from the shards by row, as Value assembles the
// variable, and the step count of each shard (a sparse update advances only the shards
// it touches, so shards may differ).
type OptimizerState struct {
	Slots [][]float32  // each the variable's size; none before any optimizer update
	Steps []ShardSteps // per shard, in row order
}

// ShardSteps is the optimizer step count t of the rows [Offset, Offset+Rows).
type ShardSteps struct {
	Offset, Rows int
	T            int64
}

// OptimizerState reads the variable's optimizer state from its shards, within ctx and
// the strategy's timeout. A shard that has no slots yet reads as zeros (what the rule
// starts from).
func (v *ShardedVariable) OptimizerState(ctx context.Context) (*OptimizerState, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	a, cancel := v.s.psAccess(ctx)
	defer cancel()
	return v.readState(a)
}

func (v *ShardedVariable) readState(a access) (*OptimizerState, error) {
	states := make([]transport.PSState, len(v.shards))
	err := parallel(len(v.shards), func(k int) error {
		sh := v.shards[k]
		st, err := a.clients[sh.task].ReadState(a.ctx, sh.key)
		if err != nil {
			return v.fail(a, sh.task, "read the optimizer state of", err)
		}
		states[k] = st
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := &OptimizerState{}
	nslots := 0
	for _, st := range states {
		nslots = max(nslots, len(st.Slots))
	}
	for range nslots {
		out.Slots = append(out.Slots, make([]float32, v.size()))
	}
	for k, sh := range v.shards {
		out.Steps = append(out.Steps, ShardSteps{Offset: sh.offset, Rows: sh.rows, T: states[k].T})
		for j, sl := range states[k].Slots {
			part := v.shardPart(out.Slots[j], sh)
			if len(sl) != len(part) {
				return nil, v.fail(a, sh.task, "read the optimizer state of", fmt.Errorf("shard %q has a slot of %d values, want %d", sh.key, len(sl), len(part)))
			}
			copy(part, sl)
		}
	}
	return out, nil
}

// SetOptimizerState sets the variable's optimizer state to st, split among the shards as
// they are laid out now (st may come from another partitioning). The step count t is one
// number per shard, so each shard takes the t of the saved rows it holds: when those rows
// were saved with different t (sparse updates on the old shards), it fails with an error
// naming the variable and sets nothing. A nil st clears the state.
func (v *ShardedVariable) SetOptimizerState(ctx context.Context, st *OptimizerState) error {
	if ctx == nil {
		ctx = context.Background()
	}
	plan, err := v.statePlan(st)
	if err != nil {
		return err
	}
	a, cancel := v.s.psAccess(ctx)
	defer cancel()
	return v.setState(a, plan)
}

// statePlan checks st against the variable and returns each shard's state.
func (v *ShardedVariable) statePlan(st *OptimizerState) ([]transport.PSState, error) {
	plan := make([]transport.PSState, len(v.shards))
	if st == nil {
		return plan, nil
	}
	for j, sl := range st.Slots {
		if len(sl) != v.size() {
			return nil, fmt.Errorf("distribute: optimizer state of variable %q: slot %d has %d values, the variable %d", v.name, j, len(sl), v.size())
		}
	}
	for k, sh := range v.shards {
		t, found := int64(0), false
		for _, s := range st.Steps {
			if len(v.shape) > 0 && (s.Offset >= sh.offset+sh.rows || s.Offset+s.Rows <= sh.offset) {
				continue // rows this shard does not hold
			}
			if found && s.T != t {
				return nil, fmt.Errorf("distribute: optimizer state of variable %q: rows %d to %d (one shard now) were saved on shards at different optimizer steps (%d and %d); "+
					"the step count is one per shard, so restore with the partitioning it was saved with", v.name, sh.offset, sh.offset+sh.rows-1, t, s.T)
			}
			t, found = s.T, true
		}
		if !found && len(st.Steps) > 0 {
			return nil, fmt.Errorf("distribute: optimizer state of variable %q: no step count saved for rows %d to %d", v.name, sh.offset, sh.offset+sh.rows-1)
		}
		plan[k].T = t
		for _, sl := range st.Slots {
			plan[k].Slots = append(plan[k].Slots, v.shardPart(sl, sh))
		}
	}
	return plan, nil
}

func (v *ShardedVariable) setState(a access, plan []transport.PSState) error {
	return parallel(len(v.shards), func(k int) error {
		sh := v.shards[k]
		if err := a.clients[sh.task].SetState(a.ctx, sh.key, plan[k]); err != nil {
			return v.fail(a, sh.task, "set the optimizer state of", err)
		}
		return nil
	})
}
