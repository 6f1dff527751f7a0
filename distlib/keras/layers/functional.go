package layers

import "fmt"

// SymbolicTensor is a placeholder for a batch in Keras' functional API (a KerasTensor): it
// has a shape but no values, and records the chain of layers that made it. Make one with
// keras.Input, pass it through layers with their Call method, and give the first and last
// to keras.NewModel:
//
//	inputs := keras.Input(784)
//	x := layers.Dense(64, layers.ReLU).Call(inputs)
//	outputs := layers.Dense(10).Call(x)
//	model := keras.NewModel(inputs, outputs)
type SymbolicTensor struct {
	shape []int // without the batch dimension
	layer Layer // the layer that made it; for an input, its InputLayer
	input *SymbolicTensor
}

// NewSymbolicInput returns the symbolic tensor an InputLayer of shape (without the batch
// dimension) produces; keras.Input calls it.
func NewSymbolicInput(shape ...int) *SymbolicTensor {
	in := Input(shape...)
	return &SymbolicTensor{shape: in.InputShape(), layer: in}
}

// Shape returns the shape with the batch dimension first as -1 (Keras' None), such as
// [-1 784].
func (s *SymbolicTensor) Shape() []int { return append([]int{-1}, s.shape...) }

// Layer returns the layer that produced s (an *InputLayer for an input).
func (s *SymbolicTensor) Layer() Layer { return s.layer }

// Input returns the symbolic tensor s was computed from, or nil for an input.
func (s *SymbolicTensor) Input() *SymbolicTensor { return s.input }

// String formats s like Keras: <KerasTensor shape=(None, 784), name=dense>.
func (s *SymbolicTensor) String() string {
	shape := "(None"
	for _, d := range s.shape {
		shape += fmt.Sprintf(", %d", d)
	}
	return fmt.Sprintf("<KerasTensor shape=%s), name=%s>", shape, s.layer.Name())
}

// CallSymbolic applies l to the symbolic tensor x, like layer(x) in Keras' functional API:
// it checks that l takes inputs of x's shape and returns the symbolic output. It panics
// with an error naming the layer and the shape when it does not.
func CallSymbolic(l Layer, x *SymbolicTensor) *SymbolicTensor {
	if l == nil {
		panic(fmt.Errorf("%w: calling a nil layer", ErrInvalidArgument))
	}
	if x == nil {
		panic(fmt.Errorf("%w: %s called on a nil symbolic tensor; start from keras.Input(shape...)", ErrInvalidArgument, l.Name()))
	}
	if _, ok := l.(*InputLayer); ok {
		panic(fmt.Errorf("%w: an InputLayer cannot be called on a tensor; keras.Input(shape...) makes the input", ErrInvalidArgument))
	}
	if want := l.InputShape(); want != nil && !sameShape(want, x.shape) {
		panic(fmt.Errorf("%w: %s declares input shape %v, called on a tensor of shape %v", ErrShape, l.Name(), want, x.Shape()))
	}
	out, _, err := l.Build(append([]int(nil), x.shape...), 0)
	if err != nil {
		panic(fmt.Errorf("%s called on a tensor of shape %v: %w", l.Name(), x.Shape(), err))
	}
	return &SymbolicTensor{shape: out, layer: l, input: x}
}

// Call applies the layer to a symbolic tensor (Keras' functional API); see CallSymbolic.
func (l *ReshapeLayer) Call(x *SymbolicTensor) *SymbolicTensor { return CallSymbolic(l, x) }

// Call applies the layer to a symbolic tensor (Keras' functional API); see CallSymbolic.
func (l *FlattenLayer) Call(x *SymbolicTensor) *SymbolicTensor { return CallSymbolic(l, x) }

// Call applies the layer to a symbolic tensor (Keras' functional API); see CallSymbolic.
func (l *DenseLayer) Call(x *SymbolicTensor) *SymbolicTensor { return CallSymbolic(l, x) }

// Call applies the layer to a symbolic tensor (Keras' functional API); see CallSymbolic.
func (l *DropoutLayer) Call(x *SymbolicTensor) *SymbolicTensor { return CallSymbolic(l, x) }

// Call applies the layer to a symbolic tensor (Keras' functional API); see CallSymbolic.
func (l *Conv2DLayer) Call(x *SymbolicTensor) *SymbolicTensor { return CallSymbolic(l, x) }

// Call applies the layer to a symbolic tensor (Keras' functional API); see CallSymbolic.
func (l *MaxPooling2DLayer) Call(x *SymbolicTensor) *SymbolicTensor { return CallSymbolic(l, x) }

// Call applies the layer to a symbolic tensor (Keras' functional API); see CallSymbolic.
func (l *EmbeddingLayer) Call(x *SymbolicTensor) *SymbolicTensor { return CallSymbolic(l, x) }
