package mesh

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"godist/distlib/data"
	"godist/distlib/keras"
	"godist/distlib/keras/layers"
	"godist/distlib/tensor"
	"godist/internal/leakcheck"
)

// TestMeshProgramContext: a Go program's own context, with no notebook cell around it,
// reaches the mesh engine's exchanges. Cancelled inside a step, Fit's step and Predict's
// forward pass fail in the engine with context.Canceled (not at keras' next batch check),
// and FitContext and PredictContext return within a second of the cancel.
func TestMeshProgramContext(t *testing.T) {
	leakcheck.Check(t)
	devs := splitCPU(t, 2)
	rec := &ctxEngines{}
	keras.SetDistributionHook(func() keras.MeshEngine {
		d := GetDistribution()
		if d == nil {
			return nil
		}
		return rec.wrap(NewEngine(d))
	})
	t.Cleanup(func() { keras.SetDistributionHook(distributionHook) })

	// d1 split by columns: d2 needs its whole input, so every forward pass all-gathers
	// after the layer that cancels.
	lm := NewLayoutMap(NewDeviceMesh([]int{1, 2}, []string{"batch", "model"}, devs))
	lm.Set("d1/kernel", Axes("", "model"))
	lm.Set("d1/bias", Axes("model"))
	cl := &cancelLayer{}
	var m *keras.Model
	NewModelParallel(lm, "batch").Scope(func() {
		m = keras.Sequential(layers.Input(8), cl, layers.Dense(16, layers.ReLU, layers.Name("d1")), layers.Dense(4, layers.Name("d2")))
		m.Compile(keras.SGD(0.05), keras.MeanSquaredError())
	})
	x := tensor.RandomNormal([]int{64, 8}, 0, 1, 1)
	y := tensor.RandomNormal([]int{64, 4}, 0, 1, 2)

	// Fit: the first batch's end arms the layer; the next step cancels inside its forward pass.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cl.cancel = cancel
	batches := 0
	cb := keras.LambdaCallback{OnTrainBatchEnd: func(int, keras.Logs) {
		if batches++; batches == 1 {
			cl.armed.Store(true)
		}
	}}
	h := m.FitContext(ctx, data.FromTensorSlices(x, y).Batch(8, false).Repeat(100), keras.Epochs(1000), keras.Verbose(0), keras.Callbacks(&cb))
	if d := cl.sinceCancel(); d > time.Second {
		t.Errorf("FitContext returned %v after its context was cancelled, want within 1s", d)
	}
	if batches != 1 {
		t.Errorf("Fit ended %d batches, want 1 (the step the cancel landed in fails)", batches)
	}
	if len(h.Epoch) != 0 {
		t.Errorf("History has %d epochs after a cancel in the first, want 0", len(h.Epoch))
	}
	if err := rec.err("TrainStep"); !errors.Is(err, context.Canceled) {
		t.Errorf("the mesh engine's TrainStep under the cancelled Fit returned %v, want an error wrapping context.Canceled", err)
	}

	// Predict (the forward path Evaluate and validation share): the first batch cancels.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	cl.cancel = cancel
	cl.armed.Store(true)
	err := func() (err error) {
		defer func() { err, _ = recover().(error) }()
		m.PredictContext(ctx, data.FromTensorSlices(x).Batch(8, false))
		return nil
	}()
	if d := cl.sinceCancel(); d > time.Second {
		t.Errorf("PredictContext returned %v after its context was cancelled, want within 1s", d)
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("PredictContext under a cancelled context panicked with %v, want an error wrapping context.Canceled", err)
	}
	if err := rec.err("Forward"); !errors.Is(err, context.Canceled) {
		t.Errorf("the mesh engine's Forward under the cancelled Predict returned %v, want an error wrapping context.Canceled", err)
	}
}

// cancelLayer passes its input through; once armed, the first device that runs it cancels
// the program's context, so that the cancel lands inside a step.
type cancelLayer struct {
	armed  atomic.Bool
	cancel context.CancelFunc // set between runs
	mu     sync.Mutex
	at     time.Time // of the last cancel
}

func (l *cancelLayer) Name() string      { return "cancel" }
func (l *cancelLayer) Class() string     { return "CancelLayer" }
func (l *cancelLayer) InputShape() []int { return nil }
func (l *cancelLayer) Build(in []int, _ uint64) ([]int, []layers.Param, error) {
	return in, nil, nil
}

func (l *cancelLayer) Forward(x *tensor.Tensor, _ []*tensor.Tensor, _ bool, _ uint64) *tensor.Tensor {
	if l.armed.CompareAndSwap(true, false) {
		l.mu.Lock()
		l.at = time.Now()
		l.mu.Unlock()
		l.cancel()
	}
	return x
}

// sinceCancel returns the time since the last cancel.
func (l *cancelLayer) sinceCancel() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.at.IsZero() {
		return 0
	}
	return time.Since(l.at)
}

// ctxEngines records the last error of each engine method that runs a step.
type ctxEngines struct {
	mu   sync.Mutex
	errs map[string]error
}

func (r *ctxEngines) wrap(e *Engine) keras.MeshEngine { return &ctxEngine{Engine: e, rec: r} }

func (r *ctxEngines) set(method string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.errs == nil {
		r.errs = map[string]error{}
	}
	r.errs[method] = err
}

func (r *ctxEngines) err(method string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.errs[method]
}

type ctxEngine struct {
	*Engine
	rec *ctxEngines
}

func (e *ctxEngine) Forward(ctx context.Context, x *tensor.Tensor, training bool, seed func(int) uint64) (*tensor.Tensor, error) {
	out, err := e.Engine.Forward(ctx, x, training, seed)
	e.rec.set("Forward", err)
	return out, err
}

func (e *ctxEngine) TrainStep(ctx context.Context, step keras.MeshStep) (keras.MeshStepResult, error) {
	res, err := e.Engine.TrainStep(ctx, step)
	e.rec.set("TrainStep", err)
	return res, err
}
