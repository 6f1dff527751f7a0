package keras

import (
	"context"
	"fmt"
	"io"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"godist/distlib/device"
	"godist/distlib/distribute"
	"godist/distlib/keras/layers"
	"godist/distlib/tensor"
)

// Model is a Sequential model: layers applied in order, like tf.keras.Sequential.
//
// A model captures distribute.GetStrategy() when it is made (inside strategy.Scope, the
// scope's strategy) and trains through it: every step splits the global batch across the
// replicas, runs them in parallel, all-reduces the gradients and updates every copy of the
// variables.
type Model struct {
	// StopTraining ends Fit after the current batch when set, by a callback for example.
	StopTraining bool

	interrupted bool // the last Fit stopped because its context was done

	// Under a ParameterServerStrategy (ps_fit.go, ps_remote.go), in a worker task: the
	// values its last pipelined step read and the memory its training steps use.
	psCache  psWorkerCache
	psStates psStatePool

	name      string
	layers    []layers.Layer
	strategy  distribute.Strategy
	seed      uint64
	placement // where the variables live (store.go)

	built      bool
	inputShape []int
	outShapes  [][]int
	paramRange [][2]int // per layer: [first, end) in the flat parameter list
	params     []paramInfo
	devices    []string             // device of each variable copy
	vars       [][]*tensor.Variable // vars[copy][param]

	optimizer *Optimizer
	loss      *Loss
	metrics   []string

	frozen  bool // SetTrainable(false) (trainable.go)
	fitting bool // a Fit runs: the trainable set is fixed until it ends

	step  int64             // training steps taken, drives dropout seeds
	grads [][][]float32     // each replica's gradient buffers, kept from step to step (fit.go)
	reuse [][]*tensor.Reuse // each replica's output storage per layer, kept from step to step (fit.go)
	mw    multiWorker       // training across workers (multiworker.go)
	// counters of the step paths taken, which tests read.
	counters struct {
		replicaTermSteps atomic.Int64 // replicas' gradients summed as the optimizer read them (terms.go)
		sharedTermSteps  atomic.Int64 // some gradient read from every worker's memory (multiworker.go)
	}
	stdout io.Writer // where text goes; nil: os.Stdout at the time of writing
	mu     sync.Mutex
}

type paramInfo struct {
	name      string
	trainable bool // trains now: declared, its layer and the model trainable (trainable.go)
	declared  bool // the layer declared it trainable
	layer     int  // index of its layer
	shape     []int
}

var (
	modelNamesMu sync.Mutex
	modelNames   int
)

// Sequential returns a model applying ls in order. The input shape comes from a leading
// layers.Input, a layers.InputShape option of the first layer, or the first batch the
// model sees. It panics when a layer is nil, appears twice, or two layers share a name.
//
// The model holds the weights of its layers: a layer serves one model. Where Keras code
// reuses trained layers in a new model (sharing their weights), make new layers and copy
// the values with GetWeights and SetWeights; building a model with a layer another model
// built panics with an error saying so (see layers.Owner).
func Sequential(ls ...layers.Layer) *Model {
	seen := map[string]bool{}
	var seenLayers []layers.Layer
	for i, l := range ls {
		if l == nil {
			panic(fmt.Errorf("%w: Sequential: layer %d is nil", ErrInvalidArgument, i))
		}
		if containsLayer(seenLayers, l) {
			panic(fmt.Errorf("%w: Sequential: layer %d (%s) appears twice; make a new layer for each position", ErrInvalidArgument, i, l.Name()))
		}
		if seen[l.Name()] {
			panic(fmt.Errorf("%w: Sequential: two layers are named %q", ErrInvalidArgument, l.Name()))
		}
		seen[l.Name()] = true
		seenLayers = append(seenLayers, l)
	}
	modelNamesMu.Lock()
	name := "sequential"
	if modelNames > 0 {
		name += "_" + strconv.Itoa(modelNames)
	}
	modelNames++
	modelNamesMu.Unlock()
	m := &Model{name: name, layers: append([]layers.Layer(nil), ls...), strategy: distribute.GetStrategy(), seed: nextSeed()}
	m.placement = newPlacement()
	if len(ls) > 0 {
		if in := ls[0].InputShape(); in != nil {
			if err := m.build(in); err != nil {
				panic(err)
			}
		}
	}
	return m
}

// ClearSession restarts the generated model and layer names ("sequential", "dense", ...),
// like keras.backend.clear_session.
func ClearSession() {
	modelNamesMu.Lock()
	modelNames = 0
	modelNamesMu.Unlock()
	layers.ResetNames()
}

func (m *Model) out() io.Writer {
	if m.stdout != nil {
		return m.stdout
	}
	return os.Stdout
}

// Name returns the model's name ("sequential", "sequential_1", ...).
func (m *Model) Name() string { return m.name }

// Layers returns the model's layers.
func (m *Model) Layers() []layers.Layer { return append([]layers.Layer(nil), m.layers...) }

// Strategy returns the distribution strategy the model trains through.
func (m *Model) Strategy() distribute.Strategy { return m.strategy }

// Optimizer returns the optimizer Compile set, or nil.
func (m *Model) Optimizer() *Optimizer { return m.optimizer }

// Loss returns the loss Compile set, or nil.
func (m *Model) Loss() *Loss { return m.loss }

// Built reports whether the model knows its input shape and has its variables.
func (m *Model) Built() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.built
}

// Build creates the model's variables for examples of inputShape (without the batch
// dimension), like model.build((None, ...)). It is done automatically on first use.
func (m *Model) Build(inputShape ...int) (err error) {
	defer recoverErr("Build", &err)
	return m.build(inputShape)
}

// buildContext creates the model's variables for examples of shape in, placed by the
// store (store.go) within ctx.
func (m *Model) buildContext(ctx context.Context, in []int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.built {
		if !sameInts(in, m.inputShape) {
			return fmt.Errorf("%w: model %s was built for examples of shape %v, got %v", ErrShape, m.name, m.inputShape, in)
		}
		return nil
	}
	if len(m.layers) == 0 {
		return fmt.Errorf("%w: model %s has no layers", ErrInvalidArgument, m.name)
	}
	if err := m.checkLayerOwners(); err != nil {
		return err
	}
	var params []paramInfo
	var inits []*tensor.Tensor
	ranges := make([][2]int, len(m.layers))
	shapes := make([][]int, len(m.layers))
	cur := append([]int(nil), in...)
	for i, l := range m.layers {
		if i > 0 && l.InputShape() != nil {
			if _, ok := l.(*layers.InputLayer); ok {
				return fmt.Errorf("%w: model %s: layers.Input must come first, it is layer %d", ErrInvalidArgument, m.name, i)
			}
		}
		out, ps, err := l.Build(cur, nextSeed())
		if err != nil {
			return fmt.Errorf("keras: build layer %d (%s) for input %v: %w", i, l.Name(), cur, err)
		}
		ranges[i] = [2]int{len(params), len(params) + len(ps)}
		for _, p := range ps {
			params = append(params, paramInfo{name: l.Name() + "/" + p.Name, trainable: p.Trainable && !m.frozen && layers.LayerTrainable(l),
				declared: p.Trainable, layer: i, shape: p.Init.Shape()})
			inits = append(inits, p.Init)
		}
		shapes[i] = out
		cur = out
	}
	st, err := m.newStore(ctx, params, inits)
	if err != nil {
		return err
	}
	m.inputShape, m.outShapes, m.paramRange, m.params, m.store = append([]int(nil), in...), shapes, ranges, params, st
	m.built = true
	m.ownLayers()
	return nil
}

// ownLayers records m as the owner of its layers' weights (see checkLayerOwners).
func (m *Model) ownLayers() {
	for _, l := range m.layers {
		layers.SetOwner(l, m, m.name)
	}
}

// checkLayerOwners returns an error naming the first of m's layers that another model
// built (layers.Owner): a Go model holds the weights of its layers, so reusing a layer in
// a second model (Keras' way of sharing a pretrained base) would silently start it from
// new weights.
func (m *Model) checkLayerOwners() error {
	for i, l := range m.layers {
		if id, owner := layers.Owner(l); id != nil && id != m {
			return fmt.Errorf("%w: model %s: layer %d (%s) already belongs to model %s, which holds its weights; a Go model "+
				"does not share a layer's weights with another model as Keras does, so the layer would start here from new "+
				"weights: make new layers for this model (a func that returns them) and copy the trained weights from model %s: "+
				"weights := newModel.GetWeights(); copy(weights, trained.GetWeights()[:n]); newModel.SetWeights(weights)",
				ErrInvalidArgument, m.name, i, l.Name(), owner, owner)
		}
	}
	return nil
}

// ensureBuiltContext builds the model from a batch's shape; the variables' placement
// (the chief's broadcast, the parameter servers) waits within ctx.
func (m *Model) ensureBuiltContext(ctx context.Context, x *tensor.Tensor) {
	if m.Built() {
		return
	}
	s := x.Shape()
	if len(s) < 2 {
		panic(fmt.Errorf("%w: model %s got inputs of shape %v; want a batch (batch, ...)", ErrShape, m.name, s))
	}
	if err := m.buildContext(ctx, s[1:]); err != nil {
		panic(err)
	}
}

// Compile configures the model for training, like model.compile(optimizer, loss, metrics).
// metrics may name "accuracy" (the accuracy that fits the loss, as in Keras),
// "sparse_categorical_accuracy" or "binary_accuracy". A nil optimizer is Keras' default,
// "rmsprop" (keras.RMSprop(0.001)), so that model.compile(loss="mse") translates to
// model.Compile(nil, keras.MeanSquaredError()). It panics on a nil loss or an unknown
// metric.
func (m *Model) Compile(opt *Optimizer, loss *Loss, metrics ...string) {
	if loss == nil {
		panic(fmt.Errorf("%w: Compile needs a loss, such as keras.SparseCategoricalCrossentropy(true) or keras.MeanSquaredError()", ErrInvalidArgument))
	}
	if opt == nil {
		opt = RMSprop(0.001)
	}
	seen := map[string]bool{}
	for _, name := range metrics {
		if _, err := compiledMetric(name, loss); err != nil {
			panic(err)
		}
		if seen[name] {
			panic(fmt.Errorf("%w: Compile: metric %q given twice", ErrInvalidArgument, name))
		}
		seen[name] = true
	}
	m.optimizer, m.loss, m.metrics = opt, loss, append([]string(nil), metrics...)
}

// copyFor returns the variable copy replica r computes with.
func (m *Model) copyFor(r int) int {
	if len(m.vars) == 1 {
		return 0
	}
	return r
}

// copyOnDevice returns the variable copy placed on dev, or copy 0.
func (m *Model) copyOnDevice(dev string) int {
	for c, d := range m.devices {
		if d == dev {
			return c
		}
	}
	return 0
}

// forward runs the layers with variable copy c.
func (m *Model) forward(ctx context.Context, c int, x *tensor.Tensor, training bool, stepSeed uint64) *tensor.Tensor {
	return m.forwardRead(ctx, c, x, training, stepSeed, (*tensor.Variable).Value, nil)
}

// forwardRead is forward reading the variables with read: Value, or StepValue in a
// training step (see stepValuesOf); reuse as in applyLayers.
func (m *Model) forwardRead(ctx context.Context, c int, x *tensor.Tensor, training bool, stepSeed uint64, read func(*tensor.Variable) *tensor.Tensor, reuse []*tensor.Reuse) *tensor.Tensor {
	if got := x.Shape(); len(got) < 1 || !sameInts(got[1:], m.inputShape) {
		panic(fmt.Errorf("%w: model %s expects examples of shape %v, got a batch of shape %v", ErrShape, m.name, m.inputShape, got))
	}
	return m.store.forward(ctx, m, c, x, training, stepSeed, read, reuse)
}

// forwardVals runs the layers with the given values of the variables (one per parameter);
// reuse as in applyLayers.
func (m *Model) forwardVals(vals []*tensor.Tensor, x *tensor.Tensor, training bool, stepSeed uint64, reuse []*tensor.Reuse) *tensor.Tensor {
	if got := x.Shape(); len(got) < 1 || !sameInts(got[1:], m.inputShape) {
		panic(fmt.Errorf("%w: model %s expects examples of shape %v, got a batch of shape %v", ErrShape, m.name, m.inputShape, got))
	}
	return m.applyLayers(x, 0, len(m.layers), func(i int) []*tensor.Tensor {
		r := m.paramRange[i]
		return vals[r[0]:r[1]]
	}, training, stepSeed, reuse)
}

// applyLayers runs layers first..end-1 on x, layer i with the parameter values valsOf(i):
// the one layer loop of every training path (Fit, custom loops, the multi-worker segments,
// the ps workers). Two layers one op computes together (a convolution with its ReLU and the
// max pool after it, layers.FusedForward) run as that op: the intermediate output is never
// made.
//
// reuse (one per layer, or nil) is given by a training step whose tensors are all dead
// when the step is over (Fit's, see stepReuse): the fused op then writes its output into
// the storage of the previous step's (tensor.Reuse) when only the step reads it
// (layers.OutputReusable).
func (m *Model) applyLayers(x *tensor.Tensor, first, end int, valsOf func(i int) []*tensor.Tensor, training bool, stepSeed uint64, reuse []*tensor.Reuse) *tensor.Tensor {
	for i := first; i < end; i++ {
		l := m.layers[i]
		if i+1 < end && m.paramRange[i+1][0] == m.paramRange[i+1][1] {
			if f := layers.FusedForward(l, m.layers[i+1]); f != nil {
				var r *tensor.Reuse
				if reuse != nil && layers.OutputReusable(m.layers, i+1) {
					r = reuse[i]
				}
				x = f(x, valsOf(i), r)
				i++
				continue
			}
		}
		x = l.Forward(x, valsOf(i), training, mix(stepSeed, uint64(i)))
	}
	return x
}

// Call applies the model to a batch x, like model(x, training=training) in a custom
// training loop; ops on the trainable variables are recorded for a GradientTape. Under a
// mirroring strategy it uses the replica's copy of the variables: the one on the device of
// the replica running it (inside strategy.Run), else on x's device.
//
// Under a ParameterServerStrategy (the model made in its scope), the variables live on the
// parameter servers: Call reads their current values (one round trip), so the steps a
// ClusterCoordinator schedules each compute with the values they read, and the optimizer's
// ApplyGradients pushes the gradients with respect to TrainableVariables to the ps.
func (m *Model) Call(x *tensor.Tensor, training bool) *tensor.Tensor {
	if x == nil {
		panic(fmt.Errorf("%w: model %s called with a nil input", ErrInvalidArgument, m.name))
	}
	m.ensureBuilt(x)
	m.mu.Lock()
	m.step++
	seed := mix(m.seed, uint64(m.step))
	st := m.store
	m.mu.Unlock()
	return st.call(m, x, training, seed)
}

// currentCopy returns the variable copy for code running in the calling goroutine: the one
// on its device scope (a replica function of strategy.Run runs in its replica's device
// scope), else the one on dev, else copy 0.
func (m *Model) currentCopy(dev string) int {
	if cur := device.Current(); cur != "" {
		for c, d := range m.devices {
			if d == cur {
				return c
			}
		}
	}
	return m.copyOnDevice(dev)
}

// TrainableVariables returns the model's trainable variables, like
// model.trainable_variables. Under a mirroring strategy, inside strategy.Run it returns the
// running replica's copy, elsewhere the first copy. The model must be built.
//
// In a custom loop, optimizer.ApplyGradients inside strategy.Run sums the replicas'
// gradients and gives every copy the same update, as TensorFlow's apply_gradients does:
//
//	grads := tape.Gradient(loss, model.TrainableVariables())
//	optimizer.ApplyGradients(grads, model.TrainableVariables())
//
// Under a ParameterServerStrategy they stand for the ps variables and are refreshed from
// the parameter servers on each call (one round trip), so their values are current.
func (m *Model) TrainableVariables() []*tensor.Variable {
	return m.variables(m.scopeCopy(), true)
}

// Variables returns all the model's variables, the copy TrainableVariables would choose.
func (m *Model) Variables() []*tensor.Variable { return m.variables(m.scopeCopy(), false) }

// scopeCopy is the copy of the calling goroutine's device scope, or copy 0.
func (m *Model) scopeCopy() int {
	m.mu.Lock()
	built := m.built
	m.mu.Unlock()
	if !built {
		return 0
	}
	return m.currentCopy("")
}

// ReplicaTrainableVariables returns the trainable variables replica r computes with.
func (m *Model) ReplicaTrainableVariables(r int) []*tensor.Variable {
	return m.variables(m.copyFor(r), true)
}

func (m *Model) variables(c int, trainableOnly bool) []*tensor.Variable {
	m.refresh()
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.built {
		panic(fmt.Errorf("%w: model %s is not built yet; call it on a batch, Fit it or give the first layer an input shape", ErrInvalidArgument, m.name))
	}
	if err := m.syncTrainableLocked(); err != nil {
		panic(err)
	}
	return m.store.variables(m, c, trainableOnly)
}

// refreshContext brings the model's local variable copies up to date (from the parameter
// servers, where they live there) before they are read, within ctx.
func (m *Model) refreshContext(ctx context.Context) {
	m.mu.Lock()
	st := m.store
	m.mu.Unlock()
	if st != nil {
		st.refresh(ctx, m)
	}
}

// GetWeights returns copies of the values of all variables, in order.
func (m *Model) GetWeights() []*tensor.Tensor {
	vs := m.Variables()
	out := make([]*tensor.Tensor, len(vs))
	for i, v := range vs {
		out[i] = v.Value().Clone()
	}
	return out
}

// SetWeights assigns ws to all variables (every replica copy), in GetWeights' order; it
// returns an error naming the first variable whose shape does not match.
func (m *Model) SetWeights(ws []*tensor.Tensor) (err error) {
	defer recoverErr("SetWeights", &err)
	vs := m.Variables()
	if len(ws) != len(vs) {
		return fmt.Errorf("%w: SetWeights got %d tensors for %d variables", ErrWeights, len(ws), len(vs))
	}
	for i, w := range ws {
		if w == nil || !sameInts(w.Shape(), vs[i].Shape()) {
			var got any = "nil"
			if w != nil {
				got = w.Shape()
			}
			return fmt.Errorf("%w: variable %s has shape %v, value %d has shape %v", ErrWeights, vs[i].Name(), vs[i].Shape(), i, got)
		}
	}
	m.assignAll(func(i int) []float32 { return ws[i].Data() })
	return nil
}

// assignAll sets variable i of every copy to data(i).
func (m *Model) assignAll(data func(i int) []float32) {
	m.mu.Lock()
	st := m.store
	m.mu.Unlock()
	st.assign(m, data)
}

// CountParams returns the number of values in the model's variables.
func (m *Model) CountParams() int {
	n := 0
	for _, p := range m.params {
		n += prodInts(p.shape)
	}
	return n
}

func prodInts(s []int) int {
	n := 1
	for _, d := range s {
		n *= d
	}
	return n
}

// Summary prints the model's layers, output shapes and parameter counts like Keras'
// model.summary().
func (m *Model) Summary() { fmt.Fprint(m.out(), m.SummaryString()) }

// SummaryString returns what Summary prints.
func (m *Model) SummaryString() string {
	if !m.Built() {
		return fmt.Sprintf("Model: %q\n(not built yet: give the first layer an input shape, or call the model on a batch)\n", m.name)
	}
	const width = 65
	cols := []int{29, 55, 65}
	row := func(fields ...string) string {
		line := ""
		for i, f := range fields {
			if i > 0 {
				line = line[:len(line)-1] + " "
			}
			line += f
			if len(line) > cols[i] {
				line = line[:cols[i]]
			}
			line += strings.Repeat(" ", cols[i]-len(line))
		}
		return strings.TrimRight(line, " ") + "\n"
	}
	m.mu.Lock()
	err := m.syncTrainableLocked()
	m.mu.Unlock()
	if err != nil {
		panic(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Model: %q\n", m.name)
	b.WriteString(strings.Repeat("_", width) + "\n")
	b.WriteString(row(" Layer (type)", "Output Shape", "Param #"))
	b.WriteString(strings.Repeat("=", width) + "\n")
	total, trainable := 0, 0
	first := true
	for i, l := range m.layers {
		if _, ok := l.(*layers.InputLayer); ok {
			continue
		}
		n := 0
		for p := m.paramRange[i][0]; p < m.paramRange[i][1]; p++ {
			k := prodInts(m.params[p].shape)
			n += k
			if m.params[p].trainable {
				trainable += k
			}
		}
		total += n
		shape := "(None"
		for _, d := range m.outShapes[i] {
			shape += ", " + strconv.Itoa(d)
		}
		shape += ")"
		if !first {
			b.WriteString("\n")
		}
		first = false
		b.WriteString(row(fmt.Sprintf(" %s (%s)", l.Name(), l.Class()), shape, strconv.Itoa(n)))
	}
	b.WriteString(strings.Repeat("=", width) + "\n")
	fmt.Fprintf(&b, "Total params: %s\nTrainable params: %s\nNon-trainable params: %s\n",
		commas(total), commas(trainable), commas(total-trainable))
	b.WriteString(strings.Repeat("_", width) + "\n")
	return b.String()
}

func commas(n int) string {
	s := strconv.Itoa(n)
	var out []byte
	for i := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}

// containsLayer reports whether l is one of ls. A layer whose dynamic type is not comparable
// (a notebook cell's layer type reaches compiled code in the interpreter's wrapper struct,
// which holds funcs) is never found here; the duplicate name check catches it instead.
func containsLayer(ls []layers.Layer, l layers.Layer) bool {
	t := reflect.TypeOf(l)
	if !t.Comparable() {
		return false
	}
	for _, o := range ls {
		if reflect.TypeOf(o) == t && o == l {
			return true
		}
	}
	return false
}

// layerPenalty returns layer i's regularization penalty for the parameter values vals (one
// per model parameter), or nil when the layer has none.
func (m *Model) layerPenalty(i int, vals []*tensor.Tensor) *tensor.Tensor {
	reg, ok := m.layers[i].(layers.Regularized)
	if !ok {
		return nil
	}
	r := m.paramRange[i]
	return reg.RegularizationLoss(vals[r[0]:r[1]])
}

// regularization returns the sum of the layers' penalties for the parameter values vals
// divided by the replicas in sync (tf.nn.scale_regularization_loss: every replica adds its
// share, the gradient all-reduce sums them), or nil when no layer has a regularizer.
func (m *Model) regularization(vals []*tensor.Tensor) *tensor.Tensor {
	return m.penalties(0, len(m.layers), vals)
}

// penalties is regularization over layers [first, end).
func (m *Model) penalties(first, end int, vals []*tensor.Tensor) *tensor.Tensor {
	var sum *tensor.Tensor
	for i := first; i < end; i++ {
		if p := m.layerPenalty(i, vals); p != nil {
			if sum == nil {
				sum = p
			} else {
				sum = tensor.Add(sum, p)
			}
		}
	}
	if sum == nil {
		return nil
	}
	return tensor.Scale(sum, 1/float32(max(1, m.strategy.NumReplicasInSync())))
}

// withPenalty adds the scaled penalty reg (nil: none) to a replica's loss and to its loss
// statistic st[0] (the loss summed over the global batch, so that the logged loss is the
// data loss plus the penalty, as Keras logs it).
func withPenalty(loss, reg *tensor.Tensor, st []float32, globalBatch int) *tensor.Tensor {
	if reg == nil {
		return loss
	}
	st[0] += reg.Item() * float32(globalBatch)
	return tensor.Add(loss, reg)
}

// Losses returns the regularization penalties of the layers that have a regularizer, with
// the variables' current values, like model.losses: a custom loop adds them to its loss
// (scaled by the replicas in sync, as distribute.ComputeAverageLoss scales the data loss:
// tf.nn.scale_regularization_loss). Computed from TrainableVariables (the running
// replica's copy; under a ParameterServerStrategy, values read from the ps), they are
// differentiable with respect to it.
func (m *Model) Losses() []*tensor.Tensor {
	if !m.Built() {
		panic(fmt.Errorf("%w: model %s is not built yet; call it on a batch first", ErrInvalidArgument, m.name))
	}
	m.mu.Lock()
	st := m.store
	m.mu.Unlock()
	vals := st.values(m)
	var out []*tensor.Tensor
	for i := range m.layers {
		if p := m.layerPenalty(i, vals); p != nil {
			out = append(out, p)
		}
	}
	return out
}
