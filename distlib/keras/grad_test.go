package keras

import (
	"fmt"
	"math"
	"testing"

	"godist/distlib/keras/layers"
	"godist/distlib/tensor"
)

// gradCheck compares the tape's gradients of f with central finite differences, for every
// value of every argument.
func gradCheck(t *testing.T, name string, f func(args []*tensor.Tensor) *tensor.Tensor, args []*tensor.Tensor) {
	t.Helper()
	vars := make([]*tensor.Variable, len(args))
	vals := make([]*tensor.Tensor, len(args))
	for i, a := range args {
		vars[i] = tensor.NewVariable(fmt.Sprintf("arg%d", i), a, true)
		vals[i] = vars[i].Value()
	}
	tape := tensor.NewGradientTape()
	out := f(vals)
	grads := tape.Gradient(out, vars)
	eval := func(k, j int, delta float32) float64 {
		in := make([]*tensor.Tensor, len(args))
		for i, a := range args {
			d := append([]float32(nil), a.Data()...)
			if i == k {
				d[j] += delta
			}
			in[i] = tensor.MustNew(a.Shape(), d)
		}
		return float64(tensor.ReduceSum(f(in)).Item())
	}
	const h = 5e-3
	for k, a := range args {
		if grads[k] == nil {
			t.Errorf("%s: gradient of argument %d is nil", name, k)
			continue
		}
		g := grads[k].Data()
		for j := range a.Data() {
			num := (eval(k, j, h) - eval(k, j, -h)) / (2 * h)
			if math.Abs(num-float64(g[j])) > 1e-2+2e-2*math.Abs(num) {
				t.Errorf("%s: d/d arg%d[%d] = %v by the tape, %v by finite differences", name, k, j, g[j], num)
				return
			}
		}
	}
}

// weighted returns sum(y * w) for fixed random w, so that every output value matters.
func weighted(y *tensor.Tensor, seed uint64) *tensor.Tensor {
	w := tensor.RandomNormal(y.Shape(), 0, 1, seed)
	return tensor.ReduceSum(tensor.Mul(y, w))
}

func TestLayerGradients(t *testing.T) {
	rnd := func(seed uint64, shape ...int) *tensor.Tensor { return tensor.RandomNormal(shape, 0, 1, seed) }
	tests := []struct {
		name  string
		layer layers.Layer
		in    []int // example shape
	}{
		{"dense linear", layers.Dense(3), []int{4}},
		{"dense relu", layers.Dense(3, layers.ReLU), []int{4}},
		{"dense sigmoid", layers.Dense(3, layers.Sigmoid), []int{4}},
		{"dense tanh", layers.Dense(3, layers.Tanh), []int{4}},
		{"dense softmax", layers.Dense(3, layers.Softmax), []int{4}},
		{"dense no bias", layers.Dense(2, layers.UseBias(false)), []int{3}},
		{"conv valid", layers.Conv2D(2, 3, layers.ReLU), []int{5, 5, 2}},
		{"conv same stride 2", layers.Conv2D(2, 3, layers.Padding("same"), layers.Strides(2)), []int{5, 4, 1}},
		{"conv sigmoid no bias", layers.Conv2D(2, 2, layers.Sigmoid, layers.UseBias(false)), []int{4, 3, 2}},
		{"conv relu no bias", layers.Conv2D(2, 2, layers.ReLU, layers.UseBias(false)), []int{4, 3, 2}},
		{"maxpool", layers.MaxPooling2D(2), []int{4, 4, 2}},
		{"maxpool same", layers.MaxPooling2D(2, layers.Padding("same")), []int{3, 3, 1}},
		{"flatten", layers.Flatten(), []int{2, 3}},
		{"reshape", layers.Reshape([]int{3, -1}), []int{2, 3}},
		{"dropout", layers.Dropout(0.5), []int{6}},
	}
	for i, tc := range tests {
		out, params, err := tc.layer.Build(tc.in, uint64(i+1))
		if err != nil {
			t.Fatalf("%s: Build(%v): %v", tc.name, tc.in, err)
		}
		args := []*tensor.Tensor{rnd(uint64(100+i), append([]int{2}, tc.in...)...)}
		for _, p := range params {
			args = append(args, p.Init)
			if p.Name == "bias" { // zeros would hide bias mistakes in ReLU regions
				args[len(args)-1] = rnd(uint64(200+i), p.Init.Shape()...)
			}
		}
		f := func(a []*tensor.Tensor) *tensor.Tensor {
			y := tc.layer.Forward(a[0], a[1:], true, 42)
			if got := y.Shape()[1:]; !sameInts(got, out) {
				t.Fatalf("%s: output examples %v, Build said %v", tc.name, got, out)
			}
			return weighted(y, 7)
		}
		gradCheck(t, tc.name, f, args)
	}
}

func TestLossGradients(t *testing.T) {
	logits := tensor.RandomNormal([]int{4, 3}, 0, 1, 5)
	probs := tensor.Softmax(tensor.RandomNormal([]int{4, 3}, 0, 1, 6), 1)
	labels := tensor.MustNew([]int{4}, []float32{0, 2, 1, 2})
	bin := tensor.MustNew([]int{4, 1}, []float32{1, 0, 0, 1})
	p01 := tensor.Sigmoid(tensor.RandomNormal([]int{4, 1}, 0, 1, 8))
	tests := []struct {
		name   string
		loss   *Loss
		y, arg *tensor.Tensor
	}{
		{"scce logits", SparseCategoricalCrossentropy(true), labels, logits},
		{"scce probs", SparseCategoricalCrossentropy(false), labels, probs},
		{"scce none", SparseCategoricalCrossentropy(true, WithReduction(ReductionNone)), labels, logits},
		{"bce logits", BinaryCrossentropy(true), bin, tensor.RandomNormal([]int{4, 1}, 0, 2, 9)},
		{"bce probs", BinaryCrossentropy(false), bin, p01},
		{"bce labels rank 1", BinaryCrossentropy(true, WithReduction(ReductionSum)), tensor.Reshape(bin, 4), tensor.RandomNormal([]int{4, 1}, 0, 2, 10)},
		{"mse", MeanSquaredError(), tensor.RandomNormal([]int{4, 2}, 0, 1, 11), tensor.RandomNormal([]int{4, 2}, 0, 1, 12)},
		{"mse broadcast labels", MeanSquaredError(), tensor.RandomNormal([]int{4, 3}, 0, 1, 13), tensor.RandomNormal([]int{4, 1}, 0, 1, 14)},
		{"mae", MeanAbsoluteError(), tensor.RandomNormal([]int{4, 2}, 0, 1, 15), tensor.RandomNormal([]int{4, 2}, 0, 1, 16)},
	}
	for _, tc := range tests {
		gradCheck(t, tc.name, func(a []*tensor.Tensor) *tensor.Tensor {
			return weighted(tc.loss.Call(tc.y, a[0]), 3)
		}, []*tensor.Tensor{tc.arg})
	}
}

func TestLossValues(t *testing.T) {
	// Values computed by hand from the Keras definitions.
	logits := tensor.MustNew([]int{2, 3}, []float32{1, 2, 3, 0, 0, 0})
	labels := tensor.MustNew([]int{2}, []float32{2, 0})
	lse := math.Log(math.Exp(1) + math.Exp(2) + math.Exp(3))
	sig := func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }
	tests := []struct {
		name string
		got  *tensor.Tensor
		want []float64
	}{
		{"scce none", SparseCategoricalCrossentropy(true, WithReduction(ReductionNone)).Call(labels, logits),
			[]float64{lse - 3, math.Log(3)}},
		{"scce mean", SparseCategoricalCrossentropy(true).Call(labels, logits),
			[]float64{(lse - 3 + math.Log(3)) / 2}},
		{"scce sum", SparseCategoricalCrossentropy(true, WithReduction(ReductionSum)).Call(labels, logits),
			[]float64{lse - 3 + math.Log(3)}},
		{"scce probs", SparseCategoricalCrossentropy(false, WithReduction(ReductionNone)).Call(labels,
			tensor.MustNew([]int{2, 3}, []float32{0.2, 0.3, 0.5, 0.6, 0.2, 0.2})),
			[]float64{-math.Log(0.5), -math.Log(0.6)}},
		{"bce logits", BinaryCrossentropy(true, WithReduction(ReductionNone)).Call(
			tensor.MustNew([]int{2, 1}, []float32{1, 0}), tensor.MustNew([]int{2, 1}, []float32{2, -1})),
			[]float64{-math.Log(sig(2)), -math.Log(1 - sig(-1))}},
		{"bce probs", BinaryCrossentropy(false, WithReduction(ReductionNone)).Call(
			tensor.MustNew([]int{2, 2}, []float32{1, 0, 0, 1}), tensor.MustNew([]int{2, 2}, []float32{0.9, 0.2, 0.3, 0.6})),
			[]float64{-(math.Log(0.9) + math.Log(0.8)) / 2, -(math.Log(0.7) + math.Log(0.6)) / 2}},
		{"mse", MeanSquaredError(WithReduction(ReductionNone)).Call(
			tensor.MustNew([]int{2, 2}, []float32{1, 2, 3, 4}), tensor.MustNew([]int{2, 2}, []float32{1, 0, 0, 4})),
			[]float64{2, 4.5}},
	}
	for _, tc := range tests {
		d := tc.got.Data()
		if len(d) != len(tc.want) {
			t.Errorf("%s: got %d values, want %d", tc.name, len(d), len(tc.want))
			continue
		}
		for i := range d {
			if math.Abs(float64(d[i])-tc.want[i]) > 1e-5 {
				t.Errorf("%s: value %d = %v, want %v", tc.name, i, d[i], tc.want[i])
			}
		}
	}
}
