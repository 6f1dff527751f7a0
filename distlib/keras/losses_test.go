package keras

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"godist/distlib/keras/layers"
	"godist/distlib/tensor"
)

// TestLossBroadcast: labels broadcast against predictions as in Keras; shapes that do not
// broadcast (even with as many values) are an error naming both.
func TestLossBroadcast(t *testing.T) {
	v := func(shape []int, d ...float32) *tensor.Tensor { return tensor.MustNew(shape, d) }
	pred41 := v([]int{4, 1}, 1, 2, 3, 4)
	y4 := v([]int{4}, 0, 2, 5, 1)
	none := WithReduction(ReductionNone)
	tests := []struct {
		name string
		loss *Loss
		y, p *tensor.Tensor
		want []float64 // per example; nil: an error
	}{
		{"mse labels [4] preds [4 1]", MeanSquaredError(none), y4, pred41, []float64{1, 0, 4, 9}},
		{"mse labels [4 1] preds [4 1]", MeanSquaredError(none), tensor.Reshape(y4, 4, 1), pred41, []float64{1, 0, 4, 9}},
		{"mse labels [4 1] preds [4]", MeanSquaredError(none), tensor.Reshape(y4, 4, 1), tensor.Reshape(pred41, 4), []float64{1, 0, 4, 9}},
		{"mse labels [4 2] preds [4 1]", MeanSquaredError(none), v([]int{4, 2}, 0, 2, 2, 2, 3, 5, 4, 4), pred41, []float64{1, 0, 2, 0}},
		{"mse labels [4 1] preds [4 2]", MeanSquaredError(none), tensor.Reshape(y4, 4, 1), v([]int{4, 2}, 1, -1, 2, 2, 5, 3, 1, 3), []float64{1, 0, 2, 2}},
		{"mae labels [4] preds [4 1]", MeanAbsoluteError(none), y4, pred41, []float64{1, 0, 2, 3}},
		{"mae mean", MeanAbsoluteError(), tensor.Reshape(y4, 4, 1), pred41, []float64{1.5}},
		{"bce labels [4] preds [4 1]", BinaryCrossentropy(false, none), v([]int{4}, 1, 0, 1, 0), v([]int{4, 1}, 0.5, 0.5, 0.5, 0.5),
			[]float64{math.Log(2), math.Log(2), math.Log(2), math.Log(2)}},
		{"mse transposed", MeanSquaredError(), v([]int{2, 4}, 1, 2, 3, 4, 5, 6, 7, 8), v([]int{4, 2}, 1, 2, 3, 4, 5, 6, 7, 8), nil},
		{"mse batch differs", MeanSquaredError(), v([]int{8}, 1, 2, 3, 4, 5, 6, 7, 8), pred41, nil},
		{"mse labels [4] preds [4 2]", MeanSquaredError(), y4, v([]int{4, 2}, 1, 2, 3, 4, 5, 6, 7, 8), nil},
		{"mae labels [4 3] preds [4 2]", MeanAbsoluteError(), tensor.Zeros(4, 3), tensor.Zeros(4, 2), nil},
		{"bce labels [3 1] preds [4 1]", BinaryCrossentropy(true), tensor.Zeros(3, 1), pred41, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				r := recover()
				if tc.want != nil {
					if r != nil {
						t.Fatalf("panic %v", r)
					}
					return
				}
				err, _ := r.(error)
				ys, ps := tc.y.Shape(), tc.p.Shape()
				if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("labels of shape %v", ys)) ||
					!strings.Contains(err.Error(), fmt.Sprintf("predictions of shape %v", ps)) {
					t.Errorf("panic %v, want an error naming labels %v and predictions %v", r, ys, ps)
				}
			}()
			got := tc.loss.Call(tc.y, tc.p).Data()
			if tc.want == nil {
				t.Fatalf("loss %v, want an error", got)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("loss %v, want %v", got, tc.want)
			}
			for i := range got {
				if math.Abs(float64(got[i])-tc.want[i]) > 1e-5 {
					t.Fatalf("loss %v, want %v", got, tc.want)
				}
			}
		})
	}
}

// TestFitMSELabelShapes: Fit with MSE trains the same with labels [n] as with [n 1].
func TestFitMSELabelShapes(t *testing.T) {
	x := tensor.RandomNormal([]int{64, 3}, 0, 1, 5)
	y := tensor.Reshape(tensor.ReduceSum(x, 1), 64)
	var ws [][]*tensor.Tensor
	for _, labels := range []*tensor.Tensor{y, tensor.Reshape(y, 64, 1)} {
		SetRandomSeed(2)
		m := Sequential(layers.Dense(1, layers.InputShape(3)))
		quiet(m)
		m.Compile(SGD(0.05), MeanSquaredError())
		h := m.Fit(x, labels, BatchSize(16), Epochs(3), Shuffle(false), Verbose(0))
		if l := h.History["loss"]; l[2] >= l[0] {
			t.Errorf("labels %v: loss %v does not fall", labels.Shape(), l)
		}
		ws = append(ws, m.GetWeights())
	}
	for i := range ws[0] {
		if d := maxAbsDiff(ws[0][i].Data(), ws[1][i].Data()); d > 1e-6 {
			t.Errorf("weight %d differs by %g between labels [64] and [64 1]", i, d)
		}
	}
}
