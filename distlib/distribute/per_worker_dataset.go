package distribute

import (
	"fmt"
	"sync"

	"godist/distlib/data"
)

// PerWorkerDataset is one dataset per worker, made by the function given to
// CreatePerWorkerDataset (ClusterCoordinator.create_per_worker_dataset).
type PerWorkerDataset struct {
	datasets []*data.Dataset
}

// CreatePerWorkerDataset calls fn once per worker with that worker's InputContext.
func (c *ClusterCoordinator) CreatePerWorkerDataset(fn func(ctx *InputContext) *data.Dataset) *PerWorkerDataset {
	d := &PerWorkerDataset{}
	for i := range c.workers {
		ds := fn(&InputContext{NumInputPipelines: len(c.workers), InputPipelineID: i, NumReplicasInSync: c.s.NumReplicasInSync()})
		if ds == nil {
			panic(fmt.Errorf("distribute: CreatePerWorkerDataset: the function returned nil for worker %d", i))
		}
		d.datasets = append(d.datasets, ds)
	}
	return d
}

// Dataset returns worker i's dataset.
func (d *PerWorkerDataset) Dataset(i int) *data.Dataset { return d.datasets[i] }

// Iterator starts one iterator per worker (iter(per_worker_dataset)); a scheduled
// function takes its worker's next element with WorkerContext.Next.
func (d *PerWorkerDataset) Iterator() *PerWorkerIterator {
	it := &PerWorkerIterator{its: make([]*data.Iterator, len(d.datasets)), mu: make([]sync.Mutex, len(d.datasets))}
	for i, ds := range d.datasets {
		it.its[i] = ds.Iterator()
	}
	return it
}

// PerWorkerIterator holds one iterator per worker.
type PerWorkerIterator struct {
	its []*data.Iterator
	mu  []sync.Mutex
}

// Close stops every worker's iterator.
func (it *PerWorkerIterator) Close() {
	for i, x := range it.its {
		it.mu[i].Lock()
		x.Close()
		it.mu[i].Unlock()
	}
}

// Next returns the next element of this worker's iterator of it; false at the end.
func (w *WorkerContext) Next(it *PerWorkerIterator) (data.Element, bool) {
	i := w.index
	if i >= len(it.its) {
		return nil, false
	}
	it.mu[i].Lock()
	defer it.mu[i].Unlock()
	return it.its[i].Next()
}
