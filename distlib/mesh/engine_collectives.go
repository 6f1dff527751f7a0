package mesh

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"

	"godist/distlib/collective"
	"godist/distlib/tensor"
)

// tagName returns a tag of its own for the next collective of this device; devices of a
// group call the same collectives in the same order, so they agree on it.
func (dc *devCtx) tagName(what string) string {
	dc.ncoll++
	return fmt.Sprintf("mesh/%s/%d", what, dc.ncoll)
}

func (dc *devCtx) tag(what string) collective.Option { return collective.Tag(dc.tagName(what)) }

func (dc *devCtx) allReduce(t *tensor.Tensor) (*tensor.Tensor, error) {
	buf := append([]float32(nil), t.Data()...)
	if err := collective.AllReduce(dc.ctx, dc.c.model[dc.d], buf, collective.Sum, dc.tag("allreduce")); err != nil {
		return nil, fmt.Errorf("mesh: all-reduce over the model axis: %w", err)
	}
	return tensor.New(t.Shape(), buf)
}

// gatherCols all-gathers the feature blocks of the model axis: (rows, c) -> (rows, c*M).
func (dc *devCtx) gatherCols(t *tensor.Tensor) (*tensor.Tensor, error) {
	parts, err := collective.AllGather(dc.ctx, dc.c.model[dc.d], t.Data(), dc.tag("allgather"))
	if err != nil {
		return nil, fmt.Errorf("mesh: all-gather over the model axis: %w", err)
	}
	shape := t.Shape()
	last := len(shape) - 1
	c := shape[last]
	rows := t.Size() / max(c, 1)
	m := len(parts)
	out := make([]float32, 0, t.Size()*m)
	for r := 0; r < rows; r++ {
		for _, p := range parts {
			if len(p) != len(t.Data()) {
				return nil, errorf("Engine", "all-gather: a peer sent %d values, this device has %d", len(p), len(t.Data()))
			}
			out = append(out, p[r*c:(r+1)*c]...)
		}
	}
	shape[last] = c * m
	return tensor.New(shape, out)
}

// reduceScatterCols sums t over the model axis and keeps this device's feature block:
// (rows, C) -> (rows, C/M), with a ring reduce-scatter.
func (dc *devCtx) reduceScatterCols(t *tensor.Tensor) (*tensor.Tensor, error) {
	m := dc.e.nm
	shape := t.Shape()
	last := len(shape) - 1
	C := shape[last]
	if C%m != 0 {
		return nil, errorf("Engine", "reduce-scatter: %d features do not split over %d devices", C, m)
	}
	c := C / m
	rows := t.Size() / max(C, 1)
	// Lay the blocks out one after another so that segment j is device j's block.
	buf := make([]float32, 0, t.Size())
	data := t.Data()
	for j := 0; j < m; j++ {
		for r := 0; r < rows; r++ {
			buf = append(buf, data[r*C+j*c:r*C+(j+1)*c]...)
		}
	}
	seg, err := reduceScatter(dc.ctx, dc.c.model[dc.d], buf, dc.tagName("reducescatter"))
	if err != nil {
		return nil, fmt.Errorf("mesh: reduce-scatter over the model axis: %w", err)
	}
	shape[last] = c
	return tensor.New(shape, seg)
}

// sliceCols returns block k of m of t's last dimension.
func sliceCols(t *tensor.Tensor, k, m int) (*tensor.Tensor, error) {
	shape := t.Shape()
	last := len(shape) - 1
	if shape[last]%m != 0 {
		return nil, errorf("Engine", "cannot split %d features over %d devices", shape[last], m)
	}
	local := append([]int(nil), shape...)
	local[last] /= m
	off := make([]int, len(shape))
	off[last] = k * local[last]
	return tensor.New(local, extract(t.Data(), shape, off, local))
}

// padCols is the inverse of sliceCols with zeros elsewhere (the backward of a slice).
func padCols(g *tensor.Tensor, k, m int) (*tensor.Tensor, error) {
	shape := g.Shape()
	last := len(shape) - 1
	c := shape[last]
	full := append([]int(nil), shape...)
	full[last] = c * m
	out := make([]float32, g.Size()*m)
	rows := g.Size() / max(c, 1)
	data := g.Data()
	for r := 0; r < rows; r++ {
		copy(out[r*c*m+k*c:], data[r*c:(r+1)*c])
	}
	return tensor.New(full, out)
}

// reduceScatter sums buf (the same length on every rank, a multiple of the group size)
// over t's ranks and returns rank r's segment r of the sum, with a ring: at step s rank r
// sends its running sum of segment r-s-1 to the right and adds what the left sends into
// segment r-s-2; after n-1 steps segment r holds every rank's contribution. The
// collective package's all-reduce does this internally but does not export it.
func reduceScatter(ctx context.Context, t collective.Transport, buf []float32, tag string) ([]float32, error) {
	n, r := t.Size(), t.Rank()
	if len(buf)%n != 0 {
		return nil, errorf("reduceScatter", "buffer of %d values does not split into %d segments", len(buf), n)
	}
	seg := len(buf) / n
	part := func(i int) []float32 { i = ((i % n) + n) % n; return buf[i*seg : (i+1)*seg] }
	if n == 1 {
		return append([]float32(nil), buf...), nil
	}
	right, left := (r+1)%n, (r-1+n)%n
	for s := 0; s < n-1; s++ {
		if err := t.Send(ctx, right, tag, encodeF32(part(r-s-1))); err != nil {
			return nil, err
		}
		b, err := t.Recv(ctx, left, tag)
		if err != nil {
			return nil, err
		}
		dst := part(r - s - 2)
		if len(b) != 4*len(dst) {
			return nil, errorf("reduceScatter", "rank %d sent %d bytes, want %d", left, len(b), 4*len(dst))
		}
		for i, v := range decodeF32(b) {
			dst[i] += v
		}
	}
	return append([]float32(nil), part(r)...), nil
}

func encodeF32(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func decodeF32(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}
