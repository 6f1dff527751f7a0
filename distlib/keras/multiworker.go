package keras

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"godist/distlib/data"
	"godist/distlib/distribute"
	"godist/distlib/tensor"
)

// How Fit trains across workers (MultiWorkerMirroredStrategy in several processes).
//
// The dataset given to Fit yields global batches, as in TensorFlow. Its AutoShardPolicy says
// what each worker trains on:
//
//   - DATA: every worker reads the same global batches and keeps its 1/N share of each one,
//     so N workers with per-worker batch B/N take exactly the steps of one worker with batch B.
//   - AUTO: FILE when the source reads files, else DATA. Datasets here are built in memory,
//     so AUTO is DATA, with one short warning (TensorFlow prints a page of text).
//   - FILE: sharding by input file; a dataset that reads no files is refused with an error.
//   - OFF and HINT (no Shard hint exists here): every worker trains on every example of each
//     global batch; the global batch is then N times the dataset's batch.
//
// The loss of a worker's share is divided by the global batch size, so that the sum of the
// workers' gradients is the gradient of the mean loss. With one replica per worker, the
// gradients go to a bucketed all-reduce (distribute.GradientBucketer); with more than one P
// the backward pass runs layer by layer and hands every layer's gradients over as soon as
// they are computed, so that the buckets of the last layers travel while the first layers'
// gradients are still being computed (with GOMAXPROCS=1 it is one pass: overlapBackward).
// The batch statistics (loss and metric sums and counts) ride in the first bucket, so the
// logs of every worker are the means over the whole global batch.

// gradientBucketBytes is the bucket size of the overlapped all-reduce: small enough that a
// model of a few layers gets several buckets, large enough that each ring pass is worth it.
var gradientBucketBytes = 256 << 10

// overlapBackward reports whether backwardInBuckets splits the backward pass into segments
// so that the all-reduce of the last layers' gradients overlaps the backward pass of the
// first ones. That takes a second P: with GOMAXPROCS=1 the bucket goroutines and the
// transport's receivers only run once the backward pass blocks in Wait, so nothing
// overlaps, while each segment boundary costs extra work (a multiply and sum over its
// activations, a persistent tape, more garbage); with one P the backward pass is one
// tape.Gradient call, and all buckets start when it ends. Even with a second P the overlap
// pays only on an idle core, not when every core runs a worker (bench/RESULTS.md,
// multiworker, "One compute thread with a second P").
var overlapBackward = func() bool { return runtime.GOMAXPROCS(0) > 1 }

// shardMode is what a worker takes from a global batch.
type shardMode int

const (
	shardNone  shardMode = iota // a single worker: the whole batch
	shardData                   // this worker's share of every batch
	shardWhole                  // every worker takes the whole batch (OFF)
)

// multiWorker is the model's state for training across workers.
type multiWorker struct {
	train, eval shardMode
	bucketer    distribute.GradientBucketer
	sizes       []int // the bucketer's tensor sizes
	resume      int   // the epoch Fit starts at, set by BackupAndRestore (0: none)
	joined      int   // the epoch Fit starts at, for a worker admitted into an elastic job later (0: none)
	balance     workerBalance
}

// groupChanged drops what belonged to the old group of workers (elastic training): the
// bucketer, made for its ranks, and the balance's speeds, one per worker.
func (mw *multiWorker) groupChanged() {
	mw.bucketer, mw.sizes = nil, nil
	mw.balance.speed, mw.balance.active = nil, false
}

// BalanceWorkers sets whether Fit under MultiWorkerMirroredStrategy splits every global
// batch between the workers in proportion to their speed (default false: equal shares, as
// TensorFlow does). Workers in sync wait for the slowest at every step, so on machines or
// cores of unequal speed the faster ones idle; balanced, each worker's share follows its
// measured examples per second (smoothed over steps, agreed by all workers through the
// step's all-reduce). The step's gradient is the same sum over the same global batch,
// only grouped differently (the loss is divided by the global batch size either way), so
// the training is the same up to the order of floating-point sums, and the dropout masks
// drawn. It is off by default because that order then depends on timing: two runs with
// the same seed no longer give bit-identical weights. It applies to the DATA shard policy
// with one replica per worker, and to global batches of at least 4 examples per worker;
// otherwise shares stay equal.
func BalanceWorkers(on bool) FitOption {
	return fitOnly(fmt.Sprintf("keras.BalanceWorkers(%v)", on), syncTrainerKind, func(c *runConfig) error {
		c.balanceWorkers = on
		return nil
	})
}

// workerBalance is BalanceWorkers's state during a Fit: every worker's smoothed speed, the
// same on every worker (computed from the all-reduced step times).
type workerBalance struct {
	enabled bool      // BalanceWorkers(true) for this Fit
	active  bool      // the training steps take the bucketed path, which exchanges the times
	speed   []float64 // examples per second per worker; nil until the first exchange
}

// balanceSmoothing is the weight of a step's own speed in the smoothed speed.
const balanceSmoothing = 0.3

// shares returns the rows of a global batch of b rows each of n workers trains on: equal
// shares (distribute.SplitBatch's) until speeds are known or when the batch has fewer
// than 4 rows per worker, else shares in proportion to the speeds with at least b/(4n)
// rows each.
func (wb *workerBalance) shares(n, b int) []int {
	sizes := make([]int, n)
	if !wb.active || len(wb.speed) != n || b < 4*n {
		for r := range sizes {
			sizes[r] = b / n
			if r < b%n {
				sizes[r]++
			}
		}
		return sizes
	}
	floor := b / (4 * n)
	total := 0.0
	for _, v := range wb.speed {
		total += v
	}
	left := b - n*floor
	given := 0
	for r := range sizes {
		extra := int(float64(left) * wb.speed[r] / total)
		sizes[r] = floor + extra
		given += extra
	}
	for r := 0; given < left; r = (r + 1) % n {
		sizes[r]++
		given++
	}
	return sizes
}

// update folds in a step's exchanged rows and seconds (two slots per worker).
func (wb *workerBalance) update(slots []float32) {
	n := len(slots) / 2
	if len(wb.speed) != n {
		wb.speed = make([]float64, n)
	}
	for w := range n {
		rows, secs := float64(slots[2*w]), float64(slots[2*w+1])
		if rows <= 0 || secs <= 0 {
			continue
		}
		if v := rows / secs; wb.speed[w] == 0 {
			wb.speed[w] = v
		} else {
			wb.speed[w] += balanceSmoothing * (v - wb.speed[w])
		}
	}
	for _, v := range wb.speed {
		if v == 0 {
			wb.speed = nil // not every worker measured yet: equal shares
			return
		}
	}
}

// shardModeOf returns how the workers of m's strategy split ds: the strategy applies its
// AutoShardPolicy (the rule ExperimentalDistributeDataset applies too).
func (m *Model) shardModeOf(op string, ds *data.Dataset) shardMode {
	if _, workers := m.strategy.Extended().Worker(); workers <= 1 {
		return shardNone
	}
	shard, err := m.strategy.Extended().AutoShard(op, ds)
	switch {
	case err != nil:
		panic(fmt.Errorf("%w: %v", ErrInvalidArgument, err))
	case shard:
		return shardData
	}
	return shardWhole
}

// workerShare returns the part of a global batch (x, y) this worker trains on and the size
// of the global batch the loss is averaged over. Training steps (train) take the shares of
// BalanceWorkers; evaluation takes equal ones.
func (m *Model) workerShare(mode shardMode, x, y *tensor.Tensor, train bool) (*tensor.Tensor, *tensor.Tensor, int, error) {
	index, workers := m.strategy.Extended().Worker()
	b := x.Shape()[0]
	switch {
	case workers <= 1 || mode == shardNone:
		return x, y, b * max(workers, 1), nil
	case mode == shardWhole:
		return x, y, b * workers, nil
	}
	wb := &workerBalance{}
	if train {
		wb = &m.mw.balance
	}
	parts, err := distribute.SplitBatchSizes(data.Element{x, y}, wb.shares(workers, b))
	if err != nil {
		return nil, nil, 0, err
	}
	return parts[index][0], parts[index][1], b, nil
}

// trainStepBuckets is trainStep for one local replica on several workers: a layer-by-layer
// backward pass whose gradients are all-reduced in buckets while it goes on. ok is false
// when the strategy does not train that way (Fit then uses the general path).
func (m *Model) trainStepBuckets(ctx context.Context, bs distribute.GradientBucketing, x, y *tensor.Tensor, globalBatch int, seed uint64, metrics []*Metric) (st stats, ok bool, err error) {
	devs := m.strategy.Extended().ReplicaDevices()
	_, workers := m.strategy.Extended().Worker()
	if workers <= 1 || len(devs) != 1 || len(m.vars) != 1 || bs == nil {
		return stats{}, false, nil
	}
	vars := m.variables(0, true)
	nTrain := len(vars)
	nStats := 2 + 2*len(metrics)
	// Balanced (BalanceWorkers), the statistics carry every worker's rows and seconds of
	// this step's forward and backward pass, two slots per worker.
	index, _ := m.strategy.Extended().Worker()
	balance := m.mw.balance.enabled && m.mw.train == shardData
	nSlots := 0
	if balance {
		nSlots = 2 * workers
	}
	if m.mw.bucketer == nil || len(m.mw.sizes) != nTrain+1 || m.mw.sizes[0] != nStats+nSlots {
		// Index 0: the batch statistics; then the trainable variables, last layer first, in
		// the order their gradients become ready.
		sizes := make([]int, nTrain+1)
		sizes[0] = nStats + nSlots
		for k, v := range vars {
			sizes[1+nTrain-1-k] = prodInts(v.Shape())
		}
		b, err := bs.GradientBucketer(ctx, sizes, gradientBucketBytes)
		if err != nil {
			return stats{}, true, err
		}
		if b == nil {
			return stats{}, false, nil
		}
		m.mw.bucketer, m.mw.sizes = b, sizes
	}
	b := m.mw.bucketer
	ctx, cancel := context.WithTimeout(ctx, bs.Timeout())
	defer cancel()
	// The gradients are computed into their places in the buckets (the dense layers write
	// their kernel gradients there directly, the tape copies the others in): no fresh
	// buffers, so fewer collections (which stall one worker and so both), and no copies.
	// Values elsewhere (the batch statistics) are copied in by Add. The buckets alternate
	// between two buffers, so the one written lies in memory: the tape writes them with
	// streaming stores (GradientIntoStreaming), which do not read the lines in first
	// (bench/RESULTS.md, multiworker, "the buckets written with streaming stores"). When the
	// workers share memory, the optimizer sums every worker's gradients where they lie as it
	// reads them (WaitTerms, optim.Spec.ApplyTerms): the sum is never written, and the
	// all-reduce is one round of messages.
	fail := func(err error) (stats, bool, error) {
		_, _ = b.WaitTerms(ctx) // drain the buckets already started; the step fails anyway
		return stats{}, true, err
	}
	xs, ys := x.To(devs[0]), y.To(devs[0])
	rows := xs.Shape()[0]
	// The statistics (index 0) go last when balanced, with this step's time appended.
	var st0 []float32
	add := b.Add
	if balance {
		add = func(i int, v []float32) error {
			if i == 0 {
				st0 = append(st0[:0], v...)
				return nil
			}
			return b.Add(i, v)
		}
	}
	start := time.Now()
	if rows == 0 {
		// This worker's share is empty (a global batch smaller than the number of workers).
		if err := add(0, make([]float32, nStats)); err != nil {
			return fail(err)
		}
		for k, v := range vars {
			if err := add(1+nTrain-1-k, make([]float32, prodInts(v.Shape()))); err != nil {
				return fail(err)
			}
		}
	} else if err := m.backwardInBuckets(xs, ys, globalBatch, mix(seed, 0), metrics, b.Buffer, add); err != nil {
		return fail(err)
	}
	if balance {
		st0 = append(st0, make([]float32, nSlots)...)
		st0[nStats+2*index] = float32(rows)
		st0[nStats+2*index+1] = float32(time.Since(start).Seconds())
		if err := b.Add(0, st0); err != nil {
			return fail(err)
		}
	}
	terms, err := b.WaitTerms(ctx)
	if err != nil {
		return stats{}, true, fmt.Errorf("all-reduce gradients: %w", err)
	}
	grads := make([]gradTerms, nTrain)
	shared := false
	for k := range vars {
		grads[k] = terms[1+nTrain-1-k]
		shared = shared || len(grads[k]) > 1
	}
	if shared {
		m.counters.sharedTermSteps.Add(1)
	}
	if err := m.optimizer.applyTerms([][]gradTerms{grads}, [][]*tensor.Variable{vars}); err != nil {
		return stats{}, true, err
	}
	sums := sumInOrder(terms[0])
	if balance {
		m.mw.balance.active = true
		m.mw.balance.update(sums[nStats:])
	}
	return statsFrom(sums[:nStats]), true, nil
}

// backwardInBuckets runs the forward pass in segments (a layer with variables and the
// variable-free layers after it), then the backward pass segment by segment from the
// last, handing each trainable variable's gradient to add as soon as it is known. The
// gradients are computed into buffer(i), where add finds them in place.
func (m *Model) backwardInBuckets(xs, ys *tensor.Tensor, globalBatch int, stepSeed uint64, metrics []*Metric, buffer func(i int) []float32, add func(i int, v []float32) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if e, ok := r.(error); ok {
				err = e
				return
			}
			err = fmt.Errorf("keras: %v", r)
		}
	}()
	if got := xs.Shape(); !sameInts(got[1:], m.inputShape) {
		return fmt.Errorf("%w: model %s expects examples of shape %v, got a batch of shape %v", ErrShape, m.name, m.inputShape, got)
	}
	type segment struct {
		first, end int            // layers [first, end)
		in, out    *tensor.Tensor // in is watched (except the first segment's)
		vars       []*tensor.Variable
		index      []int // bucketer index of each of vars
	}
	all := m.vars[0]
	nTrain := 0
	for _, p := range m.params {
		if p.trainable {
			nTrain++
		}
	}
	// A layer with variables starts a new segment once the current one has trainable
	// variables: the leading variable-free layers (Input, Rescaling, ...) join the first
	// segment with variables, so that no segment asks for the gradient of an input that no
	// variable depends on (for a first Conv2D, that would be a matrix multiply and a col2im
	// over the whole batch of images, thrown away). With a single P, everything is one
	// segment (see overlapBackward).
	split := overlapBackward()
	var segs []*segment
	k := 0 // trainable variable counter
	for i := range m.layers {
		r := m.paramRange[i]
		if len(segs) == 0 || (split && r[1] > r[0] && len(segs[len(segs)-1].vars) > 0) {
			segs = append(segs, &segment{first: i, end: i})
		}
		s := segs[len(segs)-1]
		s.end = i + 1
		for j := r[0]; j < r[1]; j++ {
			if m.params[j].trainable {
				s.vars = append(s.vars, all[j])
				s.index = append(s.index, 1+nTrain-1-k)
				k++
			}
		}
	}
	reuse := m.stepReuse(1)[0]
	tape := tensor.NewGradientTape()
	if len(segs) > 1 {
		tape = tensor.NewPersistentGradientTape()
	}
	h := xs
	for si, s := range segs {
		if si > 0 {
			h = tensor.StopGradient(h)
			tape.Watch(h)
		}
		s.in = h
		h = m.applyLayers(h, s.first, s.end, func(i int) []*tensor.Tensor {
			return stepValuesOf(all[m.paramRange[i][0]:m.paramRange[i][1]])
		}, true, stepSeed, reuse)
		s.out = h
	}
	pred := h
	perEx := m.compiledPerExample(ys, pred)
	loss := tensor.Scale(tensor.ReduceSum(perEx), 1/float32(globalBatch))
	st := m.shardStats(metrics, ys, pred, perEx)
	vals := stepValuesOf(all)
	if reg := m.regularization(vals); reg != nil {
		st[0] += reg.Item() * float32(globalBatch)
	}
	if err := add(0, st); err != nil {
		return err
	}
	var g *tensor.Tensor // gradient of the loss with respect to the current segment's output
	for si := len(segs) - 1; si >= 0; si-- {
		s := segs[si]
		target := loss
		if si < len(segs)-1 {
			if g == nil { // the later segments do not depend on this one
				g = tensor.Zeros(s.out.Shape()...)
			}
			target = tensor.ReduceSum(tensor.Mul(s.out, g))
		}
		// The penalties of the segment's layers join its target: their gradients reach
		// the segment's variables only.
		if reg := m.penalties(s.first, s.end, vals); reg != nil {
			target = tensor.Add(target, reg)
		}
		srcs := make([]any, 0, len(s.vars)+1)
		for _, v := range s.vars {
			srcs = append(srcs, v)
		}
		if si > 0 {
			srcs = append(srcs, s.in)
		}
		if len(srcs) == 0 {
			continue
		}
		into := make([][]float32, len(srcs)) // the segment's input (last source) gets a fresh tensor
		for j := range s.vars {
			into[j] = buffer(s.index[j])
		}
		grads := tape.GradientIntoStreaming(target, into, srcs...)
		for j, v := range s.vars {
			gv := grads[j]
			if gv == nil {
				gv = tensor.Zeros(v.Shape()...)
			}
			if err := add(s.index[j], gv.Data()); err != nil {
				return err
			}
		}
		if si > 0 {
			g = grads[len(s.vars)]
		}
	}
	return nil
}
