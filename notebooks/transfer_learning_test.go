package notebooks

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

const transferLearningNotebook = "11-transfer-learning.ipynb"

// TestTransferLearning executes 11-transfer-learning.ipynb alone (TestNotebooks runs it
// with the others): go test ./notebooks -run TransferLearning.
func TestTransferLearning(t *testing.T) {
	e := setup(t)
	checkTransferLearning(t, e.execute(t, transferLearningNotebook, 3*time.Minute))
}

// checkTransferLearning checks the outputs of 11-transfer-learning.ipynb: a base trained
// on MNIST under MirroredStrategy on two devices, frozen, with a new head fine-tuned on
// Fashion-MNIST; the frozen weights keep their checksum while the head's changes, Summary
// counts them as non-trainable, and the accuracies are in sane bands.
func checkTransferLearning(t *testing.T, nb *notebook) {
	reuse := findCell(t, nb, "append(pretrained.Layers()[:4]")
	wantNoErrors(t, nb, reuse)
	wantError(t, nb, reuse, `layer 0 \(conv2d\S*\) already belongs to model sequential\S*, which holds its weights.*SetWeights`)
	// Without a GPU backend (this machine) two logical CPUs; with one GPU two logical GPUs;
	// with more, one replica per GPU.
	devs := findCell(t, nb, `ListPhysicalDevices("GPU")`)
	wantStdout(t, nb, devs, `(?s)^(no GPU: MirroredStrategy trains one replica per logical CPU.*\nNumber of devices: 2|`+
		`\d+ GPUs: MirroredStrategy trains one replica per \(logical\) GPU.*\nNumber of devices: \d+)\n$`)
	batch := `\d+`
	if strings.HasPrefix(cellAt(t, nb, devs).Stream("stdout"), "no GPU") {
		batch = "128" // 64 per replica
	}
	wantStdout(t, nb, findCell(t, nb, "fashionTrainDs :="),
		`^MNIST train: 8000 Fashion-MNIST train: 60000 global batch: `+batch+`\nFashion-MNIST classes: \[T-shirt/top Trouser`)
	pre := findCell(t, nb, "pretrained.Fit(")
	wantOutput(t, nb, pre, `Epoch 3/3\n`)
	wantStdout(t, nb, pre, `^MNIST test accuracy of the pretrained model: 0\.(8|9)\d\d\n$`)

	// Summary of the frozen model: the base's convolutions 16*9+16=160 and 32*16*9+32=4640
	// frozen; the head's Dense 800*64+64=51264 and 64*10+10=650 trainable.
	sum := findCell(t, nb, "model := newTransferModel(true, true)")
	wantStdout(t, nb, sum, `(?s)Total params: 56,714\nTrainable params: 51,914\nNon-trainable params: 4,800\n.*trainable variables: 4 of 8\n$`)

	ft := findCell(t, nb, "baseBefore, headBefore")
	wantStdout(t, nb, ft, `(?m)^base checksum before ([0-9a-f]{16}) after ([0-9a-f]{16}): unchanged true$`)
	wantStdout(t, nb, ft, `(?m)^head checksum before ([0-9a-f]{16}) after ([0-9a-f]{16}): unchanged false$`)
	wantStdout(t, nb, ft, `(?m)^base still equals the pretrained weights: true$`)
	m := regexp.MustCompile(`(?m)^base checksum before ([0-9a-f]{16}) after ([0-9a-f]{16})`).FindStringSubmatch(cellAt(t, nb, ft).Stream("stdout"))
	if m != nil && m[1] != m[2] {
		t.Errorf("frozen base checksum changed: %s -> %s", m[1], m[2])
	}

	// The seeds are fixed and the steps deterministic: the pretrained base's lead is the
	// notebook's claim, not luck (0.06 to 0.09 over fresh models across seeds).
	cmp := findCell(t, nb, "freshAccuracy :=")
	acc := map[string]float64{}
	for _, m := range regexp.MustCompile(`(?m)^  (frozen MNIST base|fresh model|frozen random base)\D+(\d\.\d+)$`).FindAllStringSubmatch(cellAt(t, nb, cmp).Stream("stdout"), -1) {
		acc[m[1]], _ = strconv.ParseFloat(m[2], 64)
	}
	if len(acc) != 3 {
		t.Fatalf("comparison cell: want 3 accuracies, got %v in %q", acc, cellAt(t, nb, cmp).Stream("stdout"))
	}
	t.Logf("Fashion-MNIST accuracy: %v", acc)
	for name, a := range acc {
		if a < 0.35 || a > 0.95 {
			t.Errorf("%s accuracy %.3f, want within [0.35, 0.95]", name, a)
		}
	}
	if tr := acc["frozen MNIST base"]; tr < 0.6 || tr <= acc["fresh model"] || tr <= acc["frozen random base"] {
		t.Errorf("frozen MNIST base + new head accuracy %.3f: want at least 0.6 and above the fresh model (%.3f) and the random base (%.3f)",
			tr, acc["fresh model"], acc["frozen random base"])
	}

	unf := findCell(t, nb, "fineTunedAccuracy :=")
	wantStdout(t, nb, unf, `(?s)^trainable variables: 8 of 8\n.*base checksum after unfreezing [0-9a-f]{16}: changed true\nFashion-MNIST test accuracy after fine-tuning all layers: 0\.[6-9]\d\d\n$`)
}
