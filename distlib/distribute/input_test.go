package distribute

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"godist/distlib/data"
	"godist/distlib/tensor"
	"godist/distlib/transport"
)

// rangeDataset returns (x, y) pairs with x = [i, 100+i] and y = i, for i in [0, n).
func rangeDataset(n int) *data.Dataset {
	xs := make([]float32, 0, 2*n)
	ys := make([]float32, 0, n)
	for i := 0; i < n; i++ {
		xs = append(xs, float32(i), float32(100+i))
		ys = append(ys, float32(i))
	}
	return data.FromTensorSlices(tensor.MustNew([]int{n, 2}, xs), tensor.MustNew([]int{n}, ys))
}

// labelsOf returns each step's per-replica labels (component 1) as ints. It reports
// problems with t.Errorf, so workers' goroutines may call it.
func labelsOf(t *testing.T, dd *DistributedDataset) [][][]int {
	t.Helper()
	var steps [][][]int
	it := dd.Iterator()
	defer it.Close()
	for v, ok := it.Next(); ok; v, ok = it.Next() {
		var step [][]int
		for r, el := range v.Values() {
			if el[0].Shape()[0] != el[1].Shape()[0] {
				t.Errorf("replica %d: x has %d rows, y %d", r, el[0].Shape()[0], el[1].Shape()[0])
				return nil
			}
			if got, want := el[0].Device(), dd.b.devices[r]; got != want {
				t.Errorf("replica %d's input is on %q, want %q", r, got, want)
			}
			var ids []int
			for k, y := range el[1].Data() {
				if x := el[0].Data()[2*k]; x != y {
					t.Errorf("replica %d row %d: x %v does not match label %v", r, k, x, y)
				}
				ids = append(ids, int(y))
			}
			step = append(step, ids)
		}
		steps = append(steps, step)
	}
	return steps
}

func TestExperimentalDistributeDataset(t *testing.T) {
	tests := []struct {
		name     string
		replicas int
		n, batch int
		want     string
	}{
		{"even", 2, 8, 4, "[[[0 1] [2 3]] [[4 5] [6 7]]]"},
		{"uneven last batch", 2, 10, 4, "[[[0 1] [2 3]] [[4 5] [6 7]] [[8] [9]]]"},
		{"odd batch", 2, 5, 5, "[[[0 1 2] [3 4]]]"},
		{"last batch smaller than replicas", 3, 7, 3, "[[[0] [1] [2]] [[3] [4] [5]] [[6] [] []]]"},
		{"three replicas batch four", 3, 4, 4, "[[[0 1] [2] [3]]]"},
		{"one replica", 1, 3, 2, "[[[0 1]] [[2]]]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			splitCPU(t, tt.replicas)
			captureLog(t)
			s := NewMirroredStrategy()
			dd := s.ExperimentalDistributeDataset(rangeDataset(tt.n).Batch(tt.batch, false))
			if got := fmt.Sprint(labelsOf(t, dd)); got != tt.want {
				t.Fatalf("per-replica labels = %s, want %s", got, tt.want)
			}
			// Re-iterable: a second pass gives the same steps.
			if got := fmt.Sprint(labelsOf(t, dd)); got != tt.want {
				t.Fatalf("second pass = %s, want %s", got, tt.want)
			}
			if c := dd.Cardinality(); c != (tt.n+tt.batch-1)/tt.batch {
				t.Errorf("Cardinality() = %d, want %d", c, (tt.n+tt.batch-1)/tt.batch)
			}
		})
	}
}

func TestDistributeDatasetsFromFunction(t *testing.T) {
	splitCPU(t, 2)
	captureLog(t)
	s := NewMirroredStrategy()
	var ctxSeen *InputContext
	calls := 0
	dd := s.DistributeDatasetsFromFunction(func(ctx *InputContext) *data.Dataset {
		calls++
		ctxSeen = ctx
		return rangeDataset(9).Batch(ctx.GetPerReplicaBatchSize(4), false)
	})
	if calls != 1 {
		t.Fatalf("dataset function called %d times, want 1 (one input pipeline)", calls)
	}
	want := InputContext{NumInputPipelines: 1, InputPipelineID: 0, NumReplicasInSync: 2}
	if *ctxSeen != want {
		t.Fatalf("InputContext = %+v, want %+v", *ctxSeen, want)
	}
	if got, wantSteps := fmt.Sprint(labelsOf(t, dd)), "[[[0 1] [2 3]] [[4 5] [6 7]] [[8] []]]"; got != wantSteps {
		t.Fatalf("per-replica labels = %s, want %s", got, wantSteps)
	}
	if c := dd.Cardinality(); c != 3 {
		t.Errorf("Cardinality() = %d, want 3", c)
	}
	if !strings.Contains(ctxSeen.String(), "num_replicas_in_sync=2") {
		t.Errorf("InputContext String = %q", ctxSeen.String())
	}
}

func TestInputContextPerReplicaBatch(t *testing.T) {
	tests := []struct {
		replicas, global, want int
	}{
		{1, 64, 64}, {2, 64, 32}, {4, 8, 2}, {3, 9, 3},
	}
	for _, tt := range tests {
		ctx := &InputContext{NumInputPipelines: 1, NumReplicasInSync: tt.replicas}
		if got := ctx.GetPerReplicaBatchSize(tt.global); got != tt.want {
			t.Errorf("GetPerReplicaBatchSize(%d) with %d replicas = %d, want %d", tt.global, tt.replicas, got, tt.want)
		}
	}
	ctx := &InputContext{NumInputPipelines: 1, NumReplicasInSync: 2}
	wantPanic(t, "GetPerReplicaBatchSize(7)", ErrBatchSize, "not divisible", func() { ctx.GetPerReplicaBatchSize(7) })
}

func TestSplitBatchErrors(t *testing.T) {
	tests := []struct {
		name    string
		el      data.Element
		n       int
		mention string
	}{
		{"zero parts", data.Element{vec(1, 2)}, 0, "0 parts"},
		{"scalar", data.Element{tensor.Scalar(1)}, 2, "scalar"},
		{"different batch sizes", data.Element{vec(1, 2), vec(1, 2, 3)}, 2, "component 1 has batch size 3"},
		{"nil component", data.Element{nil}, 2, "component 0 is nil"},
	}
	for _, tt := range tests {
		_, err := SplitBatch(tt.el, tt.n)
		if !errors.Is(err, ErrBatchSize) || !strings.Contains(err.Error(), tt.mention) {
			t.Errorf("%s: SplitBatch = %v; want ErrBatchSize mentioning %q", tt.name, err, tt.mention)
		}
	}
	parts, err := SplitBatch(data.Element{mat(3, 2, 1, 2, 3, 4, 5, 6)}, 2)
	if err != nil || !equalData(parts[0][0].Data(), []float32{1, 2, 3, 4}) || !equalData(parts[1][0].Data(), []float32{5, 6}) {
		t.Fatalf("SplitBatch of 3 rows in 2 = %v, %v", parts, err)
	}
}

// TestAutoShardOneRule: ExperimentalDistributeDataset applies the same AutoShardPolicy rule
// as keras' Fit (Extended().AutoShard): FILE is refused, OFF and HINT give every worker the
// whole batch, DATA and AUTO its share.
func TestAutoShardOneRule(t *testing.T) {
	tr := transport.NewMem(2)
	s := NewMultiWorkerMirroredStrategy(WithTransport(tr[1]))
	ds := data.FromTensorSlices(tensor.MustNew([]int{8, 1}, []float32{0, 1, 2, 3, 4, 5, 6, 7})).Batch(4, false)
	for _, tc := range []struct {
		policy  data.AutoShardPolicy
		rows    int // rows of worker 1's first element
		wantErr bool
	}{
		{data.AutoShardAuto, 2, false},
		{data.AutoShardData, 2, false},
		{data.AutoShardOff, 4, false},
		{data.AutoShardHint, 4, false},
		{data.AutoShardFile, 0, true},
	} {
		d := ds.WithOptions(data.Options{AutoShardPolicy: tc.policy})
		shard, err := s.Extended().AutoShard("test", d)
		if (err != nil) != tc.wantErr || (err != nil && !errors.Is(err, ErrAutoShard)) {
			t.Fatalf("Extended().AutoShard(%v) = %v, %v; want an ErrAutoShard error: %v", tc.policy, shard, err, tc.wantErr)
		}
		func() {
			defer func() {
				if r := recover(); (r != nil) != tc.wantErr {
					t.Errorf("ExperimentalDistributeDataset(%v) panic = %v, want panic %v", tc.policy, r, tc.wantErr)
				}
			}()
			it := s.ExperimentalDistributeDataset(d).Iterator()
			defer it.Close()
			v, ok := it.Next()
			if !ok {
				t.Fatalf("ExperimentalDistributeDataset(%v) yielded nothing", tc.policy)
			}
			if got := v.Get(0)[0].Shape()[0]; got != tc.rows {
				t.Errorf("ExperimentalDistributeDataset(%v): worker 1 got %d rows of a global batch of 4, want %d", tc.policy, got, tc.rows)
			}
		}()
	}
}

func TestSplitBatchSizes(t *testing.T) {
	x := tensor.MustNew([]int{5, 2}, []float32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	y := tensor.MustNew([]int{5}, []float32{0, 1, 2, 3, 4})
	parts, err := SplitBatchSizes(data.Element{x, y}, []int{4, 0, 1})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range [][]float32{{0, 1, 2, 3}, {}, {4}} {
		if got := parts[i][1].Data(); len(got) != len(want) || (len(want) > 0 && got[0] != want[0]) || parts[i][0].Shape()[0] != len(want) {
			t.Errorf("part %d: labels %v, x shape %v; want %v", i, got, parts[i][0].Shape(), want)
		}
	}
	for _, sizes := range [][]int{{2, 2}, {3, 3}, {6, -1}} {
		if _, err := SplitBatchSizes(data.Element{x, y}, sizes); err == nil || !errors.Is(err, ErrBatchSize) {
			t.Errorf("SplitBatchSizes(%v) of a batch of 5: error %v, want ErrBatchSize", sizes, err)
		}
	}
}

// TestPartRows: the rows that consecutive parts of a split cover.
func TestPartRows(t *testing.T) {
	sizes := []int{3, 3, 2, 0, 1}
	for _, tc := range []struct{ first, end, lo, hi int }{
		{0, 1, 0, 3}, {1, 2, 3, 6}, {0, 2, 0, 6}, {2, 4, 6, 8}, {3, 4, 8, 8}, {4, 5, 8, 9}, {0, 5, 0, 9},
	} {
		if lo, hi := PartRows(sizes, tc.first, tc.end); lo != tc.lo || hi != tc.hi {
			t.Errorf("PartRows(%v, %d, %d) = [%d, %d), want [%d, %d)", sizes, tc.first, tc.end, lo, hi, tc.lo, tc.hi)
		}
	}
}
