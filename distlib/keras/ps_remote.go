package keras

import (
	"fmt"
	"sync"

	"godist/distlib/data"
	"godist/distlib/distribute"
	"godist/distlib/tensor"
)

// PSTrainFunction returns the name under which RegisterPSTrainStep registers the model's
// parameter-server training step ("keras.fit/" and the model's name).
func (m *Model) PSTrainFunction() string { return "keras.fit/" + m.name }

// psBuildMu serializes building a model inside a worker task (its first batch).
var psBuildMu sync.Mutex

// RegisterPSTrainStep registers the model's training step for Fit under a
// ParameterServerStrategy made WithRemoteWorkers (distribute.RegisterFunction, name
// m.PSTrainFunction()). A worker task's program builds and compiles the same model as
// the coordinator's (same name, layers, loss and optimizer), calls RegisterPSTrainStep,
// then serves with distribute.ServeWorker: the steps Fit schedules read the variables
// from the ps tasks by name, compute the gradients of their batches in the worker's
// process and push them to the ps tasks. It panics when the model is not compiled or its
// optimizer cannot run on parameter servers.
func (m *Model) RegisterPSTrainStep() {
	if m.optimizer == nil || m.loss == nil {
		panic(fmt.Errorf("%w: RegisterPSTrainStep: compile model %s first", ErrNotCompiled, m.name))
	}
	opt, err := psOptimizer(m.optimizer)
	if err != nil {
		panic(fmt.Errorf("keras: RegisterPSTrainStep: %w", err))
	}
	distribute.RegisterFunction(m.PSTrainFunction(), func(w *distribute.WorkerContext, args []*tensor.Tensor) (*tensor.Tensor, error) {
		return m.psRemoteStep(w, opt, args)
	})
}

// psRemoteStep is the registered training step: args are psArgs's.
func (m *Model) psRemoteStep(w *distribute.WorkerContext, opt *distribute.PSOptimizer, args []*tensor.Tensor) (*tensor.Tensor, error) {
	mode, batches, seeds, err := psUnpackArgs(args)
	if err != nil {
		return nil, fmt.Errorf("keras: %s: %w", m.PSTrainFunction(), err)
	}
	psBuildMu.Lock()
	if !m.Built() {
		m.ensureBuiltContext(w.Context(), batches[0][0])
	}
	psBuildMu.Unlock()
	svars := make([]*distribute.ShardedVariable, len(m.params))
	var strain []*distribute.ShardedVariable
	for i, p := range m.params {
		sv, err := w.Variable(m.name + "/" + p.name)
		if err != nil {
			return nil, fmt.Errorf("keras: %s: %w (the worker's model must be the coordinator's: same name and layers)", m.PSTrainFunction(), err)
		}
		if got, want := sv.Shape(), p.shape; !sameInts(got, want) {
			return nil, fmt.Errorf("keras: %s: variable %s has shape %v on the ps, %v in this worker's model", m.PSTrainFunction(), sv.Name(), got, want)
		}
		svars[i] = sv
		if p.trainable {
			strain = append(strain, sv)
		}
	}
	mode.cache = &m.psCache
	return m.psTrain(w, svars, strain, opt, &m.psStates, mode, batches, seeds, m.compiledMetrics())
}

// psArgs packs the training mode, the batches and their dropout seeds as the registered
// step's arguments: first a header of shape [n+2, 4] (16 bits of a uint64 in each exact
// float32: row 0 the Fit id, row 1 the pipeline flag, then one row per batch seed), then
// x and y of each batch.
func psArgs(mode psTrainMode, batches []data.Element, seeds []uint64) []*tensor.Tensor {
	enc := make([]float32, 0, 4*(len(seeds)+2))
	put := func(v uint64) {
		for k := 0; k < 4; k++ {
			enc = append(enc, float32((v>>(16*k))&0xffff))
		}
	}
	put(mode.fit)
	if mode.pipeline {
		put(1)
	} else {
		put(0)
	}
	for _, s := range seeds {
		put(s)
	}
	args := []*tensor.Tensor{tensor.MustNew([]int{len(seeds) + 2, 4}, enc)}
	for _, b := range batches {
		args = append(args, b[0], b[1])
	}
	return args
}

// psUnpackArgs is psArgs's inverse (the mode's cache is left nil).
func psUnpackArgs(args []*tensor.Tensor) (psTrainMode, []data.Element, []uint64, error) {
	var mode psTrainMode
	if len(args) < 3 || len(args)%2 != 1 {
		return mode, nil, nil, fmt.Errorf("%w: %d arguments, want the header then x and y of at least one batch", ErrInvalidArgument, len(args))
	}
	n := (len(args) - 1) / 2
	if sh := args[0].Shape(); len(sh) != 2 || sh[0] != n+2 || sh[1] != 4 {
		return mode, nil, nil, fmt.Errorf("%w: header of shape %v for %d batches, want [%d 4]", ErrInvalidArgument, sh, n, n+2)
	}
	enc := args[0].Data()
	get := func(row int) uint64 {
		var v uint64
		for k := 0; k < 4; k++ {
			v |= uint64(enc[4*row+k]) << (16 * k)
		}
		return v
	}
	mode.fit, mode.pipeline = get(0), get(1) == 1
	seeds := make([]uint64, n)
	batches := make([]data.Element, n)
	for i := range seeds {
		seeds[i] = get(2 + i)
		batches[i] = data.Element{args[1+2*i], args[2+2*i]}
	}
	return mode, batches, seeds, nil
}
