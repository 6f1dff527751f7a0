// Package data is a tf.data-like input pipeline: a Dataset yields Elements (tuples of
// tensors such as images and labels) through sources (FromTensorSlices, FromTensors,
// FromElements, Range) and transformations (Map, Filter, Shuffle, Batch, Unbatch, Repeat,
// Take, Skip, Cache, Prefetch, Shard, Zip).
//
// Datasets are immutable values describing a pipeline; they are re-iterable: each call to
// Iterator starts a fresh pass over the data. An Iterator is used by one goroutine and must be
// closed (Close stops the background goroutines Prefetch starts).
//
// The transformations panic with an error wrapping ErrArgument or ErrShape on bad input
// (a batch size of zero, tensors whose first dimensions differ); the message names the input.
// A notebook shows such a panic as a Jupyter error; library code that must not panic calls
// the error-returning forms (NewFromTensorSlices) or recovers at its API boundary.
package data

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"

	"godist/distlib/tensor"
)

// ErrArgument reports an invalid argument to a dataset constructor or transformation.
var ErrArgument = errors.New("data: invalid argument")

// ErrShape reports tensors whose shapes do not fit together (slicing, batching, zipping).
var ErrShape = errors.New("data: shape mismatch")

// Cardinality values with special meaning, as in tf.data.
const (
	// InfiniteCardinality is the cardinality of a dataset that never ends (Repeat(-1)).
	InfiniteCardinality = -1
	// UnknownCardinality is the cardinality of a dataset whose length is not known without
	// iterating it (after Filter, for instance).
	UnknownCardinality = -2
)

// Element is one item of a dataset: a tuple of tensors, such as (images, labels).
type Element []*tensor.Tensor

// iterator is the internal protocol every dataset node implements: next returns the next
// element or false at the end; close releases resources and closes the inputs.
type iterator interface {
	next() (Element, bool)
	close()
}

// Dataset is an immutable, re-iterable description of an input pipeline.
type Dataset struct {
	kind string          // "TensorSliceDataset", "BatchDataset", ... (for String)
	card int             // number of elements, or InfiniteCardinality / UnknownCardinality
	opts Options         // pipeline options, inherited by derived datasets
	open func() iterator // starts a fresh pass

	specOnce sync.Once
	specFn   func() []TensorSpec
	spec     []TensorSpec
}

// derive returns a new dataset node that inherits d's options.
func (d *Dataset) derive(kind string, card int, spec func() []TensorSpec, open func() iterator) *Dataset {
	return &Dataset{kind: kind, card: card, opts: d.opts, open: open, specFn: spec}
}

// sameSpec returns a spec function that reports d's element spec.
func (d *Dataset) sameSpec() func() []TensorSpec { return d.ElementSpec }

// Cardinality returns the number of elements the dataset yields, InfiniteCardinality (-1)
// or UnknownCardinality (-2), like tf.data.Dataset.cardinality.
func (d *Dataset) Cardinality() int { return d.card }

// Options returns the dataset's options (set by WithOptions on it or on an input).
func (d *Dataset) Options() Options { return d.opts }

// ElementSpec describes the shape of each component of an element; a dimension of -1 is
// unknown (printed None). It is nil when the pipeline yields no element to look at (a Map
// over an empty dataset). For a Map it runs the pipeline for one element, once.
func (d *Dataset) ElementSpec() []TensorSpec {
	d.specOnce.Do(func() {
		if d.specFn != nil {
			d.spec = d.specFn()
		}
	})
	if d.spec == nil {
		return nil
	}
	out := make([]TensorSpec, len(d.spec))
	for i, s := range d.spec {
		out[i] = TensorSpec{Shape: cloneShape(s.Shape), Dtype: s.Dtype}
	}
	return out
}

// cloneShape copies a shape keeping nil (unknown rank) apart from empty (a scalar).
func cloneShape(s []int) []int {
	if s == nil {
		return nil
	}
	return append([]int{}, s...)
}

// String formats the dataset as TensorFlow prints one:
// <BatchDataset element_spec=(TensorSpec(shape=(None, 28, 28, 1), dtype=tf.float32, name=None), ...)>.
func (d *Dataset) String() string {
	spec := d.ElementSpec()
	var b strings.Builder
	b.WriteString("<")
	b.WriteString(d.kind)
	b.WriteString(" element_spec=")
	switch {
	case spec == nil:
		b.WriteString("unknown")
	case len(spec) == 1:
		b.WriteString(spec[0].String())
	default:
		b.WriteString("(")
		for i, s := range spec {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(s.String())
		}
		b.WriteString(")")
	}
	b.WriteString(">")
	return b.String()
}

// Iterator starts a new pass over the dataset. Close it when done (reading to the end closes
// it too) so that background goroutines stop. An iterator dropped without Close (a notebook
// cell interrupted mid-loop) is closed when the garbage collector finds it unreachable.
func (d *Dataset) Iterator() *Iterator {
	inner := d.open()
	it := &Iterator{it: inner, state: &iterState{}}
	runtime.AddCleanup(it, func(st *iterState) {
		st.mu.Lock()
		defer st.mu.Unlock()
		if !st.closed {
			st.closed = true
			go st.inner.close()
		}
	}, it.state)
	it.state.inner = inner
	return it
}

// iterState is what the cleanup of an unreachable Iterator needs (not the Iterator itself).
type iterState struct {
	mu     sync.Mutex
	closed bool
	inner  iterator
}

// Iterator yields the elements of one pass over a dataset. It is not safe for concurrent use.
type Iterator struct {
	it     iterator
	closed bool
	state  *iterState
}

// Next returns the next element and true, or nil and false at the end of the data or after
// Close. A panic in a Map or Filter function, or a shape error while batching, is raised
// here, in the caller's goroutine, even when it happened in a Prefetch goroutine.
func (it *Iterator) Next() (Element, bool) {
	if it.closed {
		return nil, false
	}
	el, ok := it.it.next()
	if !ok {
		it.Close()
		return nil, false
	}
	return el, true
}

// NextRows is Next for a worker that trains on some rows of every batch, as the workers
// of a multi-worker Fit do with AutoShardData: rows(count) gives the rows [lo, hi) it keeps
// of the next batch, which has count elements. Where the pipeline ends in Batch (options
// set after it change nothing), only those rows are stacked, though every element is read
// and checked as Batch checks it; el then has hi-lo rows. Elsewhere el is the whole batch,
// as Next returns it (rows is not called), with count its rows. ok is false at the end.
func (it *Iterator) NextRows(rows func(count int) (lo, hi int)) (el Element, count int, ok bool) {
	if it.closed {
		return nil, 0, false
	}
	r, can := it.it.(interface {
		nextRows(rows func(count int) (lo, hi int)) (Element, int, bool)
	})
	if !can {
		if el, ok = it.Next(); !ok {
			return nil, 0, false
		}
		if len(el) > 0 && el[0] != nil && el[0].Rank() > 0 {
			count = el[0].Shape()[0]
		}
		return el, count, true
	}
	if el, count, ok = r.nextRows(rows); !ok {
		it.Close()
		return nil, 0, false
	}
	return el, count, true
}

// Recycle hands back an element that Next or NextRows returned, once the caller is done
// with it: the iterator may write a later element into its tensors' storage, so neither
// they nor anything that shares their data may be read or written afterwards. Where the
// pipeline ends in Batch, or in Batch then Prefetch (options set after them change
// nothing), a later batch reuses that storage instead of allocating its own (Fit does this
// after each step, so that a training loop leaves next to no garbage for its batches);
// elsewhere Recycle does nothing, since an element from a Map, a Cache or the tensors of
// FromTensorSlices may share storage that is still in use.
func (it *Iterator) Recycle(el Element) {
	if r, ok := it.it.(recycler); ok && !it.closed {
		r.recycle(el)
	}
}

// recycler is an iterator that takes back the storage of the elements it gave (Recycle).
type recycler interface {
	recycle(el Element)
}

// Close ends the pass and stops the pipeline's background goroutines, waiting for them to
// exit. It is safe to call more than once.
func (it *Iterator) Close() {
	if it.closed {
		return
	}
	it.closed = true
	if it.state == nil {
		it.it.close()
		return
	}
	it.state.mu.Lock()
	already := it.state.closed
	it.state.closed = true
	it.state.mu.Unlock()
	if !already {
		it.it.close()
	}
}

// Collect reads the whole dataset into memory; it panics on an infinite dataset.
func (d *Dataset) Collect() []Element {
	if d.card == InfiniteCardinality {
		panic(fmt.Errorf("%w: Collect of an infinite dataset (%s); use Take first", ErrArgument, d.kind))
	}
	it := d.Iterator()
	defer it.Close()
	var out []Element
	for {
		el, ok := it.Next()
		if !ok {
			return out
		}
		out = append(out, el)
		if d.card >= 0 {
			checkGrowth("Collect", "result", len(out), d.card, el)
		}
	}
}

// TensorSpec describes one component of an element: its shape (-1 for an unknown
// dimension; a nil Shape means the rank is unknown, an empty one a scalar) and dtype.
type TensorSpec struct {
	Shape []int
	Dtype string
}

// String formats the spec as TensorFlow does: TensorSpec(shape=(None, 28), dtype=tf.float32, name=None).
func (s TensorSpec) String() string {
	return "TensorSpec(shape=" + FormatShape(s.Shape) + ", dtype=tf." + s.Dtype + ", name=None)"
}

// FormatShape formats a shape as a Python tuple, with None for unknown (-1) dimensions:
// (None, 28, 28, 1), (10,), (). A nil shape (unknown rank) is <unknown>.
func FormatShape(shape []int) string {
	if shape == nil {
		return "<unknown>"
	}
	var b strings.Builder
	b.WriteString("(")
	for i, d := range shape {
		if i > 0 {
			b.WriteString(", ")
		}
		if d < 0 {
			b.WriteString("None")
		} else {
			fmt.Fprint(&b, d)
		}
	}
	if len(shape) == 1 {
		b.WriteString(",")
	}
	b.WriteString(")")
	return b.String()
}

// specOf returns the spec of a concrete element.
func specOf(el Element) []TensorSpec {
	out := make([]TensorSpec, len(el))
	for i, t := range el {
		out[i] = TensorSpec{Shape: cloneShape(append([]int{}, t.Shape()...)), Dtype: "float32"}
	}
	return out
}

// funcIter adapts closures to the iterator interface.
type funcIter struct {
	nextFn  func() (Element, bool)
	closeFn func()
}

func (f *funcIter) next() (Element, bool) { return f.nextFn() }
func (f *funcIter) close() {
	if f.closeFn != nil {
		f.closeFn()
	}
}
