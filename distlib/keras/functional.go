package keras

import (
	"fmt"
	"slices"
	"strings"

	"godist/distlib/keras/layers"
)

// Input returns a symbolic input of examples of shape (without the batch dimension), like
// keras.Input(shape=(784,)), the start of a functional model (see NewModel).
func Input(shape ...int) *layers.SymbolicTensor { return layers.NewSymbolicInput(shape...) }

// NewModel returns the model that maps inputs to outputs, like keras.Model(inputs=inputs,
// outputs=outputs) in Keras' functional API: outputs must come from inputs through a chain
// of layers called one after another (each layer's Call), which the model applies in
// order; it trains and distributes exactly as a Sequential model of those layers, under
// every strategy. Graphs with several inputs, outputs or merging branches are not
// supported: NewModel panics with an error saying so, as it does when outputs do not come
// from inputs.
func NewModel(inputs, outputs *layers.SymbolicTensor) *Model {
	if inputs == nil || outputs == nil {
		panic(fmt.Errorf("%w: NewModel(inputs, outputs): both must be symbolic tensors (keras.Input and the result of layer.Call)", ErrInvalidArgument))
	}
	if _, ok := inputs.Layer().(*layers.InputLayer); !ok || inputs.Input() != nil {
		panic(fmt.Errorf("%w: NewModel: inputs %v is not a keras.Input", ErrInvalidArgument, inputs))
	}
	var chain []layers.Layer
	s := outputs
	for s != inputs {
		if s.Input() == nil {
			panic(fmt.Errorf("%w: NewModel: outputs %v do not come from inputs %v (they start from another keras.Input)",
				ErrInvalidArgument, outputs, inputs))
		}
		chain = append(chain, s.Layer())
		s = s.Input()
	}
	chain = append(chain, inputs.Layer())
	slices.Reverse(chain)
	m := Sequential(chain...)
	m.name = strings.Replace(m.name, "sequential", "functional", 1)
	return m
}
