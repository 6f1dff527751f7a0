package data

import (
	"fmt"
	"unsafe"

	"godist/distlib/tensor"
	"godist/internal/memlimit"
)

// Map returns a dataset that applies fn to each element of d, like tf.data's map. fn runs
// lazily during iteration (in the Prefetch goroutine when one follows); it must not modify
// its input tensors. A nil fn panics.
func (d *Dataset) Map(fn func(Element) Element) *Dataset {
	if fn == nil {
		panic(fmt.Errorf("%w: Map: nil function", ErrArgument))
	}
	out := d.derive("MapDataset", d.card, nil, func() iterator {
		in := d.open()
		return &funcIter{
			nextFn: func() (Element, bool) {
				el, ok := in.next()
				if !ok {
					return nil, false
				}
				return fn(el), true
			},
			closeFn: in.close,
		}
	})
	out.specFn = func() []TensorSpec { return firstSpec(out) }
	return out
}

// firstSpec runs d for one element and returns its spec (nil when d is empty).
func firstSpec(d *Dataset) []TensorSpec {
	it := d.Iterator()
	defer it.Close()
	el, ok := it.Next()
	if !ok {
		return nil
	}
	return specOf(el)
}

// Filter returns a dataset of the elements of d for which keep returns true. Its
// cardinality is unknown. A nil keep panics.
func (d *Dataset) Filter(keep func(Element) bool) *Dataset {
	if keep == nil {
		panic(fmt.Errorf("%w: Filter: nil predicate", ErrArgument))
	}
	card := UnknownCardinality
	if d.card == 0 {
		card = 0
	}
	return d.derive("FilterDataset", card, d.sameSpec(), func() iterator {
		in := d.open()
		return &funcIter{
			nextFn: func() (Element, bool) {
				for {
					el, ok := in.next()
					if !ok {
						return nil, false
					}
					if keep(el) {
						return el, true
					}
				}
			},
			closeFn: in.close,
		}
	})
}

// Batch returns a dataset that stacks n consecutive elements of d along a new axis 0, like
// tf.data's batch. The last batch is smaller when the data does not divide evenly, unless
// dropRemainder is true. It panics when n < 1; iteration panics with an error wrapping
// ErrShape when the elements of one batch differ in shape.
func (d *Dataset) Batch(n int, dropRemainder bool) *Dataset {
	if n < 1 {
		panic(fmt.Errorf("%w: Batch: batch size %d must be at least 1", ErrArgument, n))
	}
	checkBuffer("Batch", fmt.Sprintf("Dataset.Batch's batch of %d elements", n), n, int(unsafe.Sizeof(Element(nil))))
	card := d.card
	if card >= 0 {
		if dropRemainder {
			card /= n
		} else {
			card = (card + n - 1) / n
		}
	}
	lead := -1
	if dropRemainder {
		lead = n
	}
	spec := func() []TensorSpec {
		in := d.ElementSpec()
		if in == nil {
			return nil
		}
		for i := range in {
			if in[i].Shape != nil {
				in[i].Shape = append([]int{lead}, in[i].Shape...)
			}
		}
		return in
	}
	return d.derive("BatchDataset", card, spec, func() iterator {
		return &batchIter{in: d.open(), n: n, drop: dropRemainder, buf: make([]Element, 0, n)}
	})
}

// batchIter is Batch's iterator. It stacks every element of a batch (next), or only the
// rows one worker keeps (nextRows, see Iterator.NextRows), into the storage of the batch
// handed back last (Iterator.Recycle) when that is large enough.
type batchIter struct {
	in    iterator
	n     int
	drop  bool
	buf   []Element
	spare Element // a batch handed back (recycle), whose storage the next one takes
}

// recycle keeps el's storage for the next batch.
func (b *batchIter) recycle(el Element) { b.spare = el }

// take returns the spare batch (nil if none) for a batch to take its storage; the batch
// after it allocates again unless this one is handed back too.
func (b *batchIter) take() Element {
	s := b.spare
	b.spare = nil
	return s
}

// storage returns n float32s for component k of a batch: the spare batch's when it has a
// component k with room for them, else fresh ones.
func storage(spare Element, k, n int) []float32 {
	if k < len(spare) && spare[k] != nil && cap(spare[k].Data()) >= n {
		return spare[k].Data()[:n]
	}
	if n >= memlimit.Threshold/4 {
		checkBuffer("Batch", fmt.Sprintf("Dataset.Batch's batch component of %d float32s", n), n, 4)
	}
	return make([]float32, n)
}

// fill reads the next batch's elements into b.buf; false at the end of the data.
func (b *batchIter) fill() bool {
	b.buf = b.buf[:0]
	for len(b.buf) < b.n {
		el, ok := b.in.next()
		if !ok {
			break
		}
		b.buf = append(b.buf, el)
	}
	return len(b.buf) > 0 && !(b.drop && len(b.buf) < b.n)
}

// sliceRows takes the next batch's rows from a FromTensorSlices iterator directly: their
// range, or false at the end of the data.
func (b *batchIter) sliceRows(s *sliceIter) (lo, hi int, ok bool) {
	lo, hi = s.takeRows(b.n)
	return lo, hi, hi > lo && !(b.drop && hi-lo < b.n)
}

func (b *batchIter) next() (Element, bool) {
	if s, ok := b.in.(*sliceIter); ok {
		lo, hi, ok := b.sliceRows(s)
		if !ok {
			return nil, false
		}
		return s.rows(lo, hi, b.take()), true
	}
	if !b.fill() {
		return nil, false
	}
	el, err := stackRows(b.buf, 0, len(b.buf), b.take())
	if err != nil {
		panic(err)
	}
	return el, true
}

func (b *batchIter) nextRows(rows func(count int) (lo, hi int)) (Element, int, bool) {
	if s, ok := b.in.(*sliceIter); ok {
		first, end, ok := b.sliceRows(s)
		if !ok {
			return nil, 0, false
		}
		lo, hi := pickRows(rows, end-first)
		return s.rows(first+lo, first+hi, b.take()), end - first, true
	}
	if !b.fill() {
		return nil, 0, false
	}
	lo, hi := pickRows(rows, len(b.buf))
	el, err := stackRows(b.buf, lo, hi, b.take())
	if err != nil {
		panic(err)
	}
	return el, len(b.buf), true
}

// pickRows asks rows for the range it keeps of a batch of count and checks it.
func pickRows(rows func(count int) (lo, hi int), count int) (lo, hi int) {
	lo, hi = rows(count)
	if lo < 0 || hi < lo || hi > count {
		panic(fmt.Errorf("%w: rows [%d, %d) of a batch of %d", ErrArgument, lo, hi, count))
	}
	return lo, hi
}

func (b *batchIter) close() { b.in.close() }

// Stack stacks elements component-wise along a new axis 0: component k of the result has
// shape [len(els)] + shape of component k. The elements must have the same number of
// components and equal shapes; the error names the first mismatch.
func Stack(els []Element) (Element, error) {
	if len(els) == 0 {
		return nil, fmt.Errorf("%w: Stack of no elements", ErrArgument)
	}
	return stackRows(els, 0, len(els), nil)
}

// stackRows is Stack of els[lo:hi], checking every element of els as Stack does, into
// spare's storage where it has room (see storage).
func stackRows(els []Element, lo, hi int, spare Element) (Element, error) {
	ncomp := len(els[0])
	out := make(Element, ncomp)
	for k := 0; k < ncomp; k++ {
		shape := els[0][k].Shape()
		size := els[0][k].Size()
		buf := storage(spare, k, size*(hi-lo))[:0]
		for i, el := range els {
			if len(el) != ncomp {
				return nil, fmt.Errorf("%w: batching: element %d has %d components, element 0 has %d", ErrShape, i, len(el), ncomp)
			}
			if s := el[k].Shape(); !equalShapes(s, shape) {
				return nil, fmt.Errorf("%w: batching: component %d of element %d has shape %s, element 0 has %s; batch needs equal shapes (resize in Map first)",
					ErrShape, k, i, FormatShape(nonNil(s)), FormatShape(nonNil(shape)))
			}
			if i >= lo && i < hi {
				buf = append(buf, el[k].Data()...)
			}
		}
		t, err := tensor.New(append([]int{hi - lo}, shape...), buf)
		if err != nil {
			return nil, fmt.Errorf("data: batching component %d: %w", k, err)
		}
		out[k] = t
	}
	return out, nil
}

func nonNil(s []int) []int {
	if s == nil {
		return []int{}
	}
	return s
}

func equalShapes(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Unbatch returns a dataset that splits each element of d along axis 0 into separate
// elements, the inverse of Batch. Iteration panics with an error wrapping ErrShape when a
// component is a scalar or the components' first dimensions differ.
func (d *Dataset) Unbatch() *Dataset {
	card := UnknownCardinality
	spec := func() []TensorSpec {
		in := d.ElementSpec()
		if in == nil {
			return nil
		}
		for i := range in {
			if len(in[i].Shape) > 0 {
				in[i].Shape = in[i].Shape[1:]
			}
		}
		return in
	}
	if d.card == InfiniteCardinality || d.card == 0 {
		card = d.card
	}
	return d.derive("UnbatchDataset", card, spec, func() iterator {
		in := d.open()
		var cur Element
		pos, rows := 0, 0
		return &funcIter{
			nextFn: func() (Element, bool) {
				for pos >= rows {
					el, ok := in.next()
					if !ok {
						return nil, false
					}
					rows = -1
					for k, t := range el {
						s := t.Shape()
						if len(s) == 0 {
							panic(fmt.Errorf("%w: Unbatch: component %d is a scalar; unbatching needs rank >= 1", ErrShape, k))
						}
						if rows >= 0 && s[0] != rows {
							panic(fmt.Errorf("%w: Unbatch: components have different first dimensions: %s", ErrShape, formatShapes(shapesOf(el))))
						}
						rows = s[0]
					}
					if len(el) == 0 {
						rows = 0
					}
					cur, pos = el, 0
				}
				out := make(Element, len(cur))
				for k, t := range cur {
					out[k] = sliceRow(t, pos)
				}
				pos++
				return out, true
			},
			closeFn: in.close,
		}
	})
}

func shapesOf(el Element) [][]int {
	out := make([][]int, len(el))
	for i, t := range el {
		out[i] = nonNil(t.Shape())
	}
	return out
}

// Repeat returns a dataset that repeats d count times; count -1 repeats forever. Each
// repetition is a fresh pass over d (so a Shuffle before Repeat reshuffles). Repeating an
// empty dataset forever yields nothing rather than looping. It panics when count < -1.
func (d *Dataset) Repeat(count int) *Dataset {
	if count < -1 {
		panic(fmt.Errorf("%w: Repeat: count %d must be -1 (forever) or >= 0", ErrArgument, count))
	}
	card := d.card
	switch {
	case count == 0 || d.card == 0:
		card = 0
	case count == -1:
		card = InfiniteCardinality
	case d.card >= 0:
		card = d.card * count
	}
	return d.derive("RepeatDataset", card, d.sameSpec(), func() iterator {
		var in iterator
		pass, seen := 0, false
		return &funcIter{
			nextFn: func() (Element, bool) {
				for {
					if count >= 0 && pass >= count {
						return nil, false
					}
					if in == nil {
						in, seen = d.open(), false
					}
					el, ok := in.next()
					if ok {
						seen = true
						return el, true
					}
					in.close()
					in = nil
					pass++
					if !seen { // an empty pass: the input is empty, stop instead of spinning
						return nil, false
					}
				}
			},
			closeFn: func() {
				if in != nil {
					in.close()
					in = nil
				}
			},
		}
	})
}

// Take returns a dataset of at most the first n elements of d; n -1 takes all. It panics
// when n < -1.
func (d *Dataset) Take(n int) *Dataset {
	if n < -1 {
		panic(fmt.Errorf("%w: Take: count %d must be -1 (all) or >= 0", ErrArgument, n))
	}
	if n == -1 {
		return d.derive("TakeDataset", d.card, d.sameSpec(), d.open)
	}
	card := d.card
	switch {
	case d.card == InfiniteCardinality:
		card = n
	case d.card >= 0 && d.card > n:
		card = n
	case n == 0:
		card = 0
	}
	return d.derive("TakeDataset", card, d.sameSpec(), func() iterator {
		in := d.open()
		i := 0
		return &funcIter{
			nextFn: func() (Element, bool) {
				if i >= n {
					return nil, false
				}
				el, ok := in.next()
				if ok {
					i++
				}
				return el, ok
			},
			closeFn: in.close,
		}
	})
}

// Skip returns a dataset without the first n elements of d; n -1 skips all. It panics when
// n < -1.
func (d *Dataset) Skip(n int) *Dataset {
	if n < -1 {
		panic(fmt.Errorf("%w: Skip: count %d must be -1 (all) or >= 0", ErrArgument, n))
	}
	card := d.card
	switch {
	case n == -1:
		card = 0
	case d.card >= 0:
		card = max(0, d.card-n)
	}
	return d.derive("SkipDataset", card, d.sameSpec(), func() iterator {
		in := d.open()
		skipped := false
		return &funcIter{
			nextFn: func() (Element, bool) {
				if !skipped {
					skipped = true
					for i := 0; n == -1 || i < n; i++ {
						if _, ok := in.next(); !ok {
							return nil, false
						}
					}
				}
				return in.next()
			},
			closeFn: in.close,
		}
	})
}

// NewShard is Shard returning an error instead of panicking.
func (d *Dataset) NewShard(numShards, index int) (*Dataset, error) {
	if numShards < 1 {
		return nil, fmt.Errorf("%w: Shard: number of shards %d must be at least 1", ErrArgument, numShards)
	}
	if index < 0 || index >= numShards {
		return nil, fmt.Errorf("%w: Shard: index %d out of range [0, %d)", ErrArgument, index, numShards)
	}
	card := d.card
	if card >= 0 {
		card = card / numShards
		if index < d.card%numShards {
			card++
		}
	}
	return d.derive("ShardDataset", card, d.sameSpec(), func() iterator {
		in := d.open()
		i := 0
		return &funcIter{
			nextFn: func() (Element, bool) {
				for {
					el, ok := in.next()
					if !ok {
						return nil, false
					}
					i++
					if (i-1)%numShards == index {
						return el, true
					}
				}
			},
			closeFn: in.close,
		}
	}), nil
}

// Shard returns the dataset of every numShards-th element of d starting at index: element i
// of d goes to shard i % numShards, as in tf.data. It panics when numShards < 1 or index is
// outside [0, numShards).
func (d *Dataset) Shard(numShards, index int) *Dataset {
	s, err := d.NewShard(numShards, index)
	if err != nil {
		panic(err)
	}
	return s
}

// Zip returns a dataset whose elements concatenate the components of the elements of ds,
// like tf.data.Dataset.zip((images, labels)); it ends with the shortest input. It panics
// when given no dataset.
func Zip(ds ...*Dataset) *Dataset {
	if len(ds) == 0 {
		panic(fmt.Errorf("%w: Zip needs at least one dataset", ErrArgument))
	}
	card := InfiniteCardinality
	for _, d := range ds {
		switch {
		case d.card == UnknownCardinality:
			if card == InfiniteCardinality {
				card = UnknownCardinality
			}
		case d.card >= 0:
			if card < 0 || d.card < card {
				card = d.card
			}
		}
	}
	spec := func() []TensorSpec {
		var out []TensorSpec
		for _, d := range ds {
			s := d.ElementSpec()
			if s == nil {
				return nil
			}
			out = append(out, s...)
		}
		return out
	}
	out := ds[0].derive("ZipDataset", card, spec, func() iterator {
		ins := make([]iterator, len(ds))
		for i, d := range ds {
			ins[i] = d.open()
		}
		return &funcIter{
			nextFn: func() (Element, bool) {
				var el Element
				for _, in := range ins {
					e, ok := in.next()
					if !ok {
						return nil, false
					}
					el = append(el, e...)
				}
				return el, true
			},
			closeFn: func() {
				for _, in := range ins {
					in.close()
				}
			},
		}
	})
	return out
}
