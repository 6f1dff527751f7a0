package notebooks

import (
	"regexp"
	"strconv"
	"testing"
)

var (
	lrRe      = regexp.MustCompile(`(?m)^Learning rate for epoch (\d+) is ([0-9.e+-]+)$`)
	evalAccRe = regexp.MustCompile(`(?m)^(Restored model: )?Eval loss: ([0-9.]+), Eval Accuracy: ([0-9.]+)$`)
)

// checkPracticalPipeline checks 09-practical-pipeline.ipynb (the talk's practical script):
// the learning rate printed after each epoch follows the decay schedule, there is one
// checkpoint per epoch and TensorBoard event files, the latest checkpoint is the last
// epoch's, the evaluated accuracy is well above chance and a fresh model restored from the
// checkpoint evaluates the same, and the model is saved to a .keras file (a SavedModel
// directory is refused with what to write) and loaded back, evaluating the same.
func checkPracticalPipeline(t *testing.T, nb *notebook) {
	wantNoErrors(t, nb)
	wantOutput(t, nb, findCell(t, nb, "numTrainExamples = "), `(?m)^Number of replicas in sync: 1$`)
	wantOutput(t, nb, findCell(t, nb, "numTrainExamples = "), `(?m)^train batches per epoch: 24$`)

	fit := findCell(t, nb, "model.Fit(")
	wantOutput(t, nb, fit, `Epoch 4/4`)
	want := []float64{1e-3, 1e-3, 1e-4, 1e-5}
	lrs := lrRe.FindAllStringSubmatch(cellAt(t, nb, fit).Text(), -1)
	if len(lrs) != len(want) {
		t.Errorf("fit cell printed %d learning rates, want %d: %q", len(lrs), len(want), cellAt(t, nb, fit).Text())
	}
	for i, m := range lrs {
		if i >= len(want) {
			break
		}
		lr, _ := strconv.ParseFloat(m[2], 64)
		if m[1] != strconv.Itoa(i+1) || lr != want[i] {
			t.Errorf("learning rate line %d: epoch %s lr %g, want epoch %d lr %g", i, m[1], lr, i+1, want[i])
		}
	}

	files := findCell(t, nb, "checkpoints, _ := filepath.Glob")
	wantOutput(t, nb, files, `(?s)checkpoint: training_checkpoints/ckpt_1\n.*checkpoint: training_checkpoints/ckpt_2\n.*checkpoint: training_checkpoints/ckpt_3\n.*checkpoint: training_checkpoints/ckpt_4\n`)
	wantOutput(t, nb, files, `(?m)^tensorboard: train event file of logs$`)

	eval := findCell(t, nb, "keras.LatestCheckpoint(checkpointDir)")
	wantOutput(t, nb, eval, `(?m)^latest checkpoint: ckpt_4$`)
	evals := evalAccRe.FindAllStringSubmatch(cellAt(t, nb, eval).Text(), -1)
	if len(evals) != 2 {
		t.Fatalf("evaluation cell: want the trained and the restored model's results, got %q", cellAt(t, nb, eval).Text())
	}
	if acc, _ := strconv.ParseFloat(evals[0][3], 64); acc < 0.6 {
		t.Errorf("eval accuracy %.4f, want at least 0.6 (chance is 0.1)", acc)
	}
	if evals[0][2] != evals[1][2] || evals[0][3] != evals[1][3] {
		t.Errorf("restored model evaluates to loss %s accuracy %s, the trained one to %s %s: want equal", evals[1][2], evals[1][3], evals[0][2], evals[0][3])
	}
	save := findCell(t, nb, "keras.LoadModel(path)")
	wantStdout(t, nb, save, `^keras: invalid argument: /tmp/godist-practical/saved_model/: a model is saved to one file ending in \.keras \(Keras 3's format\), not to a SavedModel directory \(TF 2's model\.save\(dir\)\): write Save\("/tmp/godist-practical/saved_model\.keras"\)\nsaved: \[/tmp/godist-practical/saved_model/model\.keras\]\n`)
	wantStdout(t, nb, save, `(?m)^Loaded model: Eval loss: `+evals[0][2]+`, Eval Accuracy: `+evals[0][3]+` \(optimizer Adam, 96 steps taken\)$`)
}
