package keras

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"godist/distlib/keras/layers"
	"godist/distlib/tensor"
)

// TestCheckpointManager: tf.train.CheckpointManager(checkpoint, directory, max_to_keep=2):
// saves number on from the checkpoint's counter, only the 2 newest stay on disk,
// latest_checkpoint names the newest and restores it; a new manager over the directory
// finds the kept ones; max_to_keep 0 keeps all.
func TestCheckpointManager(t *testing.T) {
	dir := t.TempDir()
	SetRandomSeed(1)
	model := Sequential(layers.Dense(1, layers.InputShape(2)))
	if err := model.Build(2); err != nil {
		t.Fatal(err)
	}
	optimizer := SGD(0.1)
	manager := NewCheckpointManager(NewCheckpoint(model, optimizer), dir, 2)
	if got := manager.LatestCheckpoint(); got != "" {
		t.Fatalf("LatestCheckpoint of an empty directory = %q", got)
	}
	var third []*tensor.Tensor
	for i := 1; i <= 3; i++ {
		model.SetWeights([]*tensor.Tensor{tensor.Fill(float32(i), 2, 1), tensor.Zeros(1)})
		if i == 3 {
			third = model.GetWeights()
		}
		path, err := manager.Save()
		if err != nil || path != filepath.Join(dir, "ckpt-"+string(rune('0'+i))) {
			t.Fatalf("save %d = %q, %v", i, path, err)
		}
	}
	want := []string{filepath.Join(dir, "ckpt-2"), filepath.Join(dir, "ckpt-3")}
	if got := manager.Checkpoints(); !slices.Equal(got, want) {
		t.Errorf("Checkpoints() = %v, want %v", got, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "ckpt-1"+checkpointExt)); !os.IsNotExist(err) {
		t.Errorf("ckpt-1 is still on disk beyond max_to_keep 2 (%v)", err)
	}
	if LatestCheckpoint(dir) != want[1] || manager.LatestCheckpoint() != want[1] {
		t.Errorf("latest: keras.LatestCheckpoint %q, manager %q, want %q", LatestCheckpoint(dir), manager.LatestCheckpoint(), want[1])
	}
	model.SetWeights([]*tensor.Tensor{tensor.Zeros(2, 1), tensor.Zeros(1)})
	restore := NewCheckpoint(model, optimizer)
	if err := restore.Restore(NewCheckpointManager(restore, dir, 2).LatestCheckpoint()); err != nil {
		t.Fatal(err)
	}
	if d := maxAbsDiff(model.GetWeights()[0].Data(), third[0].Data()); d != 0 || restore.SaveCounter() != 3 {
		t.Errorf("restored the latest: weights differ by %g, save counter %d (want 3)", d, restore.SaveCounter())
	}
	all := NewCheckpointManager(restore, dir, 0)
	all.Save()
	all.Save()
	if got := len(all.Checkpoints()); got != 4 {
		t.Errorf("max_to_keep 0: %d checkpoints kept, want the 2 found and 2 new", got)
	}
	if err := catch(func() { NewCheckpointManager(nil, dir, 1) }); err == nil {
		t.Error("NewCheckpointManager(nil, ...): no error")
	}
}

// TestCheckpointAddVariables: the multi-worker custom loop tutorial's
// tf.train.Checkpoint(model=model, epoch=epoch, step_in_epoch=step_in_epoch): the epoch and
// step variables are saved with the model and restored from the latest checkpoint; a
// checkpoint without them leaves them as they are.
func TestCheckpointAddVariables(t *testing.T) {
	dir := t.TempDir()
	model := Sequential(layers.Dense(1, layers.InputShape(2)))
	if err := model.Build(2); err != nil {
		t.Fatal(err)
	}
	epoch := tensor.NewVariable("epoch", tensor.Scalar(0), false)
	stepInEpoch := tensor.NewVariable("step_in_epoch", tensor.Scalar(0), false)
	checkpoint := NewCheckpoint(model, nil).Add("epoch", epoch).Add("step_in_epoch", stepInEpoch)
	manager := NewCheckpointManager(checkpoint, dir, 1)
	epoch.AssignAdd(tensor.Scalar(2))
	stepInEpoch.Assign(tensor.Scalar(7))
	weights := model.GetWeights()
	if _, err := manager.Save(); err != nil {
		t.Fatal(err)
	}
	epoch.Assign(tensor.Scalar(0))
	stepInEpoch.Assign(tensor.Scalar(0))
	model.SetWeights([]*tensor.Tensor{tensor.Zeros(2, 1), tensor.Zeros(1)})
	if err := checkpoint.Restore(manager.LatestCheckpoint()); err != nil {
		t.Fatal(err)
	}
	if epoch.Value().Item() != 2 || stepInEpoch.Value().Item() != 7 || maxAbsDiff(model.GetWeights()[0].Data(), weights[0].Data()) != 0 {
		t.Errorf("restored epoch %v, step %v, weights %v; want 2, 7 and the saved weights", epoch.Value().Item(), stepInEpoch.Value().Item(), model.GetWeights()[0].Data())
	}
	// A checkpoint of the model alone leaves them as they are.
	plain := filepath.Join(dir, "plain")
	if _, err := NewCheckpoint(model, nil).Save(plain); err != nil {
		t.Fatal(err)
	}
	epoch.Assign(tensor.Scalar(5))
	if err := checkpoint.Restore(plain + "-1"); err != nil || epoch.Value().Item() != 5 {
		t.Errorf("restore without the epoch: %v, epoch %v (want 5, untouched)", err, epoch.Value().Item())
	}
	wrong := NewCheckpoint(model, nil).Add("epoch", tensor.NewVariable("e", tensor.Zeros(3), false))
	if err := wrong.Restore(manager.LatestCheckpoint()); err == nil || !strings.Contains(err.Error(), `"epoch"`) {
		t.Errorf("restore into a variable of another shape: %v, want an error naming it", err)
	}
	if err := catch(func() { checkpoint.Add("epoch", epoch) }); err == nil {
		t.Error("adding \"epoch\" twice: no error")
	}
}
