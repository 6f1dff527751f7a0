package mesh

import (
	"context"
	"errors"
	"testing"

	"godist/distlib/keras"
	"godist/distlib/keras/layers"
	"godist/internal/leakcheck"
)

// TestMeshContext: the engine's steps run under the caller's context (Fit's, the cell's):
// a done context stops them with its error, and FitContext stops at the next step with the
// model usable.
func TestMeshContext(t *testing.T) {
	leakcheck.Check(t)
	devs := splitCPU(t, 2)
	dp := NewDataParallel(WithDevices(devs...))
	var m *keras.Model
	dp.Scope(func() {
		m = courseMLP(true, layers.Softmax)
		m.Compile(keras.SGD(0.05), keras.MeanSquaredError())
	})
	ds := courseData(64*8, 64)
	batch, _ := ds.Take(1).Iterator().Next()
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.MeshEngine().Forward(done, batch[0], false, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("Forward under a cancelled context = %v, want context.Canceled", err)
	}

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	batches := 0
	cb := keras.LambdaCallback{OnTrainBatchEnd: func(int, keras.Logs) {
		if batches++; batches == 3 {
			stop()
		}
	}}
	m.FitContext(ctx, ds, keras.Epochs(5), keras.Verbose(0), keras.Callbacks(&cb))
	if batches != 3 {
		t.Errorf("Fit trained %d batches, want it to stop after the 3rd (its context was cancelled)", batches)
	}
	if logs := m.Evaluate(ds, keras.Verbose(0)); logs["loss"] <= 0 {
		t.Errorf("Evaluate after the interrupted Fit = %v", logs)
	}
}
