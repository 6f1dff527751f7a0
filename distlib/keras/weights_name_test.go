package keras

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"godist/distlib/keras/layers"
	"godist/distlib/tensor"
)

// TestWeightsFileNames: SaveWeights never writes a foreign format's name: ".weights.h5",
// ".h5" and ".hdf5" (Keras' HDF5) and ".keras" (a Save archive) are refused with the name
// to write; files written before under such names (GDKERASW inside) still load; a real
// HDF5 file is named as such; ModelCheckpoint refuses .h5 at once and saves whole models to
// .keras paths as Keras 3 does.
func TestWeightsFileNames(t *testing.T) {
	dir := t.TempDir()
	SetRandomSeed(1)
	m := Sequential(layers.Dense(2, layers.InputShape(3)))
	quiet(m)
	m.Compile(SGD(0.1), MeanSquaredError())
	if err := m.Build(3); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"model.weights.h5": `write SaveWeights("` + filepath.Join(dir, "model.godist.weights") + `"), or Save("` + filepath.Join(dir, "model.keras") + `")`,
		"model.h5":         `write SaveWeights("` + filepath.Join(dir, "model.godist.weights") + `")`,
		"model.HDF5":       `godist does not write HDF5`,
		"model.keras":      `write Save("` + filepath.Join(dir, "model.keras") + `"), or SaveWeights("` + filepath.Join(dir, "model.godist.weights") + `")`,
	} {
		err := m.SaveWeights(filepath.Join(dir, name))
		if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), want) {
			t.Errorf("SaveWeights(%q) = %v, want an error containing %q", name, err, want)
		}
		if _, statErr := os.Stat(filepath.Join(dir, name)); statErr == nil {
			t.Errorf("SaveWeights(%q) wrote the file", name)
		}
	}
	good := filepath.Join(dir, "model"+WeightsExt)
	if err := m.SaveWeights(good); err != nil {
		t.Fatal(err)
	}
	// A file an earlier version wrote under a .weights.h5 name loads.
	old := filepath.Join(dir, "old.weights.h5")
	raw, _ := os.ReadFile(good)
	if err := os.WriteFile(old, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	want := m.GetWeights()
	m.SetWeights([]*tensor.Tensor{tensor.Zeros(3, 2), tensor.Zeros(2)})
	if err := m.LoadWeights(old); err != nil {
		t.Fatalf("LoadWeights of an old GDKERASW file named .weights.h5: %v", err)
	}
	if d := maxAbsDiff(m.GetWeights()[0].Data(), want[0].Data()); d != 0 {
		t.Errorf("loaded weights differ by %g", d)
	}
	hdf := filepath.Join(dir, "keras.weights.h5")
	os.WriteFile(hdf, []byte(hdf5Signature+"rest of a Keras file"), 0o644)
	if err := m.LoadWeights(hdf); !errors.Is(err, ErrWeights) || !strings.Contains(err.Error(), "is an HDF5 file") {
		t.Errorf("LoadWeights of an HDF5 file = %v, want ErrWeights saying it is HDF5", err)
	}

	if err := catch(func() { ModelCheckpoint(filepath.Join(dir, "ckpt.{epoch:02d}.weights.h5"), SaveWeightsOnly(true)) }); err == nil ||
		!strings.Contains(err.Error(), "ckpt.{epoch:02d}"+WeightsExt) {
		t.Errorf("ModelCheckpoint to .weights.h5: %v, want an error giving the .godist.weights name", err)
	}
	if err := catch(func() { ModelCheckpoint(filepath.Join(dir, "w.keras"), SaveWeightsOnly(true)) }); err == nil {
		t.Error("ModelCheckpoint to .keras with SaveWeightsOnly: no error")
	}
	best := filepath.Join(dir, "best.keras")
	x := tensor.RandomNormal([]int{8, 3}, 0, 1, 1)
	m.Fit(x, tensor.Zeros(8, 2), Epochs(1), Verbose(0), Callbacks(ModelCheckpoint(best)))
	if _, err := LoadModel(best); err != nil {
		t.Errorf("ModelCheckpoint(best.keras) wrote no model LoadModel reads: %v", err)
	}
}
