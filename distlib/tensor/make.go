package tensor

import (
	"errors"
	"fmt"
	"math"
	"reflect"

	"godist/distlib/device"
)

// ErrArgument reports an argument outside what an operation accepts (an axis out of range,
// an unknown padding, a label outside the number of classes, ...).
var ErrArgument = errors.New("tensor: invalid argument")

// OpError is the error an op panics with when its inputs are wrong. It names the op and
// unwraps to ErrShape or ErrArgument.
type OpError struct {
	Op  string // "MatMul", "Conv2D", ...
	Msg string
	Err error // ErrShape or ErrArgument
}

// Error returns "tensor: Op: message".
func (e *OpError) Error() string { return fmt.Sprintf("tensor: %s: %s", e.Op, e.Msg) }

// Unwrap returns ErrShape or ErrArgument.
func (e *OpError) Unwrap() error { return e.Err }

func shapeErr(op, format string, args ...any) *OpError {
	return &OpError{Op: op, Msg: fmt.Sprintf(format, args...), Err: ErrShape}
}

func argErr(op, format string, args ...any) *OpError {
	return &OpError{Op: op, Msg: fmt.Sprintf(format, args...), Err: ErrArgument}
}

// place returns the device an op runs on and logs the placement when logging is on.
func place(op string, first *Tensor) string {
	in := ""
	if first != nil {
		in = first.device
	}
	d := device.Placement(in)
	device.LogOp(op, d)
	return d
}

// constDevice places a constant. As in TensorFlow's eager mode, making a constant is not
// an op execution on the default device; inside a device scope it is logged as the copy
// TensorFlow makes (_EagerConst).
func constDevice() string {
	if d := device.Current(); d != "" {
		device.LogOp("_EagerConst", d)
		return d
	}
	return device.Default()
}

// newOn makes an output tensor with fresh storage on a device.
func newOn(dev string, shape []int) *Tensor {
	return &Tensor{shape: shape, data: floats("", shape, prod(shape)), device: dev}
}

// newGradOn returns a tensor for a backward function's result whose storage comes from the
// scratch pool, not zeroed: only for results the function writes in full. The walk in
// gradients gives the storage back as soon as no gradient refers to it, so the next
// backward pass (the next training step) reuses it, often still in the cache, and the
// garbage collector neither zeroes nor collects it.
func newGradOn(dev string, shape []int) *Tensor {
	buf := getBuf(prod(shape))
	return &Tensor{shape: shape, data: *buf, device: dev, scratch: buf}
}

// gradInto returns the tensor for the gradient of input i of a backward function: on the
// caller's buffer into[i] when GradientInto gave one (not zeroed: the function writes it in
// full), else a fresh zeroed tensor.
func gradInto(into gradDest, i int, dev string, shape []int) *Tensor {
	if b := into.buf(i); b != nil {
		return &Tensor{shape: shape, data: b, device: dev}
	}
	return newOn(dev, shape)
}

// Ones returns a tensor of the given shape filled with ones.
func Ones(shape ...int) *Tensor { return Fill(1, shape...) }

// Fill returns a tensor of the given shape with every element v.
func Fill(v float32, shape ...int) *Tensor {
	t := mustZeros("Fill", shape)
	for i := range t.data {
		t.data[i] = v
	}
	t.device = place("Fill", nil)
	return t
}

// ZerosLike returns zeros with t's shape, on t's device.
func ZerosLike(t *Tensor) *Tensor {
	return &Tensor{shape: t.Shape(), data: make([]float32, len(t.data)), device: t.device}
}

// OnesLike returns ones with t's shape, on t's device.
func OnesLike(t *Tensor) *Tensor {
	o := ZerosLike(t)
	for i := range o.data {
		o.data[i] = 1
	}
	return o
}

// FromFloat64s returns a tensor of the given shape holding data converted to float32.
func FromFloat64s(shape []int, data []float64) (*Tensor, error) {
	f := make([]float32, len(data))
	for i, v := range data {
		f[i] = float32(v)
	}
	return New(shape, f)
}

// Constant returns a tensor holding v, like tf.constant: a number (float32, float64, any
// int or uint kind, bool) gives a scalar; nested slices or arrays of numbers give a tensor whose
// shape is their nesting ([][]float64{{1, 2}, {3, 4}} has shape [2 2]); a *Tensor is copied.
// The tensor is placed on the current device scope. Ragged slices and other types panic with
// an *OpError naming the problem.
func Constant(v any) *Tensor {
	if t, ok := v.(*Tensor); ok {
		c := &Tensor{shape: t.Shape(), data: append([]float32(nil), t.data...)}
		c.device = constDevice()
		return c
	}
	var shape []int
	rv := reflect.ValueOf(v)
	if !rv.IsValid() {
		panic(argErr("Constant", "value is nil; give a number or a (nested) slice of numbers"))
	}
	// Find the shape from the first element at each level.
	for x := rv; x.Kind() == reflect.Slice || x.Kind() == reflect.Array; {
		shape = append(shape, x.Len())
		if x.Len() == 0 {
			break
		}
		x = x.Index(0)
		for x.Kind() == reflect.Interface {
			x = x.Elem()
		}
	}
	n := 1
	for _, d := range shape {
		n *= d
	}
	data := make([]float32, 0, n)
	var walk func(x reflect.Value, depth int)
	walk = func(x reflect.Value, depth int) {
		for x.Kind() == reflect.Interface {
			x = x.Elem()
		}
		if depth == len(shape) {
			f, ok := number(x)
			if !ok {
				panic(argErr("Constant", "element of type %s is not a number (value %v of type %T)", x.Type(), v, v))
			}
			data = append(data, f)
			return
		}
		if x.Kind() != reflect.Slice && x.Kind() != reflect.Array {
			panic(shapeErr("Constant", "ragged value: expected a slice at depth %d, found %s", depth, x.Type()))
		}
		if x.Len() != shape[depth] {
			panic(shapeErr("Constant", "ragged value: a slice at depth %d has %d elements, the first one at that depth has %d", depth, x.Len(), shape[depth]))
		}
		for i := 0; i < x.Len(); i++ {
			walk(x.Index(i), depth+1)
		}
	}
	walk(rv, 0)
	if shape == nil {
		shape = []int{}
	}
	return &Tensor{shape: shape, data: data, device: constDevice()}
}

func number(x reflect.Value) (float32, bool) {
	switch x.Kind() {
	case reflect.Float32, reflect.Float64:
		return float32(x.Float()), true
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return float32(x.Int()), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return float32(x.Uint()), true
	case reflect.Bool:
		if x.Bool() {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

// rng is splitmix64: small, fast, and the same sequence on every platform for a seed.
type rng struct{ s uint64 }

func (r *rng) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// float returns a uniform value in [0, 1).
func (r *rng) float() float64 { return float64(r.next()>>11) / (1 << 53) }

// RandomUniform returns a tensor of the given shape with values drawn uniformly from
// [minval, maxval), reproducibly for a seed.
func RandomUniform(shape []int, minval, maxval float32, seed uint64) *Tensor {
	t := mustZeros("RandomUniform", shape)
	r := rng{s: seed}
	span := float64(maxval - minval)
	for i := range t.data {
		t.data[i] = minval + float32(r.float()*span)
	}
	t.device = place("RandomUniform", nil)
	return t
}

// RandomNormal returns a tensor of the given shape with values drawn from a normal
// distribution with the given mean and standard deviation, reproducibly for a seed.
func RandomNormal(shape []int, mean, stddev float32, seed uint64) *Tensor {
	t := mustZeros("RandomNormal", shape)
	r := rng{s: seed}
	for i := 0; i < len(t.data); i += 2 {
		// Box-Muller.
		u1 := r.float()
		for u1 == 0 {
			u1 = r.float()
		}
		u2 := r.float()
		rad := math.Sqrt(-2 * math.Log(u1))
		t.data[i] = mean + stddev*float32(rad*math.Cos(2*math.Pi*u2))
		if i+1 < len(t.data) {
			t.data[i+1] = mean + stddev*float32(rad*math.Sin(2*math.Pi*u2))
		}
	}
	t.device = place("RandomNormal", nil)
	return t
}

// GlorotUniform returns Keras's default kernel initialization for a weight of the given
// shape: uniform in [-l, l] with l = sqrt(6 / (fanIn + fanOut)). For a dense kernel
// [in, out] the fans are in and out; for a convolution kernel [h, w, in, out] they are
// h*w*in and h*w*out.
func GlorotUniform(shape []int, seed uint64) *Tensor {
	fanIn, fanOut := fans(shape)
	l := float32(math.Sqrt(6 / float64(fanIn+fanOut)))
	return RandomUniform(shape, -l, l, seed)
}

func fans(shape []int) (int, int) {
	switch len(shape) {
	case 0:
		return 1, 1
	case 1:
		return shape[0], shape[0]
	case 2:
		return shape[0], shape[1]
	}
	rf := 1
	for _, d := range shape[:len(shape)-2] {
		rf *= d
	}
	return shape[len(shape)-2] * rf, shape[len(shape)-1] * rf
}

func mustZeros(op string, shape []int) *Tensor {
	n, err := elements(op, shape)
	if err != nil {
		if _, ok := err.(*OpError); ok {
			panic(err)
		}
		panic(shapeErr(op, "%v", err))
	}
	return &Tensor{shape: append([]int(nil), shape...), data: floats(op, shape, n)}
}

// To returns the tensor placed on another device (a full name or a specification such as
// "/CPU:1"). CPU devices share memory, so the values are not copied. It panics with the
// device error when the device cannot be satisfied.
func (t *Tensor) To(dev string) *Tensor {
	full := device.MustResolve(dev)
	out := &Tensor{shape: t.shape, data: t.data, device: full}
	if t.node != nil {
		out.node = &node{inputs: []*Tensor{t}, backward: func(g *Tensor, _ []bool, _ gradDest) []*Tensor {
			return []*Tensor{g}
		}}
	}
	device.LogOp("Identity", full)
	return out
}

// Float64s returns a copy of the values as float64.
func (t *Tensor) Float64s() []float64 {
	out := make([]float64, len(t.data))
	for i, v := range t.data {
		out[i] = float64(v)
	}
	return out
}

// Clone returns a copy of the tensor with its own storage, on the same device, not
// connected to any gradient record.
func (t *Tensor) Clone() *Tensor {
	return &Tensor{shape: t.Shape(), data: append([]float32(nil), t.data...), device: t.device}
}
