package distribute

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"godist/distlib/data"
	"godist/distlib/device"
	"godist/distlib/tensor"
)

// crossWorker reduces across workers what the local replicas already reduced; nil for
// single-worker strategies. The multi-worker strategy provides it.
type crossWorker interface {
	// allReduceWorkers sums (op) the flat list ts across workers and returns the result.
	allReduceWorkers(ctx context.Context, op ReduceOp, ts []*tensor.Tensor) ([]*tensor.Tensor, error)
}

// base implements the Strategy methods shared by every strategy in this package; each
// strategy embeds it and sets self to itself so that Scope pushes the strategy proper, and
// ext to its extended.
type base struct {
	self      Strategy
	name      string
	devices   []string // one per local replica, full names
	mirror    bool
	varDevice string
	ops       CrossDeviceOps

	worker, workers int         // this worker's index and the number of workers
	chief           bool        // this worker writes checkpoints
	remote          crossWorker // nil for one worker

	running atomic.Pointer[syncGroup] // the replicas' rendezvous of the Run in progress

	ext StrategyExtended // what Extended returns, set by the constructor
}

func (b *base) Name() string { return b.name }

func (b *base) NumReplicasInSync() int { return len(b.devices) * max(1, b.workers) }

func (b *base) Scope(fn func()) { scope(b.self, fn) }

// Extended returns the strategy's StrategyExtended, TensorFlow's strategy.extended.
func (b *base) Extended() StrategyExtended { return b.ext }

// extended implements StrategyExtended for every strategy of this package.
type extended struct{ b *base }

func (e *extended) ReplicaDevices() []string { return append([]string(nil), e.b.devices...) }

func (e *extended) MirrorsVariables() bool { return e.b.mirror }

func (e *extended) VariableDevice() string { return e.b.varDevice }

func (e *extended) Worker() (index, count int) { return e.b.worker, max(1, e.b.workers) }

func (e *extended) IsChief() bool { return e.b.chief }

func (e *extended) RunReplicas(ctx context.Context, fn func(replica int) error) error {
	return e.b.runReplicas(ctx, fn)
}

func (e *extended) AllReduce(ctx context.Context, op ReduceOp, perReplica [][]*tensor.Tensor) ([][]*tensor.Tensor, error) {
	return e.b.allReduce(ctx, op, perReplica)
}

func (e *extended) AutoShard(op string, ds *data.Dataset) (bool, error) { return e.b.autoShard(op, ds) }

// syncExtended is the extended of the strategies whose replicas run in sync in this
// process (default, one device, mirrored, central storage): optimizers apply through
// ApplyGradients, and local replicas' gradients can be summed as terms.
type syncExtended struct{ extended }

func newSyncExtended(b *base) *syncExtended { return &syncExtended{extended{b}} }

func (e *syncExtended) ApplyGradients(replicaDevice string, grads []*tensor.Tensor, apply func(grads []*tensor.Tensor) error) (inRun bool, err error) {
	return e.b.applyGradients(replicaDevice, grads, apply)
}

func (e *syncExtended) SumTerms(perReplica [][]*tensor.Tensor) (terms [][][]float32, ok bool, err error) {
	return e.b.replicaTerms(perReplica)
}

// String describes the strategy and its devices.
func (b *base) String() string {
	return fmt.Sprintf("%s(devices=(%s), replicas_in_sync=%d)", b.name, quoteList(b.devices), b.NumReplicasInSync())
}

func quoteList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = "'" + s + "'"
	}
	out := strings.Join(q, ", ")
	if len(ss) == 1 {
		out += ","
	}
	return out
}

// runReplicas runs fn once per local replica, each in its own goroutine (a single
// replica runs in the calling goroutine), inside the replica's device scope, and returns the
// first error by replica order; a panic becomes a *ReplicaError naming the replica.
func (b *base) runReplicas(ctx context.Context, fn func(replica int) error) error {
	if fn == nil {
		return fmt.Errorf("%w: RunReplicas with a nil function", ErrReplicaFailed)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	n := len(b.devices)
	errs := make([]error, n)
	done := startReplicas(b.self)
	defer done()
	run := func(r int) {
		defer func() {
			if p := recover(); p != nil {
				errs[r] = &ReplicaError{Replica: r, Device: b.devices[r], Err: panicError(p)}
			}
		}()
		var err error
		device.With(b.devices[r], func() { err = fn(r) })
		if err != nil {
			errs[r] = &ReplicaError{Replica: r, Device: b.devices[r], Err: err}
		}
	}
	if n == 1 {
		run(0)
	} else {
		var wg sync.WaitGroup
		wg.Add(n)
		for r := 0; r < n; r++ {
			go func(r int) {
				defer wg.Done()
				run(r)
			}(r)
		}
		wg.Wait()
	}
	return firstError(errs)
}

// firstError returns the first error in replica order, preferring a replica's own failure to
// the aborts it caused in the replicas waiting for it.
func firstError(errs []error) error {
	var aborted error
	for _, err := range errs {
		if err == nil {
			continue
		}
		if errors.Is(err, errAborted) {
			if aborted == nil {
				aborted = err
			}
			continue
		}
		return err
	}
	return aborted
}

// panicError turns a recovered panic value into an error, keeping a short stack for
// values that are not errors already.
func panicError(p any) error {
	if err, ok := p.(error); ok {
		return err
	}
	return fmt.Errorf("panic: %v\n%s", p, trimStack(debug.Stack()))
}

func trimStack(st []byte) string {
	lines := strings.Split(string(st), "\n")
	if len(lines) > 24 {
		lines = lines[:24]
	}
	return strings.Join(lines, "\n")
}

// RunContext calls fn once per local replica in parallel, in the strategy's scope and each
// replica's device scope, and returns the per-replica results (Run is RunContext under the
// cell's context). A replica that panics makes RunContext panic with a *ReplicaError naming
// it. Once ctx is done the replicas' collective calls fail, and RunContext panics with
// ctx's error when it is done before the replicas start.
func (b *base) RunContext(ctx context.Context, fn func(ctx *ReplicaContext, inputs data.Element) *tensor.Tensor, inputs *DistributedValue) *PerReplica {
	if fn == nil {
		panic(fmt.Errorf("%w: Run with a nil function", ErrReplicaFailed))
	}
	if ctx == nil {
		ctx = context.Background()
	}
	n := len(b.devices)
	if inputs != nil && inputs.Len() != n {
		panic(fmt.Errorf("%w: Run inputs hold %d replicas' values, %s has %d local replicas "+
			"(distribute the dataset with this strategy's ExperimentalDistributeDataset)", ErrReplicas, inputs.Len(), b.name, n))
	}
	scopeMu.Lock()
	checkScopeLocked(b.self)
	scopeMu.Unlock()
	group := newSyncGroup(ctx, b, n)
	if !b.running.CompareAndSwap(nil, group) {
		panic(fmt.Errorf("%w: %s.Run called while another Run of the same strategy is in progress "+
			"(call Run from the cell, not from inside a replica function)", ErrReplicaFailed, b.name))
	}
	defer b.running.Store(nil)
	return b.runGroup(ctx, group, fn, inputs)
}

// runGroup runs fn on every local replica with group as their rendezvous.
func (b *base) runGroup(ctx context.Context, group *syncGroup, fn func(ctx *ReplicaContext, inputs data.Element) *tensor.Tensor, inputs *DistributedValue) *PerReplica {
	n := len(b.devices)
	results := make([]*tensor.Tensor, n)
	err := b.runReplicas(ctx, func(r int) error {
		defer group.leave(r)
		rctx := &ReplicaContext{strategy: b.self, b: b, replica: r, group: group}
		var el data.Element
		if inputs != nil {
			el = inputs.values[r]
		}
		results[r] = fn(rctx, el)
		return nil
	})
	if err != nil {
		panic(err)
	}
	return &PerReplica{values: results}
}

// applyGradients sums a replica's gradients with the other replicas' of the Run in
// progress and applies the sum to each variable copy once (see ReplicaGradientApplier). A
// nil gradient stays nil: it must be nil on every replica.
func (b *base) applyGradients(replicaDevice string, grads []*tensor.Tensor, apply func(grads []*tensor.Tensor) error) (inRun bool, err error) {
	g := b.running.Load()
	if g == nil || apply == nil {
		return false, nil
	}
	r := -1
	for i, d := range b.devices {
		if d == replicaDevice {
			r = i
		}
	}
	if r < 0 {
		return false, nil
	}
	summed := grads
	if (len(b.devices) > 1 || b.workers > 1) && !g.reduced(grads) {
		// nil gradients (variables the loss does not depend on) stay out of the sum.
		var dense []*tensor.Tensor
		for _, t := range grads {
			if t != nil {
				dense = append(dense, t)
			}
		}
		out, err := g.allReduce(r, ReduceSum, dense)
		if err != nil {
			return true, fmt.Errorf("distribute: ApplyGradients: aggregate the gradients of replica %d "+
				"(every replica must call ApplyGradients with gradients of the same shapes, nil for the same variables): %w", r, err)
		}
		summed = make([]*tensor.Tensor, len(grads))
		for i, t := range grads {
			if t != nil {
				summed[i], out = out[0], out[1:]
			}
		}
	}
	if b.mirror || r == 0 {
		err = apply(summed)
	}
	if !b.mirror && len(b.devices) > 1 {
		// One copy, updated by replica 0: the others wait until the update is done.
		if _, berr := g.allReduce(r, ReduceSum, []*tensor.Tensor{tensor.Scalar(0)}); err == nil && berr != nil {
			err = fmt.Errorf("distribute: ApplyGradients: wait for the update: %w", berr)
		}
	}
	return true, err
}

// ExperimentalLocalResults returns v's values, one per local replica.
func (b *base) ExperimentalLocalResults(v *PerReplica) []*tensor.Tensor { return v.Values() }

// ReduceContext combines the per-replica values with op, across local replicas and
// workers; ctx bounds the all-reduce across workers (Reduce is ReduceContext under the
// cell's context). It panics with an error naming the problem.
//
// A non-distributed value v (a *tensor.Tensor, float64, float32 or int) is reduced as
// TensorFlow's strategy.reduce does (reduce_non_distributed_value): with axis -1, a
// number equal to 0 gives 0; MEAN gives v; SUM gives v when the worker has one replica
// (the default strategy, OneDeviceStrategy, ParameterServerStrategy on a CPU) and panics
// with ErrNonDistributedReduce across several (MirroredStrategy on 2 devices), as TF's
// ValueError; across several MultiWorkerMirrored workers each worker's v is one term of
// the sum (MEAN divides by the workers). With axis k >= 0 every replica holds v, so SUM
// gives the replicas' count times v summed along k and MEAN its mean along k.
func (b *base) ReduceContext(ctx context.Context, op ReduceOp, v any, axis int) *tensor.Tensor {
	if ctx == nil {
		ctx = context.Background()
	}
	var out *tensor.Tensor
	var err error
	if pr, ok := v.(*PerReplica); ok {
		out, err = b.reduce(ctx, op, pr, axis)
	} else {
		out, err = b.reducePlain(ctx, op, v, axis)
	}
	if err != nil {
		panic(err)
	}
	return out
}

// plainTensor converts a non-distributed value to a tensor; isZero reports a number (not a
// tensor) equal to 0, which TensorFlow reduces to 0 whatever the op.
func plainTensor(v any) (t *tensor.Tensor, isZero bool, err error) {
	switch x := v.(type) {
	case *tensor.Tensor:
		if x == nil {
			return nil, false, fmt.Errorf("%w: Reduce of a nil tensor", ErrReplicas)
		}
		return x, false, nil
	case float64:
		return tensor.Scalar(float32(x)), x == 0, nil
	case float32:
		return tensor.Scalar(x), x == 0, nil
	case int:
		return tensor.Scalar(float32(x)), x == 0, nil
	case int64:
		return tensor.Scalar(float32(x)), x == 0, nil
	case int32:
		return tensor.Scalar(float32(x)), x == 0, nil
	case *tensor.Variable:
		if x == nil {
			return nil, false, fmt.Errorf("%w: Reduce of a nil variable", ErrReplicas)
		}
		return x.Value(), false, nil
	case nil:
		return nil, false, fmt.Errorf("%w: Reduce of nil: pass the *PerReplica that strategy.Run returns", ErrReplicas)
	case *PerReplica:
		return nil, false, fmt.Errorf("%w: Reduce of a nil *PerReplica", ErrReplicas)
	}
	return nil, false, fmt.Errorf("distribute: Reduce of a %T: pass the *PerReplica that strategy.Run returns, "+
		"or a non-distributed *tensor.Tensor, float64, float32 or int", v)
}

// reducePlain reduces a non-distributed value (see Reduce).
func (b *base) reducePlain(ctx context.Context, op ReduceOp, v any, axis int) (*tensor.Tensor, error) {
	c, err := op.canonical()
	if err != nil {
		return nil, err
	}
	t, isZero, err := plainTensor(v)
	if err != nil {
		return nil, err
	}
	if axis >= 0 {
		// TF runs the reduction along axis on every replica (each holds v), then reduces
		// the replicas' results.
		copies := make([]*tensor.Tensor, len(b.devices))
		for i := range copies {
			copies[i] = t
		}
		return b.reduce(ctx, c, NewPerReplica(copies...), axis)
	}
	if axis < -1 {
		return nil, fmt.Errorf("distribute: Reduce axis %d: use -1 (none) or a dimension index", axis)
	}
	if b.remote != nil {
		// Several workers: each worker's value is one term, as TF's collective reduce of
		// a tensor on one device per worker.
		out, err := b.remote.allReduceWorkers(ctx, ReduceSum, []*tensor.Tensor{t})
		if err != nil {
			return nil, err
		}
		if c.isMean() {
			return scaleData(out[0], 1/float32(max(1, b.workers))), nil
		}
		return out[0], nil
	}
	switch {
	case isZero:
		return tensor.Scalar(0), nil
	case c.isMean(), len(b.devices) == 1:
		return t, nil
	}
	return nil, fmt.Errorf("%w: Reduce(%s, %v, -1) under %s with %d replicas: a value that is not per replica "+
		"would be counted once per replica (TensorFlow raises ValueError here): reduce the *PerReplica that "+
		"strategy.Run returns, or use \"MEAN\"", ErrNonDistributedReduce, c, v, b.name, len(b.devices))
}

func (b *base) reduce(ctx context.Context, op ReduceOp, v *PerReplica, axis int) (*tensor.Tensor, error) {
	if err := op.check(); err != nil {
		return nil, err
	}
	if v == nil || v.Len() == 0 {
		return nil, fmt.Errorf("%w: Reduce of an empty PerReplica", ErrReplicas)
	}
	if v.Len() != len(b.devices) {
		return nil, fmt.Errorf("%w: Reduce of a PerReplica with %d values, %s has %d local replicas",
			ErrReplicas, v.Len(), b.name, len(b.devices))
	}
	if axis < -1 {
		return nil, fmt.Errorf("distribute: Reduce axis %d: use -1 (none) or a dimension index", axis)
	}
	vals := v.Values()
	count := len(b.devices) * max(1, b.workers) // what MEAN divides by
	if axis >= 0 {
		// Reduce each value along axis first; MEAN then divides by the total length of that
		// axis over every replica (batches may be uneven).
		total := 0
		for r, t := range vals {
			if t == nil {
				return nil, fmt.Errorf("%w: Reduce: replica %d's value is nil", ErrReplicas, r)
			}
			if axis >= t.Rank() {
				return nil, fmt.Errorf("%w: Reduce axis %d of replica %d's value with shape %v", tensor.ErrShape, axis, r, t.Shape())
			}
			total += t.Shape()[axis]
			vals[r] = tensor.ReduceSum(t, axis)
		}
		count = total
		if b.remote != nil {
			cnt, err := b.remote.allReduceWorkers(ctx, ReduceSum, []*tensor.Tensor{tensor.Scalar(float32(total))})
			if err != nil {
				return nil, err
			}
			count = int(cnt[0].Item() + 0.5)
		}
	}
	sum, err := sumTensors(vals, b.devices)
	if err != nil {
		return nil, fmt.Errorf("reduce: %w", err)
	}
	if b.remote != nil {
		out, err := b.remote.allReduceWorkers(ctx, ReduceSum, []*tensor.Tensor{sum})
		if err != nil {
			return nil, err
		}
		sum = out[0]
	}
	if op.isMean() {
		if count == 0 {
			return scaleData(sum, 0), nil
		}
		sum = scaleData(sum, 1/float32(count))
	}
	return sum, nil
}

// allReduce reduces the replicas' tensor lists through the strategy's cross-device
// ops and, for multi-worker strategies, across workers.
func (b *base) allReduce(ctx context.Context, op ReduceOp, perReplica [][]*tensor.Tensor) (out [][]*tensor.Tensor, err error) {
	defer func() {
		if p := recover(); p != nil {
			out, err = nil, fmt.Errorf("distribute: all-reduce: %w", panicError(p))
		}
	}()
	if err := op.check(); err != nil {
		return nil, err
	}
	if len(perReplica) != len(b.devices) {
		return nil, fmt.Errorf("%w: AllReduce of %d replicas' tensors, %s has %d local replicas",
			ErrReplicas, len(perReplica), b.name, len(b.devices))
	}
	if err := checkPerReplica(perReplica); err != nil {
		return nil, err
	}
	if b.remote == nil {
		return b.ops.BatchAllReduce(op, perReplica, b.devices)
	}
	// Multi-worker: sum the local replicas (one has nothing to sum), across workers, then
	// divide and hand the result to each replica: replicas in host memory share it, as
	// BatchAllReduce's do (tensors are immutable); others get a copy.
	local := perReplica
	if len(b.devices) > 1 {
		if local, err = b.ops.BatchAllReduce(ReduceSum, perReplica, b.devices); err != nil {
			return nil, err
		}
	}
	global, err := b.remote.allReduceWorkers(ctx, ReduceSum, local[0])
	if err != nil {
		return nil, err
	}
	if op.isMean() {
		for i, t := range global {
			global[i] = scaleData(t, 1/float32(b.NumReplicasInSync()))
		}
	}
	out = make([][]*tensor.Tensor, len(b.devices))
	for r, dev := range b.devices {
		out[r] = make([]*tensor.Tensor, len(global))
		for i, t := range global {
			if sharesMemory(dev) && sharesMemory(b.devices[0]) {
				out[r][i] = newOn(dev, t.Shape(), t.Data())
			} else {
				out[r][i] = copyTo(t, dev)
			}
		}
	}
	return out, nil
}

// replicaTerms is allReduce(ReduceSum) for a caller that sums as it reads
// (keras' optimizer: optim.Spec.ApplyTerms). When the replicas are all in this process and
// in host memory, and the cross-device ops sum them in replica order (ReductionToOneDevice,
// the default on CPUs), it returns for each tensor the replicas' values in replica order,
// read where they lie and never written: their sum in order is, bit for bit, what
// allReduce gives every replica, and no sum is written. ok is false otherwise (one
// replica, several workers, a GPU, other ops): call AllReduce.
func (b *base) replicaTerms(perReplica [][]*tensor.Tensor) (terms [][][]float32, ok bool, err error) {
	// Only the ops themselves: a type that embeds them to wrap BatchAllReduce (counting,
	// logging) gets its BatchAllReduce called.
	r, is := b.ops.(*ReductionToOneDevice)
	if b.remote != nil || len(b.devices) < 2 || !is {
		return nil, false, nil
	}
	if len(perReplica) != len(b.devices) {
		return nil, false, fmt.Errorf("%w: SumTerms of %d replicas' tensors, %s has %d local replicas",
			ErrReplicas, len(perReplica), b.name, len(b.devices))
	}
	return r.sumTerms(perReplica, b.devices)
}

// checkPerReplica verifies that every replica has the same number of tensors with the
// same shapes.
func checkPerReplica(perReplica [][]*tensor.Tensor) error {
	if len(perReplica) == 0 {
		return fmt.Errorf("%w: all-reduce of no replicas", ErrReplicas)
	}
	m := len(perReplica[0])
	for r, ts := range perReplica {
		if len(ts) != m {
			return fmt.Errorf("%w: replica %d has %d tensors, replica 0 has %d", ErrReplicas, r, len(ts), m)
		}
		for i, t := range ts {
			if t == nil {
				return fmt.Errorf("%w: tensor %d of replica %d is nil", ErrReplicas, i, r)
			}
			if !sameShape(t.Shape(), perReplica[0][i].Shape()) {
				return fmt.Errorf("%w: tensor %d has shape %v on replica %d and %v on replica 0",
					tensor.ErrShape, i, t.Shape(), r, perReplica[0][i].Shape())
			}
		}
	}
	return nil
}

func sameShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// resolveDevices turns device specifications into full logical names, checking that each
// exists and none repeats. It panics with a *DeviceError.
func resolveDevices(specs []string) []string {
	if len(specs) == 0 {
		panic(&DeviceError{Device: "", Reason: "no devices given; pass at least one, e.g. \"/CPU:0\""})
	}
	// Check every device before touching the device configuration: listing logical devices
	// initializes them, and a strategy that fails (MirroredStrategy on "/gpu:0" without
	// GPUs) must leave the devices configurable, so that the setup cell can be fixed and run
	// again (device.SetLogicalDeviceConfiguration after it still works).
	if !device.IsInitialized() {
		for _, spec := range specs {
			if err := checkDeviceUninitialized(spec); err != nil {
				panic(err)
			}
		}
	}
	seen := map[string]bool{}
	out := make([]string, 0, len(specs))
	for _, spec := range specs {
		full, err := resolveDevice(spec)
		if err != nil {
			panic(err)
		}
		if seen[full] {
			panic(&DeviceError{Device: spec, Reason: "given twice; list each device once"})
		}
		seen[full] = true
		out = append(out, full)
	}
	return out
}

// resolveDevice returns the full name of an existing logical device, without soft placement.
func resolveDevice(spec string) (string, error) {
	typ, idx, err := device.Canonical(spec)
	if err != nil {
		return "", &DeviceError{Device: spec, Reason: err.Error()}
	}
	if idx < 0 {
		return "", &DeviceError{Device: spec, Reason: "empty device name; write e.g. \"/CPU:0\" or \"/GPU:0\""}
	}
	full := fmt.Sprintf("%s%s:%d", device.LocalPrefix, typ, idx)
	var names []string
	for _, d := range device.ListLogicalDevices("") {
		if d.Name == full {
			return full, nil
		}
		names = append(names, d.Name)
	}
	sort.Strings(names)
	hint := "list them with device.ListLogicalDevices(\"\")"
	if typ == device.CPU {
		hint = "split the CPU into logical devices first with device.SetLogicalDeviceConfiguration"
	}
	return "", &DeviceError{Device: spec, Reason: fmt.Sprintf("is not visible; the logical devices are [%s]; %s",
		strings.Join(names, ", "), hint)}
}

// checkDeviceUninitialized checks that spec names a logical device the current device
// configuration will create, without initializing the devices.
func checkDeviceUninitialized(spec string) error {
	typ, idx, err := device.Canonical(spec)
	if err != nil {
		return &DeviceError{Device: spec, Reason: err.Error()}
	}
	if idx < 0 {
		return &DeviceError{Device: spec, Reason: "empty device name; write e.g. \"/CPU:0\" or \"/GPU:0\""}
	}
	count := map[string]int{}
	var kinds []string
	for _, pd := range device.GetVisibleDevices("") {
		cfg, err := device.GetLogicalDeviceConfiguration(pd)
		if err != nil {
			return nil // let resolveDevice report it
		}
		if count[pd.DeviceType] == 0 {
			kinds = append(kinds, pd.DeviceType)
		}
		count[pd.DeviceType] += max(1, len(cfg))
	}
	if idx < count[typ] {
		return nil
	}
	var names []string
	for _, k := range kinds {
		for i := 0; i < count[k]; i++ {
			names = append(names, fmt.Sprintf("%s%s:%d", device.LocalPrefix, k, i))
		}
	}
	sort.Strings(names)
	hint := "list them with device.ListLogicalDevices(\"\")"
	if typ == device.CPU {
		hint = "split the CPU into logical devices first with device.SetLogicalDeviceConfiguration"
	}
	return &DeviceError{Device: spec, Reason: fmt.Sprintf("is not visible; the logical devices are [%s]; %s "+
		"(the device configuration is unchanged and can still be set)", strings.Join(names, ", "), hint)}
}

// defaultDevices returns all logical GPUs, or else all logical CPUs.
func defaultDevices() []string {
	var out []string
	for _, d := range device.ListLogicalDevices(device.GPU) {
		out = append(out, d.Name)
	}
	if len(out) > 0 {
		return out
	}
	for _, d := range device.ListLogicalDevices(device.CPU) {
		out = append(out, d.Name)
	}
	return out
}

// deviceType returns the type part of a full device name ("CPU", "GPU").
func deviceType(name string) string {
	typ, _, err := device.Canonical(name)
	if err != nil {
		return ""
	}
	return typ
}
