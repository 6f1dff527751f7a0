package keras

import (
	"math"
	"strings"
	"testing"

	"godist/distlib/keras/layers"
	"godist/distlib/tensor"
)

// TestCompiledLabelRank: a compiled model's loss and metrics first match the labels'
// rank to the predictions' as tf.keras' compile_utils.match_dtype_and_rank does (labels
// (n) against predictions (n, k) become (n, 1)), then each loss's own rules broadcast
// (n, 1) against (n, k). Called directly, the same loss refuses (n) against (n, k) with
// the reshape to write.
func TestCompiledLabelRank(t *testing.T) {
	v := func(shape []int, d ...float32) *tensor.Tensor { return tensor.MustNew(shape, d) }
	y := v([]int{2}, 1, 3)
	pred := v([]int{2, 3}, 1, 2, 3, 0, 3, 6)
	tests := []struct {
		name string
		loss *Loss
		y, p *tensor.Tensor
		want []float64 // per example
	}{
		// mean over the 3 columns of (p - y)^2: (0+1+4)/3, (9+0+9)/3
		{"mse labels [2] preds [2 3]", MeanSquaredError(), y, pred, []float64{5.0 / 3, 6}},
		// |p - y|: (0+1+2)/3, (3+0+3)/3
		{"mae labels [2] preds [2 3]", MeanAbsoluteError(), y, pred, []float64{1, 2}},
		{"mse labels [2] preds [2 1]", MeanSquaredError(), y, v([]int{2, 1}, 0, 5), []float64{1, 4}},
		{"mse labels [2 1] preds [2 3]", MeanSquaredError(), tensor.Reshape(y, 2, 1), pred, []float64{5.0 / 3, 6}},
		{"sparse cce labels [2] preds [2 3]", SparseCategoricalCrossentropy(true), v([]int{2}, 2, 0), v([]int{2, 3}, 0, 0, 0, 0, 0, 0),
			[]float64{math.Log(3), math.Log(3)}},
		{"bce labels [2] preds [2 1]", BinaryCrossentropy(true), v([]int{2}, 1, 0), v([]int{2, 1}, 0, 0), []float64{math.Log(2), math.Log(2)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := &Model{loss: tc.loss}
			got := m.compiledPerExample(tc.y, tc.p).Data()
			if len(got) != len(tc.want) {
				t.Fatalf("per-example loss %v, want %v", got, tc.want)
			}
			for i := range got {
				if math.Abs(float64(got[i])-tc.want[i]) > 1e-5 {
					t.Fatalf("per-example loss %v, want %v", got, tc.want)
				}
			}
		})
	}
	// Called directly, labels (n) against predictions (n, k) are refused, saying what to write.
	defer func() {
		err, _ := recover().(error)
		if err == nil || !strings.Contains(err.Error(), "tensor.Reshape(labels, 2, 1)") {
			t.Errorf("MeanSquaredError().Call(labels [2], preds [2 3]) = panic %v, want an error giving the reshape", err)
		}
	}()
	MeanSquaredError().Call(y, pred)
}

// TestCompiledAccuracyByShapes: Compile's "accuracy" is chosen by the shapes, as Keras'
// compile_utils does: binary for predictions (n, 1), sparse categorical for labels (n) or
// (n, 1) against (n, k), categorical for one-hot labels (n, k); "mse" and "mae" are the
// per-example means over the last axis, with the labels' rank matched.
func TestCompiledAccuracyByShapes(t *testing.T) {
	v := func(shape []int, d ...float32) *tensor.Tensor { return tensor.MustNew(shape, d) }
	mse := MeanSquaredError()
	tests := []struct {
		metric string
		loss   *Loss
		y, p   *tensor.Tensor
		want   float64
	}{
		{"accuracy", mse, v([]int{4}, 1, 0, 1, 1), v([]int{4, 1}, 0.9, 0.2, 0.4, 0.7), 0.75},                                         // binary, 0.5
		{"accuracy", BinaryCrossentropy(true), v([]int{2}, 1, 0), v([]int{2, 1}, 0.3, -0.2), 1},                                      // binary on logits: 0
		{"accuracy", mse, v([]int{2}, 2, 0), v([]int{2, 3}, 0, 1, 5, 0, 9, 1), 0.5},                                                  // sparse
		{"accuracy", mse, v([]int{2, 1}, 2, 1), v([]int{2, 3}, 0, 1, 5, 0, 9, 1), 1},                                                 // sparse, (n, 1)
		{"accuracy", BinaryCrossentropy(false), v([]int{2, 3}, 0, 0, 1, 1, 0, 0), v([]int{2, 3}, 0.1, 0.2, 0.9, 0.3, 0.6, 0.1), 0.5}, // categorical
		{"categorical_accuracy", mse, v([]int{2, 3}, 0, 0, 1, 0, 1, 0), v([]int{2, 3}, 0.1, 0.2, 0.9, 0.3, 0.6, 0.1), 1},
		{"mse", mse, v([]int{2}, 1, 3), v([]int{2, 3}, 1, 2, 3, 0, 3, 6), (5.0/3 + 6) / 2},
		{"mae", mse, v([]int{2}, 1, 3), v([]int{2, 3}, 1, 2, 3, 0, 3, 6), 1.5},
	}
	for _, tc := range tests {
		mt, err := compiledMetric(tc.metric, tc.loss)
		if err != nil {
			t.Fatal(err)
		}
		m := &Model{loss: tc.loss}
		st := m.shardStats([]*Metric{mt}, tc.y, tc.p, tensor.Zeros(tc.p.Shape()[0]))
		if got := float64(st[2] / st[3]); math.Abs(got-tc.want) > 1e-6 {
			t.Errorf("%s with labels %v, predictions %v = %v, want %v", tc.metric, tc.y.Shape(), tc.p.Shape(), got, tc.want)
		}
	}
	if _, err := compiledMetric("f1", mse); err == nil || !strings.Contains(err.Error(), `"mse"`) {
		t.Errorf("unknown metric: %v, want an error listing the known ones", err)
	}
}

// TestFitDense10MSERank1Labels: the parameter-server tutorial's Keras model, Dense(10)
// compiled with "mse" and trained on labels of shape (n): it trains, exactly as with the
// labels reshaped to (n, 1), each label compared with the 10 outputs.
func TestFitDense10MSERank1Labels(t *testing.T) {
	x := tensor.RandomUniform([]int{10, 10}, 0, 1, 3)
	y := tensor.RandomUniform([]int{10}, 0, 1, 4)
	var ws [][]*tensor.Tensor
	for _, labels := range []*tensor.Tensor{y, tensor.Reshape(y, 10, 1)} {
		SetRandomSeed(2)
		m := Sequential(layers.Dense(10))
		quiet(m)
		m.Compile(SGD(0.01), MeanSquaredError(), "mse")
		h := m.Fit(x, labels, BatchSize(5), Epochs(5), Shuffle(false), Verbose(0))
		l := h.History["loss"]
		if len(l) != 5 || !(l[4] < l[0]) {
			t.Fatalf("labels %v: loss %v, want 5 epochs with the loss falling", labels.Shape(), l)
		}
		if d := math.Abs(h.History["mse"][4] - l[4]); d > 1e-5 {
			t.Errorf("labels %v: the mse metric %v differs from the loss %v", labels.Shape(), h.History["mse"][4], l[4])
		}
		ws = append(ws, m.GetWeights())
	}
	for i := range ws[0] {
		if d := maxAbsDiff(ws[0][i].Data(), ws[1][i].Data()); d != 0 {
			t.Errorf("weight %d differs by %g between labels [10] and [10 1]", i, d)
		}
	}
}

// TestMetricUpdateStateKerasForms: the custom training tutorial's test_loss.update_state(t_loss)
// (Mean with the values alone) and reset_states().
func TestMetricUpdateStateKerasForms(t *testing.T) {
	testLoss := Mean("test_loss")
	testLoss.UpdateState(tensor.MustNew([]int{2}, []float32{1, 3}))
	testLoss.UpdateState(tensor.Scalar(5), nil)
	if got := testLoss.Result(); got != 3 {
		t.Errorf("Mean of 1, 3, 5 = %v", got)
	}
	testLoss.ResetStates()
	if got := testLoss.Result(); got != 0 {
		t.Errorf("after ResetStates: %v", got)
	}
	acc := SparseCategoricalAccuracy("acc")
	if err := catch(func() { acc.UpdateState(tensor.Zeros(2)) }); err == nil {
		t.Error("an accuracy's UpdateState without predictions: no error")
	}
}
