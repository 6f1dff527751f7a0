package interp

import (
	"context"
	"testing"
)

// TestCheckAcceptsUnexportedMethodInterfaces: distlib's option interfaces have unexported
// methods (layers.Option's apply), which reflect does not list on the types that implement
// them; the cell check must not refuse `layers.Dense(64, layers.ReLU, ...)`, the form
// every notebook uses.
func TestCheckAcceptsUnexportedMethodInterfaces(t *testing.T) {
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = s.Execute(context.Background(), `import (
	"godist/distlib/keras"
	"godist/distlib/keras/layers"
)
model := keras.Sequential(layers.Dense(64, layers.ReLU, layers.InputShape(32)), layers.Dense(1))
model.Compile(keras.Adam(1e-3), keras.MeanSquaredError())`, nil)
	if err != nil {
		t.Fatalf("a valid cell was refused: %v", err)
	}
}
