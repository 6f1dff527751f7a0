package data

import (
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"godist/distlib/tensor"
	"godist/internal/leakcheck"
)

// vals reads a dataset of scalar or vector elements and returns component 0 of each element
// flattened, as ints.
func vals(t *testing.T, d *Dataset) [][]int {
	t.Helper()
	var out [][]int
	for _, el := range d.Collect() {
		var row []int
		for _, v := range el[0].Data() {
			row = append(row, int(v))
		}
		out = append(out, row)
	}
	return out
}

func flat(t *testing.T, d *Dataset) []int {
	t.Helper()
	var out []int
	for _, r := range vals(t, d) {
		out = append(out, r...)
	}
	return out
}

func seq(a, b int) []int {
	var out []int
	for i := a; i < b; i++ {
		out = append(out, i)
	}
	return out
}

func TestFromTensorSlices(t *testing.T) {
	x := tensor.MustNew([]int{3, 2}, []float32{0, 1, 2, 3, 4, 5})
	y := tensor.MustNew([]int{3}, []float32{7, 8, 9})
	d := FromTensorSlices(x, y)
	if got := d.Cardinality(); got != 3 {
		t.Errorf("Cardinality() = %d, want 3", got)
	}
	els := d.Collect()
	if len(els) != 3 {
		t.Fatalf("Collect() has %d elements, want 3", len(els))
	}
	for i, el := range els {
		if got, want := el[0].Data(), []float32{float32(2 * i), float32(2*i + 1)}; !reflect.DeepEqual(got, want) {
			t.Errorf("element %d x = %v, want %v", i, got, want)
		}
		if got := el[0].Shape(); !reflect.DeepEqual(got, []int{2}) {
			t.Errorf("element %d x shape = %v, want [2]", i, got)
		}
		if got, want := el[1].Item(), float32(7+i); got != want {
			t.Errorf("element %d y = %v, want %v", i, got, want)
		}
	}
	want := "<TensorSliceDataset element_spec=(TensorSpec(shape=(2,), dtype=tf.float32, name=None), TensorSpec(shape=(), dtype=tf.float32, name=None))>"
	if got := d.String(); got != want {
		t.Errorf("String() = %s, want %s", got, want)
	}
}

func TestFromTensorSlicesErrors(t *testing.T) {
	tests := []struct {
		name    string
		ts      []*tensor.Tensor
		want    error
		wantMsg string
	}{
		{"none", nil, ErrArgument, "at least one"},
		{"nil tensor", []*tensor.Tensor{nil}, ErrArgument, "tensor 0 is nil"},
		{"scalar", []*tensor.Tensor{tensor.Scalar(1)}, ErrShape, "scalar"},
		{"first dims differ", []*tensor.Tensor{tensor.Zeros(3, 2), tensor.Zeros(4)}, ErrShape, "(3, 2), (4,)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewFromTensorSlices(tt.ts...)
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("NewFromTensorSlices = %v, want %v containing %q", err, tt.want, tt.wantMsg)
			}
			if !strings.HasPrefix(err.Error(), "data: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
			defer func() {
				if r := recover(); r == nil {
					t.Errorf("FromTensorSlices did not panic")
				} else if e, ok := r.(error); !ok || !errors.Is(e, tt.want) {
					t.Errorf("FromTensorSlices panicked with %v, want %v", r, tt.want)
				}
			}()
			FromTensorSlices(tt.ts...)
		})
	}
}

func TestTransformations(t *testing.T) {
	r := func() *Dataset { return Range(10) }
	tests := []struct {
		name string
		d    *Dataset
		want []int
		card int
	}{
		{"range", r(), seq(0, 10), 10},
		{"range start stop step", Range(2, 11, 3), []int{2, 5, 8}, 3},
		{"range negative step", Range(5, 0, -2), []int{5, 3, 1}, 3},
		{"range empty", Range(3, 3), nil, 0},
		{"take", r().Take(3), []int{0, 1, 2}, 3},
		{"take more", r().Take(30), seq(0, 10), 10},
		{"take all", r().Take(-1), seq(0, 10), 10},
		{"skip", r().Skip(7), []int{7, 8, 9}, 3},
		{"skip all", r().Skip(-1), nil, 0},
		{"skip more", r().Skip(20), nil, 0},
		{"repeat", Range(3).Repeat(2), []int{0, 1, 2, 0, 1, 2}, 6},
		{"repeat zero", Range(3).Repeat(0), nil, 0},
		{"repeat forever take", Range(3).Repeat(-1).Take(7), []int{0, 1, 2, 0, 1, 2, 0}, 7},
		{"repeat forever empty", Range(0).Repeat(-1), nil, 0},
		{"map", Range(4).Map(func(e Element) Element { return Element{tensor.Scalar(e[0].Item() * 10)} }), []int{0, 10, 20, 30}, 4},
		{"filter", r().Filter(func(e Element) bool { return int(e[0].Item())%3 == 0 }), []int{0, 3, 6, 9}, UnknownCardinality},
		{"shard 0", r().Shard(3, 0), []int{0, 3, 6, 9}, 4},
		{"shard 1", r().Shard(3, 1), []int{1, 4, 7}, 3},
		{"shard 2", r().Shard(3, 2), []int{2, 5, 8}, 3},
		{"shard infinite", Range(4).Repeat(-1).Shard(2, 1).Take(4), []int{1, 3, 1, 3}, 4},
		{"batch", r().Batch(4, false), seq(0, 10), 3},
		{"batch drop", r().Batch(4, true), seq(0, 8), 2},
		{"unbatch", r().Batch(4, false).Unbatch(), seq(0, 10), UnknownCardinality},
		{"cache", r().Cache(), seq(0, 10), 10},
		{"prefetch", r().Prefetch(2), seq(0, 10), 10},
		{"prefetch autotune", r().Prefetch(Autotune), seq(0, 10), 10},
		{"prefetch zero", r().Prefetch(0), seq(0, 10), 10},
		{"options", r().WithOptions(Options{AutoShardPolicy: AutoShardOff}), seq(0, 10), 10},
		{"zip", Zip(Range(5), Range(3)), []int{0, 1, 2}, 3},
		{"from elements", FromElements(Element{tensor.Scalar(4)}, Element{tensor.Scalar(2)}), []int{4, 2}, 2},
		{"from tensors", FromTensors(tensor.MustNew([]int{2}, []float32{1, 2})).Repeat(2), []int{1, 2, 1, 2}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			leakcheck.Check(t)
			if got := flat(t, tt.d); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("elements = %v, want %v", got, tt.want)
			}
			if got := tt.d.Cardinality(); got != tt.card {
				t.Errorf("Cardinality() = %d, want %d", got, tt.card)
			}
			if got := flat(t, tt.d); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("second pass = %v, want %v (datasets are re-iterable)", got, tt.want)
			}
		})
	}
}

func TestCardinality(t *testing.T) {
	inf := Range(3).Repeat(-1)
	unk := Range(3).Filter(func(Element) bool { return true })
	tests := []struct {
		name string
		d    *Dataset
		want int
	}{
		{"infinite", inf, InfiniteCardinality},
		{"infinite batch", inf.Batch(2, false), InfiniteCardinality},
		{"infinite take", inf.Take(5), 5},
		{"infinite skip", inf.Skip(5), InfiniteCardinality},
		{"infinite shard", inf.Shard(2, 0), InfiniteCardinality},
		{"unknown take", unk.Take(2), UnknownCardinality},
		{"unknown repeat", unk.Repeat(2), UnknownCardinality},
		{"unknown repeat forever", unk.Repeat(-1), InfiniteCardinality},
		{"unknown batch", unk.Batch(2, true), UnknownCardinality},
		{"zip infinite and known", Zip(inf, Range(4)), 4},
		{"zip infinite and unknown", Zip(inf, unk), UnknownCardinality},
		{"shard uneven", Range(11).Shard(4, 2), 3},
		{"shard uneven last", Range(11).Shard(4, 3), 2},
	}
	for _, tt := range tests {
		if got := tt.d.Cardinality(); got != tt.want {
			t.Errorf("%s: Cardinality() = %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestBatchShapes(t *testing.T) {
	x := tensor.MustNew([]int{5, 2, 3}, make([]float32, 30))
	y := tensor.MustNew([]int{5}, []float32{0, 1, 2, 3, 4})
	d := FromTensorSlices(x, y).Batch(2, false)
	var shapes [][]int
	for _, el := range d.Collect() {
		shapes = append(shapes, el[0].Shape(), el[1].Shape())
	}
	want := [][]int{{2, 2, 3}, {2}, {2, 2, 3}, {2}, {1, 2, 3}, {1}}
	if !reflect.DeepEqual(shapes, want) {
		t.Errorf("batch shapes = %v, want %v", shapes, want)
	}
	wantStr := "<BatchDataset element_spec=(TensorSpec(shape=(None, 2, 3), dtype=tf.float32, name=None), TensorSpec(shape=(None,), dtype=tf.float32, name=None))>"
	if got := d.String(); got != wantStr {
		t.Errorf("String() = %s\nwant %s", got, wantStr)
	}
	if got := FromTensorSlices(x).Batch(2, true).ElementSpec()[0].Shape; !reflect.DeepEqual(got, []int{2, 2, 3}) {
		t.Errorf("dropRemainder spec shape = %v, want [2 2 3]", got)
	}
	mapped := FromTensorSlices(x).Map(func(e Element) Element {
		return Element{tensor.MustNew([]int{6}, e[0].Data())}
	}).Batch(2, false)
	if got, want := mapped.String(), "<BatchDataset element_spec=TensorSpec(shape=(None, 6), dtype=tf.float32, name=None)>"; got != want {
		t.Errorf("mapped String() = %s, want %s", got, want)
	}
}

func TestBatchShapeMismatchPanics(t *testing.T) {
	leakcheck.Check(t)
	d := FromElements(Element{tensor.Zeros(2)}, Element{tensor.Zeros(3)}).Batch(2, false)
	for _, prefetch := range []bool{false, true} {
		ds := d
		if prefetch {
			ds = d.Prefetch(1)
		}
		func() {
			it := ds.Iterator()
			defer it.Close()
			defer wantShapePanic(t, fmt.Sprintf("prefetch=%v: Next", prefetch), "(3,)")
			it.Next()
		}()
	}
}

func TestArgumentPanics(t *testing.T) {
	r := Range(4)
	tests := []struct {
		name string
		fn   func()
		msg  string
	}{
		{"batch 0", func() { r.Batch(0, false) }, "batch size 0"},
		{"shuffle 0", func() { r.Shuffle(0, 1) }, "buffer size 0"},
		{"repeat -2", func() { r.Repeat(-2) }, "count -2"},
		{"take -2", func() { r.Take(-2) }, "count -2"},
		{"skip -2", func() { r.Skip(-2) }, "count -2"},
		{"shard index", func() { r.Shard(2, 2) }, "index 2 out of range [0, 2)"},
		{"shard negative index", func() { r.Shard(2, -1) }, "index -1"},
		{"shard zero", func() { r.Shard(0, 0) }, "number of shards 0"},
		{"prefetch -2", func() { r.Prefetch(-2) }, "buffer size -2"},
		{"map nil", func() { r.Map(nil) }, "nil function"},
		{"filter nil", func() { r.Filter(nil) }, "nil predicate"},
		{"cache infinite", func() { r.Repeat(-1).Cache() }, "infinite"},
		{"collect infinite", func() { r.Repeat(-1).Collect() }, "infinite"},
		{"range no args", func() { Range() }, "1 to 3 arguments"},
		{"range zero step", func() { Range(0, 3, 0) }, "step"},
		{"zip none", func() { Zip() }, "at least one"},
		{"from elements arity", func() { FromElements(Element{tensor.Scalar(1)}, Element{}) }, "element 1 has 0 components"},
		{"options", func() { r.WithOptions(Options{AutoShardPolicy: 9}) }, "AutoShardPolicy 9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				r := recover()
				e, ok := r.(error)
				if !ok || !errors.Is(e, ErrArgument) || !strings.Contains(e.Error(), tt.msg) {
					t.Errorf("panic = %v, want ErrArgument containing %q", r, tt.msg)
				}
			}()
			tt.fn()
		})
	}
}

func TestShuffle(t *testing.T) {
	d := Range(100).Shuffle(100, 42)
	a, b := flat(t, d), flat(t, d)
	if reflect.DeepEqual(a, seq(0, 100)) {
		t.Errorf("Shuffle(100, 42) left the order unchanged")
	}
	if reflect.DeepEqual(a, b) {
		t.Errorf("two passes gave the same order; reshuffle each iteration is the default")
	}
	for _, p := range [][]int{a, b} {
		s := append([]int(nil), p...)
		sort.Ints(s)
		if !reflect.DeepEqual(s, seq(0, 100)) {
			t.Errorf("shuffled pass is not a permutation: %v", p)
		}
	}
	// Same seed, fresh dataset: same sequence of orders.
	d2 := Range(100).Shuffle(100, 42)
	if a2, b2 := flat(t, d2), flat(t, d2); !reflect.DeepEqual(a, a2) || !reflect.DeepEqual(b, b2) {
		t.Errorf("same seed gave different orders")
	}
	if c := flat(t, Range(100).Shuffle(100, 43)); reflect.DeepEqual(a, c) {
		t.Errorf("seeds 42 and 43 gave the same order")
	}
	fixed := Range(100).Shuffle(100, 42, ReshuffleEachIteration(false))
	if x, y := flat(t, fixed), flat(t, fixed); !reflect.DeepEqual(x, y) {
		t.Errorf("ReshuffleEachIteration(false) gave different orders")
	}
	// Repeat after Shuffle reshuffles each repetition.
	rep := flat(t, Range(20).Shuffle(20, 1).Repeat(2))
	if reflect.DeepEqual(rep[:20], rep[20:]) {
		t.Errorf("Shuffle then Repeat repeated the same order")
	}
	// A buffer of 1 does not shuffle; a small buffer moves elements only a little.
	if got := flat(t, Range(10).Shuffle(1, 5)); !reflect.DeepEqual(got, seq(0, 10)) {
		t.Errorf("Shuffle(1) = %v, want the input order", got)
	}
	for i, v := range flat(t, Range(50).Shuffle(3, 5)) {
		if v > i+2 {
			t.Errorf("Shuffle(3): element %d at position %d, a buffer of 3 cannot move it that early", v, i)
		}
	}
}

func TestCacheRunsMapOnce(t *testing.T) {
	calls := 0
	d := Range(5).Map(func(e Element) Element { calls++; return e }).Cache()
	// An abandoned pass caches nothing.
	it := d.Iterator()
	it.Next()
	it.Close()
	for pass := 0; pass < 3; pass++ {
		if got := flat(t, d); !reflect.DeepEqual(got, seq(0, 5)) {
			t.Fatalf("pass %d = %v", pass, got)
		}
	}
	if calls != 1+5 {
		t.Errorf("map ran %d times, want 6 (1 abandoned + 1 full pass, then the cache)", calls)
	}
}

func TestPrefetchStopsOnClose(t *testing.T) {
	leakcheck.Check(t)
	produced := make(chan int, 1000)
	d := Range(3).Repeat(-1).Map(func(e Element) Element {
		produced <- 1
		return e
	}).Prefetch(4)
	it := d.Iterator()
	for i := 0; i < 5; i++ {
		if _, ok := it.Next(); !ok {
			t.Fatalf("Next %d ended an infinite dataset", i)
		}
	}
	it.Close()
	n := len(produced)
	time.Sleep(20 * time.Millisecond)
	if got := len(produced); got != n {
		t.Errorf("producer ran after Close: %d elements, then %d", n, got)
	}
	if n > 5+4+1 {
		t.Errorf("produced %d elements for 5 reads with a buffer of 4", n)
	}
	if _, ok := it.Next(); ok {
		t.Errorf("Next after Close returned an element")
	}
	it.Close() // idempotent
}

func TestPrefetchForwardsPanic(t *testing.T) {
	leakcheck.Check(t)
	boom := fmt.Errorf("boom at 3")
	d := Range(10).Map(func(e Element) Element {
		if e[0].Item() == 3 {
			panic(boom)
		}
		return e
	}).Prefetch(2)
	it := d.Iterator()
	defer it.Close()
	got := 0
	func() {
		defer func() {
			if r := recover(); r != boom {
				t.Errorf("Next panicked with %v, want %v", r, boom)
			}
		}()
		for {
			if _, ok := it.Next(); !ok {
				t.Errorf("Next ended without the panic")
				return
			}
			got++
		}
	}()
	if got != 3 {
		t.Errorf("read %d elements before the panic, want 3", got)
	}
}

func TestPrefetchConcurrentIterators(t *testing.T) {
	leakcheck.Check(t)
	d := Range(50).Map(func(e Element) Element { return e }).Prefetch(3).Batch(7, false).Prefetch(1)
	done := make(chan []int, 4)
	for g := 0; g < 4; g++ {
		go func() { done <- flat(t, d) }()
	}
	for g := 0; g < 4; g++ {
		select {
		case got := <-done:
			if !reflect.DeepEqual(got, seq(0, 50)) {
				t.Errorf("iterator %d = %v", g, got)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("concurrent iterators did not finish within 10s")
		}
	}
}

func TestOptionsInherited(t *testing.T) {
	d := Range(10).WithOptions(Options{AutoShardPolicy: AutoShardData}).Map(func(e Element) Element { return e }).Batch(2, false)
	if got := d.Options().AutoShardPolicy; got != AutoShardData {
		t.Errorf("Options().AutoShardPolicy = %v, want DATA", got)
	}
	if got := Range(3).Options().AutoShardPolicy; got != AutoShardAuto {
		t.Errorf("default AutoShardPolicy = %v, want AUTO", got)
	}
	names := map[AutoShardPolicy]string{AutoShardOff: "OFF", AutoShardAuto: "AUTO", AutoShardFile: "FILE", AutoShardData: "DATA", AutoShardHint: "HINT"}
	for p, want := range names {
		if got := p.String(); got != want {
			t.Errorf("AutoShardPolicy(%d).String() = %s, want %s", int(p), got, want)
		}
	}
}

func TestUnbatchErrors(t *testing.T) {
	d := FromElements(Element{tensor.Zeros(2), tensor.Zeros(3)}).Unbatch()
	defer func() {
		r := recover()
		if e, ok := r.(error); !ok || !errors.Is(e, ErrShape) {
			t.Errorf("panic = %v, want ErrShape", r)
		}
	}()
	d.Collect()
}

func TestSpecs(t *testing.T) {
	tests := []struct {
		d    *Dataset
		want string
	}{
		{Range(3), "<RangeDataset element_spec=TensorSpec(shape=(), dtype=tf.float32, name=None)>"},
		{FromElements(Element{tensor.Zeros(2)}, Element{tensor.Zeros(3)}), "<ElementsDataset element_spec=TensorSpec(shape=(None,), dtype=tf.float32, name=None)>"},
		{FromElements(Element{tensor.Zeros(2)}, Element{tensor.Zeros(3, 1)}), "<ElementsDataset element_spec=TensorSpec(shape=<unknown>, dtype=tf.float32, name=None)>"},
		{Range(0).Map(func(e Element) Element { return e }), "<MapDataset element_spec=unknown>"},
		{Range(4).Batch(2, false).Unbatch(), "<UnbatchDataset element_spec=TensorSpec(shape=(), dtype=tf.float32, name=None)>"},
		{Zip(Range(2), Range(2).Batch(2, true)), "<ZipDataset element_spec=(TensorSpec(shape=(), dtype=tf.float32, name=None), TensorSpec(shape=(2,), dtype=tf.float32, name=None))>"},
		{Range(3).Shuffle(3, 1).Repeat(2).Take(2).Skip(1).Cache().Prefetch(1).Shard(1, 0), "<ShardDataset element_spec=TensorSpec(shape=(), dtype=tf.float32, name=None)>"},
	}
	for _, tt := range tests {
		if got := tt.d.String(); got != tt.want {
			t.Errorf("String() = %s, want %s", got, tt.want)
		}
	}
}

func ExampleDataset_Batch() {
	x := tensor.MustNew([]int{5, 2}, []float32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	y := tensor.MustNew([]int{5}, []float32{0, 1, 0, 1, 0})
	ds := FromTensorSlices(x, y).Batch(2, false)
	fmt.Println(ds.Cardinality())
	it := ds.Iterator()
	defer it.Close()
	for el, ok := it.Next(); ok; el, ok = it.Next() {
		fmt.Println(el[0].Shape(), el[1].Data())
	}
	// Output:
	// 3
	// [2 2] [0 1]
	// [2 2] [0 1]
	// [1 2] [0]
}

func TestDroppedIteratorStopsPrefetch(t *testing.T) {
	leakcheck.Check(t)
	d := Range(3).Repeat(-1).Prefetch(2)
	func() {
		it := d.Iterator()
		it.Next() // abandoned without Close, as an interrupted cell would
	}()
	deadline := time.Now().Add(5 * time.Second)
	base := runtime.NumGoroutine()
	for time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
		if runtime.NumGoroutine() < base {
			return
		}
	}
	t.Errorf("the prefetch goroutine of a dropped iterator is still running")
}

// TestBatchOfSlicesIsStack: Batch right after FromTensorSlices copies runs of rows whole;
// its batches are those of the element-by-element path (a Map in between) for every batch
// size, with and without the remainder, and copies: writing into a batch leaves the source
// tensors as they were.
func TestBatchOfSlicesIsStack(t *testing.T) {
	x := tensor.RandomNormal([]int{7, 2, 3}, 0, 1, 1)
	y := tensor.MustNew([]int{7}, []float32{0, 1, 2, 3, 4, 5, 6})
	keep := slices.Clone(x.Data())
	src := FromTensorSlices(x, y)
	same := src.Map(func(e Element) Element { return e }) // not a FromTensorSlices iterator
	for _, n := range []int{1, 3, 4, 7, 8} {
		for _, drop := range []bool{false, true} {
			got, want := src.Batch(n, drop).Collect(), same.Batch(n, drop).Collect()
			if len(got) != len(want) {
				t.Fatalf("Batch(%d, %v): %d batches, want %d", n, drop, len(got), len(want))
			}
			for i := range got {
				for k := range got[i] {
					if !reflect.DeepEqual(got[i][k].Shape(), want[i][k].Shape()) || !reflect.DeepEqual(got[i][k].Data(), want[i][k].Data()) {
						t.Fatalf("Batch(%d, %v): batch %d component %d: %v %v, want %v %v", n, drop, i, k, got[i][k].Shape(), got[i][k].Data(), want[i][k].Shape(), want[i][k].Data())
					}
				}
				for j := range got[i][0].Data() {
					got[i][0].Data()[j] = -1
				}
			}
		}
	}
	if !reflect.DeepEqual(x.Data(), keep) {
		t.Fatal("writing into a batch changed the tensor it was sliced from")
	}
}

// TestNextRows: a worker's rows of every batch are the rows of Next's batch, whether the
// pipeline ends in Batch (only they are stacked; options after Batch change nothing) or not
// (the whole batch comes back), over a last, smaller batch and an empty share; and a shape
// error in a row the worker does not keep is still raised.
func TestNextRows(t *testing.T) {
	leakcheck.Check(t)
	x := tensor.RandomNormal([]int{7, 2, 3}, 0, 1, 1)
	y := tensor.MustNew([]int{7}, []float32{0, 1, 2, 3, 4, 5, 6})
	src := FromTensorSlices(x, y)
	// Worker 1 of 2 keeps the second half (the larger part first), worker 0 nothing of a
	// batch of 1.
	half := func(count int) (lo, hi int) { return (count + 1) / 2, count }
	tests := []struct {
		name  string
		ds    *Dataset
		rows  func(count int) (lo, hi int)
		cut   bool // only the picked rows come back
		count []int
	}{
		{"batch", src.Batch(3, false), half, true, []int{3, 3, 1}},
		{"batch, drop remainder", src.Batch(3, true), half, true, []int{3, 3}},
		{"batch then options", src.Batch(4, false).WithOptions(Options{AutoShardPolicy: AutoShardData}), half, true, []int{4, 3}},
		{"empty share", src.Batch(3, false), func(count int) (int, int) { return 0, 0 }, true, []int{3, 3, 1}},
		{"batch then map", src.Batch(3, false).Map(func(e Element) Element { return e }), half, false, []int{3, 3, 1}},
		{"batch then prefetch", src.Batch(3, false).Prefetch(1), half, false, []int{3, 3, 1}},
	}
	for _, tc := range tests {
		want := tc.ds.Collect()
		it := tc.ds.Iterator()
		var counts []int
		for i := 0; ; i++ {
			el, count, ok := it.NextRows(tc.rows)
			if !ok {
				break
			}
			counts = append(counts, count)
			lo, hi := 0, count
			if tc.cut {
				lo, hi = tc.rows(count)
			}
			for k := range el {
				stride := want[i][k].Size() / count
				wantShape := append([]int{hi - lo}, want[i][k].Shape()[1:]...)
				if !reflect.DeepEqual(el[k].Shape(), wantShape) {
					t.Fatalf("%s: batch %d component %d: shape %v, want %v", tc.name, i, k, el[k].Shape(), wantShape)
				}
				if got, w := el[k].Data(), want[i][k].Data()[lo*stride:hi*stride]; !reflect.DeepEqual(got, w) {
					t.Fatalf("%s: batch %d component %d: %v, want rows [%d, %d) of Next's: %v", tc.name, i, k, got, lo, hi, w)
				}
			}
		}
		it.Close()
		if !reflect.DeepEqual(counts, tc.count) {
			t.Errorf("%s: counts %v, want %v", tc.name, counts, tc.count)
		}
	}

	d := FromElements(Element{tensor.Zeros(2)}, Element{tensor.Zeros(2)}, Element{tensor.Zeros(3)}).Batch(3, false)
	it := d.Iterator()
	defer it.Close()
	defer wantShapePanic(t, "NextRows of rows [0, 1)", "(3,)")
	it.NextRows(func(int) (int, int) { return 0, 1 })
}

// wantShapePanic, deferred, checks that what panicked with an ErrShape naming shape.
func wantShapePanic(t *testing.T, what, shape string) {
	t.Helper()
	r := recover()
	e, ok := r.(error)
	if !ok || !errors.Is(e, ErrShape) || !strings.Contains(e.Error(), shape) {
		t.Errorf("%s panicked with %v, want ErrShape naming %s", what, r, shape)
	}
}

// BenchmarkBatchOfSlices: a batch of 64 MNIST-sized images and labels from FromTensorSlices,
// taken whole (Batch right after it) or element by element (a Map in between), and a
// worker's half of a global batch of 128 (Iterator.NextRows, as MultiWorkerMirrored's Fit
// takes it).
func BenchmarkBatchOfSlices(b *testing.B) {
	x := tensor.RandomUniform([]int{64 * 32, 28, 28, 1}, 0, 1, 1)
	y := tensor.Zeros(64 * 32)
	src := FromTensorSlices(x, y)
	half := func(count int) (lo, hi int) { return count / 2, count }
	for _, c := range []struct {
		name string
		ds   *Dataset
		rows func(count int) (lo, hi int)
	}{
		{"whole", src.Batch(64, true), nil},
		{"by-element", src.Map(func(e Element) Element { return e }).Batch(64, true), nil},
		{"worker-half-of-128", src.Batch(128, true), half},
		{"worker-half-of-128-by-element", src.Map(func(e Element) Element { return e }).Batch(128, true), half},
	} {
		b.Run(c.name, func(b *testing.B) {
			it := c.ds.Iterator()
			defer func() { it.Close() }()
			for b.Loop() {
				var ok bool
				if c.rows != nil {
					_, _, ok = it.NextRows(c.rows)
				} else {
					_, ok = it.Next()
				}
				if !ok {
					it = c.ds.Iterator()
				}
			}
		})
	}
}

// TestRecycle: where the pipeline ends in Batch, a batch handed back with Recycle lends its
// storage to the next one (over FromTensorSlices, over other elements, and for the rows
// NextRows keeps), which holds the right values; a last batch larger than the one handed
// back gets storage of its own, and a smaller one reads only its own rows. Where the
// pipeline ends elsewhere (a Map after Batch, Cache) Recycle changes nothing, and the
// source tensors are never written.
func TestRecycle(t *testing.T) {
	x := tensor.RandomNormal([]int{10, 2, 3}, 0, 1, 1)
	y := tensor.MustNew([]int{10}, []float32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	keep := slices.Clone(x.Data())
	src := FromTensorSlices(x, y)
	reference := src.Batch(4, false).Collect() // batches of 4, 4, 2
	pointer := func(el Element) *float32 { return &el[0].Data()[0] }
	for _, tc := range []struct {
		name   string
		ds     *Dataset
		reuses bool
		rows   bool // NextRows, keeping rows [1, 3) of every batch
	}{
		{"slices", src.Batch(4, false), true, false},
		{"elements", src.Map(func(e Element) Element { return e }).Batch(4, false), true, false},
		{"slices, rows", src.Batch(4, false).WithOptions(Options{AutoShardPolicy: AutoShardData}), true, true},
		{"elements, rows", src.Map(func(e Element) Element { return e }).Batch(4, false), true, true},
		{"map after batch", src.Batch(4, false).Map(func(e Element) Element { return e }), false, false},
		{"cache after batch", src.Batch(4, false).Cache(), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			it := tc.ds.Iterator()
			defer it.Close()
			var prev *float32
			for i := 0; ; i++ {
				var el Element
				var ok bool
				if tc.rows {
					el, _, ok = it.NextRows(func(count int) (int, int) { return 1, min(3, count) })
				} else {
					el, ok = it.Next()
				}
				if !ok {
					if i != len(reference) {
						t.Fatalf("%d batches, want %d", i, len(reference))
					}
					break
				}
				want := reference[i]
				if tc.rows {
					hi := min(3, want[0].Shape()[0])
					want = Element{sliceRows(want[0], 1, hi), sliceRows(want[1], 1, hi)}
				}
				for k := range el {
					if !reflect.DeepEqual(el[k].Shape(), want[k].Shape()) || !reflect.DeepEqual(el[k].Data(), want[k].Data()) {
						t.Fatalf("batch %d component %d: %v %v, want %v %v", i, k, el[k].Shape(), el[k].Data(), want[k].Shape(), want[k].Data())
					}
				}
				// Batches 0 and 1 are alike; the last (2 rows) fits in the one before.
				if reused := pointer(el) == prev; i > 0 && reused != tc.reuses {
					t.Fatalf("batch %d reuses the storage handed back: %v, want %v", i, reused, tc.reuses)
				}
				prev = pointer(el)
				it.Recycle(el)
			}
			if !reflect.DeepEqual(x.Data(), keep) {
				t.Fatal("the source tensor changed")
			}
		})
	}
	// A batch larger than the one handed back gets storage of its own.
	it := src.Batch(4, false).Iterator()
	defer it.Close()
	first, _, _ := it.NextRows(func(int) (int, int) { return 0, 1 })
	it.Recycle(first)
	second, ok := it.Next()
	if !ok || pointer(second) == pointer(first) || !reflect.DeepEqual(second[0].Data(), reference[1][0].Data()) {
		t.Fatalf("a batch of 4 after one of 1 row was handed back: %v, %v", second, ok)
	}
}

// TestRecyclePrefetched: after Batch then Prefetch, a batch handed back is written again by
// the prefetching goroutine a few batches later (it runs ahead), with the right values, so
// that a pass over 10 batches takes storage for fewer; a Map between them stops it.
func TestRecyclePrefetched(t *testing.T) {
	x := tensor.RandomNormal([]int{40, 3}, 0, 1, 1)
	y := tensor.RandomNormal([]int{40}, 0, 1, 2)
	keep := slices.Clone(x.Data())
	src := FromTensorSlices(x, y)
	reference := src.Batch(4, true).Collect()
	for _, tc := range []struct {
		name    string
		ds      *Dataset
		recycle bool
	}{
		{"batch, prefetch", src.Batch(4, true).Prefetch(1), true},
		{"batch, map, prefetch", src.Batch(4, true).Map(func(e Element) Element { return e }).Prefetch(1), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			it := tc.ds.Iterator()
			defer it.Close()
			seen := map[*float32]bool{}
			n := 0
			for el, ok := it.Next(); ok; el, ok = it.Next() {
				for k := range el {
					if !reflect.DeepEqual(el[k].Data(), reference[n][k].Data()) {
						t.Fatalf("batch %d component %d: %v, want %v", n, k, el[k].Data(), reference[n][k].Data())
					}
				}
				seen[&el[0].Data()[0]] = true
				it.Recycle(el)
				n++
			}
			if n != 10 {
				t.Fatalf("%d batches, want 10", n)
			}
			if reused := len(seen) < n; reused != tc.recycle {
				t.Fatalf("10 batches in %d distinct buffers: reused %v, want %v", len(seen), reused, tc.recycle)
			}
			if !reflect.DeepEqual(x.Data(), keep) {
				t.Fatal("the source tensor changed")
			}
		})
	}
}

// sliceRows returns rows [lo, hi) of t, a copy.
func sliceRows(t *tensor.Tensor, lo, hi int) *tensor.Tensor {
	shape := t.Shape()
	stride := t.Size() / shape[0]
	shape[0] = hi - lo
	return tensor.MustNew(shape, slices.Clone(t.Data()[lo*stride:hi*stride]))
}
