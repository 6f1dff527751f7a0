// Package distribute brings TensorFlow's tf.distribute to Go: strategies that run a
// computation on several replicas (the devices of one process, and worker processes) in
// sync or through parameter servers, the values that live on every replica (PerReplica,
// MirroredVariable), datasets split across replicas, and the cross-device reductions that
// keep the replicas in agreement.
//
// A notebook cell translates TensorFlow line by line:
//
//	strategy := distribute.NewMirroredStrategy()
//	fmt.Println("replicas:", strategy.NumReplicasInSync())
//	strategy.Scope(func() {
//		// models, optimizers and variables made here are distributed
//	})
//	dist := strategy.ExperimentalDistributeDataset(ds)
//	it := dist.Iterator()
//	for inputs, ok := it.Next(); ok; inputs, ok = it.Next() {
//		losses := strategy.Run(trainStep, inputs)
//		loss := strategy.Reduce(distribute.ReduceSum, losses, -1)
//		fmt.Println(loss)
//	}
//
// Outside any scope GetStrategy returns the default strategy: one replica on the default
// device, a pass-through that lets library code be written once for every strategy.
//
// Constructors return the concrete strategy. Bad input, such as a device that does not
// exist, panics with a typed error whose message names the input (the notebook shows it
// as a Jupyter error); the methods of Strategy.Extended, which keras calls, return errors
// instead.
package distribute

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"godist/distlib/data"
	"godist/distlib/tensor"
)

// Strategy is a way to distribute a computation across replicas, like tf.distribute.Strategy.
//
// Its methods are the user-facing API; Extended returns what library code (keras) needs
// to train through any strategy, as TensorFlow splits strategy and strategy.extended.
type Strategy interface {
	// Name returns the strategy's TensorFlow name, such as "MirroredStrategy".
	Name() string
	// NumReplicasInSync returns the number of replicas that take part in every step,
	// across all workers.
	NumReplicasInSync() int
	// Scope runs fn with this strategy as the current one: GetStrategy inside fn returns
	// it. Entering the scope of a different strategy inside it panics.
	Scope(fn func())
	// Run calls fn once per local replica, in parallel, with that replica's part of
	// inputs (nil inputs give every replica a nil Element), and returns the results. It is
	// RunContext with the running notebook cell's context (cell.Context), so that an
	// interrupt stops the collectives the replicas wait in.
	Run(fn func(ctx *ReplicaContext, inputs data.Element) *tensor.Tensor, inputs *DistributedValue) *PerReplica
	// RunContext is Run under ctx: the replicas' collective calls (AllReduce, and the
	// gradient aggregation of an optimizer's ApplyGradients) fail once ctx is done.
	RunContext(ctx context.Context, fn func(ctx *ReplicaContext, inputs data.Element) *tensor.Tensor, inputs *DistributedValue) *PerReplica
	// Reduce combines the per-replica values v with op. With axis -1 the values are
	// combined element-wise; with axis k >= 0 each value is also reduced along axis k
	// (ReduceMean then averages over all the elements of that axis across replicas).
	// v is a *PerReplica (what Run returns) or, as TensorFlow accepts, a non-distributed
	// value (a *tensor.Tensor, float64, float32 or int) that every replica holds alike:
	// see Reduce on the strategies for what that gives.
	Reduce(op ReduceOp, v any, axis int) *tensor.Tensor
	// ExperimentalDistributeDataset splits each global batch of ds across the replicas.
	ExperimentalDistributeDataset(ds *data.Dataset) *DistributedDataset
	// DistributeDatasetsFromFunction calls fn once per input pipeline (worker); each
	// replica gets the next element of its pipeline's dataset, which fn should batch with
	// ctx.GetPerReplicaBatchSize.
	DistributeDatasetsFromFunction(fn func(ctx *InputContext) *data.Dataset) *DistributedDataset
	// ExperimentalLocalResults returns the values of v, one per local replica.
	ExperimentalLocalResults(v *PerReplica) []*tensor.Tensor

	// Extended returns what library code (keras) needs to train through the strategy,
	// TensorFlow's strategy.extended.
	Extended() StrategyExtended
}

// ReduceOp says how values from several replicas are combined, like tf.distribute.ReduceOp.
// Its values are TensorFlow's names, so TF's spelling translates as it is:
// strategy.Reduce("SUM", v, -1) is strategy.Reduce(distribute.ReduceSum, v, -1). As in
// tf.distribute, the case does not matter ("sum", "mean").
type ReduceOp string

const (
	// ReduceSum adds the values.
	ReduceSum ReduceOp = "SUM"
	// ReduceMean averages the values.
	ReduceMean ReduceOp = "MEAN"
)

// String returns "SUM" or "MEAN", TensorFlow's names, or ReduceOp("...") for another value.
func (op ReduceOp) String() string {
	if c, err := op.canonical(); err == nil {
		return string(c)
	}
	return fmt.Sprintf("ReduceOp(%q)", string(op))
}

// canonical returns ReduceSum or ReduceMean for any spelling of them.
func (op ReduceOp) canonical() (ReduceOp, error) {
	switch c := ReduceOp(strings.ToUpper(strings.TrimSpace(string(op)))); c {
	case ReduceSum, ReduceMean:
		return c, nil
	}
	return "", fmt.Errorf("%w: %q (write \"SUM\" or \"MEAN\", or distribute.ReduceSum or distribute.ReduceMean)", ErrReduceOp, string(op))
}

func (op ReduceOp) check() error {
	_, err := op.canonical()
	return err
}

// isMean reports whether op is any spelling of ReduceMean.
func (op ReduceOp) isMean() bool {
	c, _ := op.canonical()
	return c == ReduceMean
}

// Errors callers can test with errors.Is.
var (
	// ErrMixedStrategies reports entering a strategy's scope inside another strategy's.
	ErrMixedStrategies = errors.New("distribute: mixing different tf.distribute.Strategy objects")
	// ErrDevice reports a device a strategy cannot use.
	ErrDevice = errors.New("distribute: bad device")
	// ErrReduceOp reports an unknown ReduceOp.
	ErrReduceOp = errors.New("distribute: unknown reduce op")
	// ErrReplicas reports values whose number of replicas does not match the strategy's.
	ErrReplicas = errors.New("distribute: wrong number of replicas")
	// ErrNonDistributedReduce reports a Reduce with SUM of a non-distributed value across
	// several replicas, which TensorFlow refuses (ValueError) as ill-defined.
	ErrNonDistributedReduce = errors.New("distribute: a non-distributed value cannot be reduced with SUM across several replicas")
	// ErrReplicaFailed reports a replica function that panicked or returned an error.
	ErrReplicaFailed = errors.New("distribute: replica failed")
	// ErrBatchSize reports a batch size that cannot be split as asked.
	ErrBatchSize = errors.New("distribute: bad batch size")
)

// DeviceError is the error of a strategy constructor given a device it cannot use.
type DeviceError struct {
	Device string // the device as the caller wrote it
	Reason string // what is wrong and what to do
}

func (e *DeviceError) Error() string {
	return fmt.Sprintf("distribute: device %q: %s", e.Device, e.Reason)
}

// Unwrap makes errors.Is(err, ErrDevice) true.
func (e *DeviceError) Unwrap() error { return ErrDevice }

// ReplicaError is the error of a replica function that panicked or failed.
type ReplicaError struct {
	Replica int    // local replica index
	Device  string // the replica's device
	Err     error  // the failure (a panic value is wrapped as an error)
}

func (e *ReplicaError) Error() string {
	return fmt.Sprintf("distribute: replica %d on %s: %v", e.Replica, e.Device, e.Err)
}

// Unwrap returns the replica's own error; errors.Is(err, ErrReplicaFailed) is also true.
func (e *ReplicaError) Unwrap() []error { return []error{ErrReplicaFailed, e.Err} }

// Scopes are process-wide, like the `with strategy.scope():` block of a notebook: while the
// function given to Scope runs, GetStrategy returns that strategy in every goroutine,
// including the goroutines started inside it (there is no goroutine-local state in Go to
// hide it from them). Opening the scope of a different strategy while one is open, in any
// goroutine, panics with ErrMixedStrategies, so two strategies never compete for it: build
// the models of several in-process workers one after the other. Run and the extended's
// RunReplicas do not open the scope: a replica function gets its strategy from its
// ReplicaContext; GetStrategy inside it returns the running strategy when it is the only
// strategy with a Run in progress in the process.
var (
	scopeMu     sync.Mutex
	scopeStack  []*scopeEntry
	running     = map[Strategy]int{} // strategies with replicas running, and how many runs
	scopeActive atomic.Int64         // open scopes plus running replica sets; 0 makes GetStrategy cheap
)

// scopeEntry is one open Scope.
type scopeEntry struct{ s Strategy }

// GetStrategy returns the strategy of the innermost open Scope, else the strategy whose
// replicas are running (when only one strategy's are), else the default strategy.
func GetStrategy() Strategy {
	if scopeActive.Load() == 0 {
		return defaultStrategy
	}
	scopeMu.Lock()
	defer scopeMu.Unlock()
	if n := len(scopeStack); n > 0 {
		return scopeStack[n-1].s
	}
	if len(running) == 1 {
		for s := range running {
			return s
		}
	}
	return defaultStrategy
}

// HasStrategy reports whether a strategy other than the default one is current.
func HasStrategy() bool {
	return GetStrategy() != Strategy(defaultStrategy)
}

// checkScopeLocked applies TensorFlow's rule: inside a non-default strategy's scope only that
// same strategy's scope (or the default's, which changes nothing) may be entered or run.
// It reports whether s is the default strategy entered inside another one.
func checkScopeLocked(s Strategy) (inert bool) {
	n := len(scopeStack)
	if n == 0 {
		return false
	}
	cur := scopeStack[n-1].s
	if cur == s || cur == Strategy(defaultStrategy) {
		return false
	}
	if s == Strategy(defaultStrategy) {
		return true
	}
	panic(fmt.Errorf("%w: %s is not %s (leave the current strategy's Scope before entering another one)",
		ErrMixedStrategies, describe(s), describe(cur)))
}

// enterScope opens s's scope (see Scope) and returns the function that closes it.
func enterScope(s Strategy) (exit func()) {
	scopeMu.Lock()
	defer scopeMu.Unlock()
	if checkScopeLocked(s) {
		// Entering the default strategy's scope inside another one keeps the other.
		return func() {}
	}
	e := &scopeEntry{s: s}
	scopeStack = append(scopeStack, e)
	scopeActive.Add(1)
	var once sync.Once
	return func() {
		once.Do(func() {
			scopeMu.Lock()
			defer scopeMu.Unlock()
			for k := len(scopeStack) - 1; k >= 0; k-- {
				if scopeStack[k] == e {
					scopeStack = append(scopeStack[:k], scopeStack[k+1:]...)
					break
				}
			}
			scopeActive.Add(-1)
		})
	}
}

// startReplicas marks s's replicas as running (for GetStrategy inside them) after checking
// that no other strategy's scope is open; the returned function unmarks them.
func startReplicas(s Strategy) (done func()) {
	scopeMu.Lock()
	defer scopeMu.Unlock()
	checkScopeLocked(s)
	running[s]++
	scopeActive.Add(1)
	return func() {
		scopeMu.Lock()
		defer scopeMu.Unlock()
		if running[s]--; running[s] <= 0 {
			delete(running, s)
		}
		scopeActive.Add(-1)
	}
}

func describe(s Strategy) string {
	return fmt.Sprintf("%s(%p)", s.Name(), s)
}

// scope runs fn with s current; the scope is left even when fn panics.
func scope(s Strategy, fn func()) {
	exit := enterScope(s)
	defer exit()
	if fn != nil {
		fn()
	}
}

// logging: TensorFlow prints INFO/WARNING lines about strategies; so do we.
var (
	logMu  sync.Mutex
	logger = log.New(os.Stderr, "", 0)
)

// SetLogOutput sends the strategies' INFO and WARNING lines to w (standard error by
// default) and returns the previous writer.
func SetLogOutput(w io.Writer) io.Writer {
	logMu.Lock()
	defer logMu.Unlock()
	old := logger.Writer()
	if w == nil {
		w = io.Discard
	}
	logger.SetOutput(w)
	return old
}

func logf(level, format string, args ...any) {
	logMu.Lock()
	defer logMu.Unlock()
	logger.Printf(level+":distribute:"+format, args...)
}

// ComputeAverageLoss returns the sum of the per-example losses divided by globalBatchSize,
// like tf.nn.compute_average_loss: gradients of this loss summed across replicas equal
// the gradient of the mean loss over the global batch. A globalBatchSize of 0 means the
// local batch (first dimension of perExample) times the current strategy's
// NumReplicasInSync. It panics with ErrBatchSize for a negative globalBatchSize.
func ComputeAverageLoss(perExample *tensor.Tensor, globalBatchSize int) *tensor.Tensor {
	if perExample == nil {
		panic(fmt.Errorf("%w: ComputeAverageLoss of a nil perExample tensor", ErrBatchSize))
	}
	if globalBatchSize < 0 {
		panic(fmt.Errorf("%w: ComputeAverageLoss globalBatchSize %d is negative", ErrBatchSize, globalBatchSize))
	}
	if globalBatchSize == 0 {
		local := 1
		if sh := perExample.Shape(); len(sh) > 0 {
			local = sh[0]
		}
		globalBatchSize = local * GetStrategy().NumReplicasInSync()
	}
	if globalBatchSize == 0 {
		return tensor.Scale(tensor.ReduceSum(perExample), 0)
	}
	return tensor.Scale(tensor.ReduceSum(perExample), 1/float32(globalBatchSize))
}

// ScaleRegularizationLoss divides a regularization loss by the current strategy's
// NumReplicasInSync, like tf.nn.scale_regularization_loss: added to every replica's
// ComputeAverageLoss, the replicas' gradients then sum to the penalty's gradient once.
// tf.nn.scale_regularization_loss(tf.add_n(model.losses)) is
// distribute.ScaleRegularizationLoss(tensor.AddN(model.Losses()...)).
func ScaleRegularizationLoss(regularizationLoss *tensor.Tensor) *tensor.Tensor {
	if regularizationLoss == nil {
		panic(fmt.Errorf("%w: ScaleRegularizationLoss of a nil tensor", ErrBatchSize))
	}
	return tensor.Scale(regularizationLoss, 1/float32(max(1, GetStrategy().NumReplicasInSync())))
}
