package layers

import (
	"fmt"

	"godist/distlib/tensor"
)

// Conv2DLayer is a 2-D convolution over NHWC inputs; see Conv2D.
type Conv2DLayer struct {
	base
	kernelPenalty
	filters, kernel, strides int
	padding                  string
	activation               Activation
	useBias                  bool
}

// Conv2D returns a 2-D convolution with filters output channels and a kernel×kernel window,
// like tf.keras.layers.Conv2D(filters, kernel_size, activation=...). Inputs are
// (batch, height, width, channels). Options: an Activation, Strides, Padding, UseBias,
// KernelRegularizer, InputShape, Name.
func Conv2D(filters, kernel int, opts ...Option) *Conv2DLayer {
	if filters <= 0 || kernel <= 0 {
		panic(fmt.Errorf("%w: Conv2D(%d, %d): filters and kernel size must be positive", ErrInvalidArgument, filters, kernel))
	}
	o := parseOptions("Conv2D", opts, "activation", "use_bias", "strides", "padding", "kernel_regularizer")
	s := o.strides
	if s == 0 {
		s = 1
	}
	return &Conv2DLayer{base: newBase("Conv2D", "conv2d", o), kernelPenalty: kernelPenalty{o.regularizer}, filters: filters, kernel: kernel, strides: s,
		padding: o.padding, activation: o.activation, useBias: o.useBias}
}

// Build implements Layer.
func (l *Conv2DLayer) Build(in []int, seed uint64) ([]int, []Param, error) {
	if len(in) != 3 {
		return nil, nil, fmt.Errorf("%w: %s needs inputs of rank 4 (batch, height, width, channels), got examples of shape %v; add layers.Reshape before it", ErrShape, l.name, in)
	}
	h, err := convOut(in[0], l.kernel, l.strides, l.padding)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s height: %v", ErrShape, l.name, err)
	}
	w, err := convOut(in[1], l.kernel, l.strides, l.padding)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s width: %v", ErrShape, l.name, err)
	}
	ps := []Param{{Name: "kernel", Init: tensor.GlorotUniform([]int{l.kernel, l.kernel, in[2], l.filters}, seed), Trainable: true}}
	if l.useBias {
		ps = append(ps, Param{Name: "bias", Init: tensor.Zeros(l.filters), Trainable: true})
	}
	return []int{h, w, l.filters}, ps, nil
}

// Forward implements Layer.
func (l *Conv2DLayer) Forward(x *tensor.Tensor, p []*tensor.Tensor, _ bool, _ uint64) *tensor.Tensor {
	var b *tensor.Tensor
	if l.useBias {
		b = p[1]
	}
	// One fused op (convolution, bias, ReLU) for the linear and ReLU activations.
	if l.activation == ReLU {
		return tensor.FusedConv2D(x, p[0], b, l.strides, l.padding, true)
	}
	return l.activation.Apply(tensor.FusedConv2D(x, p[0], b, l.strides, l.padding, false))
}

// FusedForward returns the forward computation of layer a followed by layer b when one
// op computes the two: a Conv2D with a ReLU, stride 1 and valid padding followed by a 2x2
// MaxPooling2D of stride 2, valid (tensor.ConvReLUMaxPool2D: the convolution's output is
// never written). It returns nil for any other pair. The function takes a's parameters,
// and r, the storage its output reuses (tensor.Reuse; nil: fresh storage); b has none.
func FusedForward(a, b Layer) func(x *tensor.Tensor, p []*tensor.Tensor, r *tensor.Reuse) *tensor.Tensor {
	c, ok := a.(*Conv2DLayer)
	m, ok2 := b.(*MaxPooling2DLayer)
	if !ok || !ok2 || c.activation != ReLU || c.strides != 1 || c.padding != "valid" ||
		m.pool != 2 || m.strides != 2 || m.padding != "valid" {
		return nil
	}
	return func(x *tensor.Tensor, p []*tensor.Tensor, r *tensor.Reuse) *tensor.Tensor {
		var bias *tensor.Tensor
		if c.useBias {
			bias = p[1]
		}
		return tensor.ConvReLUMaxPool2DReusing(r, x, p[0], bias)
	}
}

// OutputReusable reports whether the output of layer i of the sequence ls may be written
// in storage that the next training step overwrites (tensor.Reuse): whether the layers
// after it use it during the step only. That holds when the first layer after it that is
// not a view of it (Flatten, Reshape) computes a fresh output from it and runs no user
// code on it (Dense, Conv2D). It is false for the sequence's output and before any other
// layer, which might keep its input or return it (Dropout outside training, user layers).
func OutputReusable(ls []Layer, i int) bool {
	for j := i + 1; j < len(ls); j++ {
		switch ls[j].(type) {
		case *FlattenLayer, *ReshapeLayer: // a view of its input: look at who reads it
		case *DenseLayer, *Conv2DLayer:
			return true
		default:
			return false
		}
	}
	return false
}

// MaxPooling2DLayer takes the maximum over windows; see MaxPooling2D.
type MaxPooling2DLayer struct {
	base
	pool, strides int
	padding       string
}

// MaxPooling2D returns max pooling over pool×pool windows, moving by the pool size unless
// Strides is given, like tf.keras.layers.MaxPooling2D(pool_size). Options: Strides,
// Padding, InputShape, Name.
func MaxPooling2D(pool int, opts ...Option) *MaxPooling2DLayer {
	if pool <= 0 {
		panic(fmt.Errorf("%w: MaxPooling2D pool size %d must be positive", ErrInvalidArgument, pool))
	}
	o := parseOptions("MaxPooling2D", opts, "strides", "padding")
	s := o.strides
	if s == 0 {
		s = pool
	}
	return &MaxPooling2DLayer{base: newBase("MaxPooling2D", "max_pooling2d", o), pool: pool, strides: s, padding: o.padding}
}

// Build implements Layer.
func (l *MaxPooling2DLayer) Build(in []int, _ uint64) ([]int, []Param, error) {
	if len(in) != 3 {
		return nil, nil, fmt.Errorf("%w: %s needs inputs of rank 4 (batch, height, width, channels), got examples of shape %v", ErrShape, l.name, in)
	}
	h, err := convOut(in[0], l.pool, l.strides, l.padding)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s height: %v", ErrShape, l.name, err)
	}
	w, err := convOut(in[1], l.pool, l.strides, l.padding)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s width: %v", ErrShape, l.name, err)
	}
	return []int{h, w, in[2]}, nil, nil
}

// Forward implements Layer.
func (l *MaxPooling2DLayer) Forward(x *tensor.Tensor, _ []*tensor.Tensor, _ bool, _ uint64) *tensor.Tensor {
	return tensor.MaxPool2D(x, l.pool, l.strides, l.padding)
}

// convOut is the output size of a window of size k moving by s over n inputs.
func convOut(n, k, s int, padding string) (int, error) {
	if padding == "same" {
		return (n + s - 1) / s, nil
	}
	if n < k {
		return 0, fmt.Errorf("input size %d is smaller than the window %d with \"valid\" padding", n, k)
	}
	return (n-k)/s + 1, nil
}
