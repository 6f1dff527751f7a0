package distribute

import (
	"context"
	"fmt"
	"runtime"
	"sync"

	"godist/distlib/tensor"
	"godist/distlib/transport"
)

// WorkerContext is what a scheduled function sees of the worker that runs it: the
// variables through this worker's connections (updates deduplicated by the step id), and
// this worker's per-worker datasets.
type WorkerContext struct {
	ctx     context.Context
	index   int
	step    uint64
	a       access
	vars    func(name string) *ShardedVariable
	release func() // lets the worker task start its next function (nil: nothing to do)
}

// Release tells the worker that this function has done its compute and now only waits
// for its pushes (PendingPush.Wait): a worker task may start its next function, sent
// one ahead, meanwhile. The function still finishes, and its RemoteValue is ready, only
// when it returns; so its pushes still count exactly once. Calling it again does nothing.
func (w *WorkerContext) Release() {
	if w.release != nil {
		w.release()
	}
}

// Worker returns the index of the worker running the function.
func (w *WorkerContext) Worker() int { return w.index }

// Variable returns the strategy's variable called name (how a registered function, which
// may run in another process, reaches the variables), or an error naming it.
func (w *WorkerContext) Variable(name string) (*ShardedVariable, error) {
	if w.vars != nil {
		if v := w.vars(name); v != nil {
			return v, nil
		}
	}
	return nil, fmt.Errorf("distribute: worker %d: no variable %q (create it with strategy.NewVariable before scheduling)", w.index, name)
}

// StepID returns the scheduled function's step id (the same when it runs again after a
// worker failure).
func (w *WorkerContext) StepID() uint64 { return w.step }

// Context returns a context that ends when the function is stopped: its Schedule ctx
// ended, a Join's ctx ended, or the coordinator closed.
func (w *WorkerContext) Context() context.Context { return w.ctx }

// Read returns the current value of v.
func (w *WorkerContext) Read(v *ShardedVariable) (*tensor.Tensor, error) { return v.read(w.a) }

// AssignAdd adds delta to v, once per step even if the step runs again.
func (w *WorkerContext) AssignAdd(v *ShardedVariable, delta *tensor.Tensor) error {
	return v.update(w.a, transport.UpdateAssignAdd, transport.Rule{}, delta)
}

// Assign sets v to value.
func (w *WorkerContext) Assign(v *ShardedVariable, value *tensor.Tensor) error {
	return v.update(w.a, transport.UpdateAssign, transport.Rule{}, value)
}

// EmbeddingLookup returns rows ids of v, reading only the shards that hold them.
func (w *WorkerContext) EmbeddingLookup(v *ShardedVariable, ids []int) (*tensor.Tensor, error) {
	return v.lookup(w.a, ids)
}

// ScatterAdd adds value's rows to rows of v, touching only the shards that hold them.
func (w *WorkerContext) ScatterAdd(v *ShardedVariable, rows []int, value *tensor.Tensor) error {
	return v.scatter(w.a, transport.UpdateAssignAdd, transport.Rule{}, rows, value)
}

// ReadAll reads vars (for a forward pass): one call per ps task for the shards it holds,
// the tasks concurrently, not one call per variable.
func (w *WorkerContext) ReadAll(vars []*ShardedVariable) ([]*tensor.Tensor, error) {
	return w.ReadAllInto(vars, nil)
}

// ReadAllInto is ReadAll writing the values into the caller's tensors: dst is nil (fresh
// tensors, as ReadAll) or has one tensor per variable, of its shape, and the result is
// dst with the values read. It is how a training loop that keeps its value buffers from
// step to step reads without allocating; the caller must not use dst's values while the
// call runs, and after an error they may be partly written.
func (w *WorkerContext) ReadAllInto(vars []*ShardedVariable, dst []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if dst != nil && len(dst) != len(vars) {
		return nil, fmt.Errorf("distribute: ReadAllInto: %d destinations for %d variables", len(dst), len(vars))
	}
	var b psBatch
	datas := make([][]float32, len(vars))
	for i, v := range vars {
		data, err := v.dstData("read", dstAt(dst, i))
		if err != nil {
			return nil, err
		}
		datas[i] = data
		b.add(v, nil, data)
	}
	return b.results(w.a, "ReadAllInto", vars, dst, datas)
}

// dstAt returns dst[i], or nil when there is no dst.
func dstAt(dst []*tensor.Tensor, i int) *tensor.Tensor {
	if dst == nil {
		return nil
	}
	return dst[i]
}

// ApplyGradients pushes grads[i] for vars[i]; opt's rule updates the variables on the
// parameter servers (a nil gradient is skipped). The pushes go out as one call per ps
// task, the tasks concurrently; each keeps the update id it would have in order, so a
// rerun step is deduplicated the same.
func (w *WorkerContext) ApplyGradients(opt *PSOptimizer, grads []*tensor.Tensor, vars []*ShardedVariable) error {
	call, err := w.applyAndRead("ApplyGradients", opt, grads, vars, nil, nil)
	if err != nil {
		return err
	}
	_, err = call()
	return err
}

// ApplyGradientsAndRead is ApplyGradients followed by ReadAll(read), with one round trip
// to the parameter servers: a variable in both lists answers its push with its value
// right after its own update (and every update applied before it), and all the pushes and
// reads of the shards one ps task holds go as one call (the tasks concurrently). It is how
// a training step pushes its gradients and reads the variables for its next batch; the
// update ids are ApplyGradients's.
func (w *WorkerContext) ApplyGradientsAndRead(opt *PSOptimizer, grads []*tensor.Tensor, vars, read []*ShardedVariable) ([]*tensor.Tensor, error) {
	call, err := w.applyAndRead("ApplyGradientsAndRead", opt, grads, vars, read, nil)
	if err != nil {
		return nil, err
	}
	return call()
}

// ApplyGradientsAndReadInto is ApplyGradientsAndRead writing the values read into the
// caller's tensors: dst is nil (fresh tensors) or has one tensor per variable of read, of
// its shape (checked before anything is pushed), and the result is dst with the values
// read. The caller must not use dst's values while the call runs, and after an error they
// may be partly written.
func (w *WorkerContext) ApplyGradientsAndReadInto(opt *PSOptimizer, grads []*tensor.Tensor, vars, read []*ShardedVariable, dst []*tensor.Tensor) ([]*tensor.Tensor, error) {
	call, err := w.applyAndRead("ApplyGradientsAndReadInto", opt, grads, vars, read, dst)
	if err != nil {
		return nil, err
	}
	return call()
}

// PendingPush is a push of gradients in flight (ApplyGradientsAndReadAsync).
type PendingPush struct {
	done chan struct{}
	vals []*tensor.Tensor
	err  error
}

// Wait waits until every push and read of p has answered and returns the values read
// (ApplyGradientsAndRead's result). It may be called more than once.
func (p *PendingPush) Wait() ([]*tensor.Tensor, error) {
	<-p.done
	return p.vals, p.err
}

// ApplyGradientsAndReadAsync is ApplyGradientsAndRead in the background: it takes the
// update ids now (in call order, so a rerun of the scheduled function numbers its pushes
// the same and the parameter servers deduplicate them), sends the pushes and reads from
// another goroutine and returns at once. The caller computes its next step meanwhile
// and must Wait for p before the scheduled function returns (a function's pushes are
// part of its result: exactly-once holds only for pushes that finished). Keep at most
// one in flight per scheduled function to bound staleness to one step.
func (w *WorkerContext) ApplyGradientsAndReadAsync(opt *PSOptimizer, grads []*tensor.Tensor, vars, read []*ShardedVariable) *PendingPush {
	return w.applyAndReadAsync("ApplyGradientsAndReadAsync", opt, grads, vars, read, nil)
}

// ApplyGradientsAndReadAsyncInto is ApplyGradientsAndReadAsync writing the values read
// into dst, as ApplyGradientsAndReadInto does: p.Wait returns dst. Until p.Wait has
// returned, the push reads grads and writes dst: the caller must leave the gradients as
// they are and not use dst's values (a pipelined loop keeps two sets of each and
// alternates).
func (w *WorkerContext) ApplyGradientsAndReadAsyncInto(opt *PSOptimizer, grads []*tensor.Tensor, vars, read []*ShardedVariable, dst []*tensor.Tensor) *PendingPush {
	return w.applyAndReadAsync("ApplyGradientsAndReadAsyncInto", opt, grads, vars, read, dst)
}

// applyAndReadAsync runs applyAndRead's call in the background (op names the method).
func (w *WorkerContext) applyAndReadAsync(op string, opt *PSOptimizer, grads []*tensor.Tensor, vars, read []*ShardedVariable, dst []*tensor.Tensor) *PendingPush {
	p := &PendingPush{done: make(chan struct{})}
	call, err := w.applyAndRead(op, opt, grads, vars, read, dst)
	if err != nil {
		p.err = err
		close(p.done)
		return p
	}
	go func() {
		defer close(p.done)
		p.vals, p.err = call()
	}()
	// With one P (a worker task at GOMAXPROCS=1) let the push reach the socket before the
	// caller's compute takes the processor again.
	runtime.Gosched()
	return p
}

// applyAndRead checks the arguments of ApplyGradientsAndRead, takes the update ids and
// returns the call that sends the pushes and reads.
func (w *WorkerContext) applyAndRead(op string, opt *PSOptimizer, grads []*tensor.Tensor, vars, read []*ShardedVariable, dst []*tensor.Tensor) (func() ([]*tensor.Tensor, error), error) {
	if dst != nil && len(dst) != len(read) {
		return nil, fmt.Errorf("distribute: %s: %d destinations for %d variables read", op, len(dst), len(read))
	}
	for k, d := range dst {
		// Checked before anything is pushed, so a bad destination pushes nothing.
		if d != nil && !sameShape(d.Shape(), read[k].shape) {
			return nil, fmt.Errorf("distribute: %s: variable %q of shape %v read into a destination of shape %v", op, read[k].name, read[k].shape, d.Shape())
		}
	}
	if opt == nil {
		return nil, fmt.Errorf("distribute: %s: nil optimizer (use distribute.NewPSSGD or NewPSAdam)", op)
	}
	if len(grads) != len(vars) {
		return nil, fmt.Errorf("distribute: %s: %d gradients for %d variables", op, len(grads), len(vars))
	}
	ids := make([]transport.UpdateID, len(vars))
	pushed := make(map[*ShardedVariable]int, len(vars))
	for i, v := range vars {
		ids[i] = w.a.nextID()
		if grads[i] != nil {
			pushed[v] = i
		}
	}
	fused := make(map[int]bool, len(read)) // indexes into vars answered with a value
	firstRead := make([]bool, len(read))   // the read that carries a variable's push
	for k, v := range read {
		if i, ok := pushed[v]; ok && !fused[i] {
			fused[i], firstRead[k] = true, true
		}
	}
	var push []int // pushes answered without a value
	for i := range vars {
		if grads[i] != nil && !fused[i] {
			push = append(push, i)
		}
	}
	// One Do per ps task: every shard's push and read that task holds, in one round trip.
	var b psBatch
	datas := make([][]float32, len(read))
	for k, v := range read {
		var u *transport.Update
		if i, ok := pushed[v]; ok && firstRead[k] {
			if err := v.checkValue(opt.kind, grads[i]); err != nil {
				return nil, err
			}
			u = &transport.Update{ID: ids[i], Kind: opt.kind, Rule: opt.rule, Value: grads[i].Data()}
		}
		data, err := v.dstData(op, dstAt(dst, k))
		if err != nil {
			return nil, err
		}
		datas[k] = data
		b.add(v, u, data)
	}
	for _, i := range push {
		if err := vars[i].checkValue(opt.kind, grads[i]); err != nil {
			return nil, err
		}
		b.add(vars[i], &transport.Update{ID: ids[i], Kind: opt.kind, Rule: opt.rule, Value: grads[i].Data()}, nil)
	}
	a := w.a
	return func() ([]*tensor.Tensor, error) { return b.results(a, op, read, dst, datas) }, nil
}

// parallel runs fn(0..n-1) concurrently (the calling goroutine runs the last one) and
// returns the error of the lowest index that failed.
func parallel(n int, fn func(i int) error) error {
	if n <= 1 {
		if n == 1 {
			return fn(0)
		}
		return nil
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n-1; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn(i)
		}()
	}
	errs[n-1] = fn(n - 1)
	wg.Wait()
	return firstNonNil(errs)
}

func firstNonNil(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
