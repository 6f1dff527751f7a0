package interp

import (
	"strings"
	"testing"
)

// TestCellTypesImplementDistlibInterfaces: types written in cells are accepted where distlib
// expects its interfaces, and compiled code calls their methods: a callback embedding
// keras.BaseCallback by value and overriding one method, a callback with every method, and
// a custom layers.Layer, passed straight to the variadic keras.Callbacks and keras.Sequential
// in a real Fit.
func TestCellTypesImplementDistlibInterfaces(t *testing.T) {
	defer checkLeaks(t)
	s := newSession(t, Options{})
	mustRun(t, s, `import (
	"fmt"
	"godist/distlib/data"
	"godist/distlib/keras"
	"godist/distlib/keras/layers"
	"godist/distlib/tensor"
)`)
	mustRun(t, s, `type Counting struct {
	keras.BaseCallback
	epochs int
}
func (c *Counting) EpochEnd(epoch int, logs keras.Logs) { c.epochs++; fmt.Println("epoch", epoch, "model set", c.Model() != nil) }`)
	mustRun(t, s, `type Full struct{ batches int }
func (c *Full) SetModel(m *keras.Model)                     {}
func (c *Full) TrainBegin(logs keras.Logs)                  {}
func (c *Full) TrainEnd(logs keras.Logs)                    { fmt.Println("full train end") }
func (c *Full) EpochBegin(epoch int, logs keras.Logs)       {}
func (c *Full) EpochEnd(epoch int, logs keras.Logs)         {}
func (c *Full) TrainBatchBegin(batch int, logs keras.Logs)  {}
func (c *Full) TrainBatchEnd(batch int, logs keras.Logs)    { c.batches++ }
func (c *Full) TestBegin(logs keras.Logs)                   {}
func (c *Full) TestEnd(logs keras.Logs)                     {}
func (c *Full) TestBatchBegin(batch int, logs keras.Logs)   {}
func (c *Full) TestBatchEnd(batch int, logs keras.Logs)     {}
func (c *Full) PredictBegin(logs keras.Logs)                {}
func (c *Full) PredictEnd(logs keras.Logs)                  {}`)
	mustRun(t, s, `type Scale struct{ f float32; calls int }
func (s *Scale) Name() string      { return "scale" }
func (s *Scale) Class() string     { return "Scale" }
func (s *Scale) InputShape() []int { return []int{2} }
func (s *Scale) Build(in []int, seed uint64) ([]int, []layers.Param, error) { return in, nil, nil }
func (s *Scale) Forward(x *tensor.Tensor, p []*tensor.Tensor, training bool, seed uint64) *tensor.Tensor {
	s.calls++
	return tensor.Scale(x, s.f)
}`)
	tests := []struct{ name, code, want string }{
		{"embedding assigned to the interface", "var cb0 keras.Callback = &Counting{}\nfmt.Println(cb0 != nil)", "true\n"},
		{"real Fit", `x := tensor.MustNew([]int{4, 2}, []float32{1, 2, 3, 4, 5, 6, 7, 8})
y := tensor.MustNew([]int{4}, []float32{0, 1, 0, 1})
ds := data.FromTensorSlices(x, y).Batch(2, false)
sc := &Scale{f: 0.5}
model := keras.Sequential(sc, layers.Dense(2))
model.Compile(keras.SGD(0.1), keras.SparseCategoricalCrossentropy(true))
cb, full := &Counting{}, &Full{}
h := model.Fit(ds, keras.Epochs(2), keras.Verbose(0), keras.Callbacks(cb, full))
fmt.Println(cb.epochs, full.batches, len(h.Epoch), sc.calls > 0)`,
			"epoch 0 model set true\nepoch 1 model set true\nfull train end\n2 4 2 true\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, rec := mustRun(t, s, tt.code)
			if got := rec.text("stdout"); !strings.Contains(got, tt.want) {
				t.Errorf("stdout %q, want %q", got, tt.want)
			}
		})
	}
}
