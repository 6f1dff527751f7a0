package keras_test

import (
	"strings"
	"testing"

	"godist/distlib/data"
	"godist/distlib/device"
	"godist/distlib/keras"
	"godist/distlib/keras/layers"
	"godist/distlib/mesh"
	"godist/distlib/tensor"
)

// TestFunctionalUnderDataParallel: the functional model trains under mesh.DataParallel as
// the Sequential one does, and freezing a layer after the mesh engine built the model is an
// error saying to freeze it before, not a silently ignored flag.
func TestFunctionalUnderDataParallel(t *testing.T) {
	twoCPUs(t)
	ds := data.FromTensorSlices(tensor.RandomNormal([]int{32, 4}, 0, 1, 1), tensor.RandomNormal([]int{32, 2}, 0, 1, 2)).Batch(8, false)
	var dense *layers.DenseLayer
	train := func(functional bool) *keras.Model {
		keras.SetRandomSeed(5)
		var m *keras.Model
		mesh.NewDataParallel(mesh.WithDevices(mesh.ListDevices("CPU")...)).Scope(func() {
			if functional {
				in := keras.Input(4)
				dense = layers.Dense(8, layers.ReLU)
				m = keras.NewModel(in, layers.Dense(2).Call(dense.Call(in)))
			} else {
				m = keras.Sequential(layers.Input(4), layers.Dense(8, layers.ReLU), layers.Dense(2))
			}
			m.Compile(keras.SGD(0.05), keras.MeanSquaredError())
		})
		if m.MeshEngine() == nil {
			t.Fatal("no mesh engine under DataParallel")
		}
		m.Fit(ds, keras.Epochs(2), keras.Verbose(0))
		return m
	}
	fn, seq := train(true), train(false)
	a, b := fn.GetWeights(), seq.GetWeights()
	for i := range a {
		for j, v := range a[i].Data() {
			if d := v - b[i].Data()[j]; d > 1e-5 || d < -1e-5 {
				t.Fatalf("weight %d[%d]: functional %v, sequential %v", i, j, v, b[i].Data()[j])
			}
		}
	}
	dense.SetTrainable(false)
	defer func() {
		err, _ := recover().(error)
		if err == nil || !strings.Contains(err.Error(), "call SetTrainable before") {
			t.Errorf("Fit after freezing under DataParallel: %v, want an error saying to freeze before building", err)
		}
	}()
	fn.Fit(ds, keras.Epochs(1), keras.Verbose(0))
}

// TestDataParallelRecycledBatchesTrainAsFresh: under mesh.DataParallel too, Fit over batches
// it hands back to the iterator (data.Iterator.Recycle) trains bit for bit as over fresh
// batches (a Map after Batch).
func TestDataParallelRecycledBatchesTrainAsFresh(t *testing.T) {
	twoCPUs(t)
	ds := data.FromTensorSlices(tensor.RandomNormal([]int{30, 4}, 0, 1, 1), tensor.RandomNormal([]int{30, 2}, 0, 1, 2)).Batch(8, false)
	train := func(ds *data.Dataset) []*tensor.Tensor {
		keras.SetRandomSeed(5)
		var m *keras.Model
		mesh.NewDataParallel(mesh.WithDevices(mesh.ListDevices("CPU")...)).Scope(func() {
			m = keras.Sequential(layers.Input(4), layers.Dense(8, layers.ReLU), layers.Dense(2))
			m.Compile(keras.SGD(0.05), keras.MeanSquaredError())
		})
		m.Fit(ds, keras.Epochs(3), keras.Verbose(0))
		return m.GetWeights()
	}
	want := train(ds.Map(func(e data.Element) data.Element { return e }))
	got := train(ds)
	for i := range want {
		for j, v := range want[i].Data() {
			if got[i].Data()[j] != v {
				t.Fatalf("weight %d[%d] = %v over recycled batches, %v over fresh ones", i, j, got[i].Data()[j], v)
			}
		}
	}
}

// twoCPUs splits the CPU into 2 logical devices for one test.
func twoCPUs(t *testing.T) {
	t.Helper()
	device.Reset()
	if err := device.SetLogicalDeviceConfiguration(device.ListPhysicalDevices("CPU")[0], make([]device.LogicalDeviceConfiguration, 2)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(device.Reset)
}
