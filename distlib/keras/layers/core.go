package layers

import (
	"fmt"

	"godist/distlib/tensor"
)

// InputLayer declares the shape of a model's inputs; see Input.
type InputLayer struct{ base }

// Input declares the model's input shape without the batch dimension, like
// tf.keras.Input(shape=(28, 28)) as the first entry of a Sequential model.
func Input(shape ...int) *InputLayer {
	if err := checkShape(shape); err != nil {
		panic(fmt.Errorf("%w: Input%v: %v", ErrInvalidArgument, shape, err))
	}
	o := parseOptions("Input", nil)
	o.inputShape = append([]int(nil), shape...)
	return &InputLayer{newBase("InputLayer", "input", o)}
}

// Build implements Layer.
func (l *InputLayer) Build(in []int, _ uint64) ([]int, []Param, error) {
	if !sameShape(in, l.inputShape) {
		return nil, nil, fmt.Errorf("%w: %s declares input shape %v, got %v", ErrShape, l.name, l.inputShape, in)
	}
	return append([]int(nil), in...), nil, nil
}

// Forward implements Layer: the identity.
func (l *InputLayer) Forward(x *tensor.Tensor, _ []*tensor.Tensor, _ bool, _ uint64) *tensor.Tensor {
	return x
}

// ReshapeLayer reshapes each example; see Reshape.
type ReshapeLayer struct {
	base
	target []int
}

// Reshape returns a layer that reshapes each example to target (without the batch
// dimension; one entry may be -1), like tf.keras.layers.Reshape(target_shape=(28, 28, 1)).
func Reshape(target []int, opts ...Option) *ReshapeLayer {
	neg := 0
	for i, d := range target {
		if d == -1 {
			neg++
		} else if d <= 0 {
			panic(fmt.Errorf("%w: Reshape target %v: dimension %d is %d", ErrInvalidArgument, target, i, d))
		}
	}
	if len(target) == 0 || neg > 1 {
		panic(fmt.Errorf("%w: Reshape target %v: want a non-empty shape with at most one -1", ErrInvalidArgument, target))
	}
	o := parseOptions("Reshape", opts)
	return &ReshapeLayer{base: newBase("Reshape", "reshape", o), target: append([]int(nil), target...)}
}

// Build implements Layer.
func (l *ReshapeLayer) Build(in []int, _ uint64) ([]int, []Param, error) {
	n, known, neg := prod(in), 1, -1
	for i, d := range l.target {
		if d == -1 {
			neg = i
		} else {
			known *= d
		}
	}
	out := append([]int(nil), l.target...)
	if neg >= 0 {
		if n%known != 0 {
			return nil, nil, fmt.Errorf("%w: %s cannot reshape %v to %v", ErrShape, l.name, in, l.target)
		}
		out[neg] = n / known
	} else if known != n {
		return nil, nil, fmt.Errorf("%w: %s cannot reshape %v (%d values) to %v", ErrShape, l.name, in, n, l.target)
	}
	l.target = out
	return append([]int(nil), out...), nil, nil
}

// Forward implements Layer.
func (l *ReshapeLayer) Forward(x *tensor.Tensor, _ []*tensor.Tensor, _ bool, _ uint64) *tensor.Tensor {
	return tensor.Reshape(x, withBatch(x.Shape()[0], l.target)...)
}

// FlattenLayer flattens each example to a vector; see Flatten.
type FlattenLayer struct {
	base
	n int
}

// Flatten returns a layer that flattens each example, like tf.keras.layers.Flatten().
func Flatten(opts ...Option) *FlattenLayer {
	return &FlattenLayer{base: newBase("Flatten", "flatten", parseOptions("Flatten", opts))}
}

// Build implements Layer.
func (l *FlattenLayer) Build(in []int, _ uint64) ([]int, []Param, error) {
	l.n = prod(in)
	return []int{l.n}, nil, nil
}

// Forward implements Layer.
func (l *FlattenLayer) Forward(x *tensor.Tensor, _ []*tensor.Tensor, _ bool, _ uint64) *tensor.Tensor {
	return tensor.Reshape(x, x.Shape()[0], l.n)
}

// DenseLayer is a fully connected layer; see Dense.
type DenseLayer struct {
	base
	kernelPenalty
	units      int
	activation Activation
	useBias    bool
}

// Dense returns a fully connected layer with units outputs: activation(x·kernel + bias),
// like tf.keras.layers.Dense(units, activation=...). Options: an Activation, UseBias,
// KernelRegularizer, InputShape, Name.
func Dense(units int, opts ...Option) *DenseLayer {
	if units <= 0 {
		panic(fmt.Errorf("%w: Dense units %d must be positive", ErrInvalidArgument, units))
	}
	o := parseOptions("Dense", opts, "activation", "use_bias", "kernel_regularizer")
	return &DenseLayer{base: newBase("Dense", "dense", o), kernelPenalty: kernelPenalty{o.regularizer}, units: units, activation: o.activation, useBias: o.useBias}
}

// Build implements Layer: Dense works on the last axis.
func (l *DenseLayer) Build(in []int, seed uint64) ([]int, []Param, error) {
	if len(in) != 1 {
		return nil, nil, fmt.Errorf("%w: %s needs inputs of rank 2 (batch, features), got examples of shape %v; add layers.Flatten() before it", ErrShape, l.name, in)
	}
	ps := []Param{{Name: "kernel", Init: tensor.GlorotUniform([]int{in[0], l.units}, seed), Trainable: true}}
	if l.useBias {
		ps = append(ps, Param{Name: "bias", Init: tensor.Zeros(l.units), Trainable: true})
	}
	return []int{l.units}, ps, nil
}

// Forward implements Layer.
func (l *DenseLayer) Forward(x *tensor.Tensor, p []*tensor.Tensor, _ bool, _ uint64) *tensor.Tensor {
	var b *tensor.Tensor
	if l.useBias {
		b = p[1]
	}
	// One fused op (matrix multiply, bias, ReLU) for the linear and ReLU activations.
	if l.activation == ReLU {
		return tensor.Dense(x, p[0], b, true)
	}
	return l.activation.Apply(tensor.Dense(x, p[0], b, false))
}

// DropoutLayer randomly zeroes inputs during training; see Dropout.
type DropoutLayer struct {
	base
	rate float32
}

// Dropout returns a layer that, in training only, zeroes each input with probability rate
// and scales the others by 1/(1-rate), like tf.keras.layers.Dropout(rate).
func Dropout(rate float64, opts ...Option) *DropoutLayer {
	if rate < 0 || rate >= 1 {
		panic(fmt.Errorf("%w: Dropout rate %g must be in [0, 1)", ErrInvalidArgument, rate))
	}
	return &DropoutLayer{base: newBase("Dropout", "dropout", parseOptions("Dropout", opts)), rate: float32(rate)}
}

// Build implements Layer.
func (l *DropoutLayer) Build(in []int, _ uint64) ([]int, []Param, error) {
	return append([]int(nil), in...), nil, nil
}

// Forward implements Layer.
func (l *DropoutLayer) Forward(x *tensor.Tensor, _ []*tensor.Tensor, training bool, seed uint64) *tensor.Tensor {
	if !training || l.rate == 0 {
		return x
	}
	return tensor.Dropout(x, l.rate, seed)
}

func sameShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
