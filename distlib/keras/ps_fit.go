package keras

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"godist/distlib/data"
	"godist/distlib/distribute"
	"godist/distlib/tensor"
)

// Fit under a ParameterServerStrategy, like model.fit with
// tf.distribute.experimental.ParameterServerStrategy: the model's variables live on the
// parameter servers (placed round-robin, or split by the strategy's partitioner); a
// ClusterCoordinator schedules the training steps on the workers, StepsPerExecution
// batches per scheduled function; each worker reads the current variables, computes the
// gradients of its batches and pushes them to the ps tasks, which apply the optimizer
// (SGD with momentum or Nesterov, Adam, RMSprop: package optim's rules, as in the
// replicas, with the optimizer's own hyperparameters). Workers
// train asynchronously, each at its own pace. After every epoch the model's own variables
// get the ps values, so Evaluate, Predict and SaveWeights see the trained model.
// Batch-level callbacks run on the coordinator once per scheduled function, as in Keras:
// TrainBatchBegin with the index of its first batch before it is scheduled, TrainBatchEnd
// with the index of its last batch once it is scheduled, with the loss and metrics of the
// functions of the epoch finished by then (empty Logs when none has); setting
// m.StopTraining there stops scheduling.
//
// With in-process workers the steps are Go closures. With a strategy made
// WithRemoteWorkers they run in the worker tasks' processes as the function that
// RegisterPSTrainStep registers: every worker program builds and compiles the same model
// (same name, layers and optimizer) and calls m.RegisterPSTrainStep() before it serves
// (distribute.ServeWorker); the batches travel to the workers as the function's arguments.

// StepsPerExecution sets how many batches one scheduled function trains on under a
// ParameterServerStrategy (Keras's compile(steps_per_execution=n); default 1): fewer,
// larger scheduled functions cost less coordination per batch.
func StepsPerExecution(n int) FitOption {
	return fitOnly(fmt.Sprintf("keras.StepsPerExecution(%d)", n), psTrainerKind, func(c *runConfig) error {
		if n <= 0 {
			return fmt.Errorf("StepsPerExecution(%d): want at least 1", n)
		}
		c.stepsPerExecution = n
		return nil
	})
}

// psModel is a model's state on a ParameterServerStrategy.
type psModel struct {
	s     psSeam
	svars []*distribute.ShardedVariable // one per model parameter, in order
	train []*distribute.ShardedVariable // the trainable ones
	opt   *distribute.PSOptimizer
}

// psOptimizer returns the rule the parameter servers apply for the model's optimizer:
// the same rule (package optim) with the optimizer's own hyperparameters. Only a
// learning-rate schedule cannot go there: each ps applies one rule per push, and the
// schedule is a Go value of the coordinator.
func psOptimizer(o *Optimizer) (*distribute.PSOptimizer, error) {
	if o.schedule != nil {
		return nil, fmt.Errorf("%w: %s with a learning-rate schedule cannot run on parameter servers (they apply a constant learning rate): give %s a constant learning rate, and change it between Fit calls with SetLearningRate", ErrInvalidArgument, o.name, o.name)
	}
	o.mu.Lock()
	spec := o.specAt(o.lr)
	o.mu.Unlock()
	return distribute.NewPSOptimizer(spec)
}

// placeOnPSContext creates the model's variables (vars, one per parameter) on the
// parameter servers of c, named model/layer/variable, within ctx.
func placeOnPSContext(ctx context.Context, c psSeam, model string, params []paramInfo, vars []*tensor.Variable) (*psModel, error) {
	names := make([]string, len(params))
	for i, p := range params {
		names[i] = model + "/" + p.name
	}
	svars, err := c.ext.PlaceVariables(ctx, names, vars)
	if err != nil {
		return nil, err
	}
	st := &psModel{s: c, svars: svars}
	for i, p := range params {
		if p.trainable {
			st.train = append(st.train, svars[i])
		}
	}
	return st, nil
}

// psSetup returns the model's state on the parameter servers of s (its variables were
// placed there when the model was built in s's scope) with the rule of its optimizer.
func (m *Model) psSetup(s psSeam) (*psModel, error) {
	opt, err := psOptimizer(m.optimizer)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	st, _ := m.store.(*psModel)
	if st == nil || st.s != s {
		return nil, fmt.Errorf("%w: model %s was not built in the scope of %s: make it inside strategy.Scope", ErrInvalidArgument, m.name, s.Name())
	}
	st.opt = opt
	return st, nil
}

// psPullContext copies the ps values into every copy of the model's variables.
func (m *Model) psPullContext(ctx context.Context, st *psModel) {
	for i, val := range m.psReadContext(ctx, st) {
		for c := range m.vars {
			m.vars[c][i].Assign(val)
		}
	}
}

// psReadContext reads the current ps values of the model's variables in one concurrent
// round trip within ctx; each counts as a read of this process's copy for a GradientTape.
func (m *Model) psReadContext(ctx context.Context, st *psModel) []*tensor.Tensor {
	vals, err := st.s.ext.ReadVariables(ctx, m.vars[0])
	if err != nil {
		panic(fmt.Errorf("keras: model %s: read the variables from the parameter servers: %w", m.name, err))
	}
	return vals
}

// PSPipeline sets whether Fit under a ParameterServerStrategy pipelines each worker's
// steps (default false), like TensorFlow's asynchronous parameter-server training with
// stale reads: a worker sends step k's gradients (and the read of the variables that
// answers them) in the background and computes step k+1 at once with the variables it
// already holds, so it does not wait for the ps round trip. A step's variables then miss
// the worker's own previous push (staleness at most one step per worker), besides the
// pushes of the other workers that asynchronous training always races with; the first
// step of a scheduled function starts from the values its worker's previous function
// read with its last push (in the same Fit). Every push is still applied exactly once:
// a scheduled function waits for its pushes before it finishes, and a function that runs
// again after a worker failure numbers its pushes the same.
//
// The default (false) makes every step read the variables right after its worker's
// previous push (one ps round trip per step, fused with the push). It is the default
// because the staleness costs accuracy early in training (bench/RESULTS.md, ps, "pipelined
// steps"). Custom training loops choose per call:
// WorkerContext.ApplyGradientsAndRead or ApplyGradientsAndReadAsync.
func PSPipeline(on bool) FitOption {
	return fitOnly(fmt.Sprintf("keras.PSPipeline(%v)", on), psTrainerKind, func(c *runConfig) error {
		c.psPipeline = on
		return nil
	})
}

// psWorkerCache is what a worker keeps between the scheduled functions of one Fit: the
// values its last push read, which its next function starts from instead of reading
// them again (one ps round trip less per function), in memory of its own (a function
// copies its values in and out, so that its buffers stay its own: pipelined, the
// worker's next function may start while it still waits for its last push).
type psWorkerCache struct {
	mu   sync.Mutex
	fit  uint64
	step uint64 // the scheduled function that put vals
	vals [][]float32
}

// get copies the kept values of Fit fit into dst (one tensor per parameter) and reports
// whether there were any.
func (c *psWorkerCache) get(fit uint64, dst []*tensor.Tensor) bool {
	if c == nil || fit == 0 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fit != fit || len(c.vals) != len(dst) {
		return false
	}
	for i, t := range dst {
		if len(c.vals[i]) != t.Size() {
			return false
		}
	}
	for i, t := range dst {
		copy(t.Data(), c.vals[i])
	}
	return true
}

// put keeps a copy of vals unless a later scheduled function (by step id) of the same Fit
// put its own.
func (c *psWorkerCache) put(fit, step uint64, vals []*tensor.Tensor) {
	if c == nil || fit == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fit == fit && step < c.step {
		return
	}
	c.fit, c.step = fit, step
	if len(c.vals) != len(vals) {
		c.vals = make([][]float32, len(vals))
	}
	for i, t := range vals {
		if len(c.vals[i]) != t.Size() {
			c.vals[i] = make([]float32, t.Size())
		}
		copy(c.vals[i], t.Data())
	}
}

// psTrainMode is how psTrain runs: pipelined or not, and the Fit it belongs to (0: no
// values kept between scheduled functions).
type psTrainMode struct {
	pipeline bool
	fit      uint64
	cache    *psWorkerCache
}

// psStepState is the memory a scheduled function trains with, kept from function to
// function (psStatePool): the values the ps answer with are written into its value
// buffers (the first set is its local variables' own memory) and the steps compute with
// them where they lie, as reads of its local variables (Variable.AsRead), and the
// gradients are computed into its gradient buffers (tape.GradientInto), so a step makes
// no copy of the weights and no weight-sized garbage. Pipelined, a push reads one set of
// gradients and writes one set of values while the next step computes with the other
// sets: two of each, alternating.
type psStepState struct {
	vars      []*tensor.Variable  // stand-ins for the parameters: the sources the tape differentiates against
	train     []*tensor.Variable  // the trainable ones
	trainable []bool              // per parameter, when the state was made
	vals      [2][]*tensor.Tensor // value buffers, one tensor per parameter ([1] made when pipelined)
	grads     [2][][]float32      // gradient buffers, one per trainable parameter ([1] made when pipelined)
	reuse     []*tensor.Reuse     // the batches' output storage per layer (applyLayers): a batch's tensors are dead once its gradients are taken
}

// psStatePool keeps the step states of a worker (an in-process worker, or a worker
// task's process) for reuse: a function takes one, and gives it back when it returns.
// Functions that run at once on one worker (a worker task starts its next function while
// the last one waits for its push) get different states.
type psStatePool struct {
	mu     sync.Mutex
	prefix string // of the local variables' names
	free   []*psStepState
}

// get returns a state for m's parameters as they are now (a kept one when it fits).
func (p *psStatePool) get(m *Model) *psStepState {
	p.mu.Lock()
	for len(p.free) > 0 {
		st := p.free[len(p.free)-1]
		p.free = p.free[:len(p.free)-1]
		if st.fits(m) {
			p.mu.Unlock()
			return st
		}
	}
	p.mu.Unlock()
	st := &psStepState{}
	for _, pi := range m.params {
		v := tensor.NewVariable(p.prefix+pi.name, tensor.Zeros(pi.shape...), pi.trainable)
		st.vars = append(st.vars, v)
		st.trainable = append(st.trainable, pi.trainable)
		// The first value set is the variables' own memory (read with StepValue, never
		// handed out, and never assigned: only the ps answers write there).
		st.vals[0] = append(st.vals[0], v.StepValue())
		if pi.trainable {
			st.train = append(st.train, v)
		}
	}
	st.grads[0] = st.gradBuffers()
	return st
}

// put gives st back for a later function.
func (p *psStatePool) put(st *psStepState) {
	p.mu.Lock()
	p.free = append(p.free, st)
	p.mu.Unlock()
}

// fits reports whether st was made for m's parameters as they are now (same shapes, same
// trainable ones: trainability may change between Fits).
func (st *psStepState) fits(m *Model) bool {
	if len(st.vars) != len(m.params) {
		return false
	}
	for i, pi := range m.params {
		if st.trainable[i] != pi.trainable || !sameInts(st.vars[i].Shape(), pi.shape) {
			return false
		}
	}
	return true
}

func (st *psStepState) gradBuffers() [][]float32 {
	out := make([][]float32, len(st.train))
	for i, v := range st.train {
		out[i] = make([]float32, v.Size())
	}
	return out
}

// pipelined makes the second sets of buffers.
func (st *psStepState) pipelined() {
	if st.vals[1] == nil {
		for _, v := range st.vars {
			st.vals[1] = append(st.vals[1], tensor.Zeros(v.Shape()...))
		}
		st.grads[1] = st.gradBuffers()
	}
}

// reads returns the step's inputs: vals as reads of the state's variables (no copy).
func (st *psStepState) reads(vals []*tensor.Tensor) []*tensor.Tensor {
	out := make([]*tensor.Tensor, len(vals))
	for i, t := range vals {
		r, err := st.vars[i].AsRead(t)
		if err != nil {
			panic(err) // the buffers were made of the variables' shapes
		}
		out[i] = r
	}
	return out
}

// psStep returns the scheduled function that trains on batches (in-process workers).
func (m *Model) psStep(st *psModel, states []*psStatePool, caches []*psWorkerCache, mode psTrainMode, batches []data.Element, seeds []uint64, metrics []*Metric) distribute.WorkerFunc {
	return func(w *distribute.WorkerContext) (*tensor.Tensor, error) {
		md := mode
		md.cache = caches[w.Worker()]
		return m.psTrain(w, st.svars, st.train, st.opt, states[w.Worker()], md, batches, seeds, metrics)
	}
}

// psTrain trains on batches on a worker: per batch, compute with the variables' values
// (svars, one per parameter) and push the gradients for strain (the trainable ones) to
// the ps tasks; a push answers with the values for a later batch (the variables right
// after the push). Synchronous (mode.pipeline false): the next batch waits for that
// answer. Pipelined: the push travels while the next batch computes with the values of
// the push before (see PSPipeline). The first batch starts from the values the worker's
// last push in the same Fit read (mode.cache), else reads the variables. The values and
// gradients live in a state of pool (psStepState). It returns the summed loss and metric
// statistics of the batches.
func (m *Model) psTrain(w *distribute.WorkerContext, svars, strain []*distribute.ShardedVariable, opt *distribute.PSOptimizer,
	pool *psStatePool, mode psTrainMode, batches []data.Element, seeds []uint64, metrics []*Metric) (*tensor.Tensor, error) {
	state := pool.get(m)
	defer pool.put(state) // after the function's pushes have all answered (every return waits)
	if mode.pipeline {
		state.pipelined()
	}
	if len(state.reuse) != len(m.layers) {
		state.reuse = make([]*tensor.Reuse, len(m.layers))
		for i := range state.reuse {
			state.reuse[i] = new(tensor.Reuse)
		}
	}
	sums := make([]float32, 2+2*len(metrics))
	// use: the value set the next batch computes with; into: the one the push in flight
	// writes (pipelined).
	use, into := 0, 1
	if !mode.cache.get(mode.fit, state.vals[use]) {
		if _, err := w.ReadAllInto(svars, state.vals[use]); err != nil {
			return nil, err
		}
	}
	var pending *distribute.PendingPush
	// wait waits for the push in flight (there is one until it is called).
	wait := func() error {
		_, err := pending.Wait()
		pending = nil
		return err
	}
	defer func() {
		if pending != nil {
			pending.Wait() // an error return leaves no push touching the state's buffers
		}
	}()
	for k, el := range batches {
		x, y := el[0], el[1]
		vals := state.reads(state.vals[use])
		tape := tensor.NewGradientTape()
		pred := m.forwardVals(vals, x, true, seeds[k], state.reuse)
		perEx := m.compiledPerExample(y, pred)
		st := m.shardStats(metrics, y, pred, perEx)
		loss := withPenalty(tensor.Scale(tensor.ReduceSum(perEx), 1/float32(x.Shape()[0])), m.regularization(vals), st, x.Shape()[0])
		// Pipelined, the push of the batch before still reads the other set.
		g := 0
		if mode.pipeline {
			g = k % 2
		}
		grads := tape.GradientInto(loss, state.grads[g], state.train)
		last := k == len(batches)-1
		var err error
		switch {
		case mode.pipeline:
			// The previous push answered (or answers now) with the values for the next
			// batch: they miss only this push, which goes out in the background, writing
			// the values this batch computed with.
			if pending != nil {
				if err := wait(); err != nil {
					return nil, err
				}
				use, into = into, use
			}
			pending = w.ApplyGradientsAndReadAsyncInto(opt, grads, strain, svars, state.vals[into])
			if last {
				// The worker's next function starts from the values in hand (missing
				// only this push) while this one waits for its push: a function's
				// pushes finish before it does.
				mode.cache.put(mode.fit, w.StepID(), state.vals[use])
				w.Release()
				if err = wait(); err == nil {
					// Fresher values for the worker's functions that have not started.
					mode.cache.put(mode.fit, w.StepID(), state.vals[into])
				}
			}
		case last:
			// The answer is what the worker's next function starts from: the variables
			// right after this push, as for the other batches.
			if _, err = w.ApplyGradientsAndReadInto(opt, grads, strain, svars, state.vals[use]); err == nil {
				mode.cache.put(mode.fit, w.StepID(), state.vals[use])
			}
		default:
			// The push answers with the variables for the next batch (read right after
			// this step's updates) into the values this batch computed with (done with
			// them): one round trip per step instead of two.
			_, err = w.ApplyGradientsAndReadInto(opt, grads, strain, svars, state.vals[use])
		}
		if err != nil {
			return nil, err
		}
		for i, v := range st {
			sums[i] += v
		}
	}
	return tensor.MustNew([]int{len(sums)}, sums), nil
}

// psFitIDs numbers the Fit calls of this process (with a random start: worker tasks keep
// values per Fit, and several coordinators may drive them over time).
var psFitIDs atomic.Uint64

func init() { psFitIDs.Store(rand.Uint64() >> 1) }

// psTrainer is Fit's engine under a Coordinated strategy (ParameterServerStrategy): every
// step is a function a ClusterCoordinator schedules on a worker, StepsPerExecution batches
// each; the workers read the variables from the ps and push their gradients there.
type psTrainer struct {
	m       *Model
	s       psSeam
	spe     int
	mode    psTrainMode
	st      *psModel
	states  []*psStatePool // per worker: the memory its functions train with
	caches  []*psWorkerCache
	coord   *distribute.ClusterCoordinator
	metrics []*Metric
	rvs     []*distribute.RemoteValue // the epoch's scheduled functions
	sofar   psDoneStats
}

// psTrainerKind names the strategies psTrainer trains under, for the options only it takes.
const psTrainerKind = "a ParameterServerStrategy"

func (e *psTrainer) kind() string { return psTrainerKind }

func (e *psTrainer) params(p map[string]int) { p["steps_per_execution"] = e.spe }

func (e *psTrainer) begin(ctx context.Context, cfg *runConfig, ds *data.Dataset) error {
	m, s := e.m, e.s
	e.spe = max(1, cfg.stepsPerExecution)
	e.mode = psTrainMode{pipeline: cfg.psPipeline, fit: psFitIDs.Add(1)}
	// The first batch builds the model before its variables go to the ps.
	it := ds.Iterator()
	first, ok := it.Next()
	it.Close()
	if !ok {
		return fmt.Errorf("%w: Fit: the dataset produced no batches", ErrInvalidArgument)
	}
	x, y := splitXY("Fit", first, true)
	if err := checkBatch("Fit", x, y); err != nil {
		return fmt.Errorf("keras: Fit: %w", err)
	}
	m.ensureBuiltContext(ctx, x)
	st, err := m.psSetup(s)
	if err != nil {
		return fmt.Errorf("keras: Fit: %w", err)
	}
	e.st = st
	e.states = make([]*psStatePool, s.NumWorkers())
	for w := range e.states {
		e.states[w] = &psStatePool{prefix: fmt.Sprintf("worker%d/", w)}
	}
	e.caches = make([]*psWorkerCache, s.NumWorkers())
	for w := range e.caches {
		e.caches[w] = &psWorkerCache{}
	}
	e.coord = s.NewCoordinator()
	e.metrics = m.compiledMetrics()
	return nil
}

func (e *psTrainer) batchesPerStep() int { return e.spe }

func (e *psTrainer) step(ctx context.Context, batches []data.Element) (stats, bool, error) {
	m := e.m
	seeds := make([]uint64, len(batches))
	for k := range batches {
		m.mu.Lock()
		m.step++
		seeds[k] = mix(m.seed, uint64(m.step))
		m.mu.Unlock()
	}
	if e.s.RemoteWorkers() {
		e.rvs = append(e.rvs, e.coord.ScheduleFunctionContext(ctx, m.PSTrainFunction(), psArgs(e.mode, batches, seeds)...))
	} else {
		e.rvs = append(e.rvs, e.coord.ScheduleContext(ctx, m.psStep(e.st, e.states, e.caches, e.mode, batches, seeds, e.metrics)))
	}
	// Bound the scheduled functions in flight (memory); a failed one stops the epoch with
	// the coordinator's error (a lost ps names its task).
	if window := 4 * e.s.NumWorkers(); len(e.rvs) > window {
		if _, err := e.rvs[len(e.rvs)-1-window].FetchContext(ctx); err != nil {
			if jerr := e.coord.JoinContext(ctx); jerr != nil {
				err = jerr
			}
			return stats{}, false, fmt.Errorf("under ParameterServerStrategy: %w", err)
		}
	}
	return e.sofar.fold(e.rvs), false, nil
}

func (e *psTrainer) epochEnd(ctx context.Context, steps int, prog *progress) (stats, error) {
	rvs := e.rvs
	e.rvs, e.sofar = nil, psDoneStats{}
	if err := e.coord.JoinContext(ctx); err != nil {
		return stats{}, fmt.Errorf("under ParameterServerStrategy: %w", err)
	}
	var total stats
	done := 0
	for _, rv := range rvs {
		v, err := rv.FetchContext(ctx)
		if err != nil {
			return stats{}, err
		}
		total.add(statsFrom(v.Data()))
		done += e.spe
		if prog != nil {
			prog.samples = total.n
			prog.step(min(done, steps), e.m.logsOf(total, ""))
		}
	}
	// The ps applied one step per batch: the optimizer counts them, as Keras' iterations do.
	o := e.m.optimizer
	o.mu.Lock()
	o.iterations += int64(min(done, steps))
	o.mu.Unlock()
	e.m.psPullContext(ctx, e.st) // the model's variables get the ps values before validation
	return total, nil
}

func (e *psTrainer) end() {
	if e.coord != nil {
		e.coord.Close()
	}
}

// psDoneStats sums the statistics of an epoch's scheduled functions as they finish, for
// the logs of the batch-level callbacks: like Keras under ParameterServerStrategy, those
// run on the coordinator once per scheduled function (every StepsPerExecution batches),
// while the function may still be training, so their logs hold what finished by then.
type psDoneStats struct {
	total stats
	next  int   // rvs before it are folded in, or pending
	open  []int // indexes of functions not finished when last looked at
}

// fold adds the functions of rvs that finished since the last call (without waiting) and
// returns the sum so far. A failed function adds nothing (Join reports it).
func (d *psDoneStats) fold(rvs []*distribute.RemoteValue) stats {
	for ; d.next < len(rvs); d.next++ {
		d.open = append(d.open, d.next)
	}
	open := d.open[:0]
	for _, i := range d.open {
		if !rvs[i].Done() {
			open = append(open, i)
			continue
		}
		if v, err := rvs[i].Fetch(); err == nil {
			d.total.add(statsFrom(v.Data()))
		}
	}
	d.open = open
	return d.total
}

// applyOnPSContext pushes grads for vars (a model's variables placed on the parameter
// servers of c) with this optimizer's rule within ctx, and counts one step.
func (o *Optimizer) applyOnPSContext(ctx context.Context, c psSeam, grads []*tensor.Tensor, vars []*tensor.Variable) error {
	spec, err := psOptimizer(o)
	if err != nil {
		return err
	}
	if err := c.ext.ApplyGradientsOnPS(ctx, spec, grads, vars); err != nil {
		return fmt.Errorf("keras: ApplyGradients under %s: %w", c.Name(), err)
	}
	o.mu.Lock()
	o.iterations++
	o.mu.Unlock()
	return nil
}
