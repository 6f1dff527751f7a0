package distribute

import (
	"context"
	"fmt"

	"godist/distlib/tensor"
)

// GatherContext concatenates v's values along axis, the local replicas' in replica order
// and, under several workers, the workers' in worker order, like strategy.gather(value,
// axis): every worker gets the whole result; ctx bounds the exchange across workers (Gather
// is GatherContext under the cell's context). The values must agree on every other
// dimension. v is a *PerReplica (what Run returns), or a *tensor.Tensor where one replica is
// in sync (the default strategy, OneDeviceStrategy, a ps worker), which TF accepts there too.
func (b *base) GatherContext(ctx context.Context, v any, axis int) *tensor.Tensor {
	if ctx == nil {
		ctx = context.Background()
	}
	out, err := b.gather(ctx, v, axis)
	if err != nil {
		panic(err)
	}
	return out
}

func (b *base) gather(ctx context.Context, v any, axis int) (*tensor.Tensor, error) {
	var vals []*tensor.Tensor
	switch x := v.(type) {
	case *PerReplica:
		if x == nil || x.Len() != len(b.devices) {
			return nil, fmt.Errorf("%w: Gather of a PerReplica with %d values, %s has %d local replicas", ErrReplicas, perReplicaLen(x), b.name, len(b.devices))
		}
		vals = x.Values()
	case *tensor.Tensor:
		if x == nil || b.NumReplicasInSync() != 1 {
			return nil, fmt.Errorf("%w: Gather of a plain tensor under %s with %d replicas in sync: gather the *PerReplica that strategy.Run returns",
				ErrReplicas, b.name, b.NumReplicasInSync())
		}
		vals = []*tensor.Tensor{x}
	default:
		return nil, fmt.Errorf("distribute: Gather of a %T: pass the *PerReplica that strategy.Run returns", v)
	}
	for r, t := range vals {
		if t == nil {
			return nil, fmt.Errorf("%w: Gather: replica %d's value is nil", ErrReplicas, r)
		}
		if axis < 0 || axis >= t.Rank() {
			return nil, fmt.Errorf("%w: Gather axis %d of replica %d's value with shape %v", tensor.ErrShape, axis, r, t.Shape())
		}
	}
	local := vals[0]
	if len(vals) > 1 {
		local = tensor.StopGradient(tensor.Concat(axis, vals...))
	}
	if b.remote == nil {
		return local, nil
	}
	// Across workers: every worker learns the others' lengths along axis, places its part
	// at its offset in a zero tensor of the whole, and the SUM all-reduce assembles it.
	shape := local.Shape()
	sizes := make([]float32, b.workers+len(shape))
	sizes[b.worker] = float32(shape[axis])
	for i, d := range shape {
		sizes[b.workers+i] = float32(d)
	}
	all, err := b.remote.allReduceWorkers(ctx, ReduceSum, []*tensor.Tensor{tensor.MustNew([]int{len(sizes)}, sizes)})
	if err != nil {
		return nil, err
	}
	got := all[0].Data()
	total, offset := 0, 0
	for w := 0; w < b.workers; w++ {
		if w == b.worker {
			offset = total
		}
		total += int(got[w] + 0.5)
	}
	for i, d := range shape {
		if i != axis && int(got[b.workers+i]+0.5) != d*b.workers {
			return nil, fmt.Errorf("%w: Gather: the workers' values differ in dimension %d (this worker's shape %v)", tensor.ErrShape, i, shape)
		}
	}
	outer, inner := 1, 1
	for _, d := range shape[:axis] {
		outer *= d
	}
	for _, d := range shape[axis+1:] {
		inner *= d
	}
	whole := append([]int(nil), shape...)
	whole[axis] = total
	buf := make([]float32, outer*total*inner)
	src := local.Data()
	n := shape[axis] * inner
	for o := 0; o < outer; o++ {
		copy(buf[o*total*inner+offset*inner:], src[o*n:(o+1)*n])
	}
	summed, err := b.remote.allReduceWorkers(ctx, ReduceSum, []*tensor.Tensor{tensor.MustNew(whole, buf)})
	if err != nil {
		return nil, err
	}
	return summed[0], nil
}

func perReplicaLen(p *PerReplica) int {
	if p == nil {
		return 0
	}
	return p.Len()
}
