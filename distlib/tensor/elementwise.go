package tensor

import (
	"math"
	"strings"
)

// binary op codes for the broadcasting kernel.
const (
	opAdd = iota
	opSub
	opMul
	opDiv
	opMax
	opEq
	opMin
	opGt
	opLt
)

var binaryNames = [...]string{"AddV2", "Sub", "Mul", "RealDiv", "Maximum", "Equal", "Minimum", "Greater", "Less"}

// broadcastShape returns the NumPy broadcast of two shapes.
func broadcastShape(op string, a, b []int) []int {
	n := max(len(a), len(b))
	out := make([]int, n)
	for i := 0; i < n; i++ {
		da, db := 1, 1
		if j := len(a) - n + i; j >= 0 {
			da = a[j]
		}
		if j := len(b) - n + i; j >= 0 {
			db = b[j]
		}
		switch {
		case da == db:
			out[i] = da
		case da == 1:
			out[i] = db
		case db == 1:
			out[i] = da
		default:
			panic(shapeErr(op, "shapes %v and %v are not broadcastable (dimension %d: %d vs %d)", a, b, i, da, db))
		}
	}
	return out
}

// bstrides returns strides of shape (right-aligned into rank n) with 0 on broadcast axes.
func bstrides(shape []int, n int, out []int) []int {
	st := make([]int, n)
	s := 1
	for i := len(shape) - 1; i >= 0; i-- {
		j := n - len(shape) + i
		if shape[i] != 1 || out[j] == 1 {
			st[j] = s
		}
		s *= shape[i]
	}
	return st
}

func applyBinary(code int, x []float32, y []float32, z []float32, xs, ys int) {
	// xs/ys are 1 (contiguous) or 0 (broadcast scalar) strides over the inner run.
	switch {
	case xs == 1 && ys == 1:
		switch code {
		case opAdd:
			for i := range z {
				z[i] = x[i] + y[i]
			}
		case opSub:
			for i := range z {
				z[i] = x[i] - y[i]
			}
		case opMul:
			for i := range z {
				z[i] = x[i] * y[i]
			}
		case opDiv:
			for i := range z {
				z[i] = x[i] / y[i]
			}
		case opMax:
			for i := range z {
				z[i] = max(x[i], y[i])
			}
		case opEq:
			for i := range z {
				z[i] = b2f(x[i] == y[i])
			}
		case opMin:
			for i := range z {
				z[i] = min(x[i], y[i])
			}
		case opGt:
			for i := range z {
				z[i] = b2f(x[i] > y[i])
			}
		case opLt:
			for i := range z {
				z[i] = b2f(x[i] < y[i])
			}
		}
	default:
		for i := range z {
			a, b := x[i*xs], y[i*ys]
			switch code {
			case opAdd:
				z[i] = a + b
			case opSub:
				z[i] = a - b
			case opMul:
				z[i] = a * b
			case opDiv:
				z[i] = a / b
			case opMax:
				z[i] = max(a, b)
			case opEq:
				z[i] = b2f(a == b)
			case opMin:
				z[i] = min(a, b)
			case opGt:
				z[i] = b2f(a > b)
			case opLt:
				z[i] = b2f(a < b)
			}
		}
	}
}

func b2f(b bool) float32 {
	if b {
		return 1
	}
	return 0
}

// binaryRaw computes a op b with broadcasting into a new tensor on dev, without recording.
func binaryRaw(code int, a, b *Tensor, dev string) *Tensor {
	op := binaryNames[code]
	if sameShape(a.shape, b.shape) {
		out := newOn(dev, a.Shape())
		applyBinary(code, a.data, b.data, out.data, 1, 1)
		return out
	}
	shape := broadcastShape(op, a.shape, b.shape)
	out := newOn(dev, shape)
	if len(out.data) == 0 {
		return out
	}
	n := len(shape)
	sa, sb := bstrides(a.shape, n, shape), bstrides(b.shape, n, shape)
	// Inner run: the last axis.
	inner := shape[n-1]
	ia, ib := sa[n-1], sb[n-1]
	if inner == 1 {
		ia, ib = 1, 1
	}
	idx := make([]int, n)
	offA, offB := 0, 0
	for o := 0; o < len(out.data); o += inner {
		xa := a.data[offA:]
		xb := b.data[offB:]
		if ia == 1 {
			xa = xa[:inner]
		}
		if ib == 1 {
			xb = xb[:inner]
		}
		applyBinary(code, xa, xb, out.data[o:o+inner], ia, ib)
		// advance odometer over axes n-2..0
		for ax := n - 2; ax >= 0; ax-- {
			idx[ax]++
			offA += sa[ax]
			offB += sb[ax]
			if idx[ax] < shape[ax] {
				break
			}
			offA -= sa[ax] * shape[ax]
			offB -= sb[ax] * shape[ax]
			idx[ax] = 0
		}
	}
	return out
}

// sumToShape sums g (of a broadcast shape) down to shape, the inverse of broadcasting.
func sumToShape(g *Tensor, shape []int) *Tensor {
	if sameShape(g.shape, shape) {
		return g
	}
	out := newOn(g.device, append([]int(nil), shape...))
	n := len(g.shape)
	st := bstrides(shape, n, g.shape)
	idx := make([]int, n)
	off := 0
	for _, v := range g.data {
		out.data[off] += v
		for ax := n - 1; ax >= 0; ax-- {
			idx[ax]++
			off += st[ax]
			if idx[ax] < g.shape[ax] {
				break
			}
			off -= st[ax] * g.shape[ax]
			idx[ax] = 0
		}
	}
	return out
}

func binary(code int, a, b *Tensor) *Tensor {
	if a == nil || b == nil {
		panic(argErr(binaryNames[code], "an input is nil"))
	}
	dev := place(binaryNames[code], a)
	out := binaryRaw(code, a, b, dev)
	if !tracked(a, b) || code == opEq || code == opGt || code == opLt {
		return out
	}
	return record(out, func(g *Tensor, need []bool, _ gradDest) []*Tensor {
		var ga, gb *Tensor
		switch code {
		case opAdd:
			if need[0] {
				ga = sumToShape(g, a.shape)
			}
			if need[1] {
				gb = sumToShape(g, b.shape)
			}
		case opSub:
			if need[0] {
				ga = sumToShape(g, a.shape)
			}
			if need[1] {
				gb = sumToShape(negRaw(g), b.shape)
			}
		case opMul:
			if need[0] {
				ga = sumToShape(binaryRaw(opMul, g, b, g.device), a.shape)
			}
			if need[1] {
				gb = sumToShape(binaryRaw(opMul, g, a, g.device), b.shape)
			}
		case opDiv:
			if need[0] {
				ga = sumToShape(binaryRaw(opDiv, g, b, g.device), a.shape)
			}
			if need[1] {
				// d(a/b)/db = -a/b^2 = -out/b
				t := binaryRaw(opDiv, binaryRaw(opMul, g, out, g.device), b, g.device)
				gb = sumToShape(negRaw(t), b.shape)
			}
		case opMax, opMin:
			ma, mb := maxMasks(a, b, out)
			if need[0] {
				ga = sumToShape(binaryRaw(opMul, g, ma, g.device), a.shape)
			}
			if need[1] {
				gb = sumToShape(binaryRaw(opMul, g, mb, g.device), b.shape)
			}
		}
		return []*Tensor{ga, gb}
	}, a, b)
}

// maxMasks returns, broadcast to out's shape, where a (resp. b) gave the result of a
// maximum or minimum; ties go to a.
func maxMasks(a, b, out *Tensor) (*Tensor, *Tensor) {
	ea := binaryRaw(opEq, binaryRaw(opAdd, a, ZerosLike(out), out.device), out, out.device)
	mb := newOn(out.device, out.Shape())
	for i, v := range ea.data {
		mb.data[i] = 1 - v
	}
	return ea, mb
}

// Add returns a + b with NumPy broadcasting.
func Add(a, b *Tensor) *Tensor { return binary(opAdd, a, b) }

// Sub returns a - b with broadcasting.
func Sub(a, b *Tensor) *Tensor { return binary(opSub, a, b) }

// Mul returns a * b elementwise with broadcasting.
func Mul(a, b *Tensor) *Tensor { return binary(opMul, a, b) }

// Div returns a / b elementwise with broadcasting.
func Div(a, b *Tensor) *Tensor { return binary(opDiv, a, b) }

// Maximum returns the elementwise maximum of a and b with broadcasting.
func Maximum(a, b *Tensor) *Tensor { return binary(opMax, a, b) }

// Minimum returns the elementwise minimum of a and b with broadcasting.
func Minimum(a, b *Tensor) *Tensor { return binary(opMin, a, b) }

// ClipByValue limits t to [lo, hi] elementwise (the gradient passes where t is inside).
func ClipByValue(t *Tensor, lo, hi float32) *Tensor {
	if lo > hi {
		panic(argErr("ClipByValue", "lower bound %v is above upper bound %v", lo, hi))
	}
	return unary("ClipByValue", t, func(x float32) float32 { return min(max(x, lo), hi) },
		func(x, _, g float32) float32 {
			if x < lo || x > hi {
				return 0
			}
			return g
		})
}

// Equal returns 1 where a == b and 0 elsewhere, with broadcasting (not differentiable).
func Equal(a, b *Tensor) *Tensor { return binary(opEq, a, b) }

// Greater returns 1 where a > b and 0 elsewhere, with broadcasting, like tf.greater (whose
// booleans are 1 and 0 here; not differentiable). tf.greater(pred, 0.5) is
// tensor.Greater(pred, tensor.Scalar(0.5)).
func Greater(a, b *Tensor) *Tensor { return binary(opGt, a, b) }

// Less returns 1 where a < b and 0 elsewhere, with broadcasting, like tf.less.
func Less(a, b *Tensor) *Tensor { return binary(opLt, a, b) }

// AddN returns the sum of tensors of one shape, like tf.add_n (tf.add_n(model.losses) is
// tensor.AddN(model.Losses()...)).
func AddN(ts ...*Tensor) *Tensor {
	if len(ts) == 0 {
		panic(argErr("AddN", "no tensors to add (tf.add_n of an empty list fails too)"))
	}
	out := ts[0]
	for i, t := range ts[1:] {
		if t == nil || out == nil {
			panic(argErr("AddN", "tensor %d is nil", i+1))
		}
		if !sameShape(out.shape, t.shape) {
			panic(shapeErr("AddN", "tensor %d has shape %v, tensor 0 %v: add_n takes tensors of one shape", i+1, t.shape, ts[0].shape))
		}
		out = Add(out, t)
	}
	return out
}

// Cast converts t's values as tf.cast(t, dtype) does: to an integer type ("int64",
// "int32", "int8", "uint8", ...) it truncates toward zero, to "bool" it gives 1 where t is
// not 0, to a float type it keeps the values. Values stay float32 (the only element type):
// tf.cast(tf.greater(pred, 0.5), tf.int64) is tensor.Cast(tensor.Greater(pred, tensor.Scalar(0.5)), "int64").
func Cast(t *Tensor, dtype string) *Tensor {
	d := strings.TrimPrefix(strings.ToLower(strings.TrimSpace(dtype)), "tf.")
	switch d {
	case "float32", "float64", "float16", "bfloat16", "float", "double", "half":
		return unary("Cast", t, func(x float32) float32 { return x }, func(_, _, g float32) float32 { return g })
	case "int64", "int32", "int16", "int8", "uint64", "uint32", "uint16", "uint8", "int":
		return unary("Cast", t, func(x float32) float32 { return float32(math.Trunc(float64(x))) }, func(_, _, _ float32) float32 { return 0 })
	case "bool":
		return unary("Cast", t, func(x float32) float32 { return b2f(x != 0) }, func(_, _, _ float32) float32 { return 0 })
	}
	panic(argErr("Cast", "unknown dtype %q: write \"float32\", \"int64\", \"int32\" or \"bool\" (tensors hold float32 values)", dtype))
}

func negRaw(t *Tensor) *Tensor {
	out := newOn(t.device, t.Shape())
	for i, v := range t.data {
		out.data[i] = -v
	}
	return out
}

// unary applies f elementwise; df(x, y, g) gives the input gradient from input x, output y
// and output gradient g.
func unary(op string, t *Tensor, f func(float32) float32, df func(x, y, g float32) float32) *Tensor {
	if t == nil {
		panic(argErr(op, "input is nil"))
	}
	dev := place(op, t)
	out := newOn(dev, t.Shape())
	for i, v := range t.data {
		out.data[i] = f(v)
	}
	if !tracked(t) {
		return out
	}
	return record(out, func(g *Tensor, _ []bool, _ gradDest) []*Tensor {
		gi := newOn(g.device, t.Shape())
		for i := range gi.data {
			gi.data[i] = df(t.data[i], out.data[i], g.data[i])
		}
		return []*Tensor{gi}
	}, t)
}

// Neg returns -t.
func Neg(t *Tensor) *Tensor {
	return unary("Neg", t, func(x float32) float32 { return -x }, func(_, _, g float32) float32 { return -g })
}

// Scale returns t * s.
func Scale(t *Tensor, s float32) *Tensor {
	return unary("Mul", t, func(x float32) float32 { return x * s }, func(_, _, g float32) float32 { return g * s })
}

// AddScalar returns t + s.
func AddScalar(t *Tensor, s float32) *Tensor {
	return unary("AddV2", t, func(x float32) float32 { return x + s }, func(_, _, g float32) float32 { return g })
}

// Exp returns e^t elementwise.
func Exp(t *Tensor) *Tensor {
	return unary("Exp", t, func(x float32) float32 { return float32(math.Exp(float64(x))) },
		func(_, y, g float32) float32 { return g * y })
}

// Log returns the natural logarithm elementwise.
func Log(t *Tensor) *Tensor {
	return unary("Log", t, func(x float32) float32 { return float32(math.Log(float64(x))) },
		func(x, _, g float32) float32 { return g / x })
}

// Sqrt returns the square root elementwise.
func Sqrt(t *Tensor) *Tensor {
	return unary("Sqrt", t, func(x float32) float32 { return float32(math.Sqrt(float64(x))) },
		func(_, y, g float32) float32 { return g / (2 * y) })
}

// Square returns t*t elementwise.
func Square(t *Tensor) *Tensor {
	return unary("Square", t, func(x float32) float32 { return x * x },
		func(x, _, g float32) float32 { return 2 * x * g })
}

// ReLU returns max(t, 0) elementwise.
func ReLU(t *Tensor) *Tensor {
	if t == nil {
		panic(argErr("Relu", "input is nil"))
	}
	dev := place("Relu", t)
	out := newOn(dev, t.Shape())
	reluTo(out.data, t.data)
	return record(out, func(g *Tensor, _ []bool, _ gradDest) []*Tensor {
		gi := newOn(g.device, t.Shape())
		reluGrad(gi.data, g.data, out.data)
		return []*Tensor{gi}
	}, t)
}

// reluTo writes max(src, 0) into dst without branches (a data-dependent branch
// mispredicts on half the elements and costs ten times the arithmetic).
func reluTo(dst, src []float32) {
	dst = dst[:len(src)]
	for i, v := range src {
		u := math.Float32bits(v)
		dst[i] = math.Float32frombits(u &^ uint32(int32(u)>>31))
	}
}

// reluGrad writes g where the ReLU output y is positive and 0 elsewhere, without branches.
func reluGrad(dst, g, y []float32) {
	dst = dst[:len(y)]
	g = g[:len(y)]
	for i, v := range y {
		m := uint32(-int32(math.Float32bits(v)) >> 31) // all ones when y > 0 (y is never negative)
		dst[i] = math.Float32frombits(math.Float32bits(g[i]) & m)
	}
}

// Sigmoid returns 1/(1+e^-t) elementwise.
func Sigmoid(t *Tensor) *Tensor {
	return unary("Sigmoid", t, sigmoid, func(_, y, g float32) float32 { return g * y * (1 - y) })
}

func sigmoid(x float32) float32 {
	if x >= 0 {
		return float32(1 / (1 + math.Exp(-float64(x))))
	}
	e := math.Exp(float64(x))
	return float32(e / (1 + e))
}

// Tanh returns the hyperbolic tangent elementwise.
func Tanh(t *Tensor) *Tensor {
	return unary("Tanh", t, func(x float32) float32 { return float32(math.Tanh(float64(x))) },
		func(_, y, g float32) float32 { return g * (1 - y*y) })
}

// Abs returns |t| elementwise (gradient sign(t)).
func Abs(t *Tensor) *Tensor {
	return unary("Abs", t, func(x float32) float32 { return float32(math.Abs(float64(x))) },
		func(x, _, g float32) float32 {
			switch {
			case x > 0:
				return g
			case x < 0:
				return -g
			}
			return 0
		})
}
