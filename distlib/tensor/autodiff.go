package tensor

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"godist/distlib/device"
)

// How recording works. There is no global tape. A tensor is "tracked" when it carries a
// gradient record (node): the value of a trainable Variable, a tensor given to
// GradientTape.Watch, and every op output with at least one tracked input. An op's record
// holds its inputs and a function that maps the output's gradient to the inputs' gradients,
// so the computation graph lives in the tensors themselves and is collected with them.
// Gradient walks back from the target. Recording is therefore per value, not per goroutine:
// replicas in parallel goroutines each build their own graph, and a tape needs no locks.
//
// A consequence that differs from TensorFlow: computations on trainable variables are
// recorded even outside a tape's lifetime (a tape created after the forward pass can still
// differentiate it, also from another notebook cell). A recorded tensor keeps the tensors
// it was computed from alive; a non-persistent tape's Gradient releases the records of the
// graph it differentiated, and StopGradient gives a tensor without a record (use it for
// values kept across steps, such as running loss sums in evaluation loops). Gradients are
// first order: the backward functions do not record.

// ErrTape reports a misuse of a GradientTape.
var ErrTape = errors.New("tensor: gradient tape")

// backwardFunc maps the gradient of an op's output to the gradients of its inputs; need[i]
// tells whether input i is tracked (others may be returned as nil). into may hold for
// input i a buffer of its size (into.buf(i) non-nil) where the function can write that
// input's gradient in full and return a tensor on it: the caller's buffer given to
// GradientInto. A function that does not use it returns fresh tensors as always, and the
// walk copies them there.
type backwardFunc func(grad *Tensor, need []bool, into gradDest) []*Tensor

// gradDest is what a backward function may write its inputs' gradients into: the
// caller's buffers of GradientInto by input (bufs, nil when there are none), and whether
// they are handed over once the walk returns (stream: GradientIntoStreaming), so that a
// kernel computing a gradient there writes it with streaming stores (sgemmStreamed).
type gradDest struct {
	bufs   [][]float32
	stream bool
}

// buf returns the buffer for input i, or nil.
func (d gradDest) buf(i int) []float32 {
	if i < len(d.bufs) {
		return d.bufs[i]
	}
	return nil
}

// tracked reports whether any input carries a gradient record.
func tracked(ins ...*Tensor) bool {
	for _, t := range ins {
		if t != nil && t.node != nil {
			return true
		}
	}
	return false
}

// record attaches a gradient record to out when an input is tracked and returns out.
// bw is only called when it is needed.
func record(out *Tensor, bw backwardFunc, ins ...*Tensor) *Tensor {
	if tracked(ins...) {
		out.node = &node{inputs: ins, backward: bw}
	}
	return out
}

// GradientTape computes gradients of a target with respect to sources, like tf.GradientTape.
//
//	tape := tensor.NewGradientTape()
//	loss := ...                        // ops on trainable variables and watched tensors
//	grads := tape.Gradient(loss, vars) // one gradient per source, nil when unconnected
//
// A tape is meant for one goroutine. A non-persistent tape (NewGradientTape) allows one
// Gradient call; a persistent one (NewPersistentGradientTape) allows any number.
type GradientTape struct {
	persistent bool
	used       bool
}

// NewGradientTape returns a tape whose Gradient may be called once.
func NewGradientTape() *GradientTape { return &GradientTape{} }

// NewPersistentGradientTape returns a tape whose Gradient may be called several times.
func NewPersistentGradientTape() *GradientTape { return &GradientTape{persistent: true} }

// Watch makes tensors and variables differentiable sources: ops on them are recorded.
// Arguments may be *Tensor, *Variable, []*Tensor or []*Variable. Trainable variables are
// watched already. Watching a tensor marks that tensor value; do not watch a tensor that
// another goroutine is using at the same time.
func (tp *GradientTape) Watch(xs ...any) {
	for _, x := range flattenSources("Watch", xs) {
		switch v := x.(type) {
		case *Tensor:
			if v.node == nil {
				v.node = &node{watched: true}
			}
		case *Variable:
			v.watch()
		}
	}
}

// Gradient returns d target / d source for each source, like tape.gradient. Sources may be
// *Tensor (a watched tensor or a variable's Value), *Variable, []*Tensor or []*Variable; the
// result has one entry per source after flattening, nil for a source the target does not
// depend on. A non-scalar target is summed first (as in TensorFlow). It panics with an error
// wrapping ErrTape when a non-persistent tape is used twice.
func (tp *GradientTape) Gradient(target *Tensor, sources ...any) []*Tensor {
	srcs := tp.begin("Gradient", target, sources)
	tp.used = true
	return gradients(target, srcs, nil, false, !tp.persistent)
}

// begin checks a Gradient or GradientInto call (op) and returns its flattened sources.
func (tp *GradientTape) begin(op string, target *Tensor, sources []any) []any {
	if target == nil {
		panic(fmt.Errorf("%w: %s target is nil", ErrTape, op))
	}
	if tp.used && !tp.persistent {
		panic(fmt.Errorf("%w: %s can only be called once on a non-persistent tape; use tensor.NewPersistentGradientTape", ErrTape, op))
	}
	return flattenSources(op, sources)
}

// GradientInto is Gradient writing the gradient of each source into the buffer given for
// it: into has one entry per source after flattening, nil for a source whose gradient
// should be a fresh tensor as Gradient gives it, else a buffer of the source's size. The
// result's tensors for those sources use the buffers as their storage, so a training loop
// that keeps its gradient buffers from step to step allocates no gradient memory, and ops
// that can (Dense) compute the gradient there directly. The buffers must not overlap one
// another or any tensor of the computation. A source the target does not depend on gets
// nil, and its buffer is left as it was. It panics with an error wrapping ErrTape, naming
// the source, when into has the wrong length or a buffer the wrong size, and as Gradient
// does.
func (tp *GradientTape) GradientInto(target *Tensor, into [][]float32, sources ...any) []*Tensor {
	return tp.gradientInto("GradientInto", target, into, false, sources)
}

// GradientIntoStreaming is GradientInto for buffers that are handed over once it returns
// rather than read back at once by this core: an all-reduce's buckets, which the optimizer
// reads after the rest of the backward pass and other workers read from their cores, or
// replicas' gradients that an optimizer reads from every core. An op that computes a large
// gradient there directly (Dense's kernel gradient, on a CPU with AVX-512) writes it with
// streaming stores, which send the lines to memory without first reading their old
// contents into this core's caches: a buffer last written a step or more ago lies in
// memory or in another core's cache, and reading it in first would stall the product
// (bench/RESULTS.md, multiworker, "the buckets written with streaming stores"). The
// gradients are GradientInto's to the bit. For buffers this core reads back at once (one training loop
// that keeps one set from step to step and applies it next) use GradientInto: there the
// lines are still in its caches, and streaming stores would evict them.
func (tp *GradientTape) GradientIntoStreaming(target *Tensor, into [][]float32, sources ...any) []*Tensor {
	return tp.gradientInto("GradientIntoStreaming", target, into, true, sources)
}

// gradientInto is GradientInto (op names the method in errors) with stream as
// GradientIntoStreaming's.
func (tp *GradientTape) gradientInto(op string, target *Tensor, into [][]float32, stream bool, sources []any) []*Tensor {
	srcs := tp.begin(op, target, sources)
	if len(into) != len(srcs) {
		panic(fmt.Errorf("%w: %s has %d buffers for %d sources; give one per source (nil for a fresh tensor)", ErrTape, op, len(into), len(srcs)))
	}
	for i, b := range into {
		var n int
		switch v := srcs[i].(type) {
		case *Tensor:
			n = len(v.data)
		case *Variable:
			n = v.Size()
		}
		if b != nil && len(b) != n {
			panic(fmt.Errorf("%w: %s buffer %d has %d values, source %d has %d", ErrTape, op, i, len(b), i, n))
		}
	}
	tp.used = true
	return gradients(target, srcs, into, stream, !tp.persistent)
}

func flattenSources(op string, xs []any) []any {
	var out []any
	for i, x := range xs {
		switch v := x.(type) {
		case *Tensor:
			out = append(out, v)
		case *Variable:
			out = append(out, v)
		case []*Tensor:
			for _, t := range v {
				out = append(out, t)
			}
		case []*Variable:
			for _, t := range v {
				out = append(out, t)
			}
		case []any:
			out = append(out, flattenSources(op, v)...)
		default:
			panic(fmt.Errorf("%w: %s argument %d has type %T; want *tensor.Tensor, *tensor.Variable or a slice of them", ErrTape, op, i, x))
		}
	}
	for i, x := range out {
		if x == (*Tensor)(nil) || x == (*Variable)(nil) {
			panic(fmt.Errorf("%w: %s source %d is nil", ErrTape, op, i))
		}
	}
	return out
}

// gradients runs reverse-mode accumulation from target; into (nil, or one entry per source)
// holds the buffers of GradientInto, stream says they are handed over
// (GradientIntoStreaming).
func gradients(target *Tensor, srcs []any, into [][]float32, stream, release bool) []*Tensor {
	// Topological order of tracked tensors reachable from target (iterative DFS).
	var order []*Tensor
	seen := map[*Tensor]bool{}
	type frame struct {
		t *Tensor
		i int
	}
	if target.node != nil {
		stack := []frame{{target, 0}}
		seen[target] = true
		for len(stack) > 0 {
			f := &stack[len(stack)-1]
			n := f.t.node
			if f.i < len(n.inputs) {
				in := n.inputs[f.i]
				f.i++
				if in != nil && in.node != nil && !seen[in] {
					seen[in] = true
					stack = append(stack, frame{in, 0})
				}
				continue
			}
			order = append(order, f.t)
			stack = stack[:len(stack)-1]
		}
	}
	grads := make(map[*Tensor]*Tensor, len(order))
	if target.node != nil {
		grads[target] = OnesLike(target)
	}
	direct := directBuffers(order, srcs, into)
	var sc scratchRefs
	for i := len(order) - 1; i >= 0; i-- {
		t := order[i]
		g := grads[t]
		n := t.node
		if g == nil || n.backward == nil {
			continue
		}
		need := make([]bool, len(n.inputs))
		for j, in := range n.inputs {
			need[j] = in != nil && in.node != nil
		}
		var in [][]float32
		for j, x := range n.inputs {
			if b := direct[x]; b != nil && need[j] {
				if in == nil {
					in = make([][]float32, len(n.inputs))
				}
				in[j] = b
			}
		}
		gs := n.backward(g, need, gradDest{bufs: in, stream: stream})
		for j, in := range n.inputs {
			if !need[j] || gs[j] == nil {
				continue
			}
			sc.hold(gs[j])
			if prev := grads[in]; prev != nil {
				grads[in] = addSame(prev, gs[j])
				sc.drop(prev)
				sc.drop(gs[j])
			} else {
				grads[in] = gs[j]
			}
		}
		if t != target {
			delete(grads, t) // no longer needed unless it is a source
			if isSource(t, srcs) {
				grads[t] = g
			} else {
				sc.drop(g)
			}
		}
	}
	out := make([]*Tensor, len(srcs))
	for i, s := range srcs {
		switch v := s.(type) {
		case *Tensor:
			out[i] = grads[v]
		case *Variable:
			var sum *Tensor
			for _, t := range order {
				if t.node.variable == v && grads[t] != nil {
					if sum == nil {
						sum = grads[t]
					} else {
						sum = addSame(sum, grads[t])
					}
				}
			}
			out[i] = sum
		}
	}
	for i, g := range out {
		if g == nil {
			continue
		}
		data := g.data
		if i < len(into) && into[i] != nil {
			if !sameStart(data, into[i]) {
				copy(into[i], data)
			}
			data = into[i]
		}
		out[i] = &Tensor{shape: g.shape, data: data, device: g.device} // detached
	}
	if release {
		// A non-persistent tape is done with this graph: drop the records of the
		// computed tensors (not of the watched leaves) so that keeping the target, e.g.
		// summing losses over steps, does not keep every step's activations alive.
		for _, t := range order {
			if t.node.backward != nil {
				t.node = nil
			}
		}
	}
	return out
}

// directBuffers returns the buffers of GradientInto that a backward function may write a
// gradient into directly, by the leaf tensor whose gradient goes there: only a source's
// only leaf in the graph (a variable read once) with only one consumer, so that the one
// gradient written there is the whole of it. Every other buffer gets the final sum copied
// in.
func directBuffers(order []*Tensor, srcs []any, into [][]float32) map[*Tensor][]float32 {
	if into == nil {
		return nil
	}
	uses := map[*Tensor]int{}
	for _, t := range order {
		for _, in := range t.node.inputs {
			if in != nil && in.node != nil {
				uses[in]++
			}
		}
	}
	out := map[*Tensor][]float32{}
	for i, s := range srcs {
		if into[i] == nil {
			continue
		}
		var leaf *Tensor
		switch v := s.(type) {
		case *Tensor:
			if v.node != nil && v.node.backward == nil {
				leaf = v
			}
		case *Variable:
			for _, t := range order {
				if t.node.variable == v {
					if leaf != nil {
						leaf = nil // read more than once: the parts are summed
						break
					}
					leaf = t
				}
			}
		}
		if leaf != nil && uses[leaf] == 1 {
			out[leaf] = into[i]
		}
	}
	return out
}

// sameStart reports whether a and b start at the same element.
func sameStart(a, b []float32) bool {
	return len(a) > 0 && len(b) > 0 && unsafe.SliceData(a) == unsafe.SliceData(b)
}

// scratchRefs counts, for each scratch buffer a backward function returned (newGradOn),
// the entries of the gradients walk's map whose data lies in it (the tensor itself, or a
// view such as a reshape's gradient), and gives the buffer back to the pool when the
// count drops to zero. Only the map's entries outlive a backward call (backward functions
// keep no gradients), so a buffer no entry refers to is garbage; the results are built
// from entries, so their storage is never given back.
type scratchRefs struct {
	bufs []*[]float32
	refs []int
}

// owner returns the index of the scratch buffer holding t's data, or -1.
func (sc *scratchRefs) owner(t *Tensor) int {
	if len(t.data) == 0 {
		return -1
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(t.data)))
	for i, b := range sc.bufs {
		base := uintptr(unsafe.Pointer(unsafe.SliceData(*b)))
		if p >= base && p < base+uintptr(cap(*b))*4 {
			return i
		}
	}
	return -1
}

// hold counts one more map entry referring to t's data, registering t's own scratch
// buffer first.
func (sc *scratchRefs) hold(t *Tensor) {
	i := sc.owner(t)
	if i < 0 && t.scratch != nil {
		sc.bufs = append(sc.bufs, t.scratch)
		sc.refs = append(sc.refs, 0)
		i = len(sc.bufs) - 1
	}
	if i >= 0 {
		sc.refs[i]++
	}
}

// drop counts one map entry fewer referring to t's data, giving the buffer back at zero.
func (sc *scratchRefs) drop(t *Tensor) {
	i := sc.owner(t)
	if i < 0 {
		return
	}
	if sc.refs[i]--; sc.refs[i] == 0 {
		packPool.Put(sc.bufs[i])
		last := len(sc.bufs) - 1
		sc.bufs[i], sc.refs[i] = sc.bufs[last], sc.refs[last]
		sc.bufs, sc.refs = sc.bufs[:last], sc.refs[:last]
	}
}

func isSource(t *Tensor, srcs []any) bool {
	for _, s := range srcs {
		if s == any(t) {
			return true
		}
	}
	return t.node != nil && t.node.variable != nil
}

// addSame adds two tensors of the same shape without recording.
func addSame(a, b *Tensor) *Tensor {
	out := &Tensor{shape: a.shape, data: make([]float32, len(a.data)), device: a.device}
	for i := range out.data {
		out.data[i] = a.data[i] + b.data[i]
	}
	return out
}

// StopGradient returns t's values without its gradient record (tf.stop_gradient).
func StopGradient(t *Tensor) *Tensor {
	return &Tensor{shape: t.shape, data: t.data, device: t.device}
}

// Variable is a mutable, named tensor: a model parameter. Its Value is a tensor that
// gradient tapes differentiate against when the variable is trainable (or watched).
// Reads and assignments are safe from several goroutines.
type Variable struct {
	mu        sync.RWMutex
	name      string
	value     *Tensor
	trainable bool
	watched   bool
	dev       string
	// kept: Value handed out the current value's memory, which callers may keep, so an
	// update writes into new memory. Only StepValue reads since the memory was allocated:
	// UpdateData may write into it (see StepValue).
	kept atomic.Bool
}

// NewVariable returns a variable holding a copy of init, placed on the current device scope
// (or the default device).
func NewVariable(name string, init *Tensor, trainable bool) *Variable {
	if init == nil {
		panic(argErr("NewVariable", "variable %q has a nil initial value", name))
	}
	v := &Variable{name: name, trainable: trainable, dev: device.Placement("")}
	device.LogOp("VarHandleOp", v.dev)
	v.set(append([]float32(nil), init.data...), init.Shape(), true)
	return v
}

// set makes data the variable's value; fresh data (new memory) has not been handed out yet.
func (v *Variable) set(data []float32, shape []int, fresh bool) {
	if fresh {
		v.kept.Store(false)
	}
	t := &Tensor{shape: shape, data: data, device: v.dev}
	if v.trainable || v.watched {
		t.node = &node{variable: v}
	}
	v.value = t
}

func (v *Variable) watch() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.watched {
		v.watched = true
		if v.value.node == nil {
			v.set(v.value.data, v.value.shape, false)
		}
	}
}

// Value returns the variable's current value. The tensor stays the same until the next
// assignment; later assignments do not change it.
func (v *Variable) Value() *Tensor {
	v.mu.RLock()
	defer v.mu.RUnlock()
	v.kept.Store(true)
	return v.value
}

// StepValue returns the variable's current value, as Value does, to a computation that
// drops it, and every tensor computed from it, before the variable's next update: a training
// step, which reads the weights, computes their gradients and then updates them. Then the
// update (UpdateData) may write the new values into the same memory rather than a copy,
// which saves a pass over the weights and their garbage (keras's Fit reads its weights so).
// A value that may be kept across an update must come from Value: once Value has handed
// out the current memory, updates write into new memory.
func (v *Variable) StepValue() *Tensor {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.value
}

// AsRead returns a tensor with t's values that counts as a read of v: a GradientTape
// differentiates with respect to v through it, as through v.Value(). It is how a value of
// v kept elsewhere (on a parameter server) enters a computation while several steps read
// v at once, each with the values it fetched. t must have v's shape.
func (v *Variable) AsRead(t *Tensor) (*Tensor, error) {
	if t == nil {
		return nil, argErr("AsRead", "variable %q: value is nil", v.name)
	}
	v.mu.RLock()
	shape, track := v.value.shape, v.trainable || v.watched
	v.mu.RUnlock()
	if !sameShape(shape, t.shape) {
		return nil, argErr("AsRead", "variable %q has shape %v, the value read has shape %v", v.name, shape, t.shape)
	}
	out := &Tensor{shape: shape, data: t.data, device: v.dev}
	if track {
		out.node = &node{variable: v}
	}
	return out, nil
}

// Name returns the variable's name.
func (v *Variable) Name() string { return v.name }

// Shape returns the variable's shape.
func (v *Variable) Shape() []int { return v.StepValue().Shape() }

// Size returns the number of values in the variable.
func (v *Variable) Size() int { return v.StepValue().Size() }

// Device returns the full name of the device the variable lives on.
func (v *Variable) Device() string { return v.dev }

// Trainable reports whether gradient tapes watch the variable automatically.
func (v *Variable) Trainable() bool { return v.trainable }

// String formats the variable like TensorFlow's tf.Variable.
func (v *Variable) String() string {
	return fmt.Sprintf("<tf.Variable '%s' shape=%v dtype=float32, numpy=%v>", v.name, v.Shape(), v.StepValue().data)
}

func (v *Variable) update(op string, t *Tensor, f func(old, x float32) float32) {
	if t == nil {
		panic(argErr(op, "variable %q: value is nil", v.name))
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if !sameShape(v.value.shape, t.shape) && !(len(t.data) == 1 && f != nil) {
		panic(shapeErr(op, "variable %q has shape %v, value has shape %v", v.name, v.value.shape, t.shape))
	}
	device.LogOp(op, v.dev)
	data := make([]float32, len(v.value.data))
	if f == nil {
		copy(data, t.data)
	} else if len(t.data) == 1 && len(data) != 1 {
		x := t.data[0]
		for i, o := range v.value.data {
			data[i] = f(o, x)
		}
	} else {
		for i, o := range v.value.data {
			data[i] = f(o, t.data[i])
		}
	}
	v.set(data, v.value.shape, true)
}

// Assign sets the variable's value to t (same shape).
func (v *Variable) Assign(t *Tensor) { v.update("AssignVariableOp", t, nil) }

// AssignAdd adds t (same shape, or one value) to the variable.
func (v *Variable) AssignAdd(t *Tensor) {
	v.update("AssignAddVariableOp", t, func(o, x float32) float32 { return o + x })
}

// AssignSub subtracts t (same shape, or one value) from the variable.
func (v *Variable) AssignSub(t *Tensor) {
	v.update("AssignSubVariableOp", t, func(o, x float32) float32 { return o - x })
}

// AssignData sets the variable's value from raw data of its shape, copying it. It is the
// fast path for optimizers that compute updates on []float32.
func (v *Variable) AssignData(data []float32) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(data) != len(v.value.data) {
		panic(shapeErr("AssignVariableOp", "variable %q has %d values, data has %d", v.name, len(v.value.data), len(data)))
	}
	device.LogOp("AssignVariableOp", v.dev)
	v.set(append([]float32(nil), data...), v.value.shape, true)
}

// UpdateData sets the variable's value to the current one updated by f in place: the fast
// path for optimizers that update []float32. When Value has handed out the current value,
// f updates a copy and that value stays as it was; when only StepValue has read it since
// it was made, f updates it where it lies (no copy, no garbage).
func (v *Variable) UpdateData(f func(data []float32)) {
	v.mu.Lock()
	defer v.mu.Unlock()
	device.LogOp("AssignVariableOp", v.dev)
	if !v.kept.Load() {
		f(v.value.data)
		v.set(v.value.data, v.value.shape, false)
		return
	}
	data := append([]float32(nil), v.value.data...)
	f(data)
	v.set(data, v.value.shape, true)
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
