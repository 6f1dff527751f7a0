// Package tensor provides dense float32 tensors, the ops the course uses on them, and
// reverse-mode automatic differentiation through a GradientTape.
//
// A Tensor is immutable once made: ops return new tensors. Variables (see Variable) are the
// mutable holders of model parameters. Every tensor lives on a device (see package device);
// ops run on the device of the calling goroutine's scope (device.With), else on that of
// their first input, and, when placement logging is on, print one line per execution the
// way TensorFlow does.
package tensor

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"godist/distlib/device"
)

// ErrShape reports that tensors or data do not have the shapes an operation needs.
var ErrShape = errors.New("tensor: shape mismatch")

// Tensor is a dense, row-major float32 array with a shape.
//
// Integer data such as class labels is stored exactly as float32 (integers up to 2^24).
type Tensor struct {
	shape  []int
	data   []float32
	device string // full device name, "" means the default device
	node   *node  // autodiff record, nil when not produced under a watched computation
	// scratch is the pool buffer holding data when a backward function made this tensor
	// with newGradOn; gradients gives it back once no gradient refers to it.
	scratch *[]float32
}

// New returns a tensor with the given shape that uses data as its storage (not copied).
// It returns an error naming both when len(data) differs from the product of shape.
func New(shape []int, data []float32) (*Tensor, error) {
	n, err := numElements(shape)
	if err != nil {
		return nil, err
	}
	if len(data) != n {
		return nil, fmt.Errorf("%w: shape %v holds %d values, data has %d", ErrShape, shape, n, len(data))
	}
	return &Tensor{shape: append([]int(nil), shape...), data: data}, nil
}

// MustNew is like New but panics on error; for literals in examples and tests.
func MustNew(shape []int, data []float32) *Tensor {
	t, err := New(shape, data)
	if err != nil {
		panic(err)
	}
	return t
}

// Zeros returns a tensor of the given shape filled with zeros.
func Zeros(shape ...int) *Tensor {
	n, err := elements("Zeros", shape)
	if err != nil {
		panic(err)
	}
	return &Tensor{shape: append([]int(nil), shape...), data: floats("Zeros", shape, n)}
}

// Scalar returns a rank-0 tensor holding v.
func Scalar(v float32) *Tensor { return &Tensor{shape: []int{}, data: []float32{v}} }

func numElements(shape []int) (int, error) { return elements("New", shape) }

// Shape returns a copy of the tensor's shape.
func (t *Tensor) Shape() []int { return append([]int(nil), t.shape...) }

// Rank returns the number of dimensions.
func (t *Tensor) Rank() int { return len(t.shape) }

// Size returns the number of elements.
func (t *Tensor) Size() int { return len(t.data) }

// Data returns the tensor's storage. Callers must not modify it.
func (t *Tensor) Data() []float32 { return t.data }

// Dtype returns the element type's name, always "float32".
func (t *Tensor) Dtype() string { return "float32" }

// Device returns the full name of the device the tensor lives on.
func (t *Tensor) Device() string {
	if t.device == "" {
		return device.Default()
	}
	return t.device
}

// Item returns the single value of a tensor with one element.
func (t *Tensor) Item() float32 {
	if len(t.data) != 1 {
		panic(fmt.Errorf("%w: Item of a tensor with shape %v", ErrShape, t.shape))
	}
	return t.data[0]
}

// String formats the tensor like TensorFlow, with NumPy's layout of the values:
// tf.Tensor(values, shape=(...), dtype=float32). Tensors of more than 1000 values show the
// first and last 3 entries of each long axis.
func (t *Tensor) String() string {
	var b strings.Builder
	b.WriteString("tf.Tensor(")
	if len(t.shape) > 0 {
		b.WriteString("\n")
	}
	f := newFormatter(t.data)
	formatValues(&b, f, t.shape, t.data, 0, len(t.data) > 1000)
	b.WriteString(", shape=(")
	for i, d := range t.shape {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprint(&b, d)
	}
	if len(t.shape) == 1 {
		b.WriteString(",")
	}
	b.WriteString("), dtype=float32)")
	return b.String()
}

// formatter writes numbers the way NumPy does: integral values as "3.", others with the
// shortest exact digits, decimal points aligned; scientific notation when magnitudes are
// very large or small.
type formatter struct {
	sci         bool
	intW, fracW int
}

func newFormatter(data []float32) *formatter {
	f := &formatter{}
	var maxAbs, minAbs float64 = 0, math.Inf(1)
	for _, v := range data {
		a := math.Abs(float64(v))
		if math.IsInf(a, 0) || math.IsNaN(a) {
			continue
		}
		maxAbs = max(maxAbs, a)
		if a > 0 {
			minAbs = min(minAbs, a)
		}
	}
	f.sci = maxAbs >= 1e16 || (minAbs < 1e-4 && minAbs > 0) || (maxAbs > 0 && maxAbs/minAbs > 1e3 && minAbs < 1e-4)
	if len(data) > 1000 {
		return f // widths are not aligned for summarized output
	}
	for _, v := range data {
		ip, fp := f.parts(v)
		f.intW = max(f.intW, len(ip))
		f.fracW = max(f.fracW, len(fp))
	}
	return f
}

func (f *formatter) parts(v float32) (string, string) {
	var s string
	switch {
	case math.IsNaN(float64(v)):
		return "nan", ""
	case math.IsInf(float64(v), 1):
		return "inf", ""
	case math.IsInf(float64(v), -1):
		return "-inf", ""
	case f.sci:
		s = strconv.FormatFloat(float64(v), 'e', -1, 32)
		return s, ""
	default:
		s = strconv.FormatFloat(float64(v), 'f', -1, 32)
	}
	if i := strings.IndexByte(s, '.'); i >= 0 {
		return s[:i], s[i:]
	}
	return s, "."
}

func (f *formatter) write(b *strings.Builder, v float32) {
	ip, fp := f.parts(v)
	for i := len(ip); i < f.intW; i++ {
		b.WriteByte(' ')
	}
	b.WriteString(ip)
	b.WriteString(fp)
	for i := len(fp); i < f.fracW; i++ {
		b.WriteByte(' ')
	}
}

func formatValues(b *strings.Builder, f *formatter, shape []int, data []float32, depth int, summarize bool) {
	if len(shape) == 0 {
		f.write(b, data[0])
		return
	}
	b.WriteString("[")
	stride := 1
	for _, d := range shape[1:] {
		stride *= d
	}
	for i := 0; i < shape[0]; i++ {
		if i > 0 {
			if len(shape) > 1 {
				b.WriteString(strings.Repeat("\n", len(shape)-1))
				b.WriteString(strings.Repeat(" ", depth+1))
			} else {
				b.WriteString(" ")
			}
		}
		if summarize && shape[0] > 6 && i == 3 {
			b.WriteString("...")
			if len(shape) > 1 {
				b.WriteString(strings.Repeat("\n", len(shape)-1))
				b.WriteString(strings.Repeat(" ", depth+1))
			} else {
				b.WriteString(" ")
			}
			i = shape[0] - 3
		}
		formatValues(b, f, shape[1:], data[i*stride:(i+1)*stride], depth+1, summarize)
	}
	b.WriteString("]")
}

// node is the autodiff record of a tensor: the inputs it was computed from and how to
// push its gradient back to them. It is filled in by the ops (see autodiff).
type node struct {
	inputs   []*Tensor
	backward backwardFunc
	watched  bool      // a leaf given to GradientTape.Watch
	variable *Variable // a leaf that is a variable's value
}
