package distribute

import (
	"context"
	"time"

	"godist/distlib/data"
	"godist/distlib/tensor"
)

// StrategyExtended is what library code (keras) needs to train through any strategy,
// like TensorFlow's tf.distribute.StrategyExtended (strategy.extended): Strategy.Extended
// returns it. The interfaces below it are capabilities an extended may offer besides;
// library code asks for them once (a type assertion on s.Extended()), where keras picks
// its training loop (trainerFor) or its variables' store.
type StrategyExtended interface {
	// ReplicaDevices returns one device name per local replica.
	ReplicaDevices() []string
	// MirrorsVariables reports whether variables have one copy per replica (true) or a
	// single copy on VariableDevice (false).
	MirrorsVariables() bool
	// VariableDevice returns the device of the single variable copy when variables are
	// not mirrored.
	VariableDevice() string
	// RunReplicas calls fn once per local replica, each in its own goroutine, waits for
	// all, and returns the first error; a panic in fn becomes an error that names the
	// replica. It returns ctx's error without running fn when ctx is done.
	RunReplicas(ctx context.Context, fn func(replica int) error) error
	// AllReduce reduces perReplica[r][i] (tensor i of local replica r) across local
	// replicas and, for multi-worker strategies, across workers, and returns the reduced
	// list for every local replica.
	AllReduce(ctx context.Context, op ReduceOp, perReplica [][]*tensor.Tensor) ([][]*tensor.Tensor, error)
	// AutoShard applies ds's AutoShardPolicy between the workers: true when each worker
	// keeps its share of every global batch, false when it takes the whole batch (or there
	// is one worker); an error wrapping ErrAutoShard when the policy cannot apply. op
	// names the caller in the error and the warning.
	AutoShard(op string, ds *data.Dataset) (bool, error)
	// Worker returns this worker's index and the number of workers.
	Worker() (index, count int)
	// IsChief reports whether this worker writes checkpoints and summaries.
	IsChief() bool
}

// ReplicaGradientApplier is offered by the extended of strategies whose replicas train in
// sync (not ParameterServerStrategy's, whose variables live on the ps: PSExtended).
type ReplicaGradientApplier interface {
	// ApplyGradients is how an optimizer's ApplyGradients called inside Run updates the
	// variables, like TensorFlow's merge_call in apply_gradients: the replica running on
	// device replicaDevice (device.Current() in a replica function) hands in its
	// gradients; the strategy sums them across all replicas in sync and calls apply with
	// the sum once per variable copy (every replica for mirrored variables, one replica for
	// a single copy), and returns when the update is visible to every replica. Gradients
	// that are already the results of the Run's AllReduce are not summed again; nil
	// gradients (nil on every replica) stay nil. inRun is false, and nothing is done, when
	// no Run of this strategy is in progress or replicaDevice is not one of its replicas'
	// (a cross-replica call: the caller applies grads itself).
	ApplyGradients(replicaDevice string, grads []*tensor.Tensor, apply func(grads []*tensor.Tensor) error) (inRun bool, err error)
}

// ReplicaTermsSummer is offered by the extended of strategies whose local replicas'
// gradients an optimizer can sum as it reads them, in replica order, instead of
// all-reducing them first.
type ReplicaTermsSummer interface {
	// SumTerms hands over perReplica[r][i] (tensor i of local replica r) as terms[i] (one
	// term per replica) when the replicas' memory can be read in place (ok true); ok
	// false: the caller all-reduces as usual.
	SumTerms(perReplica [][]*tensor.Tensor) (terms [][][]float32, ok bool, err error)
}

// GradientBucketing is offered by the extended of strategies that reduce gradients across
// workers in buckets while the backward pass goes on.
type GradientBucketing interface {
	// GradientBucketer returns a bucketer that sums tensors of the given sizes across the
	// workers, in buckets of about bucketBytes; nil and no error for a single worker.
	GradientBucketer(ctx context.Context, sizes []int, bucketBytes int) (GradientBucketer, error)
	// Timeout bounds every wait of a collective.
	Timeout() time.Duration
}

// GradientTermsApplier is offered by the extended of strategies whose ApplyGradients can
// hand the update every summed gradient as terms to add in order, read where they lie, so
// that the optimizer sums them as it reads them and the sum is never written
// (MultiWorkerMirroredStrategy; keras' optimizers use it).
type GradientTermsApplier interface {
	// ApplyGradientTerms is ReplicaGradientApplier's ApplyGradients whose apply gets, for
	// each gradient, terms whose sum in order is the summed gradient (none for a nil
	// gradient); they are valid until apply returns and must not be written.
	ApplyGradientTerms(replicaDevice string, grads []*tensor.Tensor, apply func(terms [][][]float32) error) (inRun bool, err error)
}

// PSExtended is the extended of a Coordinated strategy (ParameterServerStrategy): library
// code places a model's variables on the parameter servers, reads them and updates them
// there through it.
type PSExtended interface {
	StrategyExtended
	// PlaceVariables creates a variable on the parameter servers for each of vars, named
	// names[i], with its current value, and returns them. vars (this process's copies,
	// such as a Keras model's) then stand for the ps variables: ReadVariables reads the ps
	// values for them and ApplyGradientsOnPS updates the ps variables behind them. ctx
	// bounds the calls that create them.
	PlaceVariables(ctx context.Context, names []string, vars []*tensor.Variable) ([]*ShardedVariable, error)
	// ReadVariables reads the ps values of placed variables, in one concurrent round trip:
	// each result counts as a read of vars[i] for a GradientTape (its gradient is the
	// gradient with respect to vars[i]), so a step that computes with them differentiates
	// with respect to vars, however many steps do so at once.
	ReadVariables(ctx context.Context, vars []*tensor.Variable) ([]*tensor.Tensor, error)
	// ApplyGradientsOnPS pushes grads[i] for the ps variable behind placed variable
	// vars[i]; opt's rule updates it on its parameter server (a nil gradient is skipped).
	// This is an optimizer's ApplyGradients under the strategy, in a ClusterCoordinator
	// step or on the coordinator.
	ApplyGradientsOnPS(ctx context.Context, opt *PSOptimizer, grads []*tensor.Tensor, vars []*tensor.Variable) error
}

// The extended of each strategy and the capabilities it offers.
var (
	_ ReplicaGradientApplier = (*syncExtended)(nil)
	_ ReplicaTermsSummer     = (*syncExtended)(nil)
	_ ReplicaGradientApplier = (*multiWorkerExtended)(nil)
	_ GradientBucketing      = (*multiWorkerExtended)(nil)
	_ GradientTermsApplier   = (*multiWorkerExtended)(nil)
	_ PSExtended             = (*psExtended)(nil)
)

// ElasticWorkers is offered by the extended of a strategy whose workers may change during
// training (MultiWorkerMirroredStrategy with WithElastic): keras Fit regroups the workers
// when a step fails because one was lost, and retries the step.
type ElasticWorkers interface {
	// Regroupable reports whether err (a step's) says that a worker was lost or that the
	// workers are regrouping: after Regroup the step can be retried.
	Regroupable(err error) bool
	// Regroup agrees with the other remaining workers on who goes on and on the number of
	// steps they completed (done is this worker's), and re-forms the group over them;
	// cause is the error that stopped this worker's step. On a worker that completed the
	// most steps, state is called for what a worker one step behind needs (the variables
	// and optimizer state after the last step); Regrouped.State brings it there. Every
	// worker of the group must call it; a *TooFewWorkersError says fewer than the minimum
	// remain.
	Regroup(ctx context.Context, done int64, cause error, state func() ([]byte, error)) (Regrouped, error)
	// Join joins the job, once, before Fit's first epoch: a worker of the first group gets
	// no state; a worker that started later waits until the group admits it at an epoch's
	// end, and gets the epoch it starts at and the state there.
	Join(ctx context.Context) (Admission, error)
	// Admit, at an epoch's end (every worker of the group, after the wait there), lets the
	// workers that asked to join in: next is the epoch they start at; on the chief, state
	// is called for what they need. It reports whether the group changed.
	Admit(ctx context.Context, next int, state func() ([]byte, error)) (bool, error)
}
