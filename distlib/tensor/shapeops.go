package tensor

import (
	"sort"

	gt "gorgonia.org/tensor"
)

// The generic, non-hot ops (transpose, concatenation, axis reductions, argmax) run on
// gorgonia.org/tensor: each *Tensor is viewed as a gt.Dense over the same []float32 without
// copying.

// dense returns a gorgonia view of t (shares storage; callers must not write through it).
func dense(t *Tensor) *gt.Dense {
	shape := t.shape
	if len(shape) == 0 {
		shape = []int{1}
	}
	return gt.New(gt.WithShape(append([]int(nil), shape...)...), gt.WithBacking(t.data))
}

// fromDense copies a gorgonia result into a new tensor with the given shape.
func fromDense(op string, d gt.Tensor, shape []int, dev string) *Tensor {
	if d.RequiresIterator() || !d.IsNativelyAccessible() {
		d = gt.Materialize(d)
	}
	var data []float32
	switch v := d.Data().(type) {
	case []float32:
		data = v
	case float32:
		data = []float32{v}
	case []int:
		data = make([]float32, len(v))
		for i, x := range v {
			data[i] = float32(x)
		}
	case int:
		data = []float32{float32(v)}
	default:
		panic(argErr(op, "unexpected gorgonia result of type %T", v))
	}
	n := 1
	for _, s := range shape {
		n *= s
	}
	if len(data) != n {
		panic(shapeErr(op, "internal: result has %d values for shape %v", len(data), shape))
	}
	return &Tensor{shape: shape, data: append([]float32(nil), data...), device: dev}
}

func normAxis(op string, axis, rank int) int {
	a := axis
	if a < 0 {
		a += rank
	}
	if a < 0 || a >= rank {
		panic(argErr(op, "axis %d is out of range for a tensor of rank %d", axis, rank))
	}
	return a
}

// Reshape returns t with a new shape of the same size; one dimension may be -1 and is
// inferred. The values are shared, not copied.
func Reshape(t *Tensor, shape ...int) *Tensor {
	ns := append([]int(nil), shape...)
	infer, n := -1, 1
	for i, d := range ns {
		switch {
		case d == -1 && infer < 0:
			infer = i
		case d < 0:
			panic(shapeErr("Reshape", "shape %v has an invalid dimension %d", shape, d))
		default:
			n *= d
		}
	}
	if infer >= 0 {
		if n == 0 || len(t.data)%n != 0 {
			panic(shapeErr("Reshape", "cannot reshape %v (%d values) to %v", t.shape, len(t.data), shape))
		}
		ns[infer] = len(t.data) / n
		n *= ns[infer]
	}
	if n != len(t.data) {
		panic(shapeErr("Reshape", "cannot reshape %v (%d values) to %v (%d values)", t.shape, len(t.data), shape, n))
	}
	dev := place("Reshape", t)
	out := &Tensor{shape: ns, data: t.data, device: dev}
	return record(out, func(g *Tensor, _ []bool, _ gradDest) []*Tensor {
		return []*Tensor{{shape: t.Shape(), data: g.data, device: g.device}}
	}, t)
}

// Flatten reshapes [N, ...] to [N, rest].
func Flatten(t *Tensor) *Tensor {
	if len(t.shape) == 0 {
		panic(shapeErr("Flatten", "needs a tensor of rank >= 1"))
	}
	return Reshape(t, t.shape[0], -1)
}

// Transpose permutes the axes of t; with no perm it reverses them (a matrix transpose).
func Transpose(t *Tensor, perm ...int) *Tensor {
	r := len(t.shape)
	if len(perm) == 0 {
		perm = make([]int, r)
		for i := range perm {
			perm[i] = r - 1 - i
		}
	}
	if len(perm) != r {
		panic(argErr("Transpose", "perm %v has %d axes, the tensor has rank %d (shape %v)", perm, len(perm), r, t.shape))
	}
	seen := make([]bool, r)
	for _, p := range perm {
		if p < 0 || p >= r || seen[p] {
			panic(argErr("Transpose", "perm %v is not a permutation of 0..%d", perm, r-1))
		}
		seen[p] = true
	}
	dev := place("Transpose", t)
	out := transposeRaw(t, perm, dev)
	return record(out, func(g *Tensor, _ []bool, _ gradDest) []*Tensor {
		inv := make([]int, r)
		for i, p := range perm {
			inv[p] = i
		}
		return []*Tensor{transposeRaw(g, inv, g.device)}
	}, t)
}

func transposeRaw(t *Tensor, perm []int, dev string) *Tensor {
	shape := make([]int, len(perm))
	for i, p := range perm {
		shape[i] = t.shape[p]
	}
	if len(t.shape) < 2 || len(t.data) <= 1 {
		return &Tensor{shape: shape, data: append([]float32(nil), t.data...), device: dev}
	}
	if len(perm) == 2 && perm[0] == 1 {
		out := newOn(dev, shape)
		transpose2D(t.data, out.data, t.shape[0], t.shape[1])
		return out
	}
	d := dense(t)
	res, err := gt.Transpose(d, perm...)
	if err != nil {
		panic(argErr("Transpose", "%v", err))
	}
	return fromDense("Transpose", res, shape, dev)
}

// transpose2D writes the transpose of the rows x cols matrix src into dst, in cache blocks.
func transpose2D(src, dst []float32, rows, cols int) {
	const bs = 32
	for i0 := 0; i0 < rows; i0 += bs {
		i1 := min(i0+bs, rows)
		for j0 := 0; j0 < cols; j0 += bs {
			j1 := min(j0+bs, cols)
			for i := i0; i < i1; i++ {
				row := src[i*cols : i*cols+cols]
				for j := j0; j < j1; j++ {
					dst[j*rows+i] = row[j]
				}
			}
		}
	}
}

// Concat joins tensors along an axis; all other dimensions must agree.
func Concat(axis int, ts ...*Tensor) *Tensor {
	if len(ts) == 0 {
		panic(argErr("ConcatV2", "needs at least one tensor"))
	}
	r := len(ts[0].shape)
	if r == 0 {
		panic(shapeErr("ConcatV2", "cannot concatenate scalars"))
	}
	ax := normAxis("ConcatV2", axis, r)
	shape := ts[0].Shape()
	sizes := make([]int, len(ts))
	shape[ax] = 0
	for i, t := range ts {
		if len(t.shape) != r {
			panic(shapeErr("ConcatV2", "tensor %d has shape %v, tensor 0 has %v", i, t.shape, ts[0].shape))
		}
		for d := range t.shape {
			if d != ax && t.shape[d] != ts[0].shape[d] {
				panic(shapeErr("ConcatV2", "tensor %d has shape %v, tensor 0 has %v: they differ off axis %d", i, t.shape, ts[0].shape, ax))
			}
		}
		sizes[i] = t.shape[ax]
		shape[ax] += t.shape[ax]
	}
	dev := place("ConcatV2", ts[0])
	var out *Tensor
	if len(ts) == 1 {
		out = &Tensor{shape: shape, data: append([]float32(nil), ts[0].data...), device: dev}
	} else {
		others := make([]gt.Tensor, 0, len(ts)-1)
		for _, t := range ts[1:] {
			others = append(others, dense(t))
		}
		res, err := gt.Concat(ax, dense(ts[0]), others...)
		if err != nil {
			panic(shapeErr("ConcatV2", "%v", err))
		}
		out = fromDense("ConcatV2", res, shape, dev)
	}
	return record(out, func(g *Tensor, need []bool, _ gradDest) []*Tensor {
		return splitRaw(g, ax, sizes)
	}, ts...)
}

// splitRaw cuts t along axis into pieces of the given sizes.
func splitRaw(t *Tensor, ax int, sizes []int) []*Tensor {
	outer, inner := 1, 1
	for _, d := range t.shape[:ax] {
		outer *= d
	}
	for _, d := range t.shape[ax+1:] {
		inner *= d
	}
	out := make([]*Tensor, len(sizes))
	start := 0
	for i, s := range sizes {
		shape := t.Shape()
		shape[ax] = s
		p := newOn(t.device, shape)
		for o := 0; o < outer; o++ {
			copy(p.data[o*s*inner:(o+1)*s*inner], t.data[(o*t.shape[ax]+start)*inner:(o*t.shape[ax]+start+s)*inner])
		}
		out[i] = p
		start += s
	}
	return out
}

// Split cuts t along axis into num equal pieces (tf.split with a number).
func Split(t *Tensor, num, axis int) []*Tensor {
	if len(t.shape) == 0 {
		panic(shapeErr("Split", "cannot split a scalar"))
	}
	ax := normAxis("Split", axis, len(t.shape))
	if num <= 0 || t.shape[ax]%num != 0 {
		panic(argErr("Split", "cannot split dimension %d of size %d into %d equal pieces", ax, t.shape[ax], num))
	}
	sizes := make([]int, num)
	for i := range sizes {
		sizes[i] = t.shape[ax] / num
	}
	dev := place("Split", t)
	parts := splitRaw(&Tensor{shape: t.shape, data: t.data, device: dev}, ax, sizes)
	if !tracked(t) {
		return parts
	}
	// Each part's gradient goes back into its slot of t.
	for i, p := range parts {
		i := i
		p.node = &node{inputs: []*Tensor{t}, backward: func(g *Tensor, _ []bool, _ gradDest) []*Tensor {
			pieces := make([]*Tensor, num)
			for j := range pieces {
				if j == i {
					pieces[j] = g
				} else {
					pieces[j] = newOn(g.device, g.Shape())
				}
			}
			return []*Tensor{concatRaw(ax, pieces, g.device)}
		}}
	}
	return parts
}

func concatRaw(ax int, ts []*Tensor, dev string) *Tensor {
	shape := ts[0].Shape()
	shape[ax] = 0
	for _, t := range ts {
		shape[ax] += t.shape[ax]
	}
	out := newOn(dev, shape)
	outer, inner := 1, 1
	for _, d := range shape[:ax] {
		outer *= d
	}
	for _, d := range shape[ax+1:] {
		inner *= d
	}
	pos := 0
	for o := 0; o < outer; o++ {
		for _, t := range ts {
			n := t.shape[ax] * inner
			copy(out.data[pos:pos+n], t.data[o*n:(o+1)*n])
			pos += n
		}
	}
	return out
}

// reduceAxes normalizes axes (none means all) and returns them sorted, plus the kept shape
// (reduced axes set to 1) and the result shape (reduced axes dropped).
func reduceAxes(op string, t *Tensor, axes []int) (ax []int, keep, out []int) {
	r := len(t.shape)
	if len(axes) == 0 {
		for i := 0; i < r; i++ {
			ax = append(ax, i)
		}
	} else {
		seen := map[int]bool{}
		for _, a := range axes {
			n := normAxis(op, a, r)
			if seen[n] {
				panic(argErr(op, "axis %d appears twice in %v", a, axes))
			}
			seen[n] = true
			ax = append(ax, n)
		}
		sort.Ints(ax)
	}
	keep = t.Shape()
	out = []int{}
	j := 0
	for i := range keep {
		if j < len(ax) && ax[j] == i {
			keep[i] = 1
			j++
		} else {
			out = append(out, t.shape[i])
		}
	}
	return ax, keep, out
}

// ReduceSum sums t over the given axes (all axes when none are given), dropping them.
// Negative axes count from the end.
func ReduceSum(t *Tensor, axes ...int) *Tensor {
	ax, keep, shape := reduceAxes("Sum", t, axes)
	dev := place("Sum", t)
	out := reduceSumRaw(t, ax, keep, shape, dev)
	return record(out, func(g *Tensor, _ []bool, _ gradDest) []*Tensor {
		return []*Tensor{broadcastTo(&Tensor{shape: keep, data: g.data, device: g.device}, t.shape)}
	}, t)
}

func reduceSumRaw(t *Tensor, ax, keep, shape []int, dev string) *Tensor {
	if len(ax) == 0 {
		return &Tensor{shape: shape, data: append([]float32(nil), t.data...), device: dev}
	}
	if len(ax) == len(t.shape) {
		var s float64
		for _, v := range t.data {
			s += float64(v)
		}
		return &Tensor{shape: shape, data: []float32{float32(s)}, device: dev}
	}
	// gorgonia reduces one axis at a time, highest first so lower indices stay valid.
	d := dense(t)
	var cur gt.Tensor = d
	for i := len(ax) - 1; i >= 0; i-- {
		res, err := gt.Sum(cur, ax[i])
		if err != nil {
			panic(argErr("Sum", "%v", err))
		}
		cur = res
	}
	return fromDense("Sum", cur, shape, dev)
}

// broadcastTo expands t (same rank, size-1 axes) to shape.
func broadcastTo(t *Tensor, shape []int) *Tensor {
	return binaryRaw(opAdd, &Tensor{shape: append([]int(nil), shape...), data: floats("BroadcastTo", shape, prod(shape)), device: t.device}, t, t.device)
}

func prod(s []int) int {
	n := 1
	for _, d := range s {
		n *= d
	}
	return n
}

// ReduceMean averages t over the given axes (all when none are given), dropping them.
func ReduceMean(t *Tensor, axes ...int) *Tensor {
	ax, _, _ := reduceAxes("Mean", t, axes)
	n := 1
	for _, a := range ax {
		n *= t.shape[a]
	}
	s := ReduceSum(t, axes...)
	if n == 0 {
		return s
	}
	return Scale(s, 1/float32(n))
}

// ReduceMax takes the maximum of t over the given axes (all when none are given), dropping
// them. The gradient is shared equally among tied maxima, as in TensorFlow.
func ReduceMax(t *Tensor, axes ...int) *Tensor {
	if len(t.data) == 0 {
		panic(shapeErr("Max", "cannot take the maximum of an empty tensor of shape %v", t.shape))
	}
	ax, keep, shape := reduceAxes("Max", t, axes)
	dev := place("Max", t)
	var out *Tensor
	if len(ax) == len(t.shape) {
		m := t.data[0]
		for _, v := range t.data {
			m = max(m, v)
		}
		out = &Tensor{shape: shape, data: []float32{m}, device: dev}
	} else {
		cur := dense(t)
		for i := len(ax) - 1; i >= 0; i-- {
			res, err := cur.Max(ax[i])
			if err != nil {
				panic(argErr("Max", "%v", err))
			}
			cur = res
		}
		out = fromDense("Max", cur, shape, dev)
	}
	return record(out, func(g *Tensor, _ []bool, _ gradDest) []*Tensor {
		m := &Tensor{shape: keep, data: out.data, device: dev}
		mask := binaryRaw(opEq, t, m, dev)
		cnt := reduceSumRaw(mask, ax, keep, shape, dev)
		gk := &Tensor{shape: keep, data: binaryRaw(opDiv, g, cnt, dev).data, device: dev}
		return []*Tensor{binaryRaw(opMul, mask, gk, dev)}
	}, t)
}

// ArgMax returns the index of the maximum along axis (the first one on ties), as float32
// values, dropping the axis. It has no gradient.
func ArgMax(t *Tensor, axis int) *Tensor {
	if len(t.shape) == 0 {
		panic(shapeErr("ArgMax", "needs a tensor of rank >= 1"))
	}
	ax := normAxis("ArgMax", axis, len(t.shape))
	if t.shape[ax] == 0 {
		panic(shapeErr("ArgMax", "axis %d of shape %v is empty", ax, t.shape))
	}
	dev := place("ArgMax", t)
	shape := append(append([]int{}, t.shape[:ax]...), t.shape[ax+1:]...)
	res, err := dense(t).Argmax(ax)
	if err != nil {
		panic(argErr("ArgMax", "%v", err))
	}
	return fromDense("ArgMax", res, shape, dev)
}
