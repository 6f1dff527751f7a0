package keras_test

import (
	"path/filepath"
	"testing"

	"godist/distlib/data"
	"godist/distlib/device"
	"godist/distlib/keras"
	"godist/distlib/keras/layers"
	"godist/distlib/mesh"
	"godist/distlib/tensor"
)

// TestSaveLoadModelUnderDistribution: a model trained under a Keras 3 distribution (its
// variables replicated, or its Dense kernels sharded, over a device mesh) saves with its
// optimizer state and, loaded in the same distribution's scope, predicts the same and
// trains on exactly as the saved one does.
func TestSaveLoadModelUnderDistribution(t *testing.T) {
	for _, mp := range []bool{false, true} {
		name := "DataParallel"
		if mp {
			name = "ModelParallel"
		}
		t.Run(name, func(t *testing.T) { saveLoadUnderDistribution(t, mp) })
	}
}

func saveLoadUnderDistribution(t *testing.T, modelParallel bool) {
	device.Reset()
	if err := device.SetLogicalDeviceConfiguration(device.ListPhysicalDevices("CPU")[0], make([]device.LogicalDeviceConfiguration, 2)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(device.Reset)
	x, y := tensor.RandomNormal([]int{32, 4}, 0, 1, 1), tensor.RandomNormal([]int{32, 2}, 0, 1, 2)
	ds := data.FromTensorSlices(x, y).Batch(8, false)
	devs := mesh.ListDevices("CPU")
	var dist interface{ Scope(func()) }
	if modelParallel {
		dm := mesh.NewDeviceMesh([]int{1, 2}, []string{"batch", "model"}, devs)
		lm := mesh.NewLayoutMap(dm)
		lm.Set("dense.*kernel", mesh.Axes("", "model"))
		dist = mesh.NewModelParallel(lm, "batch")
	} else {
		dist = mesh.NewDataParallel(mesh.WithDevices(devs...))
	}
	var m *keras.Model
	dist.Scope(func() {
		keras.SetRandomSeed(8)
		m = keras.Sequential(layers.Input(4), layers.Dense(8, layers.ReLU), layers.Dense(2))
		m.Compile(keras.Adam(0.01), keras.MeanSquaredError())
	})
	m.Fit(ds, keras.Epochs(2), keras.Verbose(0))
	path := filepath.Join(t.TempDir(), "mp.keras")
	if err := m.Save(path); err != nil {
		t.Fatal(err)
	}
	var got *keras.Model
	var err error
	dist.Scope(func() { got, err = keras.LoadModel(path) })
	if err != nil {
		t.Fatal(err)
	}
	if got.MeshEngine() == nil {
		t.Fatal("the model loaded in the distribution's scope has no mesh engine")
	}
	same := func(what string, a, b []*tensor.Tensor) {
		t.Helper()
		for i := range a {
			for j, v := range a[i].Data() {
				if d := v - b[i].Data()[j]; d > 1e-6 || d < -1e-6 {
					t.Fatalf("%s: %d[%d] = %v, want %v", what, i, j, b[i].Data()[j], v)
				}
			}
		}
	}
	same("weights", m.GetWeights(), got.GetWeights())
	same("predictions", []*tensor.Tensor{m.Predict(x)}, []*tensor.Tensor{got.Predict(x)})
	m.Fit(ds, keras.Epochs(1), keras.Verbose(0))
	got.Fit(ds, keras.Epochs(1), keras.Verbose(0))
	same("one more epoch", m.GetWeights(), got.GetWeights())
}
