package keras

import (
	"strings"
	"testing"

	"godist/distlib/distribute"
	"godist/distlib/keras/layers"
	"godist/internal/leakcheck"
)

// TestFunctionalModel: keras.Input, layer.Call and NewModel build the model a Sequential
// of the same layers is, and it trains identically, under the default strategy and
// MirroredStrategy on 2 logical CPUs.
func TestFunctionalModel(t *testing.T) {
	leakcheck.Check(t)
	splitCPU(t, 2)
	x, y := blobs(64, 9)
	for _, sc := range []struct {
		name string
		s    distribute.Strategy
	}{
		{"default", nil},
		{"mirrored 2", distribute.NewMirroredStrategy(distribute.WithDevices("/cpu:0", "/cpu:1"))},
	} {
		t.Run(sc.name, func(t *testing.T) {
			train := func(build func() *Model) *Model {
				SetRandomSeed(5)
				var m *Model
				mk := func() {
					m = build()
					m.Compile(Adam(0.01), SparseCategoricalCrossentropy(true), "accuracy")
				}
				if sc.s != nil {
					sc.s.Scope(mk)
				} else {
					mk()
				}
				quiet(m)
				m.Fit(x, y, BatchSize(16), Shuffle(false), Epochs(2), Verbose(0))
				return m
			}
			var out *layers.SymbolicTensor
			fn := train(func() *Model {
				inputs := Input(2)
				h := layers.Dense(8, layers.ReLU).Call(inputs)
				h = layers.Dropout(0.1).Call(h)
				out = layers.Dense(2).Call(h)
				return NewModel(inputs, out)
			})
			seq := train(func() *Model {
				return Sequential(layers.Input(2), layers.Dense(8, layers.ReLU), layers.Dropout(0.1), layers.Dense(2))
			})
			sameWeights(t, "functional vs sequential", fn, seq)
			if got := out.Shape(); !sameInts(got, []int{-1, 2}) {
				t.Errorf("output shape %v, want [-1 2]", got)
			}
			if !strings.HasPrefix(fn.Name(), "functional") || !strings.Contains(fn.SummaryString(), "Total params: 42") {
				t.Errorf("name %q, summary\n%s", fn.Name(), fn.SummaryString())
			}
			if fn.Strategy() != seq.Strategy() {
				t.Errorf("strategy %s, want %s", fn.Strategy().Name(), seq.Strategy().Name())
			}
		})
	}
}

func TestFunctionalErrors(t *testing.T) {
	a, b := Input(3), Input(3)
	shared := layers.Dense(3)
	tests := []struct {
		name string
		fn   func()
		want string
	}{
		{"other input", func() { NewModel(a, layers.Dense(2).Call(b)) }, "do not come from inputs"},
		{"inputs not an Input", func() { NewModel(layers.Dense(2).Call(a), layers.Dense(2).Call(a)) }, "is not a keras.Input"},
		{"nil", func() { NewModel(a, nil) }, "both must be symbolic tensors"},
		{"shape", func() { layers.Conv2D(2, 3).Call(a) }, "called on a tensor of shape [-1 3]"},
		{"nil input", func() { layers.Dense(2).Call(nil) }, "start from keras.Input"},
		{"layer twice", func() { NewModel(a, shared.Call(shared.Call(a))) }, "appears twice"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				r := recover()
				err, _ := r.(error)
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("panic %v, want an error containing %q", r, tc.want)
				}
			}()
			tc.fn()
		})
	}
}
