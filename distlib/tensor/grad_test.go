package tensor

import (
	"fmt"
	"math"
	"testing"
)

// lossOf reduces an op's output to a scalar with fixed random weights, so every output
// element's gradient is exercised.
func lossOf(y *Tensor) *Tensor {
	w := RandomNormal(y.shape, 0, 1, 99)
	return ReduceSum(Mul(y, w))
}

// checkGrad compares the tape's gradients of f with central finite differences computed in
// float64 around float32 inputs.
func checkGrad(t *testing.T, name string, f func(xs []*Tensor) *Tensor, inputs []*Tensor, tol float64) {
	t.Helper()
	vars := make([]*Variable, len(inputs))
	vals := make([]*Tensor, len(inputs))
	for i, in := range inputs {
		vars[i] = NewVariable(fmt.Sprintf("x%d", i), in, true)
		vals[i] = vars[i].Value()
	}
	tape := NewGradientTape()
	loss := lossOf(f(vals))
	grads := tape.Gradient(loss, vars)
	for i, in := range inputs {
		if grads[i] == nil {
			t.Errorf("%s: gradient %d is nil", name, i)
			continue
		}
		if !sameShape(grads[i].shape, in.shape) {
			t.Errorf("%s: gradient %d has shape %v, want %v", name, i, grads[i].shape, in.shape)
			continue
		}
		for j := range in.data {
			const h = 1e-2
			eval := func(delta float64) float64 {
				xs := make([]*Tensor, len(inputs))
				for k, x := range inputs {
					xs[k] = x.Clone()
				}
				xs[i].data[j] = float32(float64(in.data[j]) + delta)
				return float64(lossOf(f(xs)).Item())
			}
			num := (eval(h) - eval(-h)) / (2 * h)
			got := float64(grads[i].data[j])
			if math.Abs(num-got) > tol*(1+math.Abs(num)) {
				t.Errorf("%s: d/dx%d[%d] = %.5f, finite difference %.5f", name, i, j, got, num)
				return
			}
		}
	}
}

func rnd(seed uint64, shape ...int) *Tensor { return RandomNormal(shape, 0, 1, seed) }

// positive returns values in [0.5, 1.5), safe for Log, Sqrt and division.
func positive(seed uint64, shape ...int) *Tensor { return RandomUniform(shape, 0.5, 1.5, seed) }

// awayFromZero returns values with |v| >= 0.2 so kinks (ReLU, Abs) are not straddled.
func awayFromZero(seed uint64, shape ...int) *Tensor {
	t := rnd(seed, shape...)
	for i, v := range t.data {
		if v >= 0 && v < 0.2 {
			t.data[i] = v + 0.3
		} else if v < 0 && v > -0.2 {
			t.data[i] = v - 0.3
		}
	}
	return t
}

func one(op func(*Tensor) *Tensor) func([]*Tensor) *Tensor {
	return func(x []*Tensor) *Tensor { return op(x[0]) }
}

func two(op func(a, b *Tensor) *Tensor) func([]*Tensor) *Tensor {
	return func(x []*Tensor) *Tensor { return op(x[0], x[1]) }
}

func TestGradients(t *testing.T) {
	labels := Constant([]float32{2, 0, 1})
	distinct := Constant([][]float32{{1, 5, 2}, {7, 3, 4}})
	tests := []struct {
		name   string
		f      func([]*Tensor) *Tensor
		inputs []*Tensor
	}{
		{"Add", two(Add), []*Tensor{rnd(1, 2, 3), rnd(2, 2, 3)}},
		{"AddBroadcastRow", two(Add), []*Tensor{rnd(1, 2, 3), rnd(2, 3)}},
		{"AddBroadcastBoth", two(Add), []*Tensor{rnd(1, 2, 1, 3), rnd(2, 4, 1)}},
		{"SubBroadcastScalar", two(Sub), []*Tensor{rnd(1, 2, 3), rnd(2)}},
		{"Mul", two(Mul), []*Tensor{rnd(1, 3, 2), rnd(2, 3, 1)}},
		{"Div", two(Div), []*Tensor{rnd(1, 2, 3), positive(2, 3)}},
		{"Maximum", two(Maximum), []*Tensor{Constant([]float32{1, -2, 3}), Constant([]float32{0, 0, 4})}},
		{"Minimum", two(Minimum), []*Tensor{Constant([]float32{1, -2, 3}), Constant([]float32{0, 0, 4})}},
		{"MinimumBroadcast", two(Minimum), []*Tensor{Constant([][]float32{{1, -2}, {3, 0.5}}), Constant([]float32{0.25})}},
		{"ClipByValue", one(func(x *Tensor) *Tensor { return ClipByValue(x, -0.5, 0.5) }), []*Tensor{Constant([]float32{-1, -0.2, 0.3, 0.9})}},
		{"Neg", one(Neg), []*Tensor{rnd(1, 4)}},
		{"Scale", one(func(x *Tensor) *Tensor { return Scale(x, 2.5) }), []*Tensor{rnd(1, 4)}},
		{"AddScalar", one(func(x *Tensor) *Tensor { return AddScalar(x, -1) }), []*Tensor{rnd(1, 4)}},
		{"Exp", one(Exp), []*Tensor{rnd(1, 2, 2)}},
		{"Log", one(Log), []*Tensor{positive(1, 5)}},
		{"Sqrt", one(Sqrt), []*Tensor{positive(1, 5)}},
		{"Square", one(Square), []*Tensor{rnd(1, 5)}},
		{"ReLU", one(ReLU), []*Tensor{awayFromZero(1, 6)}},
		{"Sigmoid", one(Sigmoid), []*Tensor{rnd(1, 6)}},
		{"Tanh", one(Tanh), []*Tensor{rnd(1, 6)}},
		{"Abs", one(Abs), []*Tensor{awayFromZero(3, 6)}},
		{"MatMul", two(func(a, b *Tensor) *Tensor { return MatMul(a, b, false, false) }), []*Tensor{rnd(1, 3, 4), rnd(2, 4, 5)}},
		{"MatMulTA", two(func(a, b *Tensor) *Tensor { return MatMul(a, b, true, false) }), []*Tensor{rnd(1, 4, 3), rnd(2, 4, 5)}},
		{"MatMulTB", two(func(a, b *Tensor) *Tensor { return MatMul(a, b, false, true) }), []*Tensor{rnd(1, 3, 4), rnd(2, 5, 4)}},
		{"MatMulTATB", two(func(a, b *Tensor) *Tensor { return MatMul(a, b, true, true) }), []*Tensor{rnd(1, 4, 3), rnd(2, 5, 4)}},
		{"Transpose", one(func(x *Tensor) *Tensor { return Transpose(x, 2, 0, 1) }), []*Tensor{rnd(1, 2, 3, 4)}},
		{"Transpose2D", one(func(x *Tensor) *Tensor { return Transpose(x) }), []*Tensor{rnd(1, 3, 5)}},
		{"Reshape", one(func(x *Tensor) *Tensor { return Reshape(x, -1, 2) }), []*Tensor{rnd(1, 2, 3)}},
		{"Concat0", two(func(a, b *Tensor) *Tensor { return Concat(0, a, b) }), []*Tensor{rnd(1, 2, 3), rnd(2, 1, 3)}},
		{"Concat1", two(func(a, b *Tensor) *Tensor { return Concat(-1, a, b) }), []*Tensor{rnd(1, 2, 3), rnd(2, 2, 2)}},
		{"Split", one(func(x *Tensor) *Tensor { p := Split(x, 2, 1); return Mul(p[0], p[1]) }), []*Tensor{rnd(1, 2, 4)}},
		{"ReduceSumAll", one(func(x *Tensor) *Tensor { return ReduceSum(x) }), []*Tensor{rnd(1, 2, 3)}},
		{"ReduceSumAxes", one(func(x *Tensor) *Tensor { return ReduceSum(x, 0, 2) }), []*Tensor{rnd(1, 2, 3, 4)}},
		{"ReduceMean", one(func(x *Tensor) *Tensor { return ReduceMean(x, -1) }), []*Tensor{rnd(1, 2, 3)}},
		{"ReduceMax", one(func(x *Tensor) *Tensor { return ReduceMax(x, 1) }), []*Tensor{distinct}},
		{"ReduceMaxAll", one(func(x *Tensor) *Tensor { return ReduceMax(x) }), []*Tensor{distinct}},
		{"Softmax", one(func(x *Tensor) *Tensor { return Softmax(x, -1) }), []*Tensor{rnd(1, 2, 4)}},
		{"SoftmaxAxis0", one(func(x *Tensor) *Tensor { return Softmax(x, 0) }), []*Tensor{rnd(1, 3, 2)}},
		{"LogSoftmax", one(func(x *Tensor) *Tensor { return LogSoftmax(x, 1) }), []*Tensor{rnd(1, 2, 4)}},
		{"BiasAdd", two(BiasAdd), []*Tensor{rnd(1, 2, 2, 3), rnd(2, 3)}},
		{"DenseReLU", func(x []*Tensor) *Tensor { return Dense(x[0], x[1], x[2], true) }, []*Tensor{awayFromZero(1, 3, 4), rnd(2, 4, 5), Constant([]float32{0.1, -0.2, 0.3, 0, 0.5})}},
		{"DenseLinear", func(x []*Tensor) *Tensor { return Dense(x[0], x[1], nil, false) }, []*Tensor{rnd(1, 3, 4), rnd(2, 4, 5)}},
		{"Conv2DValid", two(func(x, k *Tensor) *Tensor { return Conv2D(x, k, 1, "valid") }), []*Tensor{rnd(1, 2, 5, 5, 2), rnd(2, 3, 3, 2, 3)}},
		{"Conv2DSameStride2", two(func(x, k *Tensor) *Tensor { return Conv2D(x, k, 2, "same") }), []*Tensor{rnd(1, 1, 5, 6, 2), rnd(2, 3, 2, 2, 2)}},
		{"FusedConv2D", func(x []*Tensor) *Tensor { return FusedConv2D(x[0], x[1], x[2], 1, "same", true) }, []*Tensor{rnd(1, 2, 4, 4, 2), rnd(2, 3, 3, 2, 3), Constant([]float32{0.1, -0.1, 0.2})}},
		{"FusedConv2DLinear", func(x []*Tensor) *Tensor { return FusedConv2D(x[0], x[1], nil, 2, "valid", false) }, []*Tensor{rnd(1, 1, 5, 5, 1), rnd(2, 3, 3, 1, 2)}},
		{"MaxPoolValid", one(func(x *Tensor) *Tensor { return MaxPool2D(x, 2, 2, "valid") }), []*Tensor{rnd(1, 2, 4, 5, 2)}},
		{"MaxPoolSame", one(func(x *Tensor) *Tensor { return MaxPool2D(x, 2, 2, "same") }), []*Tensor{rnd(2, 1, 3, 3, 1)}},
		{"Dropout", one(func(x *Tensor) *Tensor { return Dropout(x, 0.5, 7) }), []*Tensor{rnd(1, 10)}},
		{"SparseSoftmaxCE", one(func(x *Tensor) *Tensor { return SparseSoftmaxCrossEntropyWithLogits(x, labels) }), []*Tensor{rnd(1, 3, 4)}},
		{"SigmoidCE", one(func(x *Tensor) *Tensor {
			return SigmoidCrossEntropyWithLogits(Constant([]float32{0, 1, 0.5}), x)
		}), []*Tensor{rnd(1, 3)}},
		{"Chain", two(func(a, b *Tensor) *Tensor {
			h := Tanh(MatMul(a, b, false, false))
			return Add(Mul(h, h), Exp(Scale(h, 0.5)))
		}), []*Tensor{rnd(1, 2, 3), rnd(2, 3, 2)}},
		{"SharedInput", one(func(x *Tensor) *Tensor { return Mul(x, Add(x, x)) }), []*Tensor{rnd(1, 3)}},
		// Dense input gradients come from the scratch pool and go back once no gradient
		// refers to them: here one is read through two reshape views and summed with
		// another, and the kernel x[2] is read by two ops.
		{"DenseScratchViews", func(x []*Tensor) *Tensor {
			h := Dense(x[0], x[1], nil, true)
			h2 := Dense(Reshape(Reshape(h, -1), 3, 4), x[2], nil, false)
			return Add(Dense(h, x[2], nil, true), h2)
		}, []*Tensor{awayFromZero(1, 3, 4), rnd(2, 4, 4), rnd(3, 4, 5)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkGrad(t, tc.name, tc.f, tc.inputs, 2e-2)
		})
	}
}
