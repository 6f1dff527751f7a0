package keras

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"godist/distlib/data"
	"godist/distlib/distribute"
	"godist/distlib/keras/layers"
	"godist/internal/leakcheck"
)

// TestFitContextInterrupted: cancelling Fit's context stops it at the next step with a line
// saying where, returns the History of the completed epochs, and leaves the model usable.
func TestFitContextInterrupted(t *testing.T) {
	leakcheck.Check(t)
	splitCPU(t, 2)
	ds := imageData().Repeat(20)
	s := distribute.NewMirroredStrategy()
	var m *Model
	s.Scope(func() {
		m = Sequential(layers.Input(6, 6), layers.Flatten(), layers.Dense(8, layers.ReLU), layers.Dense(2))
		m.Compile(Adam(1e-3), SparseCategoricalCrossentropy(true), "accuracy")
	})
	var out bytes.Buffer
	m.stdout = &out
	ctx, cancel := context.WithCancel(context.Background())
	steps := 0
	cb := LambdaCallback{OnTrainBatchEnd: func(batch int, _ Logs) {
		if steps++; steps == 70 { // in the 2nd epoch (60 steps an epoch)
			cancel()
		}
	}}
	start := time.Now()
	h := m.FitContext(ctx, ds, Epochs(1000), Callbacks(cb), Verbose(2))
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("FitContext took %v after the cancel", d)
	}
	if steps != 70 {
		t.Errorf("Fit ran %d steps, want 70 (it stops at the step boundary after the cancel)", steps)
	}
	if len(h.Epoch) != 1 {
		t.Errorf("History has %d epochs after an interrupt in the second, want 1", len(h.Epoch))
	}
	if got := out.String(); !strings.Contains(got, "Fit interrupted in epoch 2/1000 after step 10/60") {
		t.Errorf("Fit output does not say where it stopped:\n%s", got)
	}
	// The model, its optimizer and the strategy still work.
	logs := m.Evaluate(imageData(), Verbose(0))
	if _, ok := logs["accuracy"]; !ok {
		t.Errorf("Evaluate after the interrupt = %v, want accuracy", logs)
	}
	h = m.Fit(imageData(), Epochs(1), Verbose(0))
	if len(h.Epoch) != 1 {
		t.Errorf("Fit after the interrupt recorded %d epochs, want 1", len(h.Epoch))
	}
}

// TestPSFitContextInterrupted: under ParameterServerStrategy a cancelled Fit stops
// scheduling at the next step, returns the History so far, leaves no goroutine running,
// and the next Fit works.
func TestPSFitContextInterrupted(t *testing.T) {
	leakcheck.Check(t) // checked after the strategy and the servers are closed
	s, _ := psStrategy(t, 1, 2)
	var m *Model
	s.Scope(func() {
		m = Sequential(layers.Input(6, 6), layers.Flatten(), layers.Dense(8, layers.ReLU), layers.Dense(2))
		m.Compile(SGD(0.1), SparseCategoricalCrossentropy(true), "accuracy")
	})
	var out bytes.Buffer
	m.stdout = &out
	// The strategy keeps its connections between Fits: count the goroutines after one.
	m.Fit(imageData(), Epochs(1), Verbose(0))
	before := settledGoroutines()
	ctx, cancel := context.WithCancel(context.Background())
	steps := 0
	cb := LambdaCallback{OnTrainBatchEnd: func(int, Logs) {
		if steps++; steps == 25 {
			cancel()
		}
	}}
	h := m.FitContext(ctx, imageData().Repeat(10), Epochs(1000), Callbacks(cb), Verbose(2))
	if steps != 25 {
		t.Errorf("Fit scheduled %d steps, want 25 (it stops at the step after the cancel)", steps)
	}
	if len(h.Epoch) != 0 {
		t.Errorf("History has %d epochs after an interrupt in the first, want 0", len(h.Epoch))
	}
	if !strings.Contains(out.String(), "Fit interrupted in epoch 1/1000 after step 25") {
		t.Errorf("Fit output does not say where it stopped:\n%s", out.String())
	}
	if after := settledGoroutines(); after > before {
		t.Errorf("goroutines: %d after a complete Fit, %d after an interrupted one", before, after)
	}
	if h := m.Fit(imageData(), Epochs(1), Verbose(0)); len(h.Epoch) != 1 {
		t.Errorf("Fit after the interrupt recorded %d epochs, want 1", len(h.Epoch))
	}
}

// settledGoroutines returns the number of goroutines once it stops falling (up to 2 s).
func settledGoroutines() int {
	n := runtime.NumGoroutine()
	for i := 0; i < 40; i++ {
		time.Sleep(50 * time.Millisecond)
		m := runtime.NumGoroutine()
		if m >= n && i >= 4 {
			return m
		}
		n = min(n, m)
	}
	return n
}

// TestFitInterruptedInValidation: a cancel while the epoch's validation data is evaluated
// ends Fit as one during the epoch does: the line saying where, the History of the epochs
// before, and no panic.
func TestFitInterruptedInValidation(t *testing.T) {
	m := Sequential(layers.Input(6, 6), layers.Flatten(), layers.Dense(8, layers.ReLU), layers.Dense(2))
	m.Compile(Adam(1e-3), SparseCategoricalCrossentropy(true), "accuracy")
	var out bytes.Buffer
	m.stdout = &out
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	epochs := 0
	cb := LambdaCallback{OnEpochEnd: func(int, Logs) { epochs++ }}
	val := imageData().Map(func(el data.Element) data.Element {
		if epochs == 1 { // the second epoch's validation
			cancel()
		}
		return el
	})
	h := m.FitContext(ctx, imageData(), Epochs(5), ValidationData(val), Callbacks(cb), Verbose(2))
	if len(h.Epoch) != 1 || epochs != 1 {
		t.Errorf("History has %d epochs, %d epoch ends ran; want 1 and 1 (the second stopped in its validation)", len(h.Epoch), epochs)
	}
	if got := out.String(); !strings.Contains(got, "Fit interrupted in epoch 2/5 after step 3/3") {
		t.Errorf("Fit output does not say where it stopped:\n%s", got)
	}
}
