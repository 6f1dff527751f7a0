package mesh

import (
	"fmt"

	"godist/distlib/collective"
	"godist/distlib/tensor"
)

// backward walks the stages in reverse and returns the synchronized gradient of every
// parameter this device holds.
func (dc *devCtx) backward() ([]*tensor.Tensor, error) {
	e := dc.e
	pg := make([]*tensor.Tensor, len(dc.vars))
	var g *tensor.Tensor
	var err error
	for i := len(dc.recs) - 1; i >= 0; i-- {
		r := dc.recs[i]
		switch r.kind {
		case recLoss:
			g = tensor.NewGradientTape().Gradient(r.out, r.in)[0]
		case recLocal:
			target := tensor.ReduceSum(tensor.Mul(r.out, g))
			srcs := []any{r.in}
			for _, v := range r.pvals {
				srcs = append(srcs, v)
			}
			gs := tensor.NewGradientTape().Gradient(target, srcs...)
			for j, p := range r.params {
				if gs[1+j] == nil || !e.params[p].Trainable {
					continue
				}
				if pg[p] == nil {
					pg[p] = gs[1+j]
				} else {
					pg[p] = tensor.Add(pg[p], gs[1+j])
				}
			}
			g = gs[0]
		case recGather:
			g, err = dc.reduceScatterCols(g)
		case recSlice:
			g, err = padCols(g, dc.k, e.nm)
		case recAllReduce:
			g, err = dc.allReduce(g)
		case recReduceScatter:
			g, err = dc.gatherCols(g)
		}
		if err != nil {
			return nil, err
		}
		if g == nil {
			g = tensor.Zeros(r.in.Shape()...)
		}
	}
	// Synchronize: sharded parameters over the batch axis, replicated ones over the mesh.
	var shardedIdx, replIdx []int
	for p := range pg {
		if !e.params[p].Trainable {
			continue
		}
		if pg[p] == nil {
			pg[p] = tensor.Zeros(dc.vars[p].Shape()...)
		}
		if e.split[p] >= 0 {
			shardedIdx = append(shardedIdx, p)
		} else {
			replIdx = append(replIdx, p)
		}
	}
	if err := dc.sumGrads(pg, shardedIdx, dc.c.batch[dc.d], "grads-sharded"); err != nil {
		return nil, err
	}
	if err := dc.sumGrads(pg, replIdx, dc.c.all[dc.d], "grads-replicated"); err != nil {
		return nil, err
	}
	return pg, nil
}

// sumGrads all-reduces (sum) the gradients idx of pg in one buffer over t.
func (dc *devCtx) sumGrads(pg []*tensor.Tensor, idx []int, t collective.Transport, what string) error {
	if len(idx) == 0 || t.Size() == 1 {
		return nil
	}
	var buf []float32
	for _, p := range idx {
		buf = append(buf, pg[p].Data()...)
	}
	if err := collective.AllReduce(dc.ctx, t, buf, collective.Sum, dc.tag(what)); err != nil {
		return fmt.Errorf("mesh: all-reduce %s: %w", what, err)
	}
	off := 0
	for _, p := range idx {
		n := pg[p].Size()
		pg[p] = tensor.MustNew(pg[p].Shape(), buf[off:off+n])
		off += n
	}
	return nil
}
