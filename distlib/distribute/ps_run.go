package distribute

import (
	"context"
	"fmt"
	"sync"

	"godist/distlib/data"
	"godist/distlib/tensor"
	"godist/internal/goid"
)

// scheduledFns maps the goroutines running an in-process scheduled function to its
// WorkerContext, so that strategy.Run inside the function knows which worker runs it.
var scheduledFns sync.Map // goroutine id -> *WorkerContext

// inScheduled records that the calling goroutine runs wc's function until the returned
// func is called.
func inScheduled(wc *WorkerContext) (done func()) {
	id := goid.Get()
	scheduledFns.Store(id, wc)
	return func() { scheduledFns.Delete(id) }
}

// currentWorker returns the WorkerContext of the scheduled function the calling goroutine
// runs, or nil on the coordinator.
func currentWorker() *WorkerContext {
	if wc, ok := scheduledFns.Load(goid.Get()); ok {
		return wc.(*WorkerContext)
	}
	return nil
}

// RunContext calls fn on the replicas of the worker that runs the calling scheduled function
// (as tf.distribute's strategy.run does inside a function given to ClusterCoordinator.Schedule),
// under ctx; called on the coordinator, it runs fn there. Scheduled functions run on several
// workers at once, so each Run inside one has replicas of its own.
func (s *ParameterServerStrategy) RunContext(ctx context.Context, fn func(ctx *ReplicaContext, inputs data.Element) *tensor.Tensor, inputs *DistributedValue) *PerReplica {
	if currentWorker() == nil {
		return s.base.RunContext(ctx, fn, inputs)
	}
	if fn == nil {
		panic(fmt.Errorf("%w: Run with a nil function", ErrReplicaFailed))
	}
	if ctx == nil {
		ctx = context.Background()
	}
	if n := len(s.devices); inputs != nil && inputs.Len() != n {
		panic(fmt.Errorf("%w: Run inputs hold %d replicas' values, a %s worker has %d replicas "+
			"(pass distribute.NewDistributedValue(batch) with the batch from w.Next)", ErrReplicas, inputs.Len(), s.name, n))
	}
	return s.runGroup(ctx, newSyncGroup(ctx, &s.base, len(s.devices)), fn, inputs)
}
