package keras

import (
	"bytes"
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"godist/distlib/data"
	"godist/distlib/keras/layers"
	"godist/distlib/tensor"
)

// blobs returns n points in 2-D, class 0 around (-1,-1) and class 1 around (1,1).
func blobs(n int, seed uint64) (*tensor.Tensor, *tensor.Tensor) {
	noise := tensor.RandomNormal([]int{n, 2}, 0, 0.3, seed).Data()
	x := make([]float32, 2*n)
	y := make([]float32, n)
	for i := 0; i < n; i++ {
		c := float32(i % 2)
		y[i] = c
		x[2*i] = 2*c - 1 + noise[2*i]
		x[2*i+1] = 2*c - 1 + noise[2*i+1]
	}
	return tensor.MustNew([]int{n, 2}, x), tensor.MustNew([]int{n}, y)
}

func quiet(m *Model) *bytes.Buffer {
	var b bytes.Buffer
	m.stdout = &b
	return &b
}

func TestTinyModelLearnsSeparableProblem(t *testing.T) {
	tests := []struct {
		name string
		opt  func() *Optimizer
	}{
		{"sgd", func() *Optimizer { return SGD(0.1, Momentum(0.9)) }},
		{"adam", func() *Optimizer { return Adam(0.05) }},
		{"rmsprop", func() *Optimizer { return RMSprop(0.02) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			SetRandomSeed(7)
			x, y := blobs(128, 3)
			ds := data.FromTensorSlices(x, y).Batch(32, false)
			m := Sequential(layers.Dense(8, layers.Tanh, layers.InputShape(2)), layers.Dense(2))
			out := quiet(m)
			m.Compile(tc.opt(), SparseCategoricalCrossentropy(true), "accuracy")
			before := m.Evaluate(ds, Verbose(0))
			h := m.Fit(ds, Epochs(5), Verbose(2))
			after := m.Evaluate(ds, Verbose(0))
			if after["loss"] >= before["loss"] || after["accuracy"] < 0.95 {
				t.Errorf("loss %v -> %v, accuracy %v -> %v; want lower loss and accuracy >= 0.95",
					before["loss"], after["loss"], before["accuracy"], after["accuracy"])
			}
			if len(h.History["loss"]) != 5 || len(h.Epoch) != 5 {
				t.Errorf("history has %d losses, %d epochs; want 5", len(h.History["loss"]), len(h.Epoch))
			}
			if got := strings.Count(out.String(), "Epoch "); got != 5 {
				t.Errorf("output has %d Epoch lines, want 5:\n%s", got, out)
			}
			p := m.Predict(x)
			if got := p.Shape(); got[0] != 128 || got[1] != 2 {
				t.Errorf("Predict shape = %v, want [128 2]", got)
			}
		})
	}
}

func TestBinaryAndMSELosses(t *testing.T) {
	SetRandomSeed(1)
	x, y := blobs(64, 5)
	ds := data.FromTensorSlices(x, y).Batch(16, false)
	tests := []struct {
		name string
		loss *Loss
		last layers.Layer
	}{
		{"bce logits", BinaryCrossentropy(true), layers.Dense(1)},
		{"bce probs", BinaryCrossentropy(false), layers.Dense(1, layers.Sigmoid)},
		{"mse", MeanSquaredError(), layers.Dense(1)},
	}
	for _, tc := range tests {
		m := Sequential(layers.Dense(4, layers.ReLU, layers.InputShape(2)), tc.last)
		quiet(m)
		m.Compile(Adam(0.05), tc.loss, "accuracy")
		before := m.Evaluate(ds, Verbose(0))["loss"]
		m.Fit(ds, Epochs(4), Verbose(0))
		after := m.Evaluate(ds, Verbose(0))
		if after["loss"] >= before {
			t.Errorf("%s: loss %v -> %v, want lower", tc.name, before, after["loss"])
		}
		if tc.name != "mse" && after["accuracy"] < 0.9 {
			t.Errorf("%s: accuracy %v, want >= 0.9", tc.name, after["accuracy"])
		}
	}
}

func TestMetricsWeightedByBatchSize(t *testing.T) {
	// 5 examples in batches of 2, 2, 1: the mean must be over examples, not batches.
	SetRandomSeed(3)
	x, y := blobs(5, 9)
	m := Sequential(layers.Dense(2, layers.InputShape(2)))
	quiet(m)
	m.Compile(SGD(0.1), SparseCategoricalCrossentropy(true), "accuracy")
	logs := m.Evaluate(data.FromTensorSlices(x, y).Batch(2, false), Verbose(0))
	pred := m.Predict(x)
	per := m.loss.PerExample(y, pred).Data()
	var want float64
	for _, v := range per {
		want += float64(v)
	}
	want /= 5
	if math.Abs(logs["loss"]-want) > 1e-5 {
		t.Errorf("Evaluate loss = %v, want the mean over examples %v", logs["loss"], want)
	}
	acc := SparseCategoricalAccuracy("a")
	acc.UpdateState(y, pred)
	if math.Abs(logs["accuracy"]-acc.Result()) > 1e-9 {
		t.Errorf("Evaluate accuracy = %v, want %v", logs["accuracy"], acc.Result())
	}
}

func TestWeightsRoundTripAndMismatch(t *testing.T) {
	dir := t.TempDir()
	SetRandomSeed(11)
	a := Sequential(layers.Dense(3, layers.ReLU, layers.InputShape(4)), layers.Dense(2))
	path := filepath.Join(dir, "w.weights")
	if err := a.SaveWeights(path); err != nil {
		t.Fatal(err)
	}
	b := Sequential(layers.Dense(3, layers.ReLU, layers.InputShape(4)), layers.Dense(2))
	if err := b.LoadWeights(path); err != nil {
		t.Fatal(err)
	}
	for i, w := range a.GetWeights() {
		got := b.GetWeights()[i].Data()
		for j, v := range w.Data() {
			if got[j] != v {
				t.Fatalf("variable %d value %d = %v after load, want %v", i, j, got[j], v)
			}
		}
	}
	// An unbuilt model is built from the recorded input shape.
	c := Sequential(layers.Dense(3, layers.ReLU), layers.Dense(2))
	if err := c.LoadWeights(path); err != nil {
		t.Fatalf("LoadWeights into an unbuilt model: %v", err)
	}
	if got := LatestCheckpoint(dir); got != path {
		t.Errorf("LatestCheckpoint = %q, want %q", got, path)
	}

	tests := []struct {
		name  string
		model *Model
		want  string
	}{
		{"shape", Sequential(layers.Dense(5, layers.InputShape(4)), layers.Dense(2)), "has shape [4 5]"},
		{"count", Sequential(layers.Dense(3, layers.InputShape(4))), "holds 4 variables"},
	}
	for _, tc := range tests {
		err := tc.model.LoadWeights(path)
		if !errors.Is(err, ErrWeights) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "kernel") {
			t.Errorf("%s mismatch: err = %v, want ErrWeights mentioning %q and the variable", tc.name, err, tc.want)
		}
	}
}

func TestSummary(t *testing.T) {
	layers.ResetNames()
	m := peerCNN()
	got := m.SummaryString()
	for _, want := range []string{
		" conv2d (Conv2D)             (None, 26, 26, 32)        320",
		" max_pooling2d (MaxPooling2D (None, 13, 13, 32)        0",
		" flatten (Flatten)           (None, 5408)              0",
		" dense (Dense)               (None, 64)                346176",
		" dense_1 (Dense)             (None, 10)                650",
		"Total params: 347,146",
		"Trainable params: 347,146",
		"Non-trainable params: 0",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("Summary lacks %q:\n%s", want, got)
		}
	}
	if n := m.CountParams(); n != 347146 {
		t.Errorf("CountParams = %d, want 347146", n)
	}
}

func smallX(n int) *tensor.Tensor  { return tensor.RandomNormal([]int{n, 3}, 0, 1, 1) }
func smallX2(n int) *tensor.Tensor { return tensor.RandomNormal([]int{n, 2}, 0, 1, 1) }
func smallY(n int) *tensor.Tensor  { return tensor.Zeros(n) }
func smallYv(n int, v float32) *tensor.Tensor {
	return tensor.Fill(v, n)
}

// TestCompileDefaultOptimizer: model.compile(loss="mse") has Keras' default optimizer,
// rmsprop with learning rate 0.001; Compile(nil, loss) is its translation. A nil loss is
// an error that says what to pass.
func TestCompileDefaultOptimizer(t *testing.T) {
	m := Sequential(layers.Input(2), layers.Dense(1))
	m.Compile(nil, MeanSquaredError())
	if m.optimizer == nil || m.optimizer.Name() != RMSprop(0.001).Name() || m.optimizer.LearningRate() != 0.001 {
		t.Fatalf("Compile(nil, mse): optimizer %v, want RMSprop(0.001)", m.optimizer)
	}
	defer func() {
		err, _ := recover().(error)
		if err == nil || !strings.Contains(err.Error(), "Compile needs a loss") {
			t.Fatalf("Compile(opt, nil) = %v, want an error naming the missing loss", err)
		}
	}()
	m.Compile(Adam(1e-3), nil)
}
