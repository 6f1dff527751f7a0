package data

import (
	"fmt"

	"godist/distlib/tensor"
)

// NewFromTensorSlices is FromTensorSlices returning an error instead of panicking: the
// tensors must be at least rank 1 and share their first dimension; the error names the shapes.
func NewFromTensorSlices(ts ...*tensor.Tensor) (*Dataset, error) {
	if len(ts) == 0 {
		return nil, fmt.Errorf("%w: FromTensorSlices needs at least one tensor", ErrArgument)
	}
	shapes := make([][]int, len(ts))
	for i, t := range ts {
		if t == nil {
			return nil, fmt.Errorf("%w: FromTensorSlices: tensor %d is nil", ErrArgument, i)
		}
		shapes[i] = t.Shape()
		if len(shapes[i]) == 0 {
			return nil, fmt.Errorf("%w: FromTensorSlices: tensor %d is a scalar (shape ()); slicing needs rank >= 1", ErrShape, i)
		}
	}
	n := shapes[0][0]
	for i := range shapes {
		if shapes[i][0] != n {
			return nil, fmt.Errorf("%w: FromTensorSlices: first dimensions differ: shapes %s; all tensors must have the same size along axis 0",
				ErrShape, formatShapes(shapes))
		}
	}
	specs := make([]TensorSpec, len(ts))
	for i := range ts {
		specs[i] = TensorSpec{Shape: shapes[i][1:], Dtype: "float32"}
	}
	tensors := append([]*tensor.Tensor(nil), ts...)
	d := &Dataset{kind: "TensorSliceDataset", card: n, specFn: func() []TensorSpec { return specs }}
	d.open = func() iterator { return &sliceIter{tensors: tensors, n: n} }
	return d, nil
}

// sliceIter is FromTensorSlices' iterator: element i holds row i of every tensor. A Batch
// right after it takes whole runs of rows (takeRows, rows): one copy per tensor and batch
// instead of an element (a view of a row of each tensor) per row, and, when a worker keeps
// only some rows of every batch (Iterator.NextRows), nothing done for the others.
type sliceIter struct {
	tensors []*tensor.Tensor
	i, n    int // the next row, the number of rows
}

func (s *sliceIter) next() (Element, bool) {
	if s.i >= s.n {
		return nil, false
	}
	el := make(Element, len(s.tensors))
	for k, t := range s.tensors {
		el[k] = sliceRow(t, s.i)
	}
	s.i++
	return el, true
}

func (s *sliceIter) close() {}

// takeRows moves past the next k rows (fewer at the end) and returns their range.
func (s *sliceIter) takeRows(k int) (lo, hi int) {
	lo = s.i
	s.i = min(s.n, s.i+k)
	return lo, s.i
}

// rows returns rows [lo, hi) of every tensor stacked, as Stack of those elements gives them
// (copies, not views), in spare's storage where it has room (see storage).
func (s *sliceIter) rows(lo, hi int, spare Element) Element {
	el := make(Element, len(s.tensors))
	for k, t := range s.tensors {
		shape := t.Shape()
		stride := 1
		for _, d := range shape[1:] {
			stride *= d
		}
		shape[0] = hi - lo
		buf := storage(spare, k, (hi-lo)*stride)
		copy(buf, t.Data()[lo*stride:hi*stride])
		el[k] = tensor.MustNew(shape, buf)
	}
	return el
}

// FromTensorSlices returns a dataset whose i-th element holds the i-th slice along axis 0 of
// each tensor, like tf.data.Dataset.from_tensor_slices((x, y)). The slices share the tensors'
// storage. It panics with an error wrapping ErrShape when the first dimensions differ (see
// NewFromTensorSlices for the error-returning form).
func FromTensorSlices(ts ...*tensor.Tensor) *Dataset {
	d, err := NewFromTensorSlices(ts...)
	if err != nil {
		panic(err)
	}
	return d
}

// FromTensors returns a dataset of one element made of the given tensors, like
// tf.data.Dataset.from_tensors((x, y)); combine with Repeat and Batch.
func FromTensors(ts ...*tensor.Tensor) *Dataset {
	return FromElements(Element(ts)).rename("TensorDataset")
}

// FromElements returns a dataset that yields the given elements in order. All elements must
// have the same number of components; it panics with an error wrapping ErrArgument otherwise.
func FromElements(els ...Element) *Dataset {
	if len(els) > 0 {
		for i, el := range els {
			if len(el) != len(els[0]) {
				panic(fmt.Errorf("%w: FromElements: element %d has %d components, element 0 has %d", ErrArgument, i, len(el), len(els[0])))
			}
			for k, t := range el {
				if t == nil {
					panic(fmt.Errorf("%w: FromElements: component %d of element %d is nil", ErrArgument, k, i))
				}
			}
		}
	}
	stored := make([]Element, len(els))
	for i, el := range els {
		stored[i] = append(Element(nil), el...)
	}
	d := &Dataset{kind: "ElementsDataset", card: len(stored), specFn: func() []TensorSpec { return mergeSpecs(stored) }}
	d.open = func() iterator { return newSliceIter(stored) }
	return d
}

// Range returns a dataset of scalar float32 values like Python's range:
// Range(stop), Range(start, stop) or Range(start, stop, step). It panics when given no
// argument, more than three, or a zero step.
func Range(args ...int) *Dataset {
	start, stop, step := 0, 0, 1
	switch len(args) {
	case 1:
		stop = args[0]
	case 2:
		start, stop = args[0], args[1]
	case 3:
		start, stop, step = args[0], args[1], args[2]
	default:
		panic(fmt.Errorf("%w: Range takes 1 to 3 arguments (stop | start, stop | start, stop, step), got %d", ErrArgument, len(args)))
	}
	if step == 0 {
		panic(fmt.Errorf("%w: Range: step must not be zero", ErrArgument))
	}
	n := 0
	if step > 0 && stop > start {
		n = (stop - start + step - 1) / step
	} else if step < 0 && stop < start {
		n = (start - stop - step - 1) / -step
	}
	d := &Dataset{kind: "RangeDataset", card: n, specFn: func() []TensorSpec {
		return []TensorSpec{{Shape: []int{}, Dtype: "float32"}}
	}}
	d.open = func() iterator {
		i := 0
		return &funcIter{nextFn: func() (Element, bool) {
			if i >= n {
				return nil, false
			}
			v := start + i*step
			i++
			return Element{tensor.Scalar(float32(v))}, true
		}}
	}
	return d
}

// rename returns a shallow copy with another kind name (for String).
func (d *Dataset) rename(kind string) *Dataset {
	return &Dataset{kind: kind, card: d.card, opts: d.opts, open: d.open, specFn: d.specFn}
}

// sliceRow returns row i (along axis 0) of t, sharing its storage.
func sliceRow(t *tensor.Tensor, i int) *tensor.Tensor {
	shape := t.Shape()
	stride := 1
	for _, s := range shape[1:] {
		stride *= s
	}
	return tensor.MustNew(shape[1:], t.Data()[i*stride:(i+1)*stride])
}

func newSliceIter(els []Element) iterator {
	i := 0
	return &funcIter{nextFn: func() (Element, bool) {
		if i >= len(els) {
			return nil, false
		}
		el := append(Element(nil), els[i]...)
		i++
		return el, true
	}}
}

// mergeSpecs returns the spec common to els: dimensions that differ become -1 (unknown),
// components whose ranks differ get a nil shape of unknown rank. nil when els is empty.
func mergeSpecs(els []Element) []TensorSpec {
	if len(els) == 0 {
		return nil
	}
	spec := specOf(els[0])
	for _, el := range els[1:] {
		for k, t := range el {
			s := t.Shape()
			if spec[k].Shape == nil || len(s) != len(spec[k].Shape) {
				spec[k].Shape = nil
				continue
			}
			for j := range s {
				if s[j] != spec[k].Shape[j] {
					spec[k].Shape[j] = -1
				}
			}
		}
	}
	return spec
}

func formatShapes(shapes [][]int) string {
	s := ""
	for i, sh := range shapes {
		if i > 0 {
			s += ", "
		}
		s += FormatShape(sh)
	}
	return s
}
