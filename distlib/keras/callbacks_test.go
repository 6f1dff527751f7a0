package keras

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"godist/distlib/data"
	"godist/distlib/keras/internal/tfevents"
	"godist/distlib/keras/layers"
	"godist/distlib/tensor"
)

// smallModel returns a compiled two-class model and its data.
func smallModel(t *testing.T, opt *Optimizer) (*Model, *data.Dataset) {
	t.Helper()
	SetRandomSeed(5)
	x, y := blobs(32, 2)
	m := Sequential(layers.Dense(4, layers.Tanh, layers.InputShape(2)), layers.Dense(2))
	quiet(m)
	m.Compile(opt, SparseCategoricalCrossentropy(true), "accuracy")
	return m, data.FromTensorSlices(x, y).Batch(8, false)
}

// scripted feeds fixed values of a log key, one per epoch, to the callbacks after it.
type scripted struct {
	BaseCallback
	key  string
	vals []float64
}

func (s *scripted) EpochEnd(epoch int, logs Logs) { logs[s.key] = s.vals[epoch] }

func TestLambdaCallbackOrder(t *testing.T) {
	m, ds := smallModel(t, SGD(0.1))
	var events []string
	add := func(s string) { events = append(events, s) }
	cb := LambdaCallback{
		OnTrainBegin:      func(Logs) { add("train_begin") },
		OnEpochBegin:      func(e int, _ Logs) { add("epoch_begin") },
		OnTrainBatchBegin: func(b int, _ Logs) { add("batch_begin") },
		OnTrainBatchEnd: func(b int, l Logs) {
			if _, ok := l["loss"]; !ok {
				t.Errorf("batch %d logs lack loss: %v", b, l)
			}
			add("batch_end")
		},
		OnEpochEnd: func(e int, l Logs) {
			if _, ok := l["val_accuracy"]; !ok {
				t.Errorf("epoch %d logs lack val_accuracy: %v", e, l)
			}
			add("epoch_end")
		},
		OnTestBegin: func(Logs) { add("test_begin") },
		OnTrainEnd:  func(Logs) { add("train_end") },
	}
	m.Fit(ds, Epochs(1), StepsPerEpoch(2), ValidationData(ds), Callbacks(cb), Verbose(0))
	want := []string{"train_begin", "epoch_begin", "batch_begin", "batch_end", "batch_begin", "batch_end", "epoch_end", "train_end"}
	if !reflect.DeepEqual(events, want) {
		t.Errorf("events = %v, want %v", events, want)
	}
}

func TestStopTrainingFromCallback(t *testing.T) {
	m, ds := smallModel(t, SGD(0.1))
	batches := 0
	h := m.Fit(ds, Epochs(5), Verbose(0), Callbacks(LambdaCallback{OnTrainBatchEnd: func(b int, _ Logs) {
		batches++
		if batches == 3 {
			m.StopTraining = true
		}
	}}))
	if batches != 3 || len(h.Epoch) != 1 {
		t.Errorf("ran %d batches and %d epochs, want 3 and 1", batches, len(h.Epoch))
	}
}

func TestEarlyStopping(t *testing.T) {
	tests := []struct {
		name        string
		vals        []float64
		patience    int
		wantEpochs  int
		wantStopped int
	}{
		{"improving", []float64{5, 4, 3, 2, 1}, 1, 5, -1},
		{"plateau", []float64{5, 4, 4, 4, 4, 4}, 1, 4, 3},
		{"patience 0", []float64{3, 3.5, 1, 1}, 0, 2, 1},
	}
	for _, tc := range tests {
		m, ds := smallModel(t, SGD(0.1))
		es := EarlyStopping("val_loss", tc.patience, false)
		h := m.Fit(ds, Epochs(len(tc.vals)), Verbose(0), Callbacks(&scripted{key: "val_loss", vals: tc.vals}, es))
		if len(h.Epoch) != tc.wantEpochs || es.StoppedEpoch != tc.wantStopped {
			t.Errorf("%s: ran %d epochs, stopped at %d; want %d and %d", tc.name, len(h.Epoch), es.StoppedEpoch, tc.wantEpochs, tc.wantStopped)
		}
	}
}

func TestEarlyStoppingRestoresBestWeights(t *testing.T) {
	m, ds := smallModel(t, SGD(0.5))
	var atEpoch [][][]float32
	snap := LambdaCallback{OnEpochEnd: func(int, Logs) { atEpoch = append(atEpoch, m.weightData()) }}
	// The snapshot runs before EarlyStopping, so atEpoch[e] are the weights after epoch e.
	es := EarlyStopping("val_loss", 1, true)
	m.Fit(ds, Epochs(6), Verbose(0), Callbacks(&scripted{key: "val_loss", vals: []float64{3, 1, 2, 2, 2, 2}}, snap, es))
	if es.StoppedEpoch != 3 {
		t.Fatalf("stopped at %d, want 3", es.StoppedEpoch)
	}
	if got := m.weightData(); !reflect.DeepEqual(got, atEpoch[1]) {
		t.Errorf("weights after stopping are not those of the best epoch 1")
	}
	if reflect.DeepEqual(atEpoch[1], atEpoch[3]) {
		t.Errorf("weights did not change between epochs 1 and 3; the test proves nothing")
	}
}

func TestModelCheckpoint(t *testing.T) {
	dir := t.TempDir()
	m, ds := smallModel(t, Adam(0.01))
	all := ModelCheckpoint(filepath.Join(dir, "all", "ckpt_{epoch}"), SaveWeightsOnly(true))
	best := ModelCheckpoint(filepath.Join(dir, "best", "w{epoch:02d}-{val_loss:.2f}"), SaveBestOnly(true), Monitor("val_loss"))
	m.Fit(ds, Epochs(4), Verbose(0), Callbacks(&scripted{key: "val_loss", vals: []float64{3, 1, 2, 0.5}}, all, best))
	wantAll := []string{"ckpt_1", "ckpt_2", "ckpt_3", "ckpt_4"}
	wantBest := []string{"w01-3.00", "w02-1.00", "w04-0.50"}
	for _, tc := range []struct {
		cb   *ModelCheckpointCallback
		sub  string
		want []string
	}{{all, "all", wantAll}, {best, "best", wantBest}} {
		var got []string
		for _, p := range tc.cb.Saved {
			got = append(got, filepath.Base(p))
			if _, err := os.Stat(p); err != nil {
				t.Errorf("checkpoint %s: %v", p, err)
			}
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s checkpoints = %v, want %v", tc.sub, got, tc.want)
		}
	}
	// A write in progress (the temporary file of an atomic write, newer than every
	// checkpoint) is not a checkpoint.
	b, err := os.ReadFile(filepath.Join(dir, "all", "ckpt_4"))
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, "all", ".ckpt_5.tmp123")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Second) // file times are coarse: make it the newest for sure
	if err := os.Chtimes(tmp, later, later); err != nil {
		t.Fatal(err)
	}
	latest := LatestCheckpoint(filepath.Join(dir, "all"))
	if filepath.Base(latest) != "ckpt_4" {
		t.Errorf("LatestCheckpoint = %q, want .../ckpt_4", latest)
	}
	before := m.Evaluate(ds, Verbose(0))
	m2, _ := smallModel(t, Adam(0.01))
	if err := m2.LoadWeights(latest); err != nil {
		t.Fatal(err)
	}
	if after := m2.Evaluate(ds, Verbose(0)); math.Abs(after["loss"]-before["loss"]) > 1e-6 {
		t.Errorf("loss after loading the last checkpoint = %v, want %v", after["loss"], before["loss"])
	}
}

func TestFormatPath(t *testing.T) {
	logs := Logs{"val_loss": 0.12345, "accuracy": 0.5}
	tests := []struct {
		pattern, want string
		err           bool
	}{
		{"ckpt_{epoch}", "ckpt_3", false},
		{"w{epoch:03d}", "w003", false},
		{"w-{val_loss:.3f}-{accuracy}", "w-0.123-0.5", false},
		{"w-{missing}", "", true},
		{"w-{epoch:%x}", "", true},
	}
	for _, tc := range tests {
		got, err := formatPath(tc.pattern, 2, logs)
		if (err != nil) != tc.err || (!tc.err && got != tc.want) {
			t.Errorf("formatPath(%q) = %q, %v; want %q, error %v", tc.pattern, got, err, tc.want, tc.err)
		}
	}
}

func TestLearningRateScheduler(t *testing.T) {
	m, ds := smallModel(t, Adam(0.001))
	decay := func(epoch int, lr float64) float64 {
		switch {
		case epoch < 1:
			return 1e-3
		case epoch < 2:
			return 1e-4
		}
		return 1e-5
	}
	var seen []float64
	h := m.Fit(ds, Epochs(3), Verbose(0), Callbacks(LearningRateScheduler(decay),
		LambdaCallback{OnEpochEnd: func(int, Logs) { seen = append(seen, m.Optimizer().LearningRate()) }}))
	want := []float64{1e-3, 1e-4, 1e-5}
	if !reflect.DeepEqual(seen, want) || !reflect.DeepEqual(h.History["learning_rate"], want) {
		t.Errorf("learning rates = %v, history %v; want %v", seen, h.History["learning_rate"], want)
	}
}

func TestTensorBoardWritesReadableEvents(t *testing.T) {
	dir := t.TempDir()
	m, ds := smallModel(t, SGD(0.1))
	h := m.Fit(ds, Epochs(3), Verbose(0), ValidationData(ds), Callbacks(TensorBoard(dir)))
	for _, tc := range []struct {
		sub  string
		keys map[string]string // tag -> history key
	}{
		{"train", map[string]string{"epoch_loss": "loss", "epoch_accuracy": "accuracy"}},
		{"validation", map[string]string{"epoch_loss": "val_loss", "epoch_accuracy": "val_accuracy"}},
	} {
		files, _ := filepath.Glob(filepath.Join(dir, tc.sub, "events.out.tfevents.*"))
		if len(files) != 1 {
			t.Fatalf("%s: %d event files, want 1", tc.sub, len(files))
		}
		evs, err := tfevents.ReadFile(files[0])
		if err != nil {
			t.Fatalf("%s: %v", tc.sub, err)
		}
		if len(evs) != 4 || evs[0].FileVersion != "brain.Event:2" {
			t.Fatalf("%s: %d events (first %+v), want a version event and 3 epochs", tc.sub, len(evs), evs[0])
		}
		for e := 0; e < 3; e++ {
			ev := evs[e+1]
			if ev.Step != int64(e) {
				t.Errorf("%s: event %d step %d, want %d", tc.sub, e+1, ev.Step, e)
			}
			for tag, key := range tc.keys {
				if got, want := ev.Scalars[tag], float32(h.History[key][e]); got != want {
					t.Errorf("%s epoch %d: %s = %v, want %v", tc.sub, e, tag, got, want)
				}
			}
		}
		if tc.sub == "train" && evs[1].Scalars["epoch_learning_rate"] != float32(0.1) {
			t.Errorf("train epoch_learning_rate = %v, want 0.1", evs[1].Scalars["epoch_learning_rate"])
		}
	}
}

func TestFitErrors(t *testing.T) {
	m, ds := smallModel(t, SGD(0.1))
	unc := Sequential(layers.Dense(2))
	tests := []struct {
		name string
		fn   func()
		want string
	}{
		{"not compiled", func() { unc.Fit(ds) }, "not compiled"},
		{"bad option", func() { m.Evaluate(ds, Epochs(2)) }, "Evaluate does not take keras.Epochs(2): it is an option of Fit"},
		{"steps to fit", func() { m.Fit(ds, Steps(2)) }, "Fit does not take keras.Steps(2): it is an option of Evaluate and Predict (Fit's is keras.StepsPerEpoch)"},
		{"ps option", func() { m.Fit(ds, PSPipeline(true)) }, "keras.PSPipeline(true) applies to training under a ParameterServerStrategy"},
		{"nil option", func() { m.Fit(ds, FitOption(nil)) }, "argument 2 is nil"},
		{"bad epochs", func() { m.Fit(ds, Epochs(0)) }, "Epochs(0)"},
		{"wrong input", func() {
			m.Fit(data.FromTensorSlices(smallX(3), smallY(3)).Batch(3, false), Verbose(0))
		}, "expects examples of shape [2]"},
		{"bad label", func() {
			m.Fit(data.FromTensorSlices(smallX2(2), smallYv(2, 5)).Batch(2, false), Verbose(0))
		}, "not a class index"},
		{"unbatched", func() {
			m.Fit(data.FromTensorSlices(smallX2(4), smallY(4)), Verbose(0))
		}, "batch the dataset"},
		{"unknown metric", func() { m.Compile(SGD(0.1), MeanSquaredError(), "auc") }, "unknown metric \"auc\""},
	}
	for _, tc := range tests {
		func() {
			defer func() {
				r := recover()
				err, _ := r.(error)
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("%s: panic %v, want an error containing %q", tc.name, r, tc.want)
				}
			}()
			tc.fn()
		}()
	}
}

// TestTerminateOnNaN: a NaN in the inputs makes the first batch's loss NaN; training stops
// there with Keras' message instead of running every epoch into NaN weights.
func TestTerminateOnNaN(t *testing.T) {
	x := tensor.MustNew([]int{4, 1}, []float32{1, float32(math.NaN()), 3, 4})
	y := tensor.MustNew([]int{4, 1}, []float32{2, 4, 6, 8})
	ds := data.FromTensorSlices(x, y).Batch(2, false)
	m := Sequential(layers.Dense(1, layers.InputShape(1)))
	m.Compile(SGD(0.01), MeanSquaredError())
	out := quiet(m)
	cb := TerminateOnNaN()
	h := m.Fit(ds, Epochs(5), Callbacks(cb), Verbose(0))
	if cb.StoppedBatch != 0 || !strings.Contains(out.String(), "Batch 0: Invalid loss, terminating training") {
		t.Errorf("TerminateOnNaN stopped at batch %d, output %q; want batch 0 and Keras' message", cb.StoppedBatch, out.String())
	}
	if len(h.Epoch) != 1 {
		t.Errorf("History has %d epochs, want 1 (training stops in the first)", len(h.Epoch))
	}
}
