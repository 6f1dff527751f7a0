package keras

import (
	"context"
	"fmt"
	"time"

	"godist/distlib/cell"
	"godist/distlib/data"
	"godist/distlib/distribute"
	"godist/distlib/tensor"
)

// requireOwnScope refuses to train or evaluate inside the scope of a strategy other than
// the one the model was built under, as TensorFlow does ("Mixing different
// tf.distribute.Strategy objects"): the model would silently run on its own strategy.
func (m *Model) requireOwnScope(op string) {
	if !distribute.HasStrategy() {
		return
	}
	if cur := distribute.GetStrategy(); cur != m.strategy {
		panic(fmt.Errorf("%w: %s inside the scope of %s, but model %s was built under %s: build the model "+
			"(Sequential and Compile) inside strategy.Scope so that it trains on that strategy's replicas",
			ErrInvalidArgument, op, cur.Name(), m.name, m.strategy.Name()))
	}
}

func (m *Model) requireCompiled(op string) {
	if m.optimizer == nil || m.loss == nil {
		panic(fmt.Errorf("%w: call model.Compile(optimizer, loss, metrics...) before %s", ErrNotCompiled, op))
	}
}

// Fit trains the model like model.fit: on a *data.Dataset whose elements are (inputs,
// labels) batches, model.Fit(ds, keras.Epochs(5)), or on tensors of inputs and labels,
// model.Fit(x, y, keras.BatchSize(64), keras.Epochs(5), keras.ValidationSplit(0.2)) (see
// BatchSize, ValidationSplit and Shuffle). It returns the History of the epochs' logs.
// Errors (bad shapes, a failing callback) panic with an error wrapping one of this
// package's; the notebook shows them as Jupyter errors. Fit is FitContext with the running
// notebook cell's context: interrupting the cell stops training.
func (m *Model) Fit(x any, args ...any) *History {
	return m.FitContext(cell.Context(), x, args...)
}

// FitContext is Fit under ctx. When ctx is done (an interrupted cell, a cancelled
// program), training stops at the next step boundary: the progress bar ends with a line
// saying where it stopped, the callbacks' TrainEnd runs (BackupAndRestore keeps its
// backup), and FitContext returns the History of the epochs completed so far. The model,
// its optimizer and the strategy stay usable: the next Fit or Evaluate works.
func (m *Model) FitContext(ctx context.Context, x any, args ...any) *History {
	y, opts := splitArgs("Fit", args)
	if ctx == nil {
		ctx = context.Background()
	}
	m.requireCompiled("Fit")
	m.requireOwnScope("Fit")
	defer m.fixTrainable()()
	eng := m.trainerFor()
	cfg := parseRun("Fit", opts)
	if err := cfg.checkTrainer(m, eng); err != nil {
		panic(err)
	}
	ds := m.inputData("Fit", x, y, cfg)
	m.mw.train = m.shardModeOf("Fit", ds)
	if err := eng.begin(ctx, cfg, ds); err != nil {
		panic(err)
	}
	defer eng.end()
	f := m.newFitLoop(ctx, cfg, ds)
	eng.params(f.hist.Params)
	var h *History
	f.prog.around(func() { h = m.fitEpochs(ctx, eng, cfg, ds, f) })
	return h
}

// fitEpochs runs Fit's epochs for FitContext, inside the progress display's run.
func (m *Model) fitEpochs(ctx context.Context, eng trainer, cfg *runConfig, ds *data.Dataset, f *fitLoop) *History {
	cbs, prog := f.cbs, f.prog

	var it *data.Iterator
	defer func() {
		if it != nil {
			it.Close()
		}
	}()
	var rows func(count int) (lo, hi int) // the rows of each batch this process trains on; nil: all
	if p, ok := eng.(rowPicker); ok {
		rows = p.pickRows()
	}
	if s, ok := eng.(workerSyncer); ok {
		f.sync = s.syncWorkers
		if s.elastic() {
			f.regroup = s.regroupAfter
		}
	}
	m.mw.resume = 0
	f.trainBegin()
	// BackupAndRestore resumes after its backup; a worker admitted into an elastic job
	// later starts where the others are.
	start := max(cfg.initialEpoch, m.mw.resume, m.mw.joined)
	if m.mw.joined > 0 && cfg.steps > 0 {
		// With StepsPerEpoch the epochs share one iterator: take it to where the others' is.
		it = ds.Iterator()
		for range m.mw.joined * cfg.steps {
			if _, ok := nextBatch(ds, &it, cfg.steps, rows); !ok {
				break
			}
		}
	}
	m.mw.resume, m.mw.joined = 0, 0
	for epoch := start; epoch < cfg.epochs && !m.StopTraining; epoch++ {
		f.epochBegin(epoch)
		if cfg.steps == 0 && it != nil {
			it.Close()
			it = nil
		}
		if it == nil {
			it = ds.Iterator()
		}
		var total stats
		steps := 0
		for ended := false; !ended && (cfg.steps == 0 || steps < cfg.steps); {
			if f.interrupted(epoch, steps) {
				return f.trainEnd()
			}
			var batches []data.Element
			for len(batches) < eng.batchesPerStep() && (cfg.steps == 0 || steps+len(batches) < cfg.steps) {
				el, ok := nextBatch(ds, &it, cfg.steps, rows)
				if !ok {
					ended = true
					break
				}
				batches = append(batches, el)
			}
			if len(batches) == 0 {
				break
			}
			for _, cb := range cbs {
				cb.TrainBatchBegin(steps, Logs{})
			}
			st, done, err := eng.step(ctx, batches)
			if err != nil {
				if f.interrupted(epoch, steps) {
					return f.trainEnd()
				}
				panic(fmt.Errorf("keras: Fit epoch %d step %d: %w", epoch+1, steps+1, err))
			}
			steps += len(batches)
			if done { // the batches' storage takes the next ones: no garbage per step
				for _, b := range batches {
					it.Recycle(b)
				}
			}
			logs := Logs{} // a scheduled step: what finished so far, if anything
			switch {
			case done:
				total.add(st)
				logs = m.logsOf(total, "")
				if prog != nil {
					prog.samples = total.n
					prog.step(steps, logs)
				}
			case st.n > 0:
				logs = m.logsOf(st, "")
			}
			for _, cb := range cbs {
				cb.TrainBatchEnd(steps-1, logs)
			}
			if m.StopTraining {
				break
			}
		}
		if steps == 0 {
			panic(fmt.Errorf("%w: Fit: the dataset produced no batches in epoch %d", ErrInvalidArgument, epoch+1))
		}
		rest, err := eng.epochEnd(ctx, steps, prog)
		if err != nil {
			if f.interrupted(epoch, steps) {
				return f.trainEnd()
			}
			panic(fmt.Errorf("keras: Fit epoch %d: %w", epoch+1, err))
		}
		total.add(rest)
		if !f.epochEnd(epoch, steps, total) {
			return f.trainEnd()
		}
	}
	return f.trainEnd()
}

// nextBatch returns the next batch of *it. With StepsPerEpoch (steps > 0) over a finite
// dataset, an iterator that runs out is started over once; it reports false when the data
// ends (or a fresh iterator yields nothing).
// With rows (a rowPicker's), it asks *it for those rows of each batch only
// (Iterator.NextRows).
func nextBatch(ds *data.Dataset, it **data.Iterator, steps int, rows func(count int) (lo, hi int)) (data.Element, bool) {
	next := func() (data.Element, bool) {
		if rows == nil {
			return (*it).Next()
		}
		el, _, ok := (*it).NextRows(rows)
		return el, ok
	}
	el, ok := next()
	if ok || steps == 0 {
		return el, ok
	}
	(*it).Close()
	*it = ds.Iterator()
	return next()
}

// fitLoop is the bookkeeping around the steps that Fit and psFit share: the History, the
// callbacks (the user's and the History's), the progress bar and the epoch logs.
type fitLoop struct {
	ctx    context.Context
	m      *Model
	cfg    *runConfig
	hist   *History
	target int // steps per epoch; 0 until known
	cbs    []Callback
	prog   *progress // nil when silent
	logs   Logs      // the last epoch's
	// sync waits for the other workers at the end of epoch (last: Fit's last): the
	// trainer's (workerSyncer), else Model.syncWorkers.
	sync func(ctx context.Context, epoch int, last bool) error
	// regroup, under elastic training (workerSyncer), regroups the workers after err
	// stopped the validation; again reports that it can run again.
	regroup func(ctx context.Context, err error) (again bool, rerr error)
}

// workerSyncer is implemented by trainers with their own wait for the other workers at an
// epoch's end (elastic training regroups and admits workers there).
type workerSyncer interface {
	syncWorkers(ctx context.Context, epoch int, last bool) error
	// regroupAfter regroups the workers after err, when it says a worker was lost and the
	// training is elastic (again); otherwise it returns again false and rerr nil.
	regroupAfter(ctx context.Context, err error) (again bool, rerr error)
	// elastic reports whether the training is elastic.
	elastic() bool
}

// newFitLoop prepares the History and the callbacks of a Fit over ds and clears
// m.StopTraining.
func (m *Model) newFitLoop(ctx context.Context, cfg *runConfig, ds *data.Dataset) *fitLoop {
	f := &fitLoop{ctx: ctx, m: m, cfg: cfg, hist: newHistory(), target: cfg.steps,
		sync: func(ctx context.Context, _ int, _ bool) error { return m.syncWorkers(ctx) }}
	if f.target == 0 && ds.Cardinality() >= 0 {
		f.target = ds.Cardinality()
	}
	f.hist.Params["epochs"], f.hist.Params["steps"], f.hist.Params["verbose"] = cfg.epochs, f.target, cfg.verbose
	f.cbs = append(append([]Callback(nil), cfg.callbacks...), &historyCallback{h: f.hist})
	for _, cb := range f.cbs {
		cb.SetModel(m)
	}
	if cfg.verbose > 0 {
		f.prog = newProgress(cfg.verbose, m.out(), time.Now)
	}
	m.StopTraining = false
	m.interrupted = false
	return f
}

// interrupted reports whether Fit's context is done; the first time, it ends the progress
// bar with a line saying where training stopped (epoch and steps done in it, 0-based epoch)
// and marks the model interrupted for the callbacks' TrainEnd.
func (f *fitLoop) interrupted(epoch, steps int) bool {
	if f.ctx.Err() == nil {
		return false
	}
	if f.m.interrupted {
		return true
	}
	f.m.interrupted = true
	where := fmt.Sprintf("epoch %d/%d after step %d", epoch+1, f.cfg.epochs, steps)
	if f.target > 0 {
		where += fmt.Sprintf("/%d", f.target)
	}
	line := fmt.Sprintf("Fit interrupted in %s (%v): the model keeps the weights of its last step; "+
		"the History holds the %d completed epoch(s)", where, context.Cause(f.ctx), len(f.hist.Epoch))
	if f.prog != nil {
		f.prog.emitLine(line)
	} else {
		fmt.Fprintln(f.m.out(), line)
	}
	return true
}

func (f *fitLoop) trainBegin() {
	for _, cb := range f.cbs {
		cb.TrainBegin(Logs{})
	}
}

func (f *fitLoop) epochBegin(epoch int) {
	for _, cb := range f.cbs {
		cb.EpochBegin(epoch, Logs{})
	}
	if f.prog != nil {
		f.prog.epochBegin(epoch, f.cfg.epochs, f.target)
	}
}

// epochEnd closes an epoch of steps steps whose training figures are total: it fixes the
// epoch length if it was unknown, adds the validation logs, and tells the progress bar and
// the callbacks.
func (f *fitLoop) epochEnd(epoch, steps int, total stats) (goOn bool) {
	if f.target == 0 {
		f.target = steps
		f.hist.Params["steps"] = steps
	}
	f.logs = f.m.logsOf(total, "")
	if f.cfg.validation != nil {
		vl, err := f.validate()
		for err != nil && f.regroup != nil {
			// Elastic training: a worker lost during the validation; the others regroup and
			// evaluate again.
			again, rerr := f.regroup(f.ctx, err)
			if !again {
				if rerr != nil {
					err = rerr
				}
				break
			}
			vl, err = f.validate()
		}
		if err != nil {
			if f.interrupted(epoch, steps) {
				return false
			}
			panic(err)
		}
		for k, v := range vl {
			f.logs["val_"+k] = v
		}
	}
	if f.prog != nil {
		f.prog.finish(f.logs)
	}
	for _, cb := range f.cbs {
		cb.EpochEnd(epoch, f.logs)
	}
	// The chief writes checkpoints, backups and summaries in those callbacks; the workers
	// leave the epoch together, so that what it wrote is complete for every worker (one that
	// reads LatestCheckpoint once Fit returns finds the last epoch's), as TensorFlow's
	// collective saves make it under MultiWorkerMirroredStrategy.
	if _, workers := f.m.strategy.Extended().Worker(); workers > 1 {
		if err := f.sync(f.ctx, epoch, epoch == f.cfg.epochs-1 || f.m.StopTraining); err != nil && f.ctx.Err() == nil {
			panic(fmt.Errorf("keras: Fit epoch %d: waiting for the other workers after the epoch's callbacks: %w", epoch+1, err))
		}
	}
	return true
}

// validate evaluates the validation data at an epoch's end. An interrupt there ends Fit
// as one during the epoch does (err, for interrupted to report), not with a panic.
func (f *fitLoop) validate() (vl Logs, err error) {
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(error)
			if !ok || (f.ctx.Err() == nil && f.regroup == nil) {
				panic(r)
			}
			err = e
		}
	}()
	return f.m.evaluate(f.ctx, f.cfg.validation, f.cfg.validationSteps, nil, nil), nil
}

// syncWorkers returns once every worker has called it: an all-reduce of one value.
func (m *Model) syncWorkers(ctx context.Context) error {
	per := make([][]*tensor.Tensor, len(m.strategy.Extended().ReplicaDevices()))
	for r := range per {
		per[r] = []*tensor.Tensor{tensor.Scalar(0)}
	}
	_, err := m.strategy.Extended().AllReduce(ctx, distribute.ReduceSum, per)
	return err
}

// trainEnd tells the callbacks that training ended and returns the History.
func (f *fitLoop) trainEnd() *History {
	for _, cb := range f.cbs {
		cb.TrainEnd(f.logs)
	}
	return f.hist
}

// Evaluate returns the loss and metrics of the model, like model.evaluate: on a
// *data.Dataset of (inputs, labels) batches, model.Evaluate(ds), or on tensors,
// model.Evaluate(x, y, keras.BatchSize(64)) (32 examples a batch by default):
// logs["loss"], logs["accuracy"], ... Options: Steps, Callbacks, Verbose, BatchSize. It is
// EvaluateContext with the running notebook cell's context.
func (m *Model) Evaluate(x any, args ...any) Logs {
	return m.EvaluateContext(cell.Context(), x, args...)
}

// EvaluateContext is Evaluate under ctx: when ctx is done it stops at the next batch and
// panics with an error wrapping ctx's (no partial figures are returned as if they were
// the dataset's).
func (m *Model) EvaluateContext(ctx context.Context, x any, args ...any) Logs {
	y, opts := splitArgs("Evaluate", args)
	if ctx == nil {
		ctx = context.Background()
	}
	m.requireCompiled("Evaluate")
	m.requireOwnScope("Evaluate")
	cfg := parseRun("Evaluate", opts)
	ds := m.inputData("Evaluate", x, y, cfg)
	for _, cb := range cfg.callbacks {
		cb.SetModel(m)
	}
	var prog *progress
	if cfg.verbose > 0 {
		prog = newProgress(cfg.verbose, m.out(), time.Now)
	}
	var logs Logs
	prog.around(func() { logs = m.evaluate(ctx, ds, cfg.steps, cfg.callbacks, prog) })
	return logs
}

func (m *Model) evaluate(ctx context.Context, ds *data.Dataset, maxSteps int, cbs []Callback, prog *progress) Logs {
	m.refreshContext(ctx)
	metrics := m.compiledMetrics()
	m.mw.eval = m.shardModeOf("Evaluate", ds)
	for _, cb := range cbs {
		cb.TestBegin(Logs{})
	}
	target := maxSteps
	if target == 0 && ds.Cardinality() >= 0 {
		target = ds.Cardinality()
	}
	if prog != nil {
		prog.target, prog.start, prog.stepsDone = target, prog.now(), 0
	}
	it := ds.Iterator()
	defer it.Close()
	var total stats
	steps := 0
	for maxSteps == 0 || steps < maxSteps {
		if err := ctx.Err(); err != nil {
			panic(fmt.Errorf("keras: Evaluate stopped after %d batches: %w", steps, context.Cause(ctx)))
		}
		el, ok := it.Next()
		if !ok {
			break
		}
		for _, cb := range cbs {
			cb.TestBatchBegin(steps, Logs{})
		}
		st, err := m.testStep(ctx, el, metrics)
		if err != nil {
			panic(fmt.Errorf("keras: Evaluate step %d: %w", steps+1, err))
		}
		total.add(st)
		steps++
		logs := m.logsOf(total, "")
		for _, cb := range cbs {
			cb.TestBatchEnd(steps-1, logs)
		}
		if prog != nil {
			prog.step(steps, logs)
		}
	}
	logs := m.logsOf(total, "")
	if prog != nil {
		prog.finish(logs)
	}
	for _, cb := range cbs {
		cb.TestEnd(logs)
	}
	return logs
}

// Predict returns the model's outputs for input, a *data.Dataset of batches (elements
// (inputs) or (inputs, labels)) or a *tensor.Tensor of examples (run 32 at a time, or
// BatchSize(n)), like model.predict. Options: Steps, Callbacks, Verbose, BatchSize. It is
// PredictContext with the running notebook cell's context.
func (m *Model) Predict(input any, opts ...PredictOption) *tensor.Tensor {
	return m.PredictContext(cell.Context(), input, opts...)
}

// PredictContext is Predict under ctx: when ctx is done it stops at the next batch and
// panics with an error wrapping ctx's.
func (m *Model) PredictContext(ctx context.Context, input any, opts ...PredictOption) *tensor.Tensor {
	if ctx == nil {
		ctx = context.Background()
	}
	runOpts := make([]*runOption, len(opts))
	for i, o := range opts {
		if o == nil {
			panic(fmt.Errorf("%w: Predict option %d is nil", ErrInvalidArgument, i))
		}
		runOpts[i] = o.predictOption()
	}
	cfg := parseRun("Predict", runOpts)
	m.refreshContext(ctx)
	ds := m.inputData("Predict", input, nil, cfg)
	for _, cb := range cfg.callbacks {
		cb.SetModel(m)
		cb.PredictBegin(Logs{})
	}
	it := ds.Iterator()
	defer it.Close()
	var outs []*tensor.Tensor
	for steps := 0; cfg.steps == 0 || steps < cfg.steps; steps++ {
		if err := ctx.Err(); err != nil {
			panic(fmt.Errorf("keras: Predict stopped after %d batches: %w", steps, context.Cause(ctx)))
		}
		el, ok := it.Next()
		if !ok {
			break
		}
		x, _ := splitXY("Predict", el, false)
		m.ensureBuiltContext(ctx, x)
		devs := m.strategy.Extended().ReplicaDevices()
		shards, err := distribute.SplitBatch(data.Element{x}, len(devs))
		if err != nil {
			panic(fmt.Errorf("keras: Predict: %w", err))
		}
		parts := make([]*tensor.Tensor, len(devs))
		if err := m.strategy.Extended().RunReplicas(ctx, func(r int) error {
			if xs := shards[r][0]; xs.Shape()[0] > 0 {
				parts[r] = tensor.StopGradient(m.forward(ctx, m.copyFor(r), xs.To(devs[r]), false, 0))
			}
			return nil
		}); err != nil {
			panic(fmt.Errorf("keras: Predict: %w", err))
		}
		for _, p := range parts {
			if p != nil {
				outs = append(outs, p)
			}
		}
	}
	for _, cb := range cfg.callbacks {
		cb.PredictEnd(Logs{})
	}
	if len(outs) == 0 {
		panic(fmt.Errorf("%w: Predict: the input produced no batches", ErrInvalidArgument))
	}
	if len(outs) == 1 {
		return outs[0]
	}
	return tensor.Concat(0, outs...)
}

// valuesOf returns the current values of vars.
func valuesOf(vars []*tensor.Variable) []*tensor.Tensor {
	return readValues(vars, (*tensor.Variable).Value)
}

// stepValuesOf is valuesOf for a training step of Fit: it reads with StepValue, so that the
// optimizer's update at the end of the step writes the new weights where the old ones lie
// (the step keeps nothing it computed from them past that point: its tape, activations and
// gradients are dropped, its statistics are numbers). Code that hands values, or tensors
// computed from them, to the user reads with valuesOf.
func stepValuesOf(vars []*tensor.Variable) []*tensor.Tensor {
	return readValues(vars, (*tensor.Variable).StepValue)
}

// readValues reads every variable with read (Value or StepValue).
func readValues(vars []*tensor.Variable, read func(*tensor.Variable) *tensor.Tensor) []*tensor.Tensor {
	out := make([]*tensor.Tensor, len(vars))
	for i, v := range vars {
		out[i] = read(v)
	}
	return out
}
