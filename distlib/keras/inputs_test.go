package keras

import (
	"math"
	"strings"
	"testing"

	"godist/distlib/data"
	"godist/distlib/keras/layers"
	"godist/distlib/tensor"
)

// optionArgs passes a slice of FitOptions to Fit.
func optionArgs(opts []FitOption) []any {
	out := make([]any, len(opts))
	for i, o := range opts {
		out[i] = o
	}
	return out
}

func blobModel(seed int64) *Model {
	SetRandomSeed(seed)
	m := Sequential(layers.Dense(8, layers.Tanh, layers.InputShape(2)), layers.Dense(2))
	quiet(m)
	m.Compile(SGD(0.1), SparseCategoricalCrossentropy(true), "accuracy")
	return m
}

func sameWeights(t *testing.T, what string, a, b *Model) {
	t.Helper()
	wa, wb := a.GetWeights(), b.GetWeights()
	for i := range wa {
		if d := maxAbsDiff(wa[i].Data(), wb[i].Data()); d > 1e-6 {
			t.Errorf("%s: weight %d differs by %g", what, i, d)
		}
	}
}

// TestFitTensors: Fit(x, y, BatchSize(n)) trains exactly as Fit on the dataset of the same
// batches (in order with Shuffle(false)); ValidationSplit holds out the last examples.
func TestFitTensors(t *testing.T) {
	x, y := blobs(100, 3)
	all := data.FromTensorSlices(x, y)
	tests := []struct {
		name      string
		args      []any
		ds        *data.Dataset // the same training without the tensor options
		steps     int
		valFrom   int // first validation example; 0: no validation
		wantEqual bool
	}{
		{"batch 25 in order", []any{BatchSize(25), Shuffle(false)}, all.Batch(25, false), 4, 0, true},
		{"default batch 32", []any{Shuffle(false)}, all.Batch(32, false), 4, 0, true},
		{"validation split 0.2", []any{BatchSize(16), Shuffle(false), ValidationSplit(0.2)}, all.Take(80).Batch(16, false), 5, 80, true},
		{"validation split 0.25 shuffled", []any{BatchSize(10), ValidationSplit(0.25)}, nil, 8, 75, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := blobModel(7)
			h := m.Fit(x, append([]any{y, Epochs(2), Verbose(0)}, tt.args...)...)
			if got := h.Params["steps"]; got != tt.steps {
				t.Errorf("steps per epoch = %v, want %d", got, tt.steps)
			}
			if tt.wantEqual {
				ref := blobModel(7)
				ref.Fit(tt.ds, Epochs(2), Verbose(0))
				sameWeights(t, "tensors vs dataset", m, ref)
			}
			val, ok := h.History["val_loss"]
			if tt.valFrom == 0 {
				if ok {
					t.Errorf("val_loss without ValidationSplit: %v", val)
				}
				return
			}
			if len(val) != 2 || len(h.History["val_accuracy"]) != 2 {
				t.Fatalf("history %v: want 2 val_loss and val_accuracy", h.History)
			}
			want := m.Evaluate(all.Skip(tt.valFrom).Batch(7, false), Verbose(0))["loss"]
			if math.Abs(val[1]-want) > 1e-5 {
				t.Errorf("last val_loss = %v, want the loss of the last %d examples %v", val[1], 100-tt.valFrom, want)
			}
		})
	}
}

// TestEvaluatePredictTensors: Evaluate(x, y, BatchSize(n)) and Predict(x, BatchSize(n))
// agree with the dataset forms.
func TestEvaluatePredictTensors(t *testing.T) {
	x, y := blobs(50, 4)
	m := blobModel(3)
	for _, bs := range []int{1, 7, 50, 64} {
		got := m.Evaluate(x, y, BatchSize(bs), Verbose(0))
		want := m.Evaluate(data.FromTensorSlices(x, y).Batch(bs, false), Verbose(0))
		if math.Abs(got["loss"]-want["loss"]) > 1e-6 || got["accuracy"] != want["accuracy"] {
			t.Errorf("BatchSize(%d): Evaluate(x, y) = %v, on the dataset %v", bs, got, want)
		}
		p, q := m.Predict(x, BatchSize(bs)), m.Predict(x)
		if !sameInts(p.Shape(), []int{50, 2}) || maxAbsDiff(p.Data(), q.Data()) > 1e-6 {
			t.Errorf("BatchSize(%d): Predict shape %v differs from the default batches", bs, p.Shape())
		}
	}
}

func TestTensorInputErrors(t *testing.T) {
	x, y := blobs(10, 1)
	ds := data.FromTensorSlices(x, y).Batch(5, false)
	m := blobModel(1)
	tests := []struct {
		name string
		fn   func()
		want string
	}{
		{"batch size with dataset", func() { m.Fit(ds, BatchSize(32)) }, "batch it with ds.Batch(32, false) and drop keras.BatchSize"},
		{"evaluate batch size with dataset", func() { m.Evaluate(ds, BatchSize(8)) }, "ds.Batch(8, false)"},
		{"predict batch size with dataset", func() { m.Predict(ds, BatchSize(8)) }, "ds.Batch(8, false)"},
		{"validation split with dataset", func() { m.Fit(ds, ValidationSplit(0.2)) }, "keras.ValidationData"},
		{"shuffle with dataset", func() { m.Fit(ds, Shuffle(true)) }, "ds.Shuffle"},
		{"labels with dataset", func() { m.Fit(ds, y) }, "a dataset holds its labels"},
		{"no labels", func() { m.Fit(x, Epochs(1)) }, "Fit(x, y, ...)"},
		{"labels count", func() { m.Fit(x, tensor.Zeros(9)) }, "inputs x [10 2] and labels y [9]"},
		{"wrong argument", func() { m.Fit(x, y, 5) }, "argument 3 has type int"},
		{"labels late", func() { m.Fit(x, Epochs(1), y) }, "the labels come right after the inputs"},
		{"nil labels", func() { m.Fit(x, (*tensor.Tensor)(nil)) }, "labels y are nil"},
		{"not data", func() { m.Fit([]float32{1, 2}, y) }, "got []float32"},
		{"bad fraction", func() { m.Fit(x, y, ValidationSplit(1)) }, "ValidationSplit(1)"},
		{"split leaves nothing", func() { m.Fit(x, y, ValidationSplit(0.95)) }, "leaves 0 to train and 10 to validate"},
		{"split and data", func() { m.Fit(x, y, ValidationSplit(0.5), ValidationData(ds)) }, "pass one of them"},
		{"evaluate split", func() { m.Evaluate(x, y, ValidationSplit(0.5)) }, "Evaluate does not take keras.ValidationSplit(0.5): it is an option of Fit"},
		{"bad batch size", func() { m.Fit(x, y, BatchSize(0)) }, "BatchSize(0)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				r := recover()
				err, _ := r.(error)
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("panic %v, want an error containing %q", r, tc.want)
				}
			}()
			tc.fn()
		})
	}
}
