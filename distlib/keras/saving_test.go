package keras

import (
	"archive/zip"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"godist/distlib/data"
	"godist/distlib/distribute"
	"godist/distlib/keras/layers"
	"godist/distlib/tensor"
)

// saveModel is a model using every saved feature: a regularizer, dropout (its seeds
// follow the step), a frozen layer left trainable false, metrics.
func saveModel() *Model {
	return Sequential(
		layers.Input(36),
		layers.Reshape([]int{6, 6, 1}),
		layers.Conv2D(4, 3, layers.ReLU, layers.KernelRegularizer(layers.L2(1e-3))),
		layers.MaxPooling2D(2),
		layers.Flatten(),
		layers.Dense(8, layers.ReLU),
		layers.Dropout(0.25),
		layers.Dense(3),
	)
}

func equalTensors(t *testing.T, what string, a, b []*tensor.Tensor) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: %d weights, want %d", what, len(b), len(a))
	}
	for i := range a {
		x, y := a[i].Data(), b[i].Data()
		for j := range x {
			if x[j] != y[j] {
				t.Fatalf("%s: weight %d[%d] = %v, want %v (exactly)", what, i, j, y[j], x[j])
			}
		}
	}
}

// TestSaveLoadModelResumes: a model saved after one epoch and loaded (architecture,
// compile arguments, weights, optimizer state) predicts the same, and one more epoch gives
// exactly the weights of two uninterrupted epochs, for each optimizer and schedule.
func TestSaveLoadModelResumes(t *testing.T) {
	x, y := mwData(48)
	x = tensor.Reshape(x, 48, 36)
	ds := data.FromTensorSlices(x, y).Batch(16, false)
	opts := []struct {
		name string
		make func() *Optimizer
	}{
		{"Adam", func() *Optimizer { return Adam(0.01, Beta1(0.8)) }},
		{"SGD-momentum-nesterov-decay", func() *Optimizer {
			return SGD(0, Momentum(0.9), Nesterov(true), Schedule(ExponentialDecay(0.05, 2, 0.9, true)))
		}},
		{"RMSprop-piecewise", func() *Optimizer {
			return RMSprop(0, Rho(0.8), Momentum(0.1), Schedule(PiecewiseConstantDecay([]int64{3}, []float64{0.01, 0.001})))
		}},
	}
	for _, o := range opts {
		t.Run(o.name, func(t *testing.T) {
			mk := func() *Model {
				SetRandomSeed(5)
				m := saveModel()
				m.Compile(o.make(), SparseCategoricalCrossentropy(true), "accuracy")
				return m
			}
			ref := mk()
			ref.Fit(ds, Epochs(2), Verbose(0))

			m := mk()
			m.Fit(ds, Epochs(1), Verbose(0))
			path := filepath.Join(t.TempDir(), "sub", "model.keras")
			if err := m.Save(path); err != nil {
				t.Fatalf("Save(%s) = %v", path, err)
			}
			got, err := LoadModel(path)
			if err != nil {
				t.Fatalf("LoadModel(%s) = %v", path, err)
			}
			if got.Name() != m.Name() || len(got.Layers()) != len(m.Layers()) {
				t.Errorf("loaded %s with %d layers, want %s with %d", got.Name(), len(got.Layers()), m.Name(), len(m.Layers()))
			}
			if got.Optimizer().Name() != m.Optimizer().Name() || got.Optimizer().Iterations() != m.Optimizer().Iterations() ||
				got.Optimizer().LearningRate() != m.Optimizer().LearningRate() {
				t.Errorf("optimizer %s at %d lr %v, want %s at %d lr %v", got.Optimizer().Name(), got.Optimizer().Iterations(), got.Optimizer().LearningRate(),
					m.Optimizer().Name(), m.Optimizer().Iterations(), m.Optimizer().LearningRate())
			}
			equalTensors(t, "loaded", m.GetWeights(), got.GetWeights())
			equalTensors(t, "predictions", []*tensor.Tensor{m.Predict(x)}, []*tensor.Tensor{got.Predict(x)})
			h := got.Fit(ds, Epochs(1), Verbose(0))
			if _, ok := h.History["accuracy"]; !ok {
				t.Errorf("the loaded model lost its metrics: history %v", h.History)
			}
			equalTensors(t, "one more epoch after loading vs two epochs", ref.GetWeights(), got.GetWeights())
		})
	}
}

// TestSaveLoadModelFunctionalFrozenMirrored: a functional model with a frozen layer, saved
// and loaded inside a MirroredStrategy scope over two devices, keeps its class, its frozen
// layer and puts the weights in both copies.
func TestSaveLoadModelFunctionalFrozenMirrored(t *testing.T) {
	splitCPU(t, 2)
	SetRandomSeed(9)
	inputs := Input(6, 6, 1)
	h := layers.Conv2D(2, 3, layers.ReLU).Call(inputs)
	h = layers.Flatten().Call(h)
	base := layers.Dense(4, layers.Tanh)
	h = base.Call(h)
	outputs := layers.Dense(1).Call(h)
	m := NewModel(inputs, outputs)
	base.SetTrainable(false)
	m.Compile(SGD(0.1), MeanSquaredError())
	x, _ := mwData(8)
	x = tensor.Reshape(x, 8, 6, 6, 1)
	path := filepath.Join(t.TempDir(), "f.keras")
	if err := m.Save(path); err != nil {
		t.Fatal(err)
	}
	s := distribute.NewMirroredStrategy()
	var got *Model
	var err error
	s.Scope(func() { got, err = LoadModel(path) })
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got.Name(), "functional") || got.Strategy() != distribute.Strategy(s) {
		t.Errorf("loaded %s under %s, want a functional model under %s", got.Name(), got.Strategy().Name(), s.Name())
	}
	if tr := len(got.TrainableVariables()); tr != len(m.TrainableVariables()) {
		t.Errorf("%d trainable variables, want %d (the frozen layer stays frozen)", tr, len(m.TrainableVariables()))
	}
	for c := range got.vars {
		for i, v := range got.vars[c] {
			equalTensors(t, "copy "+v.Name(), []*tensor.Tensor{m.vars[0][i].Value()}, []*tensor.Tensor{v.Value()})
		}
	}
	equalTensors(t, "predictions", []*tensor.Tensor{m.Predict(x)}, []*tensor.Tensor{got.Predict(x)})
	// LoadWeights reads a .keras file's weights, as Keras 3 does.
	SetRandomSeed(10)
	in2 := Input(6, 6, 1)
	o2 := layers.Dense(1).Call(layers.Dense(4, layers.Tanh).Call(layers.Flatten().Call(layers.Conv2D(2, 3, layers.ReLU).Call(in2))))
	fresh := NewModel(in2, o2)
	if err := fresh.LoadWeights(path); err != nil {
		t.Fatalf("LoadWeights(%s) = %v", path, err)
	}
	equalTensors(t, "LoadWeights(.keras)", m.GetWeights(), fresh.GetWeights())
}

// TestSaveErrors: what Save refuses, each with what to write instead.
func TestSaveErrors(t *testing.T) {
	dir := t.TempDir()
	SetRandomSeed(1)
	m := saveModel()
	m.Compile(Adam(0.01), SparseCategoricalCrossentropy(true))
	custom := saveModel()
	custom.Compile(SGD(0.1, Schedule(stepSchedule{})), SparseCategoricalCrossentropy(true))
	cases := []struct {
		m    *Model
		path string
		want string
	}{
		{m, filepath.Join(dir, "saved_model"), `not to a SavedModel directory (TF 2's model.save(dir)): write Save("` + filepath.Join(dir, "saved_model") + `.keras")`},
		{m, filepath.Join(dir, "saved_model") + "/", `write Save("` + filepath.Join(dir, "saved_model") + `.keras")`},
		{m, filepath.Join(dir, "m.h5"), `godist does not write HDF5; save the whole model with Save("` + filepath.Join(dir, "m.keras") + `")`},
		{Sequential(layers.Dense(2)), filepath.Join(dir, "u.keras"), "is not built yet"},
		{custom, filepath.Join(dir, "c.keras"), "learning-rate schedule keras.stepSchedule cannot be saved"},
	}
	for _, c := range cases {
		err := c.m.Save(c.path)
		if err == nil || !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Save(%s) = %v, want an ErrInvalidArgument containing %q", c.path, err, c.want)
		}
		if _, serr := os.Stat(c.path); serr == nil {
			t.Errorf("Save(%s) failed but left a file", c.path)
		}
	}
}

type stepSchedule struct{}

func (stepSchedule) At(step int64) float64 { return 0.1 / float64(step+1) }

// TestLoadModelErrors: a file LoadModel cannot use is an error naming it and saying why.
func TestLoadModelErrors(t *testing.T) {
	dir := t.TempDir()
	SetRandomSeed(2)
	m := saveModel()
	m.Compile(Adam(0.01), LossFunc("my_loss", func(yTrue, yPred *tensor.Tensor) *tensor.Tensor {
		return tensor.ReduceSum(tensor.Square(yPred))
	}))
	m.Build(36)
	good := filepath.Join(dir, "good.keras")
	if err := m.Save(good); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// rezip rewrites the archive with entry name's contents changed by edit (nil: dropped).
	rezip := func(name string, edit func([]byte) []byte) []byte {
		zr, err := zip.NewReader(bytes.NewReader(raw), int64(len(raw)))
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		zw := zip.NewWriter(&out)
		for _, f := range zr.File {
			r, _ := f.Open()
			var b bytes.Buffer
			b.ReadFrom(r)
			r.Close()
			d := b.Bytes()
			if f.Name == name {
				if edit == nil {
					continue
				}
				d = edit(d)
			}
			w, _ := zw.Create(f.Name)
			w.Write(d)
		}
		zw.Close()
		return out.Bytes()
	}
	flip := func(b []byte) []byte { c := append([]byte(nil), b...); c[len(c)-3] ^= 0x40; return c }
	os.Mkdir(filepath.Join(dir, "saved"), 0o755)
	cases := []struct {
		path string
		opts []LoadOption
		want string
	}{
		{filepath.Join(dir, "missing.keras"), nil, "no such file"},
		{filepath.Join(dir, "saved.keras"), nil, "saved is a directory (a TF SavedModel?)"},
		{write("text.keras", []byte("not a zip")), nil, "is not a .keras archive"},
		{write("torn.keras", raw[:len(raw)/2]), nil, "is not a .keras archive"},
		{write("noweights.keras", rezip(modelWeightsEntry, nil)), nil, "has no model.weights.gdck"},
		{write("flipped.keras", rezip(modelWeightsEntry, flip)), nil, "torn or corrupt (checksum"},
		{write("python.keras", rezip(modelMetadataEntry, func([]byte) []byte { return []byte(`{"keras_version": "3.3.3", "date_saved": "x"}`) })), nil,
			"was saved by Keras 3.3.3 (weights in HDF5), which godist does not read"},
		{write("lstm.keras", rezip(modelConfigEntry, func(b []byte) []byte { return bytes.Replace(b, []byte(`"Flatten"`), []byte(`"LSTM"`), 1) })), nil,
			`layer 4: layers: invalid argument: layer class "LSTM" is not one godist knows`},
		{write("adagrad.keras", rezip(modelConfigEntry, func(b []byte) []byte { return bytes.Replace(b, []byte(`"Adam"`), []byte(`"Adagrad"`), 1) })), nil,
			`optimizer class "Adagrad": godist has SGD, Adam and RMSprop`},
		{write("nobeta.keras", rezip(modelConfigEntry, func(b []byte) []byte { return bytes.Replace(b, []byte(`"beta_1"`), []byte(`"beta_one"`), 1) })), nil,
			`optimizer Adam: "beta_1" is <nil>, want a number`},
		{good, nil, `the custom loss "my_loss" (keras.LossFunc), which a file cannot hold: pass it, LoadModel(path, keras.WithCustomLoss(`},
	}
	for _, c := range cases {
		got, err := LoadModel(c.path, c.opts...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("LoadModel(%s) = %v, %v; want an error containing %q", filepath.Base(c.path), got, err, c.want)
		}
	}
	// With the loss given, or without compiling, the same file loads.
	l := LossFunc("my_loss", func(yTrue, yPred *tensor.Tensor) *tensor.Tensor { return tensor.ReduceSum(tensor.Square(yPred)) })
	if got, err := LoadModel(good, WithCustomLoss(l)); err != nil || got.Loss() != l {
		t.Errorf("LoadModel(WithCustomLoss) = %v, %v; want the model compiled with the given loss", got, err)
	}
	if got, err := LoadModel(good, WithoutCompile()); err != nil || got.Optimizer() != nil {
		t.Errorf("LoadModel(WithoutCompile) = %v, %v; want an uncompiled model", got, err)
	} else {
		equalTensors(t, "WithoutCompile", m.GetWeights(), got.GetWeights())
	}
}

// TestSaveLoadModelFromPS: a model trained under ParameterServerStrategy saves the values
// its variables have on the parameter servers; loaded outside the cluster it evaluates the
// same, and its optimizer resumes where the ps left it (the iterations and slots read from
// the ps, as for Checkpoint).
func TestSaveLoadModelFromPS(t *testing.T) {
	train, test := mnistSmall(t)
	s, _ := psStrategy(t, 1, 2)
	SetRandomSeed(1)
	var m *Model
	s.Scope(func() { m = mnistModel() })
	m.Fit(train, Epochs(1), Verbose(0), StepsPerExecution(4))
	want := m.Evaluate(test, Verbose(0))
	path := filepath.Join(t.TempDir(), "ps.keras")
	if err := m.Save(path); err != nil {
		t.Fatal(err)
	}
	got, err := LoadModel(path)
	if err != nil {
		t.Fatal(err)
	}
	if logs := got.Evaluate(test, Verbose(0)); logs["accuracy"] != want["accuracy"] || logs["loss"] != want["loss"] {
		t.Errorf("loaded model evaluates to %v, the trained one on the ps to %v", logs, want)
	}
	if want["accuracy"] < 0.8 {
		t.Errorf("trained accuracy %.4f: the model did not train", want["accuracy"])
	}
	if it, want := got.Optimizer().Iterations(), m.Optimizer().Iterations(); it != want || want == 0 {
		t.Errorf("loaded optimizer at iteration %d, the trained one at %d; want the same, not 0", it, want)
	}
}
