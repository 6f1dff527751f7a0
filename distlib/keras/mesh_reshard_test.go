package keras_test

import (
	"path/filepath"
	"strings"
	"testing"

	"godist/distlib/data"
	"godist/distlib/device"
	"godist/distlib/keras"
	"godist/distlib/keras/layers"
	"godist/distlib/mesh"
	"godist/distlib/tensor"
)

// meshLayout names a Keras 3 distribution: "none", "dp2" (DataParallel over 2 devices),
// "mp1x2" (ModelParallel, a batch x model mesh of 1 x 2 with the Dense kernels split
// along "model"), ...
type meshLayout string

// scope runs fn in the layout's distribution (directly for "none").
func (l meshLayout) scope(t *testing.T, fn func()) {
	t.Helper()
	devs := mesh.ListDevices("CPU")
	var dist interface{ Scope(func()) }
	switch l {
	case "none":
		fn()
		return
	case "dp2", "dp3":
		n := int(l[2] - '0')
		dist = mesh.NewDataParallel(mesh.WithDevices(devs[:n]...))
	case "mp1x2", "mp2x2", "mp1x4":
		b, m := int(l[2]-'0'), int(l[4]-'0')
		dm := mesh.NewDeviceMesh([]int{b, m}, []string{"batch", "model"}, devs[:b*m])
		lm := mesh.NewLayoutMap(dm)
		lm.Set("dense.*kernel", mesh.Axes("", "model"))
		dist = mesh.NewModelParallel(lm, "batch")
	default:
		t.Fatalf("unknown layout %q", l)
	}
	dist.Scope(fn)
}

// meshReshardModel is a two-layer MLP with Adam made in layout l's distribution.
func meshReshardModel(t *testing.T, l meshLayout) (*keras.Model, *keras.Optimizer) {
	var m *keras.Model
	var opt *keras.Optimizer
	l.scope(t, func() {
		keras.SetRandomSeed(8)
		m = keras.Sequential(layers.Input(4), layers.Dense(8, layers.ReLU), layers.Dense(4))
		opt = keras.Adam(0.01)
		m.Compile(opt, keras.MeanSquaredError())
	})
	if (l == "none") != (m.MeshEngine() == nil) {
		t.Fatalf("layout %s: model's mesh engine %v", l, m.MeshEngine())
	}
	return m, opt
}

var meshReshardCases = []struct{ from, to meshLayout }{
	{"dp2", "dp3"},
	{"dp2", "none"},
	{"none", "mp1x2"},
	{"mp1x2", "mp2x2"},
	{"mp1x2", "dp2"},
	{"mp1x4", "mp1x2"},
	{"mp2x2", "none"},
}

func meshReshardData() *data.Dataset {
	x, y := tensor.RandomNormal([]int{48, 4}, 0, 1, 1), tensor.RandomNormal([]int{48, 4}, 0, 1, 2)
	return data.FromTensorSlices(x, y).Batch(12, false)
}

func meshDevices(t *testing.T, n int) {
	device.Reset()
	if err := device.SetLogicalDeviceConfiguration(device.ListPhysicalDevices("CPU")[0], make([]device.LogicalDeviceConfiguration, n)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(device.Reset)
}

// TestCheckpointReshardsMesh: a Checkpoint and a BackupAndRestore backup written under one
// device-mesh layout (or none) restore under another, every device's part of the weights
// and Adam slots bit for bit the saved global values' part.
func TestCheckpointReshardsMesh(t *testing.T) {
	meshDevices(t, 4)
	for _, tc := range meshReshardCases {
		t.Run(string(tc.from)+" to "+string(tc.to), func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "ckpt-1")
			m, opt := meshReshardModel(t, tc.from)
			stop := keras.LambdaCallback{OnEpochEnd: func(int, keras.Logs) { m.StopTraining = true }}
			m.Fit(meshReshardData(), keras.Epochs(3), keras.Verbose(0), keras.Callbacks(keras.BackupAndRestore(dir), stop))
			if err := keras.NewCheckpoint(m, opt).Write(path); err != nil {
				t.Fatal(err)
			}

			m2, opt2 := meshReshardModel(t, tc.to)
			if err := keras.NewCheckpoint(m2, opt2).Restore(path); err != nil {
				t.Fatal(err)
			}
			if err := keras.StateMatches(path+".gdck", m2); err != nil {
				t.Errorf("Checkpoint: restored state differs from the saved one: %v", err)
			}

			m3, _ := meshReshardModel(t, tc.to)
			bk := keras.BackupAndRestore(dir)
			var epochs []int
			check := keras.LambdaCallback{
				OnTrainBegin: func(keras.Logs) {
					if err := keras.StateMatches(bk.Path(), m3); err != nil {
						t.Errorf("BackupAndRestore: restored state differs from the backup: %v", err)
					}
				},
				OnEpochBegin: func(e int, _ keras.Logs) { epochs = append(epochs, e) },
			}
			m3.Fit(meshReshardData(), keras.Epochs(3), keras.Verbose(0), keras.Callbacks(bk, check))
			if bk.RestoredEpoch() != 0 || len(epochs) != 2 || epochs[0] != 1 {
				t.Errorf("BackupAndRestore: resumed after epoch index %d and ran epochs %v, want 0 and [1 2]", bk.RestoredEpoch(), epochs)
			}
		})
	}
}

// TestModelSaveReshardsMesh: a .keras model saved under one layout loads under another
// with its weights and optimizer state bit for bit.
func TestModelSaveReshardsMesh(t *testing.T) {
	meshDevices(t, 4)
	for _, tc := range meshReshardCases {
		t.Run(string(tc.from)+" to "+string(tc.to), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "m.keras")
			m, _ := meshReshardModel(t, tc.from)
			m.Fit(meshReshardData(), keras.Epochs(1), keras.Verbose(0))
			if err := m.Save(path); err != nil {
				t.Fatal(err)
			}
			var got *keras.Model
			var err error
			tc.to.scope(t, func() { got, err = keras.LoadModel(path) })
			if err != nil {
				t.Fatal(err)
			}
			if err := keras.StateMatches(path, got); err != nil {
				t.Errorf("loaded state differs from the saved one: %v", err)
			}
		})
	}
}

// TestMeshRestoreShapeError: a checkpoint whose variable has another global shape than the
// model's is refused under a mesh too, naming the file, the variable and both shapes.
func TestMeshRestoreShapeError(t *testing.T) {
	meshDevices(t, 4)
	path := filepath.Join(t.TempDir(), "ckpt-1")
	m, opt := meshReshardModel(t, "mp1x2")
	m.Fit(meshReshardData(), keras.Epochs(1), keras.Verbose(0))
	if err := keras.NewCheckpoint(m, opt).Write(path); err != nil {
		t.Fatal(err)
	}
	var w *keras.Model
	meshLayout("mp1x4").scope(t, func() {
		w = keras.Sequential(layers.Input(4), layers.Dense(12, layers.ReLU), layers.Dense(4))
		w.Compile(keras.Adam(0.01), keras.MeanSquaredError())
	})
	err := keras.NewCheckpoint(w, nil).Restore(path)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "[4 12]") || !strings.Contains(err.Error(), "[4 8]") {
		t.Errorf("restore of [4 8] into [4 12] = %v, want an error naming the file and both shapes", err)
	}
}
