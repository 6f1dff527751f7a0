// Package layers holds the Keras layers a Sequential model is made of: Input, Reshape,
// Conv2D, MaxPooling2D, Flatten, Dense, Dropout, Embedding and GlobalAveragePooling1D/2D,
// with the activations ReLU, Sigmoid, Tanh, Softmax and Linear, and the kernel regularizers
// L1, L2 and L1L2 (KernelRegularizer). StringLookup maps Go strings to the ids an Embedding takes.
//
// A cell writes them the way Keras does, options after the required arguments:
//
//	layers.Conv2D(32, 3, layers.ReLU, layers.InputShape(28, 28, 1))
//	layers.MaxPooling2D(2)
//	layers.Flatten()
//	layers.Dense(64, layers.ReLU)
//	layers.Dense(10)
//
// A layer does not own its weights: Build declares them (Param, with a seeded Glorot-uniform
// or zero initial value) and the model keeps the variables, one copy per replica when a
// strategy mirrors variables, and passes their values to Forward. Shapes given to Build
// leave out the batch dimension. Constructors panic with an error wrapping ErrInvalidArgument
// when an argument is bad; the notebook shows it as a Jupyter error.
package layers

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"godist/distlib/tensor"
)

// ErrInvalidArgument reports a bad layer argument or option.
var ErrInvalidArgument = errors.New("layers: invalid argument")

// ErrShape reports an input shape a layer cannot take.
var ErrShape = errors.New("layers: shape mismatch")

// Layer is one step of a Sequential model.
type Layer interface {
	// Name returns the layer's unique name, such as "dense_1".
	Name() string
	// Class returns the Keras class name, such as "Dense".
	Class() string
	// InputShape returns the input shape (without the batch dimension) the layer was
	// declared with (Input, or the InputShape option), or nil.
	InputShape() []int
	// Build prepares the layer for inputs of inputShape (without the batch dimension) and
	// returns its output shape and the parameters it needs, initialized from seed.
	Build(inputShape []int, seed uint64) (outputShape []int, params []Param, err error)
	// Forward computes the layer on a batch x with the current values of its parameters
	// (in the order Build returned them). seed drives random layers such as Dropout.
	Forward(x *tensor.Tensor, params []*tensor.Tensor, training bool, seed uint64) *tensor.Tensor
}

// Param declares one weight of a layer.
type Param struct {
	Name      string         // within the layer: "kernel", "bias"
	Init      *tensor.Tensor // initial value
	Trainable bool
}

// Activation is an element-wise activation function; it is also an Option of Dense and
// Conv2D.
type Activation string

// The activations Keras names "linear", "relu", "sigmoid", "tanh" and "softmax".
const (
	Linear  Activation = "linear"
	ReLU    Activation = "relu"
	Sigmoid Activation = "sigmoid"
	Tanh    Activation = "tanh"
	Softmax Activation = "softmax"
)

// Apply computes the activation of x (Softmax over the last axis).
func (a Activation) Apply(x *tensor.Tensor) *tensor.Tensor {
	switch a {
	case Linear, "":
		return x
	case ReLU:
		return tensor.ReLU(x)
	case Sigmoid:
		return tensor.Sigmoid(x)
	case Tanh:
		return tensor.Tanh(x)
	case Softmax:
		return tensor.Softmax(x, x.Rank()-1)
	}
	panic(fmt.Errorf("%w: unknown activation %q (use layers.Linear, ReLU, Sigmoid, Tanh or Softmax)", ErrInvalidArgument, string(a)))
}

func (a Activation) apply(o *options) error {
	switch a {
	case Linear, ReLU, Sigmoid, Tanh, Softmax:
	default:
		return fmt.Errorf("unknown activation %q (use layers.Linear, ReLU, Sigmoid, Tanh or Softmax)", string(a))
	}
	o.activation = a
	o.set["activation"] = true
	return nil
}

// Option sets an optional argument of a layer: an Activation, Strides, Padding, UseBias,
// InputShape or Name.
type Option interface{ apply(*options) error }

type options struct {
	activation  Activation
	strides     int
	padding     string
	useBias     bool
	inputShape  []int
	name        string
	regularizer Regularizer
	set         map[string]bool
}

type optionFunc func(*options) error

func (f optionFunc) apply(o *options) error { return f(o) }

// Strides sets the step of a convolution or pooling window (default 1 for Conv2D, the pool
// size for MaxPooling2D).
func Strides(s int) Option {
	return optionFunc(func(o *options) error {
		if s <= 0 {
			return fmt.Errorf("Strides(%d): strides must be positive", s)
		}
		o.strides = s
		o.set["strides"] = true
		return nil
	})
}

// Padding sets "valid" (default) or "same" padding of a convolution or pooling.
func Padding(p string) Option {
	return optionFunc(func(o *options) error {
		if p != "valid" && p != "same" {
			return fmt.Errorf("Padding(%q): use \"valid\" or \"same\"", p)
		}
		o.padding = p
		o.set["padding"] = true
		return nil
	})
}

// UseBias says whether Dense or Conv2D adds a bias (default true).
func UseBias(b bool) Option {
	return optionFunc(func(o *options) error {
		o.useBias = b
		o.set["use_bias"] = true
		return nil
	})
}

// InputShape declares the input shape (without the batch dimension) on the first layer,
// like Keras' input_shape=(28, 28, 1).
func InputShape(shape ...int) Option {
	return optionFunc(func(o *options) error {
		if err := checkShape(shape); err != nil {
			return fmt.Errorf("InputShape%v: %v", shape, err)
		}
		o.inputShape = append([]int(nil), shape...)
		o.set["input_shape"] = true
		return nil
	})
}

// Name sets the layer's name instead of the generated one ("dense", "dense_1", ...).
func Name(name string) Option {
	return optionFunc(func(o *options) error {
		if name == "" {
			return fmt.Errorf("Name(\"\"): a layer name cannot be empty")
		}
		o.name = name
		o.set["name"] = true
		return nil
	})
}

func checkShape(shape []int) error {
	if len(shape) == 0 {
		return fmt.Errorf("shape is empty")
	}
	for i, d := range shape {
		if d <= 0 {
			return fmt.Errorf("dimension %d is %d, want > 0", i, d)
		}
	}
	return nil
}

// parseOptions applies opts, allowing only the named kinds; it panics on a bad option.
func parseOptions(class string, opts []Option, allowed ...string) *options {
	o := &options{useBias: true, padding: "valid", activation: Linear, set: map[string]bool{}}
	for i, opt := range opts {
		if opt == nil {
			panic(fmt.Errorf("%w: %s option %d is nil", ErrInvalidArgument, class, i))
		}
		if err := opt.apply(o); err != nil {
			panic(fmt.Errorf("%w: %s: %v", ErrInvalidArgument, class, err))
		}
	}
	ok := map[string]bool{"name": true, "input_shape": true}
	for _, a := range allowed {
		ok[a] = true
	}
	for k := range o.set {
		if !ok[k] {
			panic(fmt.Errorf("%w: %s does not take the %s option", ErrInvalidArgument, class, k))
		}
	}
	return o
}

var (
	namesMu sync.Mutex
	names   = map[string]int{}
)

// uniqueName returns base, then base_1, base_2, ... like Keras' layer names.
func uniqueName(base string) string {
	namesMu.Lock()
	defer namesMu.Unlock()
	n := names[base]
	names[base] = n + 1
	if n == 0 {
		return base
	}
	return fmt.Sprintf("%s_%d", base, n)
}

// ResetNames restarts the generated layer names ("dense", "dense_1", ...) from the
// beginning, like keras.backend.clear_session.
func ResetNames() {
	namesMu.Lock()
	defer namesMu.Unlock()
	names = map[string]int{}
}

// TrainableLayer is a layer whose weights can be frozen, like Keras' layer.trainable:
// every layer of this package is one. A model trains a layer's weights only while the
// layer (and the model) is trainable; a layer that is not a TrainableLayer always trains.
type TrainableLayer interface {
	Layer
	// Trainable reports whether the layer's weights train (true unless SetTrainable(false)).
	Trainable() bool
	// SetTrainable freezes (false) or unfreezes (true) the layer's weights, like
	// layer.trainable = False. A model takes it into account at its next Fit, and at once in
	// TrainableVariables and Summary.
	SetTrainable(on bool)
}

// LayerTrainable reports whether l's weights train: l.Trainable() for a TrainableLayer,
// true otherwise.
func LayerTrainable(l Layer) bool {
	if t, ok := l.(TrainableLayer); ok {
		return t.Trainable()
	}
	return true
}

// base holds what every layer has.
type base struct {
	name, class string
	inputShape  []int
	frozen      *atomic.Bool
	owner       *atomic.Pointer[layerOwner] // the model holding the weights (ClaimOwner)
}

// layerOwner is the model that built a layer and holds its weights.
type layerOwner struct {
	id   any
	name string
}

// owned is a layer that records its owner: every layer of this package.
type owned interface {
	ownerRef() *atomic.Pointer[layerOwner]
}

func (b *base) ownerRef() *atomic.Pointer[layerOwner] { return b.owner }

// Owner returns the model that holds l's weights (the id and name given to SetOwner), or
// nil and "" when no model built l yet. A Go model owns the weights of its layers, so a
// layer cannot serve two models (in Keras the models would share its weights): a model
// checks Owner before it builds. Layers from outside this package are not tracked.
func Owner(l Layer) (id any, name string) {
	if o, ok := l.(owned); ok && o.ownerRef() != nil {
		if cur := o.ownerRef().Load(); cur != nil {
			return cur.id, cur.name
		}
	}
	return nil, ""
}

// SetOwner records that the model id, named name, built l and holds its weights (see
// Owner).
func SetOwner(l Layer, id any, name string) {
	if o, ok := l.(owned); ok && o.ownerRef() != nil {
		o.ownerRef().Store(&layerOwner{id: id, name: name})
	}
}

func newBase(class, snake string, o *options) base {
	name := o.name
	if name == "" {
		name = uniqueName(snake)
	}
	return base{name: name, class: class, inputShape: o.inputShape, frozen: new(atomic.Bool), owner: new(atomic.Pointer[layerOwner])}
}

// Trainable reports whether the layer's weights train (see TrainableLayer).
func (b *base) Trainable() bool { return !b.frozen.Load() }

// SetTrainable freezes (false) or unfreezes (true) the layer's weights (see TrainableLayer).
func (b *base) SetTrainable(on bool) { b.frozen.Store(!on) }

func (b *base) Name() string      { return b.name }
func (b *base) Class() string     { return b.class }
func (b *base) InputShape() []int { return append([]int(nil), b.inputShape...) }

func prod(s []int) int {
	n := 1
	for _, d := range s {
		n *= d
	}
	return n
}

// batchShape returns x's shape with the leading batch dimension.
func withBatch(batch int, shape []int) []int { return append([]int{batch}, shape...) }
