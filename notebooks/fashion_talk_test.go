package notebooks

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

const fashionTalkNotebook = "10-fashion-mnist-talk.ipynb"

// TestFashionTalk executes 10-fashion-mnist-talk.ipynb alone (TestNotebooks runs it with
// the others): go test ./notebooks -run FashionTalk.
func TestFashionTalk(t *testing.T) {
	e := setup(t)
	checkFashionTalk(t, e.execute(t, fashionTalkNotebook, 5*time.Minute))
}

var (
	singleAccRe = regexp.MustCompile(`(?m)^single process: test loss ([0-9.]+), test accuracy ([0-9.]+)$`)
	distAccRe   = regexp.MustCompile(`(?m)^\[worker (\d)\] distributed \(worker (\d) of 2, global batch 128\): test loss ([0-9.]+), test accuracy ([0-9.]+)$`)
	talkLRRe    = regexp.MustCompile(`(?m)^\[worker 0\] Learning rate for epoch (\d+) is ([0-9.e+-]+)$`)
	talkEvalRe  = regexp.MustCompile(`(?m)^\[worker (\d)\] Eval loss: ([0-9.]+), Eval Accuracy: ([0-9.]+)$`)
)

// Accuracy bounds of the talk's runs on the full Fashion-MNIST. Measured twice, the same
// figures both times, on 2 cores (Intel Xeon, AVX-512) shared with other jobs (2026-11-26):
// the single process (3 epochs of 70 steps, batch 64, SGD 0.001) 0.5144; the two workers
// (global batch 128) 0.5126; the practical script on two workers (12 epochs of 70 steps,
// Adam, the decay schedule) 0.8645. The bounds leave a wide margin (chance is 0.1) so that
// another seed or kernel order cannot flake them, yet a model that does not learn, or
// workers that do not average their gradients, fail them.
const (
	talkMinAccuracy      = 0.40
	talkMaxAccuracyGap   = 0.05 // |single - distributed|: same steps, same learning rate
	practicalMinAccuracy = 0.80
)

// checkFashionTalk checks 10-fashion-mnist-talk.ipynb: the talk's script on the real
// Fashion-MNIST (60k/10k) in one process and on two MultiWorkerMirrored workers from
// %%distributed, whose accuracies are well above chance and close to each other (both
// workers report the same), and the practical script's callbacks on two workers: the decay
// schedule printed per epoch, one checkpoint per epoch, the latest restored and evaluated,
// TensorBoard files and the saved model.
func checkFashionTalk(t *testing.T, nb *notebook) {
	wantNoErrors(t, nb)
	wantStdout(t, nb, findCell(t, nb, "datasets.LoadFashionMNIST()\nif err"), `^train: 60000 images, test: 10000 images\n$`)

	single := findCell(t, nb, "model.Fit(trainDataset")
	wantOutput(t, nb, single, `(?s)Epoch 1/3\n70/70 .*Epoch 2/3\n70/70 .*Epoch 3/3\n70/70 `)
	m := singleAccRe.FindStringSubmatch(cellAt(t, nb, single).Stream("stdout"))
	if m == nil {
		t.Fatalf("single-process cell: no test accuracy line in stdout %q", cellAt(t, nb, single).Stream("stdout"))
	}
	singleAcc, _ := strconv.ParseFloat(m[2], 64)
	if singleAcc < talkMinAccuracy {
		t.Errorf("single process: test accuracy %.4f, want at least %.2f", singleAcc, talkMinAccuracy)
	}

	dist := findCell(t, nb, "multiWorkerModel.Fit(")
	out := cellAt(t, nb, dist).Stream("stdout")
	for _, w := range []string{"0", "1"} {
		if n := strings.Count(out, "[worker "+w+"] Epoch 1/3\n"); n != 1 {
			t.Errorf("distributed cell: worker %s printed \"Epoch 1/3\" %d times, want once", w, n)
		}
	}
	accs := map[string]float64{}
	for _, m := range distAccRe.FindAllStringSubmatch(out, -1) {
		if m[1] != m[2] {
			t.Errorf("distributed cell: line of worker %s says worker %s", m[1], m[2])
		}
		accs[m[1]], _ = strconv.ParseFloat(m[4], 64)
	}
	if len(accs) != 2 {
		t.Fatalf("distributed cell: want the accuracy of workers 0 and 1, got %v in stdout %q", accs, out)
	}
	if accs["0"] != accs["1"] {
		t.Errorf("the two workers evaluate to accuracies %.4f and %.4f: want equal (same weights, same test set)", accs["0"], accs["1"])
	}
	if accs["0"] < talkMinAccuracy {
		t.Errorf("two workers: test accuracy %.4f, want at least %.2f", accs["0"], talkMinAccuracy)
	}
	if d := math.Abs(accs["0"] - singleAcc); d > talkMaxAccuracyGap {
		t.Errorf("single process accuracy %.4f, two workers %.4f: differ by %.4f, want at most %.2f", singleAcc, accs["0"], d, talkMaxAccuracyGap)
	}
	wantOutput(t, nb, dist, `%%distributed --workers 2: done`)

	practical := findCell(t, nb, "keras.LearningRateScheduler(decay)")
	out = cellAt(t, nb, practical).Stream("stdout")
	for _, w := range []string{"0", "1"} {
		if !strings.Contains(out, "[worker "+w+"] Number of replicas in sync: 2 (60000 training, 10000 test examples)\n") {
			t.Errorf("practical cell: worker %s did not print the replicas and the dataset sizes: %q", w, out)
		}
	}
	lrs := talkLRRe.FindAllStringSubmatch(out, -1)
	if len(lrs) != 12 {
		t.Errorf("practical cell: worker 0 printed %d learning rates, want 12: %q", len(lrs), out)
	}
	for i, m := range lrs {
		want := 1e-3 // the talk's decay: epochs 1-3, then 1e-4 for 4-7, then 1e-5
		if i >= 7 {
			want = 1e-5
		} else if i >= 3 {
			want = 1e-4
		}
		lr, _ := strconv.ParseFloat(m[2], 64)
		if m[1] != strconv.Itoa(i+1) || lr != want {
			t.Errorf("learning rate line %d: epoch %s lr %g, want epoch %d lr %g", i, m[1], lr, i+1, want)
		}
	}
	wantStdout(t, nb, practical, `(?m)^\[worker 0\] latest checkpoint: training_checkpoints/ckpt_12$`)
	evals := map[string]string{}
	for _, m := range talkEvalRe.FindAllStringSubmatch(out, -1) {
		evals[m[1]] = m[3]
	}
	if len(evals) != 2 || evals["0"] != evals["1"] {
		t.Errorf("practical cell: want the same evaluation from both workers, got %v", evals)
	}
	if acc, _ := strconv.ParseFloat(evals["0"], 64); acc < practicalMinAccuracy {
		t.Errorf("practical script: eval accuracy %.4f, want at least %.2f", acc, practicalMinAccuracy)
	}
	wantStdout(t, nb, practical, `(?m)^\[worker 0\] saved: \[/tmp/godist-fashion-talk/saved_model/model\.keras\]$`)
	if strings.Contains(out, "[worker 1] saved:") {
		t.Errorf("practical cell: worker 1 saved the model; only the chief saves")
	}

	files := findCell(t, nb, "checkpoints, _ := filepath.Glob")
	wantStdout(t, nb, files, `^checkpoints: 12\n`)
	wantStdout(t, nb, files, `(?m)^tensorboard: train event file$`)
}
