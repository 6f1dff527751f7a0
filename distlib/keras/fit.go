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

// FitOption sets an optional argument of Fit, like fit's keyword arguments: Epochs,
// InitialEpoch, StepsPerEpoch, ValidationData, ValidationSteps, ValidationSplit, Shuffle,
// StepsPerExecution, PSPipeline, BalanceWorkers, and the Options every call takes.
type FitOption interface{ fitOption() *runOption }

// EvaluateOption sets an optional argument of Evaluate: Steps, and the Options every
// call takes.
type EvaluateOption interface{ evaluateOption() *runOption }

// PredictOption sets an optional argument of Predict: Steps, and the Options every call
// takes.
type PredictOption interface{ predictOption() *runOption }

// Option is an optional argument Fit, Evaluate and Predict all take: Callbacks, Verbose,
// BatchSize.
type Option interface {
	FitOption
	EvaluateOption
	PredictOption
}

// StepsOption is Steps, an optional argument of Evaluate and Predict.
type StepsOption interface {
	EvaluateOption
	PredictOption
}

// runOption is one optional argument: its spelling for errors, the calls that take it,
// the trainer it needs (a Fit option of one kind of strategy), and what it sets.
type runOption struct {
	name    string // "keras.Epochs(3)"
	calls   string // "Fit", "Evaluate and Predict", ...
	trainer string // "" or the trainer kind that takes it (trainer.kind)
	set     func(*runConfig) error
}

// The option kinds: which calls' interfaces they satisfy.
type (
	fitOpt      struct{ o *runOption }
	evalPredOpt struct{ o *runOption }
	everyOpt    struct{ o *runOption }
)

func (f fitOpt) fitOption() *runOption           { return f.o }
func (e evalPredOpt) evaluateOption() *runOption { return e.o }
func (e evalPredOpt) predictOption() *runOption  { return e.o }
func (e everyOpt) fitOption() *runOption         { return e.o }
func (e everyOpt) evaluateOption() *runOption    { return e.o }
func (e everyOpt) predictOption() *runOption     { return e.o }

func fitOnly(name, trainer string, set func(*runConfig) error) FitOption {
	return fitOpt{&runOption{name: name, calls: "Fit", trainer: trainer, set: set}}
}

type runConfig struct {
	epochs, initialEpoch, steps, validationSteps int
	validation                                   *data.Dataset
	callbacks                                    []Callback
	verbose                                      int
	stepsPerExecution                            int     // ParameterServerStrategy (ps_fit.go)
	psPipeline                                   bool    // ParameterServerStrategy (ps_fit.go)
	balanceWorkers                               bool    // MultiWorkerMirroredStrategy (multiworker.go)
	batchSize                                    int     // tensor inputs (inputs.go); 0: not given
	validationSplit                              float64 // tensor inputs (inputs.go); 0: not given
	shuffleGiven, noShuffle                      bool    // tensor inputs (inputs.go)
	given                                        []*runOption
}

// Epochs sets the number of epochs Fit trains (default 1).
func Epochs(n int) FitOption {
	return fitOnly(fmt.Sprintf("keras.Epochs(%d)", n), "", func(c *runConfig) error {
		if n <= 0 {
			return fmt.Errorf("Epochs(%d): the number of epochs must be positive", n)
		}
		c.epochs = n
		return nil
	})
}

// InitialEpoch sets the epoch Fit starts counting from (default 0), to resume training.
func InitialEpoch(n int) FitOption {
	return fitOnly(fmt.Sprintf("keras.InitialEpoch(%d)", n), "", func(c *runConfig) error {
		if n < 0 {
			return fmt.Errorf("InitialEpoch(%d): must be >= 0", n)
		}
		c.initialEpoch = n
		return nil
	})
}

// StepsPerEpoch sets the number of batches per epoch. The dataset's iterator then carries
// over from one epoch to the next, and starts over when it runs out.
func StepsPerEpoch(n int) FitOption {
	return fitOnly(fmt.Sprintf("keras.StepsPerEpoch(%d)", n), "", func(c *runConfig) error {
		if n <= 0 {
			return fmt.Errorf("StepsPerEpoch(%d): must be positive", n)
		}
		c.steps = n
		return nil
	})
}

// Steps sets the number of batches Evaluate or Predict uses (default: the whole dataset).
// Fit's is StepsPerEpoch.
func Steps(n int) StepsOption {
	return evalPredOpt{&runOption{name: fmt.Sprintf("keras.Steps(%d)", n), calls: "Evaluate and Predict (Fit's is keras.StepsPerEpoch)",
		set: func(c *runConfig) error {
			if n <= 0 {
				return fmt.Errorf("Steps(%d): must be positive", n)
			}
			c.steps = n
			return nil
		}}}
}

// ValidationData makes Fit evaluate ds at the end of every epoch, adding "val_" logs.
func ValidationData(ds *data.Dataset) FitOption {
	return fitOnly("keras.ValidationData", "", func(c *runConfig) error {
		if ds == nil {
			return fmt.Errorf("ValidationData(nil)")
		}
		c.validation = ds
		return nil
	})
}

// ValidationSteps limits the validation at the end of each epoch to n batches.
func ValidationSteps(n int) FitOption {
	return fitOnly(fmt.Sprintf("keras.ValidationSteps(%d)", n), "", func(c *runConfig) error {
		if n <= 0 {
			return fmt.Errorf("ValidationSteps(%d): must be positive", n)
		}
		c.validationSteps = n
		return nil
	})
}

// every returns an option of Fit, Evaluate and Predict alike.
func every(name string, set func(*runConfig) error) Option {
	return everyOpt{&runOption{name: name, calls: "Fit, Evaluate and Predict", set: set}}
}

// Callbacks adds callbacks, called in order.
func Callbacks(cbs ...Callback) Option {
	return every("keras.Callbacks", func(c *runConfig) error {
		for i, cb := range cbs {
			if cb == nil {
				return fmt.Errorf("Callbacks: callback %d is nil", i)
			}
		}
		c.callbacks = append(c.callbacks, cbs...)
		return nil
	})
}

// Verbose sets what Fit and Evaluate print: 0 nothing, 1 a progress bar (default), 2 one
// line per epoch. Outside a notebook or terminal the bar is printed once per epoch.
func Verbose(n int) Option {
	return every(fmt.Sprintf("keras.Verbose(%d)", n), func(c *runConfig) error {
		if n < 0 || n > 2 {
			return fmt.Errorf("Verbose(%d): use 0, 1 or 2", n)
		}
		c.verbose = n
		return nil
	})
}

// parseRun applies the options of call op (each already of op's option type).
func parseRun(op string, opts []*runOption) *runConfig {
	c := &runConfig{epochs: 1, verbose: 1}
	for _, o := range opts {
		if err := o.set(c); err != nil {
			panic(fmt.Errorf("%w: %s: %v", ErrInvalidArgument, op, err))
		}
		c.given = append(c.given, o)
	}
	return c
}

// checkTrainer returns an error naming the first option given to Fit that the model's
// trainer does not take (an option of another strategy's training).
func (c *runConfig) checkTrainer(m *Model, eng trainer) error {
	for _, o := range c.given {
		if o.trainer != "" && o.trainer != eng.kind() {
			return fmt.Errorf("%w: Fit: %s applies to training under %s; model %s trains under %s: drop it",
				ErrInvalidArgument, o.name, o.trainer, m.name, m.strategy.Name())
		}
	}
	return nil
}

// stats are the sums of one or more batches: the loss and every metric's (sum, count).
type stats struct {
	lossSum, n float64
	metrics    [][2]float64
}

func (s *stats) add(o stats) {
	s.lossSum += o.lossSum
	s.n += o.n
	if s.metrics == nil {
		s.metrics = make([][2]float64, len(o.metrics))
	}
	for i, m := range o.metrics {
		s.metrics[i][0] += m[0]
		s.metrics[i][1] += m[1]
	}
}

// logs returns the means: "loss" and each metric by name.
func (m *Model) logsOf(s stats, prefix string) Logs {
	l := Logs{}
	if s.n > 0 {
		l[prefix+"loss"] = s.lossSum / s.n
	} else {
		l[prefix+"loss"] = 0
	}
	for i, name := range m.metricNames() {
		v := 0.0
		if i < len(s.metrics) && s.metrics[i][1] > 0 {
			v = s.metrics[i][0] / s.metrics[i][1]
		}
		l[prefix+name] = v
	}
	return l
}

func (m *Model) metricNames() []string {
	out := make([]string, len(m.metrics))
	for i, name := range m.metrics {
		mt, _ := compiledMetric(name, m.loss)
		out[i] = mt.name
	}
	return out
}

func (m *Model) compiledMetrics() []*Metric {
	out := make([]*Metric, len(m.metrics))
	for i, name := range m.metrics {
		out[i], _ = compiledMetric(name, m.loss)
	}
	return out
}

// splitXY returns the inputs and labels of a dataset element.
func splitXY(op string, el data.Element, needY bool) (x, y *tensor.Tensor) {
	switch {
	case len(el) >= 2:
		return el[0], el[1]
	case len(el) == 1 && !needY:
		return el[0], nil
	}
	panic(fmt.Errorf("%w: %s needs dataset elements of (inputs, labels); got %d components", ErrShape, op, len(el)))
}

// checkBatch reports inputs and labels that are not one batch.
func checkBatch(op string, x, y *tensor.Tensor) error {
	if y.Rank() == 0 || x.Rank() < 2 {
		return fmt.Errorf("%w: %s got inputs %v and labels %v, one example rather than a batch; batch the dataset with ds.Batch(n, false)", ErrShape, op, x.Shape(), y.Shape())
	}
	if x.Shape()[0] != y.Shape()[0] {
		return fmt.Errorf("%w: %s: inputs %v and labels %v must share their batch size", ErrShape, op, x.Shape(), y.Shape())
	}
	return nil
}

// shardStats computes the per-example losses, their sum and the metrics of one shard.
func (m *Model) shardStats(metrics []*Metric, y, pred, perEx *tensor.Tensor) []float32 {
	y = compiledLabels(y, pred)
	out := make([]float32, 2+2*len(metrics))
	for _, v := range perEx.Data() {
		out[0] += v
	}
	out[1] = float32(pred.Shape()[0])
	for i, mt := range metrics {
		if out[1] == 0 {
			continue
		}
		s, n := mt.batchStats(y, pred)
		out[2+2*i], out[3+2*i] = float32(s), float32(n)
	}
	return out
}

func statsFrom(v []float32) stats {
	s := stats{lossSum: float64(v[0]), n: float64(v[1])}
	for i := 2; i+1 < len(v); i += 2 {
		s.metrics = append(s.metrics, [2]float64{float64(v[i]), float64(v[i+1])})
	}
	return s
}

// trainStep runs one global batch through the strategy and applies the gradients. With
// global > 0, el holds only this worker's rows of a global batch of global rows (taken by
// syncTrainer.pickRows); else el is the global batch.
func (m *Model) trainStep(ctx context.Context, el data.Element, metrics []*Metric, global int, paths stepPaths) (stats, error) {
	x, y := splitXY("Fit", el, true)
	if err := checkBatch("Fit", x, y); err != nil {
		return stats{}, err
	}
	m.ensureBuilt(x)
	globalBatch := global
	if global == 0 {
		var err error
		if x, y, globalBatch, err = m.workerShare(m.mw.train, x, y, true); err != nil {
			return stats{}, err
		}
	}
	devs := m.strategy.ExtendedReplicaDevices()
	local := len(devs)
	shards, err := distribute.SplitBatch(data.Element{x, y}, local)
	if err != nil {
		return stats{}, err
	}
	m.mu.Lock()
	m.step++
	seed := mix(m.seed, uint64(m.step))
	m.mu.Unlock()
	if st, ok, err := m.trainStepBuckets(ctx, paths.buckets, x, y, globalBatch, seed, metrics); ok {
		return st, err
	}

	nTrain := len(m.TrainableVariables())
	perReplica := make([][]*tensor.Tensor, local)
	replicaVars := make([][]*tensor.Variable, local)
	for r := range local {
		replicaVars[r] = m.variables(m.copyFor(r), true)
	}
	bufs := m.gradBuffers(replicaVars)
	reuse := m.stepReuse(local)
	err = m.strategy.ExtendedRunReplicas(ctx, func(r int) error {
		c := m.copyFor(r)
		xs, ys := shards[r][0].To(devs[r]), shards[r][1].To(devs[r])
		vars := replicaVars[r]
		out := make([]*tensor.Tensor, 0, nTrain+1)
		if xs.Shape()[0] == 0 {
			for _, v := range vars {
				out = append(out, tensor.Zeros(v.Shape()...))
			}
			st := make([]float32, 2+2*len(metrics))
			perReplica[r] = append(out, tensor.MustNew([]int{len(st)}, st))
			return nil
		}
		tape := tensor.NewGradientTape()
		pred := m.forwardRead(ctx, c, xs, true, mix(seed, uint64(r)), (*tensor.Variable).StepValue, reuse[r])
		perEx := m.compiledPerExample(ys, pred)
		st := m.shardStats(metrics, ys, pred, perEx)
		loss := withPenalty(tensor.Scale(tensor.ReduceSum(perEx), 1/float32(globalBatch)), m.regularization(stepValuesOf(m.vars[c])), st, globalBatch)
		// With several replicas the optimizer reads every replica's gradients (terms) from
		// the other cores too, so a kept buffer's lines sit in another core's cache when the
		// next step writes it: streaming stores take the lines without reading them first
		// (bench/RESULTS.md, keras, "Mirrored's replicas write their kept gradients with
		// streaming stores"). One replica's buffers are still in its own caches: ordinary stores.
		into := tape.GradientInto
		if local > 1 {
			into = tape.GradientIntoStreaming
		}
		grads := into(loss, bufs[r], vars)
		for i, g := range grads {
			if g == nil {
				g = tensor.Zeros(vars[i].Shape()...)
			}
			out = append(out, g)
		}
		perReplica[r] = append(out, tensor.MustNew([]int{len(st)}, st))
		return nil
	})
	if err != nil {
		return stats{}, err
	}
	if paths.terms != nil && local > 1 {
		terms, ok, err := paths.terms.ExtendedSumTerms(perReplica)
		if err != nil {
			return stats{}, fmt.Errorf("keras: all-reduce gradients: %w", err)
		}
		if ok {
			return m.applyReplicaTerms(terms, nTrain)
		}
	}
	// One replica in one worker: the sum over replicas is the replica's own list.
	reduced := perReplica
	if _, workers := m.strategy.ExtendedWorker(); local > 1 || workers > 1 {
		reduced, err = m.strategy.ExtendedAllReduce(ctx, distribute.ReduceSum, perReplica)
		if err != nil {
			return stats{}, fmt.Errorf("keras: all-reduce gradients: %w", err)
		}
	}
	grads := make([][]*tensor.Tensor, len(m.vars))
	vars := make([][]*tensor.Variable, len(m.vars))
	for c := range m.vars {
		grads[c] = reduced[c][:nTrain]
		vars[c] = m.variables(c, true)
	}
	if err := m.optimizer.applyReplicas(grads, vars); err != nil {
		return stats{}, err
	}
	return statsFrom(reduced[0][nTrain].Data()), nil
}

// gradBuffers returns, for each replica, one buffer per trainable variable of its copy
// (replicaVars[r]), for tape.GradientInto: the gradients of a step are all-reduced and
// applied within the step, so the buffers are kept from step to step: a dense kernel's
// gradient, which the backward pass writes there directly, makes no garbage.
// They are made again when the trainable variables change.
func (m *Model) gradBuffers(replicaVars [][]*tensor.Variable) [][][]float32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.grads) != len(replicaVars) {
		m.grads = make([][][]float32, len(replicaVars))
	}
	for r, vars := range replicaVars {
		ok := len(m.grads[r]) == len(vars)
		for i := 0; ok && i < len(vars); i++ {
			ok = len(m.grads[r][i]) == vars[i].Size()
		}
		if !ok {
			m.grads[r] = make([][]float32, len(vars))
			for i, v := range vars {
				m.grads[r][i] = make([]float32, v.Size())
			}
		}
	}
	return m.grads
}

// stepReuse returns, for each of the replicas, one tensor.Reuse per layer: the storage
// of the outputs that only the step reads (applyLayers), kept from step to step. A step's
// tensors are all dead once it is over: its tape is gone, and what it hands on (the
// gradients, the statistics) is in storage of its own. The last step's storage lives as
// long as the model.
func (m *Model) stepReuse(replicas int) [][]*tensor.Reuse {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.reuse) != replicas || len(m.reuse[0]) != len(m.layers) {
		m.reuse = make([][]*tensor.Reuse, replicas)
		for r := range m.reuse {
			m.reuse[r] = make([]*tensor.Reuse, len(m.layers))
			for i := range m.reuse[r] {
				m.reuse[r][i] = new(tensor.Reuse)
			}
		}
	}
	return m.reuse
}

// testStep evaluates one global batch through the strategy.
func (m *Model) testStep(ctx context.Context, el data.Element, metrics []*Metric) (stats, error) {
	x, y := splitXY("Evaluate", el, true)
	if err := checkBatch("Evaluate", x, y); err != nil {
		return stats{}, err
	}
	m.ensureBuilt(x)
	x, y, _, err := m.workerShare(m.mw.eval, x, y, false)
	if err != nil {
		return stats{}, err
	}
	devs := m.strategy.ExtendedReplicaDevices()
	shards, err := distribute.SplitBatch(data.Element{x, y}, len(devs))
	if err != nil {
		return stats{}, err
	}
	perReplica := make([][]*tensor.Tensor, len(devs))
	err = m.strategy.ExtendedRunReplicas(ctx, func(r int) error {
		st := make([]float32, 2+2*len(metrics))
		if xs := shards[r][0]; xs.Shape()[0] > 0 {
			xs = xs.To(devs[r])
			ys := shards[r][1].To(devs[r])
			pred := tensor.StopGradient(m.forward(ctx, m.copyFor(r), xs, false, 0))
			st = m.shardStats(metrics, ys, pred, m.compiledPerExample(ys, pred))
		}
		perReplica[r] = []*tensor.Tensor{tensor.MustNew([]int{len(st)}, st)}
		return nil
	})
	if err != nil {
		return stats{}, err
	}
	reduced, err := m.strategy.ExtendedAllReduce(ctx, distribute.ReduceSum, perReplica)
	if err != nil {
		return stats{}, fmt.Errorf("keras: all-reduce metrics: %w", err)
	}
	return statsFrom(reduced[0][0].Data()), nil
}

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
	m.mw.resume = 0
	f.trainBegin()
	start := max(cfg.initialEpoch, m.mw.resume) // BackupAndRestore resumes after its backup
	m.mw.resume = 0
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
			if done { // the batches' storage takes the next ones (garbage a step: bench/RESULTS.md, multiworker "2026-11-28")
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
		f.epochEnd(epoch, steps, total)
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
}

// newFitLoop prepares the History and the callbacks of a Fit over ds and clears
// m.StopTraining.
func (m *Model) newFitLoop(ctx context.Context, cfg *runConfig, ds *data.Dataset) *fitLoop {
	f := &fitLoop{ctx: ctx, m: m, cfg: cfg, hist: newHistory(), target: cfg.steps}
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
func (f *fitLoop) epochEnd(epoch, steps int, total stats) {
	if f.target == 0 {
		f.target = steps
		f.hist.Params["steps"] = steps
	}
	f.logs = f.m.logsOf(total, "")
	if f.cfg.validation != nil {
		vl := f.m.evaluate(f.ctx, f.cfg.validation, f.cfg.validationSteps, nil, nil)
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
	if _, workers := f.m.strategy.ExtendedWorker(); workers > 1 {
		if err := f.m.syncWorkers(f.ctx); err != nil && f.ctx.Err() == nil {
			panic(fmt.Errorf("keras: Fit epoch %d: waiting for the other workers after the epoch's callbacks: %w", epoch+1, err))
		}
	}
}

// syncWorkers returns once every worker has called it: an all-reduce of one value.
func (m *Model) syncWorkers(ctx context.Context) error {
	per := make([][]*tensor.Tensor, len(m.strategy.ExtendedReplicaDevices()))
	for r := range per {
		per[r] = []*tensor.Tensor{tensor.Scalar(0)}
	}
	_, err := m.strategy.ExtendedAllReduce(ctx, distribute.ReduceSum, per)
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
		m.ensureBuilt(x)
		devs := m.strategy.ExtendedReplicaDevices()
		shards, err := distribute.SplitBatch(data.Element{x}, len(devs))
		if err != nil {
			panic(fmt.Errorf("keras: Predict: %w", err))
		}
		parts := make([]*tensor.Tensor, len(devs))
		if err := m.strategy.ExtendedRunReplicas(ctx, func(r int) error {
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
