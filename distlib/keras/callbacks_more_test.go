package keras

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"godist/distlib/keras/layers"
	"godist/distlib/tensor"
)

// TestReduceLROnPlateauKerasTrace: the epoch-by-epoch learning rates Keras'
// ReduceLROnPlateau gives for a val_loss sequence (factor 0.5, patience 2, cooldown 1,
// min_lr 0.01, min_delta 1e-4): reductions after two epochs without improvement, the
// cooldown epoch not counted, the floor at min_lr; "learning_rate" logged before each
// reduction, as Keras logs it.
func TestReduceLROnPlateauKerasTrace(t *testing.T) {
	m := Sequential(layers.Dense(1, layers.InputShape(1)))
	out := quiet(m)
	m.Compile(SGD(0.1), MeanSquaredError())
	cb := ReduceLROnPlateau("val_loss", 0.5, 2)
	cb.Cooldown, cb.MinLR, cb.Verbose = 1, 0.01, 1
	cb.SetModel(m)
	cb.TrainBegin(nil)
	losses := []float64{1.0, 0.9, 0.95, 0.92, 0.91, 0.93, 0.94, 0.95, 0.96, 0.97}
	wantLogged := []float64{0.1, 0.1, 0.1, 0.1, 0.05, 0.05, 0.025, 0.025, 0.0125, 0.0125}
	for e, l := range losses {
		logs := Logs{"loss": l, "val_loss": l}
		cb.EpochEnd(e, logs)
		if math.Abs(logs["learning_rate"]-wantLogged[e]) > 1e-12 {
			t.Errorf("epoch %d: logged learning_rate %v, want %v", e, logs["learning_rate"], wantLogged[e])
		}
	}
	if lr := m.Optimizer().LearningRate(); lr != 0.01 {
		t.Errorf("final learning rate %v, want min_lr 0.01", lr)
	}
	if !strings.Contains(out.String(), "Epoch 4: ReduceLROnPlateau reducing learning rate to 0.05.") ||
		!strings.Contains(out.String(), "Epoch 10: ReduceLROnPlateau reducing learning rate to 0.01.") {
		t.Errorf("verbose output %q, want Keras' lines at epochs 4 and 10", out.String())
	}

	// "auto" on an accuracy maximizes; a missing key warns, naming the keys there are.
	acc := ReduceLROnPlateau("val_accuracy", 0.1, 0)
	acc.SetModel(m)
	acc.TrainBegin(nil)
	m.Optimizer().SetLearningRate(1)
	acc.EpochEnd(0, Logs{"val_accuracy": 0.5}) // improves on -inf
	acc.EpochEnd(1, Logs{"val_accuracy": 0.6}) // improves
	if lr := m.Optimizer().LearningRate(); lr != 1 {
		t.Errorf("rising accuracy reduced the rate to %v", lr)
	}
	acc.EpochEnd(2, Logs{"val_accuracy": 0.6}) // patience 0: reduce at once
	if lr := m.Optimizer().LearningRate(); math.Abs(lr-0.1) > 1e-12 {
		t.Errorf("flat accuracy: rate %v, want 0.1", lr)
	}
	acc.EpochEnd(3, Logs{"loss": 1})
	if !strings.Contains(out.String(), `metric "val_accuracy" which is not available. Available metrics are: learning_rate,loss`) {
		t.Errorf("missing monitor: output %q", out.String())
	}
	for _, bad := range []func(){func() { ReduceLROnPlateau("val_loss", 1, 1) }, func() { ReduceLROnPlateau("", 0.1, 1) }} {
		if err := catch(bad); err == nil {
			t.Error("ReduceLROnPlateau with factor 1 or no monitor: no error")
		}
	}
}

// TestReduceLROnPlateauInFit: in Fit, a plateau of the training loss lowers the
// optimizer's rate, and History records the rate of each epoch.
func TestReduceLROnPlateauInFit(t *testing.T) {
	x := tensor.RandomNormal([]int{32, 2}, 0, 1, 1)
	y := tensor.RandomNormal([]int{32, 1}, 0, 1, 2) // noise: the loss soon stops falling
	SetRandomSeed(1)
	m := Sequential(layers.Dense(1, layers.InputShape(2)))
	quiet(m)
	m.Compile(SGD(0.05), MeanSquaredError())
	cb := ReduceLROnPlateau("loss", 0.5, 1)
	cb.MinDelta = 0.05
	h := m.Fit(x, y, Epochs(6), BatchSize(32), Verbose(0), Callbacks(cb))
	lrs := h.History["learning_rate"]
	if len(lrs) != 6 || lrs[0] != 0.05 || !(m.Optimizer().LearningRate() < 0.05) {
		t.Errorf("learning rates %v, final %v: want 0.05 first, then reductions", lrs, m.Optimizer().LearningRate())
	}
}

// TestCSVLogger: Keras' CSV: "epoch" then the sorted log keys (val_ columns of "NA" when
// there is no validation), one row per epoch; Append adds rows without a second header;
// another separator.
func TestCSVLogger(t *testing.T) {
	path := filepath.Join(t.TempDir(), "training.log")
	x := tensor.RandomNormal([]int{20, 2}, 0, 1, 1)
	y := tensor.RandomNormal([]int{20, 1}, 0, 1, 2)
	SetRandomSeed(1)
	m := Sequential(layers.Dense(1, layers.InputShape(2)))
	quiet(m)
	m.Compile(SGD(0.05), MeanSquaredError(), "mae")
	h := m.Fit(x, y, Epochs(2), BatchSize(10), Verbose(0), Callbacks(CSVLogger(path)))
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := "epoch,loss,mae,val_loss,val_mae\r\n" +
		"0," + pyFloat(h.History["loss"][0]) + "," + pyFloat(h.History["mae"][0]) + ",NA,NA\r\n" +
		"1," + pyFloat(h.History["loss"][1]) + "," + pyFloat(h.History["mae"][1]) + ",NA,NA\r\n"
	if string(raw) != want {
		t.Fatalf("CSV\n%q\nwant\n%q", raw, want)
	}
	logger := CSVLogger(path)
	logger.Append = true
	m.Fit(x, y, Epochs(1), BatchSize(10), Verbose(0), Callbacks(logger), ValidationSplit(0.5))
	raw, _ = os.ReadFile(path)
	lines := strings.Split(strings.TrimSuffix(string(raw), "\r\n"), "\r\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[3], "0,") || strings.Count(lines[3], ",") != 4 || strings.Contains(lines[3], "NA") {
		t.Errorf("after an appended epoch with validation: %q, want a fourth row with 5 values and no header", lines)
	}
	semi := CSVLogger(path)
	semi.Separator = ";"
	m.Fit(x, y, Epochs(1), BatchSize(10), Verbose(0), Callbacks(semi), ValidationSplit(0.5))
	raw, _ = os.ReadFile(path)
	if !strings.HasPrefix(string(raw), "epoch;loss;mae;val_loss;val_mae\r\n0;") || strings.Count(string(raw), "\r\n") != 2 {
		t.Errorf("with separator \";\" (overwriting): %q", raw)
	}
	for v, want := range map[float64]string{2: "2.0", 0.1: "0.1", 1e-5: "1e-05", 1.5e16: "1.5e+16", 123456789: "123456789.0", math.NaN(): "nan"} {
		if got := pyFloat(v); got != want {
			t.Errorf("pyFloat(%v) = %q, want Python's %q", v, got, want)
		}
	}
}

func catch(fn func()) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err, _ = p.(error)
			if err == nil {
				err = os.ErrInvalid
			}
		}
	}()
	fn()
	return nil
}
