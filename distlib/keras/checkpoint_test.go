package keras

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"godist/distlib/data"
	"godist/distlib/keras/layers"
	"godist/distlib/tensor"
)

// TestCheckpointCustomLoop: a custom loop saves a Checkpoint of its model and optimizer,
// goes on training, then restores it: the weights and the optimizer's state are the saved
// ones, so training on from there repeats exactly what followed the save.
func TestCheckpointCustomLoop(t *testing.T) {
	dir := t.TempDir()
	x := tensor.RandomNormal([]int{64, 3}, 0, 1, 2)
	y := tensor.Reshape(tensor.ReduceSum(x, 1), 64, 1)
	batches := func() []data.Element {
		var out []data.Element
		it := data.FromTensorSlices(x, y).Batch(16, false).Iterator()
		for el, ok := it.Next(); ok; el, ok = it.Next() {
			out = append(out, el)
		}
		return out
	}()
	SetRandomSeed(4)
	model := Sequential(layers.Dense(8, layers.ReLU, layers.InputShape(3)), layers.Dense(1))
	optimizer := Adam(0.01)
	loss := MeanSquaredError()
	step := func(el data.Element) {
		tape := tensor.NewGradientTape()
		l := loss.Call(el[1], model.Call(el[0], true))
		if err := optimizer.ApplyGradients(tape.Gradient(l, model.TrainableVariables()), model.TrainableVariables()); err != nil {
			t.Fatal(err)
		}
	}
	for _, el := range batches {
		step(el)
	}
	checkpoint := NewCheckpoint(model, optimizer)
	path, err := checkpoint.Save(filepath.Join(dir, "ckpt"))
	if err != nil || path != filepath.Join(dir, "ckpt-1") {
		t.Fatalf("Save = %q, %v; want %s/ckpt-1", path, err, dir)
	}
	if latest := LatestCheckpoint(dir); latest != path {
		t.Fatalf("LatestCheckpoint = %q, want %q", latest, path)
	}
	for _, el := range batches {
		step(el)
	}
	after := model.GetWeights()
	iters := optimizer.Iterations()
	if err := checkpoint.Restore(path); err != nil {
		t.Fatal(err)
	}
	if optimizer.Iterations() != int64(len(batches)) || checkpoint.SaveCounter() != 1 {
		t.Fatalf("after Restore: iterations %d (want %d), save counter %d (want 1)", optimizer.Iterations(), len(batches), checkpoint.SaveCounter())
	}
	for _, el := range batches {
		step(el)
	}
	if optimizer.Iterations() != iters {
		t.Fatalf("iterations %d after the replay, want %d", optimizer.Iterations(), iters)
	}
	for i, w := range model.GetWeights() {
		if d := maxAbsDiff(w.Data(), after[i].Data()); d > 1e-6 {
			t.Fatalf("weight %d after restore + replay differs by %g from the run that went on (Adam's slots not restored?)", i, d)
		}
	}
	if p2, _ := checkpoint.Save(filepath.Join(dir, "ckpt")); p2 != filepath.Join(dir, "ckpt-2") || LatestCheckpoint(dir) != p2 {
		t.Errorf("second Save = %q, latest %q; want ckpt-2 for both", p2, LatestCheckpoint(dir))
	}

	// Errors name the file; a torn file changes nothing.
	if err := checkpoint.Restore(filepath.Join(dir, "nope")); err == nil || !strings.Contains(err.Error(), "no checkpoint at") {
		t.Errorf("Restore(missing) = %v", err)
	}
	raw, _ := os.ReadFile(path + checkpointExt)
	raw[len(raw)-1] ^= 0xff
	os.WriteFile(path+checkpointExt, raw, 0o644)
	before := model.GetWeights()
	if err := checkpoint.Restore(path); err == nil || !strings.Contains(err.Error(), "torn or corrupt") {
		t.Errorf("Restore(torn) = %v, want an error saying the file is torn", err)
	}
	if d := maxAbsDiff(model.GetWeights()[0].Data(), before[0].Data()); d != 0 {
		t.Errorf("a failed Restore changed the weights")
	}
	other := NewCheckpoint(Sequential(layers.Dense(2, layers.InputShape(3))), nil)
	if err := other.Restore(filepath.Join(dir, "ckpt-2")); err == nil || !strings.Contains(err.Error(), "holds 4 variables") {
		t.Errorf("Restore into another model = %v, want an error naming the mismatch", err)
	}
}
