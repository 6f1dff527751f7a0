package distribute

import (
	"errors"
	"fmt"
	"sync"

	"godist/distlib/data"
	"godist/distlib/tensor"
)

// InputContext tells a dataset function of DistributeDatasetsFromFunction which input
// pipeline it builds, like tf.distribute.InputContext.
type InputContext struct {
	// NumInputPipelines is the number of input pipelines (workers).
	NumInputPipelines int
	// InputPipelineID is this pipeline's index, in [0, NumInputPipelines).
	InputPipelineID int
	// NumReplicasInSync is the number of replicas in sync across all workers.
	NumReplicasInSync int
}

// GetPerReplicaBatchSize returns globalBatchSize / NumReplicasInSync; it panics with
// ErrBatchSize when the division is not exact, as TensorFlow raises ValueError.
func (c *InputContext) GetPerReplicaBatchSize(globalBatchSize int) int {
	if c.NumReplicasInSync < 1 {
		panic(fmt.Errorf("%w: InputContext has NumReplicasInSync %d", ErrBatchSize, c.NumReplicasInSync))
	}
	if globalBatchSize%c.NumReplicasInSync != 0 || globalBatchSize < 0 {
		panic(fmt.Errorf("%w: the global batch size %d is not divisible by num_replicas_in_sync %d",
			ErrBatchSize, globalBatchSize, c.NumReplicasInSync))
	}
	return globalBatchSize / c.NumReplicasInSync
}

// String formats the context like TensorFlow.
func (c *InputContext) String() string {
	return fmt.Sprintf("InputContext(num_input_pipelines=%d, input_pipeline_id=%d, num_replicas_in_sync=%d)",
		c.NumInputPipelines, c.InputPipelineID, c.NumReplicasInSync)
}

// SplitBatch splits every tensor of a global batch along its first dimension into n
// per-replica parts, as evenly as possible: the first B%n parts get one example more
// (a batch of 5 over 2 replicas gives 3 and 2; a batch smaller than n leaves some replicas
// an empty batch with 0 rows). The parts share the batch's storage.
func SplitBatch(el data.Element, n int) ([]data.Element, error) {
	if n < 1 {
		return nil, fmt.Errorf("%w: SplitBatch into %d parts; need at least 1", ErrBatchSize, n)
	}
	batch, err := batchRows("SplitBatch", el)
	if err != nil {
		return nil, err
	}
	return splitRows(el, evenSizes(batch, n)), nil
}

// PartRows returns the rows [lo, hi) that parts [first, end) of a batch split into parts
// of sizes rows (SplitBatchSizes) cover: one worker's share of a global batch, for
// data.Iterator.NextRows.
func PartRows(sizes []int, first, end int) (lo, hi int) {
	for _, s := range sizes[:first] {
		lo += s
	}
	hi = lo
	for _, s := range sizes[first:end] {
		hi += s
	}
	return lo, hi
}

// evenSizes is SplitBatch's split of batch rows into n parts.
func evenSizes(batch, n int) []int {
	sizes := make([]int, n)
	for r := range sizes {
		sizes[r] = batch / n
		if r < batch%n {
			sizes[r]++
		}
	}
	return sizes
}

// SplitBatchSizes splits every tensor of a global batch along its first dimension into
// parts of the given sizes, in order (their sum must be the batch size). The parts share
// the batch's storage.
func SplitBatchSizes(el data.Element, sizes []int) ([]data.Element, error) {
	batch, err := batchRows("SplitBatchSizes", el)
	if err != nil {
		return nil, err
	}
	sum := 0
	for r, n := range sizes {
		if n < 0 {
			return nil, fmt.Errorf("%w: SplitBatchSizes: part %d has %d rows", ErrBatchSize, r, n)
		}
		sum += n
	}
	if len(el) > 0 && sum != batch {
		return nil, fmt.Errorf("%w: SplitBatchSizes: parts of %v rows (%d in all) for a batch of %d", ErrBatchSize, sizes, sum, batch)
	}
	return splitRows(el, sizes), nil
}

// batchRows checks that every component of el is a batch of the same size and returns it
// (-1 for an element without components).
func batchRows(op string, el data.Element) (int, error) {
	batch := -1
	for i, t := range el {
		if t == nil {
			return 0, fmt.Errorf("%w: %s: component %d is nil", ErrBatchSize, op, i)
		}
		if t.Rank() == 0 {
			return 0, fmt.Errorf("%w: %s: component %d is a scalar; batch the dataset before distributing it", ErrBatchSize, op, i)
		}
		b := t.Shape()[0]
		if batch >= 0 && b != batch {
			return 0, fmt.Errorf("%w: %s: component %d has batch size %d, component 0 has %d", ErrBatchSize, op, i, b, batch)
		}
		batch = b
	}
	return batch, nil
}

// splitRows cuts el into consecutive parts of sizes rows (checked by the caller).
func splitRows(el data.Element, sizes []int) []data.Element {
	out := make([]data.Element, len(sizes))
	if len(el) == 0 {
		return out
	}
	off := 0
	for r, size := range sizes {
		part := make(data.Element, len(el))
		for i, t := range el {
			part[i] = sliceRows(t, off, off+size)
		}
		out[r] = part
		off += size
	}
	return out
}

// sliceRows returns rows [lo, hi) of t along axis 0, sharing t's storage.
func sliceRows(t *tensor.Tensor, lo, hi int) *tensor.Tensor {
	shape := t.Shape()
	stride := 1
	for _, d := range shape[1:] {
		stride *= d
	}
	shape[0] = hi - lo
	return newOn(t.Device(), shape, t.Data()[lo*stride:hi*stride])
}

// emptyLike returns an element shaped like el with 0 rows.
func emptyLike(el data.Element) data.Element {
	out := make(data.Element, len(el))
	for i, t := range el {
		out[i] = sliceRows(t, 0, 0)
	}
	return out
}

// DistributedDataset is a dataset whose iteration yields one DistributedValue per step:
// every local replica's part of the input, like tf.distribute.DistributedDataset.
type DistributedDataset struct {
	b        *base
	global   *data.Dataset // split mode: global batches
	pipeline *data.Dataset // pipeline mode: per-replica batches, consecutive elements
	ctx      *InputContext
	shard    bool // multi-worker: take this worker's share of each global batch
}

// Iterator starts a pass over the dataset.
func (d *DistributedDataset) Iterator() *DistributedIterator {
	it := &DistributedIterator{d: d}
	if d.global != nil {
		it.it = d.global.Iterator()
	} else {
		it.it = d.pipeline.Iterator()
	}
	return it
}

// Cardinality returns the number of steps of one pass, or data.InfiniteCardinality /
// data.UnknownCardinality.
func (d *DistributedDataset) Cardinality() int {
	if d.global != nil {
		return d.global.Cardinality()
	}
	c := d.pipeline.Cardinality()
	if c < 0 {
		return c
	}
	n := len(d.b.devices)
	return (c + n - 1) / n
}

// InputContext returns the context the dataset function received (nil for
// ExperimentalDistributeDataset).
func (d *DistributedDataset) InputContext() *InputContext { return d.ctx }

// String describes the dataset.
func (d *DistributedDataset) String() string {
	if d.global != nil {
		return fmt.Sprintf("<DistributedDataset replicas=%d global=%v>", len(d.b.devices), d.global)
	}
	return fmt.Sprintf("<DistributedDatasetsFromFunction replicas=%d %v per_replica=%v>", len(d.b.devices), d.ctx, d.pipeline)
}

// DistributedIterator yields the steps of a DistributedDataset. It is used by one goroutine.
type DistributedIterator struct {
	d      *DistributedDataset
	it     *data.Iterator
	closed bool
}

// Next returns the next step's per-replica inputs and true, or nil and false at the end.
// It panics when a batch cannot be split (components with different batch sizes).
func (it *DistributedIterator) Next() (*DistributedValue, bool) {
	if it.closed {
		return nil, false
	}
	n := len(it.d.b.devices)
	if it.d.global != nil {
		b := it.d.b
		if !it.d.shard {
			el, ok := it.it.Next()
			if !ok {
				it.Close()
				return nil, false
			}
			parts, err := SplitBatch(el, n)
			if err != nil {
				it.Close()
				panic(err)
			}
			return it.place(parts), true
		}
		// This worker's replicas take their slices of the global batch; where the
		// pipeline ends in Batch, only this worker's rows are stacked (NextRows).
		var mine []int // the sizes of this worker's replicas' slices, once the rows are picked
		el, _, ok := it.it.NextRows(func(count int) (lo, hi int) {
			all := evenSizes(count, b.NumReplicasInSync())
			mine = all[b.worker*n : (b.worker+1)*n]
			return PartRows(all, b.worker*n, (b.worker+1)*n)
		})
		if !ok {
			it.Close()
			return nil, false
		}
		var parts []data.Element
		var err error
		if mine != nil {
			parts, err = SplitBatchSizes(el, mine)
		} else if parts, err = SplitBatch(el, b.NumReplicasInSync()); err == nil {
			parts = parts[b.worker*n : (b.worker+1)*n]
		}
		if err != nil {
			it.Close()
			panic(err)
		}
		return it.place(parts), true
	}
	parts := make([]data.Element, n)
	got := 0
	for r := 0; r < n; r++ {
		el, ok := it.it.Next()
		if !ok {
			break
		}
		parts[r] = el
		got++
	}
	if got == 0 {
		it.Close()
		return nil, false
	}
	for r := got; r < n; r++ {
		parts[r] = emptyLike(parts[0])
	}
	return it.place(parts), true
}

// place puts each replica's tensors on its device.
func (it *DistributedIterator) place(parts []data.Element) *DistributedValue {
	for r, el := range parts {
		dev := it.d.b.devices[r]
		for i, t := range el {
			if t != nil && t.Device() != dev {
				el[i] = newOn(dev, t.Shape(), t.Data())
			}
		}
	}
	return &DistributedValue{values: parts}
}

// Close ends the pass; it is safe to call more than once.
func (it *DistributedIterator) Close() {
	if it.closed {
		return
	}
	it.closed = true
	it.it.Close()
}

// ExperimentalDistributeDataset returns a dataset that splits each global batch of ds
// across the replicas. With several workers, ds's AutoShardPolicy says what each worker
// takes (StrategyExtended.AutoShard: the same rule as keras' Fit): its replicas' share of every
// global batch (DATA, and AUTO for in-memory sources), or the whole global batch split
// among its own replicas (OFF, HINT). FILE panics: the source reads no files.
func (b *base) ExperimentalDistributeDataset(ds *data.Dataset) *DistributedDataset {
	if ds == nil {
		panic(fmt.Errorf("%w: ExperimentalDistributeDataset of a nil dataset", ErrBatchSize))
	}
	shard, err := b.autoShard("ExperimentalDistributeDataset", ds)
	if err != nil {
		panic(err)
	}
	return &DistributedDataset{b: b, global: ds, shard: shard}
}

// ErrAutoShard reports an auto-shard policy that cannot apply to a dataset.
var ErrAutoShard = errors.New("distribute: auto-shard policy")

// autoShardWarned makes the AUTO warning appear once per process.
var autoShardWarned sync.Once

// autoShard applies ds's AutoShardPolicy between this strategy's workers, the one
// rule for keras' Fit and Evaluate and for ExperimentalDistributeDataset, as TensorFlow
// applies it to in-memory sources: true when each worker keeps its share of every global
// batch (DATA; AUTO, which falls back to DATA and warns once, naming op), false with one
// worker or when every worker takes the whole batch (OFF, HINT without a shard hint). FILE
// is an error: the dataset reads no files.
func (b *base) autoShard(op string, ds *data.Dataset) (bool, error) {
	workers := max(1, b.workers)
	if workers <= 1 || ds == nil {
		return false, nil
	}
	switch p := ds.Options().AutoShardPolicy; p {
	case data.AutoShardData:
		return true, nil
	case data.AutoShardAuto:
		autoShardWarned.Do(func() {
			logf("WARNING", "%s: AUTO sharding policy will apply DATA sharding policy as it failed to apply FILE "+
				"sharding policy (the dataset reads no files): each of the %d workers keeps its share of every batch. "+
				"Set data.Options{AutoShardPolicy: data.AutoShardData} with ds.WithOptions to silence this.", op, workers)
		})
		return true, nil
	case data.AutoShardFile:
		return false, fmt.Errorf("%w: %s: AutoShardPolicy FILE shards by input file, and this dataset reads no files; "+
			"use data.AutoShardData (each worker keeps its share of every batch) or data.AutoShardOff", ErrAutoShard, op)
	default: // OFF, HINT
		return false, nil
	}
}

// DistributeDatasetsFromFunction calls fn with this worker's InputContext; each local
// replica then takes the next element of the returned dataset in turn.
func (b *base) DistributeDatasetsFromFunction(fn func(ctx *InputContext) *data.Dataset) *DistributedDataset {
	if fn == nil {
		panic(fmt.Errorf("%w: DistributeDatasetsFromFunction with a nil function", ErrBatchSize))
	}
	ctx := &InputContext{NumInputPipelines: max(1, b.workers), InputPipelineID: b.worker, NumReplicasInSync: b.NumReplicasInSync()}
	ds := fn(ctx)
	if ds == nil {
		panic(fmt.Errorf("%w: the dataset function of DistributeDatasetsFromFunction returned nil", ErrBatchSize))
	}
	return &DistributedDataset{b: b, pipeline: ds, ctx: ctx}
}
