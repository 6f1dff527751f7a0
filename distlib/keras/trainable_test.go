package keras

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"godist/distlib/distribute"
	"godist/distlib/keras/layers"
	"godist/distlib/tensor"
	"godist/internal/leakcheck"
)

// changedWeights reports, per weight, whether it moved between before and after.
func changedWeights(before, after []*tensor.Tensor) []bool {
	out := make([]bool, len(before))
	for i := range before {
		out[i] = maxAbsDiff(before[i].Data(), after[i].Data()) > 0
	}
	return out
}

// TestSetTrainable: frozen weights are not updated by Fit, not in TrainableVariables, and
// count as non-trainable in Summary, under the default strategy and MirroredStrategy on 2
// logical CPUs; a change after Compile takes effect at the next Fit.
func TestSetTrainable(t *testing.T) {
	leakcheck.Check(t)
	splitCPU(t, 2)
	x, y := blobs(64, 5)
	for _, sc := range []struct {
		name string
		s    func() distribute.Strategy
	}{
		{"default", func() distribute.Strategy { return nil }},
		{"mirrored 2", func() distribute.Strategy {
			return distribute.NewMirroredStrategy(distribute.WithDevices("/cpu:0", "/cpu:1"))
		}},
	} {
		t.Run(sc.name, func(t *testing.T) {
			SetRandomSeed(4)
			var m *Model
			var base, head *layers.DenseLayer
			build := func() {
				base = layers.Dense(4, layers.Tanh, layers.InputShape(2))
				head = layers.Dense(2)
				m = Sequential(base, head)
				m.Compile(SGD(0.1), SparseCategoricalCrossentropy(true), "accuracy")
			}
			if s := sc.s(); s != nil {
				s.Scope(build)
				if got := m.Strategy().NumReplicasInSync(); got != 2 {
					t.Fatalf("%d replicas, want 2", got)
				}
			} else {
				build()
			}
			quiet(m)
			steps := []struct {
				name      string
				change    func()
				nTrain    int
				trained   []bool // base kernel, base bias, head kernel, head bias
				summary   string
				trainable bool
			}{
				{"freeze base after compile", func() { base.SetTrainable(false) }, 2, []bool{false, false, true, true},
					"Trainable params: 10\nNon-trainable params: 12\n", true},
				{"unfreeze base", func() { base.SetTrainable(true) }, 4, []bool{true, true, true, true},
					"Trainable params: 22\nNon-trainable params: 0\n", true},
				{"freeze model", func() { m.SetTrainable(false) }, 0, []bool{false, false, false, false},
					"Trainable params: 0\nNon-trainable params: 22\n", false},
				{"unfreeze the head only: the model stays frozen", func() { head.SetTrainable(true) }, 0, []bool{false, false, false, false},
					"Trainable params: 0\nNon-trainable params: 22\n", false},
				{"unfreeze model, freeze head", func() { m.SetTrainable(true); head.SetTrainable(false) }, 2, []bool{true, true, false, false},
					"Trainable params: 12\nNon-trainable params: 10\n", true},
			}
			for _, st := range steps {
				st.change()
				if got := len(m.TrainableVariables()); got != st.nTrain {
					t.Errorf("%s: %d trainable variables, want %d", st.name, got, st.nTrain)
				}
				if !strings.Contains(m.SummaryString(), st.summary) {
					t.Errorf("%s: Summary\n%s\nwant %q", st.name, m.SummaryString(), st.summary)
				}
				if m.Trainable() != st.trainable {
					t.Errorf("%s: Trainable() = %v", st.name, m.Trainable())
				}
				before := m.GetWeights()
				m.Fit(x, y, BatchSize(16), Epochs(1), Verbose(0))
				got := changedWeights(before, m.GetWeights())
				for i := range got {
					if got[i] != st.trained[i] {
						t.Errorf("%s: weight %d moved %v, want %v", st.name, i, got[i], st.trained[i])
					}
				}
				if sc.name != "default" {
					// Every replica's copy holds the same values.
					for r := 1; r < 2; r++ {
						for i, v := range m.variables(r, false) {
							if d := maxAbsDiff(v.Value().Data(), m.variables(0, false)[i].Value().Data()); d > 1e-6 {
								t.Errorf("%s: replica %d weight %d differs by %g", st.name, r, i, d)
							}
						}
					}
				}
			}
		})
	}
}

// TestSetTrainableBeforeBuild: a layer frozen at construction never trains, and a custom
// loop applying gradients to TrainableVariables leaves it alone.
func TestSetTrainableBeforeBuild(t *testing.T) {
	SetRandomSeed(4)
	base := layers.Dense(4, layers.Tanh)
	base.SetTrainable(false)
	m := Sequential(base, layers.Dense(2))
	quiet(m)
	m.Compile(Adam(0.01), SparseCategoricalCrossentropy(true))
	x, y := blobs(32, 6)
	m.Fit(x, y, Epochs(1), Verbose(0))
	before := m.GetWeights()
	tape := tensor.NewGradientTape()
	loss := m.Loss().Call(y, m.Call(x, true))
	vars := m.TrainableVariables()
	if len(vars) != 2 {
		t.Fatalf("%d trainable variables, want 2", len(vars))
	}
	if err := m.Optimizer().ApplyGradients(tape.Gradient(loss, vars), vars); err != nil {
		t.Fatal(err)
	}
	got := changedWeights(before, m.GetWeights())
	if got[0] || got[1] || !got[2] {
		t.Errorf("weights moved %v, want only the head's", got)
	}
}

func TestLayerTrainable(t *testing.T) {
	for _, l := range []layers.Layer{layers.Dense(2), layers.Conv2D(2, 3), layers.Flatten(), layers.Dropout(0.5), layers.Input(3)} {
		tl, ok := l.(layers.TrainableLayer)
		if !ok {
			t.Fatalf("%s is not a TrainableLayer", l.Class())
		}
		if !tl.Trainable() || !layers.LayerTrainable(l) {
			t.Errorf("%s: not trainable when made", l.Class())
		}
		tl.SetTrainable(false)
		if tl.Trainable() || layers.LayerTrainable(l) {
			t.Errorf("%s: trainable after SetTrainable(false)", l.Class())
		}
	}
}

// countingOps is a ReductionToOneDevice that counts the values it all-reduces (the first
// replica's tensors, summed over the calls).
type countingOps struct {
	*distribute.ReductionToOneDevice
	mu     sync.Mutex
	values int
}

func (c *countingOps) BatchAllReduce(op distribute.ReduceOp, perReplica [][]*tensor.Tensor, devices []string) ([][]*tensor.Tensor, error) {
	c.mu.Lock()
	for _, t := range perReplica[0] {
		c.values += t.Size()
	}
	c.mu.Unlock()
	return c.ReductionToOneDevice.BatchAllReduce(op, perReplica, devices)
}

func (c *countingOps) take() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.values
	c.values = 0
	return n
}

// TestFrozenNotAllReduced: under MirroredStrategy a Fit step all-reduces the gradients of
// the trainable weights only; freezing a layer takes exactly its parameters out of the
// values the cross-device ops reduce.
func TestFrozenNotAllReduced(t *testing.T) {
	leakcheck.Check(t)
	splitCPU(t, 2)
	x, y := blobs(64, 5)
	ops := &countingOps{ReductionToOneDevice: distribute.NewReductionToOneDevice()}
	s := distribute.NewMirroredStrategy(distribute.WithDevices("/cpu:0", "/cpu:1"), distribute.WithCrossDeviceOps(ops))
	SetRandomSeed(4)
	var m *Model
	var base, head *layers.DenseLayer
	s.Scope(func() {
		base = layers.Dense(8, layers.Tanh, layers.InputShape(2)) // 2*8+8 = 24 values
		head = layers.Dense(2)                                    // 8*2+2 = 18 values
		m = Sequential(base, head)
		m.Compile(SGD(0.1), SparseCategoricalCrossentropy(true))
	})
	quiet(m)
	const steps = 4 // 64 examples in batches of 16
	fit := func() int {
		ops.take()
		m.Fit(x, y, BatchSize(16), Epochs(1), Verbose(0))
		return ops.take()
	}
	all := fit()
	for _, tc := range []struct {
		name   string
		change func()
		less   int // values per step not all-reduced, against all weights trainable
	}{
		{"base frozen", func() { base.SetTrainable(false) }, 24},
		{"head frozen", func() { base.SetTrainable(true); head.SetTrainable(false) }, 18},
		{"all trainable again", func() { head.SetTrainable(true) }, 0},
	} {
		tc.change()
		if got := fit(); all-got != steps*tc.less {
			t.Errorf("%s: a Fit all-reduced %d values, %d with every weight trainable: want %d fewer (%d per step)",
				tc.name, got, all, steps*tc.less, tc.less)
		}
	}
	if all < steps*(24+18) {
		t.Errorf("a Fit with every weight trainable all-reduced %d values, want at least %d (the gradients)", all, steps*(24+18))
	}
}

// TestLayerInTwoModels: a layer built by one model cannot serve a second one (whose
// weights would silently start anew, where Keras would share them): Sequential and the
// functional API report it, naming the layer and the model holding its weights, while the
// first model and new layers with copied weights work.
func TestLayerInTwoModels(t *testing.T) {
	leakcheck.Check(t)
	SetRandomSeed(4)
	conv := layers.Dense(3, layers.Tanh, layers.InputShape(2), layers.Name("shared_base"))
	trained := Sequential(conv, layers.Dense(2))
	lazy := layers.Dense(3) // no input shape: its model builds at the first batch
	lazyModel := Sequential(lazy)
	lazyModel.Call(tensor.Zeros(1, 2), false)
	for _, tc := range []struct {
		name  string
		build func()
		want  string
	}{
		{"Sequential", func() { Sequential(conv, layers.Dense(2)) }, "layer 0 (shared_base) already belongs to model " + trained.Name()},
		{"functional", func() {
			in := Input(2)
			NewModel(in, layers.Dense(2).Call(conv.Call(in)))
		}, "layer 1 (shared_base) already belongs to model " + trained.Name()},
		{"built at the first batch", func() {
			m := Sequential(lazy, layers.Dense(2))
			m.Call(tensor.Zeros(1, 2), false)
		}, "layer 0 (" + lazy.Name() + ") already belongs to model " + lazyModel.Name()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := catchPanic(tc.build)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "SetWeights") {
				t.Fatalf("got %v, want an error containing %q and saying to copy the weights with SetWeights", err, tc.want)
			}
		})
	}
	// The owner still builds and runs; new layers with the copied weights compute the same.
	copied := Sequential(layers.Dense(3, layers.Tanh, layers.InputShape(2)), layers.Dense(2))
	if err := copied.SetWeights(trained.GetWeights()); err != nil {
		t.Fatal(err)
	}
	x, _ := blobs(4, 1)
	if d := maxAbsDiff(copied.Call(x, false).Data(), trained.Call(x, false).Data()); d != 0 {
		t.Errorf("a model of new layers with the copied weights differs by %g", d)
	}
}

// catchPanic runs f and returns what it panicked with as an error (nil if it returned).
func catchPanic(f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if e, ok := r.(error); ok {
				err = e
			} else {
				err = fmt.Errorf("%v", r)
			}
		}
	}()
	f()
	return nil
}
