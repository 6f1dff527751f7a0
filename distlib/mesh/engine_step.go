package mesh

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"godist/distlib/device"
	"godist/distlib/keras"
	"godist/distlib/tensor"
	"godist/distlib/transport"
)

// DefaultStepTimeout bounds one step's collectives on the mesh.
const DefaultStepTimeout = 2 * time.Minute

// Forward implements keras.MeshEngine.
func (e *Engine) Forward(ctx context.Context, x *tensor.Tensor, training bool, seed func(int) uint64) (*tensor.Tensor, error) {
	res, err := e.run(ctx, x, nil, training, seed, nil)
	if err != nil {
		return nil, err
	}
	return res.pred, nil
}

// TrainStep implements keras.MeshEngine.
func (e *Engine) TrainStep(ctx context.Context, step keras.MeshStep) (keras.MeshStepResult, error) {
	if step.Y == nil {
		return keras.MeshStepResult{}, errorf("TrainStep", "labels are nil")
	}
	res, err := e.run(ctx, step.X, step.Y, true, step.Seed, &step)
	if err != nil {
		return keras.MeshStepResult{}, err
	}
	return keras.MeshStepResult{Vars: res.vars, Grads: res.grads, Stats: res.stats}, nil
}

type runResult struct {
	pred  *tensor.Tensor
	vars  []*tensor.Variable
	grads []*tensor.Tensor
	stats []float32
}

// comms are one step's communication groups.
type comms struct {
	model, batch, all []*transport.Mem // per device: its endpoint
}

func (e *Engine) newComms() comms {
	n := len(e.mesh.devices)
	c := comms{model: make([]*transport.Mem, n), batch: make([]*transport.Mem, n), all: transport.NewMem(n)}
	for b := 0; b < e.nb; b++ {
		g := transport.NewMem(e.nm)
		for k := 0; k < e.nm; k++ {
			c.model[e.deviceAt(b, k)] = g[k]
		}
	}
	for k := 0; k < e.nm; k++ {
		g := transport.NewMem(e.nb)
		for b := 0; b < e.nb; b++ {
			c.batch[e.deviceAt(b, k)] = g[b]
		}
	}
	return c
}

// deviceAt returns the index of the device at batch position b and model position k.
func (e *Engine) deviceAt(b, k int) int {
	coords := make([]int, len(e.mesh.shape))
	coords[e.bAxis] = b
	if e.mAxis >= 0 {
		coords[e.mAxis] = k
	}
	d := 0
	for i, c := range coords {
		d = d*e.mesh.shape[i] + c
	}
	return d
}

func (e *Engine) position(d int) (b, k int) {
	c := e.mesh.Coords(d)
	b = c[e.bAxis]
	if e.mAxis >= 0 {
		k = c[e.mAxis]
	}
	return b, k
}

// run executes one global batch on every device; with step set, also backward and the
// gradient synchronization.
func (e *Engine) run(ctx context.Context, x, y *tensor.Tensor, training bool, seed func(int) uint64, step *keras.MeshStep) (*runResult, error) {
	if x == nil || x.Rank() < 1 {
		return nil, errorf("Engine", "the input batch is nil or a scalar")
	}
	n := x.Shape()[0]
	if n < e.nb {
		return nil, errorf("Engine", "global batch of %d examples is smaller than the batch axis %q of size %d; use a batch of at least %d",
			n, e.mesh.axisNames[e.bAxis], e.nb, e.nb)
	}
	if y != nil && (y.Rank() < 1 || y.Shape()[0] != n) {
		return nil, errorf("Engine", "inputs %v and labels %v must share their batch size", x.Shape(), y.Shape())
	}
	if seed == nil {
		seed = func(int) uint64 { return 0 }
	}
	e.mu.Lock()
	vars := e.vars
	e.mu.Unlock()
	if vars == nil {
		return nil, errorf("Engine", "the model is not built")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, DefaultStepTimeout)
	defer cancel()
	c := e.newComms()
	ndev := len(e.mesh.devices)
	preds := make([]*tensor.Tensor, ndev)
	stats := make([][]float32, ndev)
	grads := make([][]*tensor.Tensor, ndev)
	errs := make([]error, ndev)
	rowsOfDev := make([][2]int, ndev)
	var wg sync.WaitGroup
	for d := 0; d < ndev; d++ {
		wg.Add(1)
		go func(d int) {
			defer wg.Done()
			defer func() {
				if r := recover(); r != nil {
					errs[d] = fmt.Errorf("mesh: device %s: %v\n%s", e.mesh.devices[d], r, debug.Stack())
					cancel()
				}
			}()
			b, k := e.position(d)
			r0, r1 := b*n/e.nb, (b+1)*n/e.nb
			rowsOfDev[d] = [2]int{r0, r1}
			dc := &devCtx{e: e, ctx: ctx, d: d, k: k, c: c, vars: vars[d], grad: step != nil,
				rows: [2]int{r0, r1}, globalRows: n, training: training, seed: seed}
			body := func() { errs[d] = dc.program(x, y, step, &preds[d], &stats[d], &grads[d]) }
			if deviceKnown(e.mesh.devices[d]) {
				_ = device.WithErr(e.mesh.devices[d], body)
			} else {
				body()
			}
			if errs[d] != nil {
				cancel()
			}
		}(d)
	}
	wg.Wait()
	e.mu.Lock()
	e.lastRows = rowsOfDev
	e.mu.Unlock()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	res := &runResult{}
	var parts []*tensor.Tensor
	for b := 0; b < e.nb; b++ {
		d := e.deviceAt(b, 0)
		parts = append(parts, preds[d])
		if stats[d] != nil {
			if res.stats == nil {
				res.stats = make([]float32, len(stats[d]))
			}
			for i, v := range stats[d] {
				res.stats[i] += v
			}
		}
	}
	res.pred = parts[0]
	if len(parts) > 1 {
		res.pred = tensor.Concat(0, parts...)
	}
	if step != nil {
		for d := range vars {
			for i, v := range vars[d] {
				if e.params[i].Trainable {
					res.vars = append(res.vars, v)
					res.grads = append(res.grads, grads[d][i])
				}
			}
		}
	}
	return res, nil
}
