package keras

import (
	"context"
	"fmt"

	"godist/distlib/data"
	"godist/distlib/distribute"
	"godist/distlib/tensor"
)

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
	m.ensureBuiltContext(ctx, x)
	globalBatch := global
	if global == 0 {
		var err error
		if x, y, globalBatch, err = m.workerShare(m.mw.train, x, y, true); err != nil {
			return stats{}, err
		}
	}
	devs := m.strategy.Extended().ReplicaDevices()
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
	err = m.strategy.Extended().RunReplicas(ctx, func(r int) error {
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
		terms, ok, err := paths.terms.SumTerms(perReplica)
		if err != nil {
			return stats{}, fmt.Errorf("keras: all-reduce gradients: %w", err)
		}
		if ok {
			return m.applyReplicaTerms(terms, nTrain)
		}
	}
	// One replica in one worker: the sum over replicas is the replica's own list.
	reduced := perReplica
	if _, workers := m.strategy.Extended().Worker(); local > 1 || workers > 1 {
		reduced, err = m.strategy.Extended().AllReduce(ctx, distribute.ReduceSum, perReplica)
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
	m.ensureBuiltContext(ctx, x)
	x, y, _, err := m.workerShare(m.mw.eval, x, y, false)
	if err != nil {
		return stats{}, err
	}
	devs := m.strategy.Extended().ReplicaDevices()
	shards, err := distribute.SplitBatch(data.Element{x, y}, len(devs))
	if err != nil {
		return stats{}, err
	}
	perReplica := make([][]*tensor.Tensor, len(devs))
	err = m.strategy.Extended().RunReplicas(ctx, func(r int) error {
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
	reduced, err := m.strategy.Extended().AllReduce(ctx, distribute.ReduceSum, perReplica)
	if err != nil {
		return stats{}, fmt.Errorf("keras: all-reduce metrics: %w", err)
	}
	return statsFrom(reduced[0][0].Data()), nil
}
