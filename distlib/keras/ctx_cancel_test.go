package keras

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"godist/distlib/data"
	"godist/distlib/distribute"
	"godist/distlib/keras/layers"
	"godist/distlib/tensor"
)

// cancelAfterFirstBatch returns a callback that cancels ctx when the first batch of the Fit
// ends, and the time it did.
func cancelAfterFirstBatch(cancel context.CancelFunc) (Callback, func() time.Time) {
	var once sync.Once
	var mu sync.Mutex
	var at time.Time
	cb := LambdaCallback{OnTrainBatchEnd: func(int, Logs) {
		once.Do(func() {
			mu.Lock()
			at = time.Now()
			mu.Unlock()
			cancel()
		})
	}}
	return cb, func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return at
	}
}

// checkStopped checks that a FitContext whose ctx was cancelled at cancelled returned at
// returned, within 1s, saying it stopped for context.Canceled (its output), with no epoch.
func checkStopped(t *testing.T, who string, cancelled, returned time.Time, h *History, out string) {
	t.Helper()
	if cancelled.IsZero() {
		t.Errorf("%s: the first batch never ended", who)
		return
	}
	d := returned.Sub(cancelled)
	t.Logf("%s: FitContext returned %v after the cancel", who, d)
	if d > time.Second {
		t.Errorf("%s: FitContext returned %v after its ctx was cancelled, want under 1s", who, d)
	}
	if h == nil || len(h.Epoch) != 0 {
		t.Errorf("%s: History %v after a cancel in the first epoch, want no epoch", who, h)
	}
	if !strings.Contains(out, "Fit interrupted") || !strings.Contains(out, context.Canceled.Error()) {
		t.Errorf("%s: Fit's output does not say it stopped for %v:\n%s", who, context.Canceled, out)
	}
}

// TestPSFitProgramCtxCancel: a Go program (no notebook: cell.Context is not set) that
// cancels its own ctx during a ParameterServerStrategy Fit gets FitContext back within 1s:
// the ctx reaches the coordinator's scheduled functions and Join.
func TestPSFitProgramCtxCancel(t *testing.T) {
	s, _ := psStrategy(t, 1, 2)
	var m *Model
	s.Scope(func() {
		m = Sequential(layers.Input(6, 6), layers.Flatten(), layers.Dense(64, layers.ReLU), layers.Dense(2))
		m.Compile(SGD(0.1), SparseCategoricalCrossentropy(true), "accuracy")
	})
	var out bytes.Buffer
	m.stdout = &out
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cb, cancelledAt := cancelAfterFirstBatch(cancel)
	h := m.FitContext(ctx, imageData().Repeat(200), Epochs(1000), Callbacks(cb), Verbose(2))
	checkStopped(t, "ps", cancelledAt(), time.Now(), h, out.String())
}

// TestMultiWorkerFitProgramCtxCancel: two in-process MultiWorkerMirroredStrategy workers
// train under one program ctx; worker 0 cancels it when its first batch ends. Both
// FitContexts return within 1s of the cancel, wherever the cancel found them (a step's
// all-reduce, the gradient buckets).
func TestMultiWorkerFitProgramCtxCancel(t *testing.T) {
	splitCPU(t, 2)
	x := tensor.RandomNormal([]int{64, 6, 6}, 0, 1, 5)
	y := tensor.MustNew([]int{64}, make([]float32, 64))
	ds := data.FromTensorSlices(x, y).Batch(8, false).Repeat(100).WithOptions(data.Options{AutoShardPolicy: data.AutoShardData})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cb, cancelledAt := cancelAfterFirstBatch(cancel)
	hist := make([]*History, 2)
	returned := make([]time.Time, 2)
	outs := make([]bytes.Buffer, 2)
	memWorkers(t, 2, 30*time.Second, func(w int, s *distribute.MultiWorkerMirroredStrategy) {
		var m *Model
		inProcessScopes.Lock()
		s.Scope(func() {
			// No input shape: the model is built in Fit, where both workers broadcast
			// the chief's values (not here, under inProcessScopes).
			m = Sequential(layers.Flatten(), layers.Dense(64, layers.ReLU), layers.Dense(2))
			m.Compile(SGD(0.1), SparseCategoricalCrossentropy(true))
		})
		inProcessScopes.Unlock()
		m.stdout = &outs[w]
		var cbs []Callback
		if w == 0 {
			cbs = append(cbs, cb)
		}
		hist[w] = m.FitContext(ctx, ds, Epochs(1000), Callbacks(cbs...), Verbose(2))
		returned[w] = time.Now()
	})
	for w := range 2 {
		checkStopped(t, "worker "+string(rune('0'+w)), cancelledAt(), returned[w], hist[w], outs[w].String())
	}
}
