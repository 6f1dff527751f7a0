package distribute

import (
	"godist/distlib/cell"
	"godist/distlib/data"
	"godist/distlib/tensor"
)

// The context-free forms that cells translate from TensorFlow. Each reads the running
// notebook cell's context (cell.Context: context.Background() outside a notebook) and
// calls its Context form; everything below them takes its caller's ctx. This is the only
// file of the package that reads cell.Context (package cell's tests check it).

// Run calls fn once per local replica in parallel, in the strategy's scope and each
// replica's device scope, and returns the per-replica results. A replica that panics makes
// Run panic with a *ReplicaError naming it. It is RunContext with the running notebook
// cell's context.
func (b *base) Run(fn func(ctx *ReplicaContext, inputs data.Element) *tensor.Tensor, inputs *DistributedValue) *PerReplica {
	return b.RunContext(cell.Context(), fn, inputs)
}

// Reduce is ReduceContext with the running notebook cell's context (see ReduceContext for
// what it gives).
func (b *base) Reduce(op ReduceOp, v any, axis int) *tensor.Tensor {
	return b.ReduceContext(cell.Context(), op, v, axis)
}

// Gather is GatherContext with the running notebook cell's context, like
// strategy.gather(value, axis) (see GatherContext).
func (b *base) Gather(v any, axis int) *tensor.Tensor {
	return b.GatherContext(cell.Context(), v, axis)
}

// Run calls fn on the replicas of the worker that runs the calling scheduled function (as
// tf.distribute's strategy.run does inside a function given to ClusterCoordinator.Schedule),
// under that function's context; called on the coordinator, it runs fn there under the
// running notebook cell's context. Scheduled functions run on several workers at once, so
// each Run inside one has replicas of its own.
func (s *ParameterServerStrategy) Run(fn func(ctx *ReplicaContext, inputs data.Element) *tensor.Tensor, inputs *DistributedValue) *PerReplica {
	if wc := currentWorker(); wc != nil {
		return s.RunContext(wc.ctx, fn, inputs)
	}
	return s.RunContext(cell.Context(), fn, inputs)
}

// Barrier waits until every worker reaches it, or until the running notebook cell is
// interrupted (BarrierContext with the cell's context).
func (s *MultiWorkerMirroredStrategy) Barrier() error {
	return s.BarrierContext(cell.Context())
}

// BroadcastFromChief is BroadcastFromChiefContext with the running notebook cell's context.
func BroadcastFromChief(s Strategy, ts []*tensor.Tensor) ([]*tensor.Tensor, error) {
	return BroadcastFromChiefContext(cell.Context(), s, ts)
}

// NewMirroredVariable creates a variable distributed by s: one copy per replica device
// when s mirrors variables, otherwise one copy on s.Extended().VariableDevice(). Across
// several workers every worker starts from the chief's value, broadcast under the running
// notebook cell's context.
func NewMirroredVariable(s Strategy, name string, init *tensor.Tensor, trainable bool) *MirroredVariable {
	return newMirroredVariable(cell.Context(), s, name, init, trainable)
}

// Schedule queues fn to run on a worker and returns its RemoteValue at once; it is
// ScheduleContext with the running notebook cell's context: interrupting the cell cancels it.
func (c *ClusterCoordinator) Schedule(fn WorkerFunc) *RemoteValue {
	return c.ScheduleContext(cell.Context(), fn)
}

// ScheduleFunction queues the function registered as name with args, like Schedule; it is
// ScheduleFunctionContext with the running notebook cell's context.
func (c *ClusterCoordinator) ScheduleFunction(name string, args ...*tensor.Tensor) *RemoteValue {
	return c.ScheduleFunctionContext(cell.Context(), name, args...)
}

// Join waits until every scheduled function has finished and returns the first error
// since the last Join (then forgets it), like ClusterCoordinator.join; it is
// JoinContext with the running notebook cell's context.
func (c *ClusterCoordinator) Join() error { return c.JoinContext(cell.Context()) }

// Fetch waits for the function and returns its result or error; it is FetchContext with
// the running notebook cell's context, so interrupting the cell ends the wait.
func (r *RemoteValue) Fetch() (*tensor.Tensor, error) {
	return r.FetchContext(cell.Context())
}

// NewVariable creates a variable on the parameter servers with initial value init (see
// NewVariableContext), under the running notebook cell's context. It panics when a ps
// cannot be reached, with an error naming it.
func (s *ParameterServerStrategy) NewVariable(name string, init *tensor.Tensor, trainable bool) *ShardedVariable {
	v, err := s.NewVariableContext(cell.Context(), name, init, trainable)
	if err != nil {
		panic(err)
	}
	return v
}

// Assign sets the variable to t (of its shape): AssignContext under the running notebook
// cell's context. It panics when a ps cannot be reached, with an error naming it.
func (v *ShardedVariable) Assign(t *tensor.Tensor) {
	v.must(v.AssignContext(cell.Context(), t))
}

// NewMirroredVariables is NewMirroredVariablesContext with the running notebook cell's
// context.
func NewMirroredVariables(s Strategy, names []string, inits []*tensor.Tensor, trainable []bool) ([]*MirroredVariable, error) {
	return NewMirroredVariablesContext(cell.Context(), s, names, inits, trainable)
}
