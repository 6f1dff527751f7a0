package mesh

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"runtime/debug"
	"sync"
	"time"

	"godist/distlib/collective"
	"godist/distlib/device"
	"godist/distlib/keras"
	"godist/distlib/keras/layers"
	"godist/distlib/tensor"
	"godist/distlib/transport"
)

// How a model runs on a mesh (the engine keras asks for while a distribution is set).
//
// Every device of the mesh holds its part of every variable: the whole variable when its
// layout is replicated, else the block DistributeTensor gives it. A step runs one goroutine
// per device (SPMD): device (b, k) — b its position on the batch axis, k on the model
// axis — takes rows b of the global batch and runs the layers on them. An activation is
// either replicated (R: all features on every device of the model axis) or sharded (S:
// device k holds feature block k). A Dense kernel laid out (nil, "model") is split by
// columns: it needs R input and gives S output; (model, nil) is split by rows: it needs S
// input (an R input is sliced, no communication) and gives partial sums that an all-reduce
// (R output) or, when the next Dense is row-split too, a reduce-scatter (S output) adds.
// A layer that needs R input after an S activation all-gathers it (Flatten, softmax,
// replicated layers, the loss).
//
// Backward runs the same stages in reverse. The gradient of a replicated tensor is kept as
// partial sums over the model axis (the loss of each of the M devices of a row group is
// scaled by 1/M), so the backward of all-gather is reduce-scatter, of reduce-scatter
// all-gather, of all-reduce all-reduce, and of a slice a zero pad. Each local stage is
// differentiated with its own tape from its watched input, chained by
// d/dx sum(out * upstream). Finally, gradients of sharded variables are all-reduced over
// the batch axis (the devices that hold the same block), those of replicated variables
// over the whole mesh, and the optimizer updates every device's part.
//
// Dropout draws its mask for the whole global batch with the seed a single device would
// use and applies each device's block, so that every layout follows the single-device run.
// The collectives are distlib/collective's ring algorithms (and a ring reduce-scatter
// here) over transport.NewMem groups: the devices are goroutines of one process.

// DefaultStepTimeout bounds one step's collectives on the mesh.
const DefaultStepTimeout = 2 * time.Minute

func init() {
	keras.SetDistributionHook(func() keras.MeshEngine {
		d := GetDistribution()
		if d == nil {
			return nil
		}
		return NewEngine(d)
	})
}

// Engine runs a keras model laid out by a Distribution; it implements keras.MeshEngine.
// keras makes one for every model built while a distribution is set.
type Engine struct {
	dist    Distribution
	mesh    *DeviceMesh
	bAxis   int // mesh axis of the batch
	mAxis   int // mesh axis of the model, -1 when none
	nb, nm  int
	layers  []layers.Layer
	params  []keras.MeshParam
	plans   []layerPlan
	split   []int // per param: the dimension split along the model axis, -1 replicated
	layouts []*TensorLayout

	mu       sync.Mutex
	vars     [][]*tensor.Variable // [device][param]
	lastRows [][2]int             // rows of the last global batch each device took (tests)
}

var _ keras.MeshEngine = (*Engine)(nil)

// NewEngine returns an engine for distribution d (keras calls it through its hook).
func NewEngine(d Distribution) *Engine { return &Engine{dist: d, mesh: d.DeviceMesh()} }

type layerKind int

const (
	kindGeneric layerKind = iota // replicated params, needs R input
	kindDense
	kindDropout
)

type layerPlan struct {
	kind       layerKind
	params     []int // global param indices
	kernelDim  int   // Dense: kernel dimension split on the model axis, -1 none
	biasSplit  bool  // Dense: bias split on the model axis
	scatterOut bool  // row-split Dense: reduce-scatter (S output) rather than all-reduce
}

// Build implements keras.MeshEngine: it checks the layouts and creates every device's part.
func (e *Engine) Build(ls []layers.Layer, params []keras.MeshParam) error {
	m := e.mesh
	if m == nil {
		return errorf("Engine", "the distribution %s has no device mesh", e.dist)
	}
	if len(m.shape) > 2 {
		return errorf("Engine", "mesh %s has %d axes; models run on meshes of one (batch) or two (batch, model) axes", m, len(m.shape))
	}
	e.bAxis = m.AxisIndex(e.dist.BatchDimName())
	if e.bAxis < 0 {
		return errorf("Engine", "batch axis %q is not an axis of %s", e.dist.BatchDimName(), m)
	}
	e.mAxis, e.nm = -1, 1
	if len(m.shape) == 2 {
		e.mAxis = 1 - e.bAxis
		e.nm = m.shape[e.mAxis]
	}
	e.nb = m.shape[e.bAxis]
	modelName := ""
	if e.mAxis >= 0 {
		modelName = m.axisNames[e.mAxis]
	}
	e.layers, e.params = ls, params
	e.split = make([]int, len(params))
	e.layouts = make([]*TensorLayout, len(params))
	for i, p := range params {
		l, err := e.dist.VariableLayout(p.Path, p.Init.Shape())
		if err != nil {
			return err
		}
		if l.mesh == nil {
			l = &TensorLayout{axes: l.axes, mesh: m}
		}
		e.split[i] = -1
		for dim, a := range l.axes {
			switch {
			case a == "":
			case a == e.dist.BatchDimName():
				return errorf("Engine", "variable %q: layout %s splits it along the batch axis %q; variables can be split along the model axis only", p.Path, formatAxes(l.axes), a)
			case a == modelName:
				e.split[i] = dim
			default:
				return errorf("Engine", "variable %q: layout %s names axis %q, not an axis of %s", p.Path, formatAxes(l.axes), a, m)
			}
		}
		if e.split[i] >= 0 && !p.Trainable {
			return errorf("Engine", "variable %q is not trainable; only trainable variables can be sharded", p.Path)
		}
		e.layouts[i] = l
	}
	e.plans = make([]layerPlan, len(ls))
	for li, l := range ls {
		var ps []int
		for i, p := range params {
			if p.Layer == li {
				ps = append(ps, i)
			}
		}
		plan := layerPlan{params: ps, kernelDim: -1}
		switch lt := l.(type) {
		case *layers.DenseLayer:
			plan.kind = kindDense
			plan.kernelDim = e.split[ps[0]]
			if lt.UseBias() {
				plan.biasSplit = e.split[ps[1]] == 0
				if plan.biasSplit && plan.kernelDim == -1 {
					return errorf("Engine", "layer %s: the bias %q is split along %q but the kernel is replicated; split the kernel's output dimension too (layout [nil, %q])",
						l.Name(), params[ps[1]].Path, modelName, modelName)
				}
			}
		case *layers.DropoutLayer:
			plan.kind = kindDropout
		default:
			for _, p := range ps {
				if e.split[p] >= 0 {
					return errorf("Engine", "variable %q of layer %s (%s): only Dense kernels and biases can be split; give it a replicated layout", params[p].Path, l.Name(), l.Class())
				}
			}
		}
		e.plans[li] = plan
	}
	// A row-split Dense feeding another row-split Dense (through layers that keep a
	// sharded activation) leaves its output sharded.
	for li := range e.plans {
		p := &e.plans[li]
		if p.kind != kindDense || p.kernelDim != 0 || e.denseAct(li) == layers.Softmax {
			continue
		}
		for nj := li + 1; nj < len(e.plans); nj++ {
			if e.plans[nj].kind == kindDropout {
				continue
			}
			if e.plans[nj].kind == kindDense && e.plans[nj].kernelDim == 0 {
				p.scatterOut = true
			}
			break
		}
		if p.scatterOut && len(p.params) > 1 && !p.biasSplit && params[p.params[1]].Init.Size()%e.nm != 0 {
			p.scatterOut = false
		}
	}
	vars := make([][]*tensor.Variable, len(m.devices))
	for d := range vars {
		vars[d] = make([]*tensor.Variable, len(params))
	}
	for i, p := range params {
		shards, err := DistributeTensor(p.Init, e.layouts[i])
		if err != nil {
			return fmt.Errorf("mesh: variable %q: %w", p.Path, err)
		}
		for d, sh := range shards {
			var err error
			mk := func() { vars[d][i] = tensor.NewVariable(p.Path, sh.Tensor, p.Trainable) }
			if deviceKnown(sh.Device) {
				err = device.WithErr(sh.Device, mk)
			} else {
				mk()
			}
			if err != nil {
				return fmt.Errorf("mesh: place %q on %s: %w", p.Path, sh.Device, err)
			}
		}
	}
	e.mu.Lock()
	e.vars = vars
	e.mu.Unlock()
	return nil
}

func (e *Engine) denseAct(li int) layers.Activation {
	if d, ok := e.layers[li].(*layers.DenseLayer); ok {
		return d.Activation()
	}
	return layers.Linear
}

// Devices implements keras.MeshEngine.
func (e *Engine) Devices() []string { return e.mesh.Devices() }

// DeviceVariables implements keras.MeshEngine: per device, its part of every variable.
func (e *Engine) DeviceVariables() [][]*tensor.Variable {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([][]*tensor.Variable, len(e.vars))
	for d, vs := range e.vars {
		out[d] = append([]*tensor.Variable(nil), vs...)
	}
	return out
}

// DeviceParamBytes returns, per device in mesh order, the bytes of the variables it holds.
func (e *Engine) DeviceParamBytes() []int {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]int, len(e.vars))
	for d, vs := range e.vars {
		for _, v := range vs {
			out[d] += 4 * v.Value().Size()
		}
	}
	return out
}

// Layout returns the layout of parameter i (nil when out of range).
func (e *Engine) Layout(i int) *TensorLayout {
	if i < 0 || i >= len(e.layouts) {
		return nil
	}
	return e.layouts[i]
}

// Weights implements keras.MeshEngine: the global value of every parameter, assembled from
// the devices' parts.
func (e *Engine) Weights() []*tensor.Tensor {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]*tensor.Tensor, len(e.params))
	for i := range e.params {
		parts := make([][]float32, len(e.vars))
		for d, vs := range e.vars {
			parts[d] = vs[i].Value().Data()
		}
		t, err := e.gatherLocked(i, parts)
		if err != nil {
			panic(err)
		}
		out[i] = t
	}
	return out
}

// Gather implements keras.MeshEngine: the global value of parameter i's layout made of
// parts, one per device in mesh order, each shaped as that device's part of the parameter
// (an optimizer's slot, say).
func (e *Engine) Gather(i int, parts [][]float32) ([]float32, error) {
	if i < 0 || i >= len(e.params) {
		return nil, errorf("Gather", "parameter %d out of range [0, %d)", i, len(e.params))
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	t, err := e.gatherLocked(i, parts)
	if err != nil {
		return nil, err
	}
	return t.Data(), nil
}

func (e *Engine) gatherLocked(i int, parts [][]float32) (*tensor.Tensor, error) {
	p := e.params[i]
	if len(parts) != len(e.vars) {
		return nil, errorf("Gather", "%q: %d parts for %d devices", p.Path, len(parts), len(e.vars))
	}
	shards := make([]Shard, len(e.vars))
	for d, vs := range e.vars {
		coords := e.mesh.Coords(d)
		off := make([]int, p.Init.Rank())
		shape := vs[i].Shape()
		if s := e.split[i]; s >= 0 {
			off[s] = coords[e.mAxis] * shape[s]
		}
		val, err := tensor.New(shape, parts[d])
		if err != nil {
			return nil, fmt.Errorf("mesh: gather %q on %s: %w", p.Path, e.mesh.devices[d], err)
		}
		shards[d] = Shard{Device: e.mesh.devices[d], Coords: coords, Offset: off, Tensor: val}
	}
	return Assemble(shards, p.Init.Shape())
}

// Scatter implements keras.MeshEngine: each device's part, in mesh order, of a global value
// laid out as parameter i.
func (e *Engine) Scatter(i int, data []float32) ([][]float32, error) {
	if i < 0 || i >= len(e.params) {
		return nil, errorf("Scatter", "parameter %d out of range [0, %d)", i, len(e.params))
	}
	t, err := tensor.New(e.params[i].Init.Shape(), append([]float32(nil), data...))
	if err != nil {
		return nil, fmt.Errorf("mesh: scatter %q: %w", e.params[i].Path, err)
	}
	shards, err := DistributeTensor(t, e.layouts[i])
	if err != nil {
		return nil, err
	}
	out := make([][]float32, len(shards))
	for d, sh := range shards {
		out[d] = sh.Tensor.Data()
	}
	return out, nil
}

// Assign implements keras.MeshEngine: it sets parameter i from its global value.
func (e *Engine) Assign(i int, data []float32) error {
	parts, err := e.Scatter(i, data)
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for d, part := range parts {
		e.vars[d][i].AssignData(part)
	}
	return nil
}

// Forward implements keras.MeshEngine.
func (e *Engine) Forward(ctx context.Context, x *tensor.Tensor, training bool, seed func(int) uint64) (*tensor.Tensor, error) {
	res, err := e.run(ctx, x, nil, training, seed, nil)
	if err != nil {
		return nil, err
	}
	return res.pred, nil
}

// TrainStep implements keras.MeshEngine.
func (e *Engine) TrainStep(ctx context.Context, step keras.MeshStep) (keras.MeshStepResult, error) {
	if step.Y == nil {
		return keras.MeshStepResult{}, errorf("TrainStep", "labels are nil")
	}
	res, err := e.run(ctx, step.X, step.Y, true, step.Seed, &step)
	if err != nil {
		return keras.MeshStepResult{}, err
	}
	return keras.MeshStepResult{Vars: res.vars, Grads: res.grads, Stats: res.stats}, nil
}

type runResult struct {
	pred  *tensor.Tensor
	vars  []*tensor.Variable
	grads []*tensor.Tensor
	stats []float32
}

// comms are one step's communication groups.
type comms struct {
	model, batch, all []*transport.Mem // per device: its endpoint
}

func (e *Engine) newComms() comms {
	n := len(e.mesh.devices)
	c := comms{model: make([]*transport.Mem, n), batch: make([]*transport.Mem, n), all: transport.NewMem(n)}
	for b := 0; b < e.nb; b++ {
		g := transport.NewMem(e.nm)
		for k := 0; k < e.nm; k++ {
			c.model[e.deviceAt(b, k)] = g[k]
		}
	}
	for k := 0; k < e.nm; k++ {
		g := transport.NewMem(e.nb)
		for b := 0; b < e.nb; b++ {
			c.batch[e.deviceAt(b, k)] = g[b]
		}
	}
	return c
}

// deviceAt returns the index of the device at batch position b and model position k.
func (e *Engine) deviceAt(b, k int) int {
	coords := make([]int, len(e.mesh.shape))
	coords[e.bAxis] = b
	if e.mAxis >= 0 {
		coords[e.mAxis] = k
	}
	d := 0
	for i, c := range coords {
		d = d*e.mesh.shape[i] + c
	}
	return d
}

func (e *Engine) position(d int) (b, k int) {
	c := e.mesh.Coords(d)
	b = c[e.bAxis]
	if e.mAxis >= 0 {
		k = c[e.mAxis]
	}
	return b, k
}

// run executes one global batch on every device; with step set, also backward and the
// gradient synchronization.
func (e *Engine) run(ctx context.Context, x, y *tensor.Tensor, training bool, seed func(int) uint64, step *keras.MeshStep) (*runResult, error) {
	if x == nil || x.Rank() < 1 {
		return nil, errorf("Engine", "the input batch is nil or a scalar")
	}
	n := x.Shape()[0]
	if n < e.nb {
		return nil, errorf("Engine", "global batch of %d examples is smaller than the batch axis %q of size %d; use a batch of at least %d",
			n, e.mesh.axisNames[e.bAxis], e.nb, e.nb)
	}
	if y != nil && (y.Rank() < 1 || y.Shape()[0] != n) {
		return nil, errorf("Engine", "inputs %v and labels %v must share their batch size", x.Shape(), y.Shape())
	}
	if seed == nil {
		seed = func(int) uint64 { return 0 }
	}
	e.mu.Lock()
	vars := e.vars
	e.mu.Unlock()
	if vars == nil {
		return nil, errorf("Engine", "the model is not built")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, DefaultStepTimeout)
	defer cancel()
	c := e.newComms()
	ndev := len(e.mesh.devices)
	preds := make([]*tensor.Tensor, ndev)
	stats := make([][]float32, ndev)
	grads := make([][]*tensor.Tensor, ndev)
	errs := make([]error, ndev)
	rowsOfDev := make([][2]int, ndev)
	var wg sync.WaitGroup
	for d := 0; d < ndev; d++ {
		wg.Add(1)
		go func(d int) {
			defer wg.Done()
			defer func() {
				if r := recover(); r != nil {
					errs[d] = fmt.Errorf("mesh: device %s: %v\n%s", e.mesh.devices[d], r, debug.Stack())
					cancel()
				}
			}()
			b, k := e.position(d)
			r0, r1 := b*n/e.nb, (b+1)*n/e.nb
			rowsOfDev[d] = [2]int{r0, r1}
			dc := &devCtx{e: e, ctx: ctx, d: d, k: k, c: c, vars: vars[d], grad: step != nil,
				rows: [2]int{r0, r1}, globalRows: n, training: training, seed: seed}
			body := func() { errs[d] = dc.program(x, y, step, &preds[d], &stats[d], &grads[d]) }
			if deviceKnown(e.mesh.devices[d]) {
				_ = device.WithErr(e.mesh.devices[d], body)
			} else {
				body()
			}
			if errs[d] != nil {
				cancel()
			}
		}(d)
	}
	wg.Wait()
	e.mu.Lock()
	e.lastRows = rowsOfDev
	e.mu.Unlock()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	res := &runResult{}
	var parts []*tensor.Tensor
	for b := 0; b < e.nb; b++ {
		d := e.deviceAt(b, 0)
		parts = append(parts, preds[d])
		if stats[d] != nil {
			if res.stats == nil {
				res.stats = make([]float32, len(stats[d]))
			}
			for i, v := range stats[d] {
				res.stats[i] += v
			}
		}
	}
	res.pred = parts[0]
	if len(parts) > 1 {
		res.pred = tensor.Concat(0, parts...)
	}
	if step != nil {
		for d := range vars {
			for i, v := range vars[d] {
				if e.params[i].Trainable {
					res.vars = append(res.vars, v)
					res.grads = append(res.grads, grads[d][i])
				}
			}
		}
	}
	return res, nil
}

// devCtx is one device's side of a step.
type devCtx struct {
	e          *Engine
	ctx        context.Context
	d, k       int
	c          comms
	vars       []*tensor.Variable
	grad       bool
	rows       [2]int
	globalRows int
	training   bool
	seed       func(int) uint64
	recs       []rec
	ncoll      int
}

type recKind int

const (
	recLocal recKind = iota
	recGather
	recSlice
	recAllReduce
	recReduceScatter
	recLoss
)

// rec is one forward stage, kept for the backward pass.
type rec struct {
	kind    recKind
	in, out *tensor.Tensor
	params  []int
	pvals   []*tensor.Tensor
}

// act is an activation: features replicated over the model axis or sharded.
type act struct {
	t       *tensor.Tensor
	sharded bool
}

func (dc *devCtx) program(x, y *tensor.Tensor, step *keras.MeshStep, pred **tensor.Tensor, stats *[]float32, grads *[]*tensor.Tensor) error {
	e := dc.e
	xb := tensor.MustNew(append([]int{dc.rows[1] - dc.rows[0]}, x.Shape()[1:]...), rowsOf(x, dc.rows[0], dc.rows[1]))
	a := act{t: xb}
	var err error
	for li, l := range e.layers {
		if a, err = dc.layer(li, l, a); err != nil {
			return fmt.Errorf("mesh: layer %d (%s): %w", li, l.Name(), err)
		}
	}
	if a, err = dc.toReplicated(a); err != nil {
		return err
	}
	*pred = tensor.StopGradient(a.t)
	if step == nil {
		return nil
	}
	yb := tensor.MustNew(append([]int{dc.rows[1] - dc.rows[0]}, y.Shape()[1:]...), rowsOf(y, dc.rows[0], dc.rows[1]))
	u := dc.watch(a.t)
	perEx := step.PerExample(yb, u)
	loss := tensor.Scale(tensor.ReduceSum(perEx), 1/float32(dc.globalRows*e.nm))
	dc.recs = append(dc.recs, rec{kind: recLoss, in: u, out: loss})
	if dc.k == 0 && step.Stats != nil {
		*stats = step.Stats(yb, *pred, tensor.StopGradient(perEx))
	}
	g, err := dc.backward()
	if err != nil {
		return err
	}
	*grads = g
	return nil
}

func rowsOf(t *tensor.Tensor, r0, r1 int) []float32 {
	per := 1
	for _, s := range t.Shape()[1:] {
		per *= s
	}
	return append([]float32(nil), t.Data()[r0*per:r1*per]...)
}

// watch returns a copy of t without its history, watched for the next stage's tape.
func (dc *devCtx) watch(t *tensor.Tensor) *tensor.Tensor {
	u := tensor.StopGradient(t)
	if dc.grad {
		tensor.NewGradientTape().Watch(u)
	}
	return u
}

// local runs fn as a stage of its own: on a watched copy of in and the values of params.
func (dc *devCtx) local(in *tensor.Tensor, params []int, fn func(u *tensor.Tensor, ps []*tensor.Tensor) *tensor.Tensor) *tensor.Tensor {
	u := dc.watch(in)
	pv := make([]*tensor.Tensor, len(params))
	for i, p := range params {
		pv[i] = dc.vars[p].Value()
		if !dc.grad {
			pv[i] = tensor.StopGradient(pv[i])
		}
	}
	out := fn(u, pv)
	if dc.grad {
		dc.recs = append(dc.recs, rec{kind: recLocal, in: u, out: out, params: params, pvals: pv})
	}
	return out
}

// tagName returns a tag of its own for the next collective of this device; devices of a
// group call the same collectives in the same order, so they agree on it.
func (dc *devCtx) tagName(what string) string {
	dc.ncoll++
	return fmt.Sprintf("mesh/%s/%d", what, dc.ncoll)
}

func (dc *devCtx) tag(what string) collective.Option { return collective.Tag(dc.tagName(what)) }

// toReplicated all-gathers a sharded activation along its last dimension.
func (dc *devCtx) toReplicated(a act) (act, error) {
	if !a.sharded {
		return a, nil
	}
	out, err := dc.gatherCols(a.t)
	if err != nil {
		return a, err
	}
	if dc.grad {
		dc.recs = append(dc.recs, rec{kind: recGather, in: a.t, out: out})
	}
	return act{t: out}, nil
}

// toSharded slices a replicated activation to this device's feature block (no
// communication).
func (dc *devCtx) toSharded(a act) (act, error) {
	if a.sharded {
		return a, nil
	}
	out, err := sliceCols(a.t, dc.k, dc.e.nm)
	if err != nil {
		return a, err
	}
	if dc.grad {
		dc.recs = append(dc.recs, rec{kind: recSlice, in: a.t, out: out})
	}
	return act{t: out, sharded: true}, nil
}

func (dc *devCtx) layer(li int, l layers.Layer, a act) (act, error) {
	e := dc.e
	plan := e.plans[li]
	seed := dc.seed(li)
	switch plan.kind {
	case kindDropout:
		if !dc.training {
			return a, nil
		}
		mask, err := dc.dropoutMask(l, a, seed)
		if err != nil {
			return a, err
		}
		out := dc.local(a.t, nil, func(u *tensor.Tensor, _ []*tensor.Tensor) *tensor.Tensor { return tensor.Mul(u, mask) })
		return act{t: out, sharded: a.sharded}, nil
	case kindDense:
		return dc.dense(li, l.(*layers.DenseLayer), a)
	}
	a, err := dc.toReplicated(a)
	if err != nil {
		return a, err
	}
	out := dc.local(a.t, plan.params, func(u *tensor.Tensor, ps []*tensor.Tensor) *tensor.Tensor {
		return l.Forward(u, ps, dc.training, seed)
	})
	return act{t: out}, nil
}

// dropoutMask draws the layer's mask for the global batch (what one device would draw) and
// returns this device's block of it.
func (dc *devCtx) dropoutMask(l layers.Layer, a act, seed uint64) (*tensor.Tensor, error) {
	local := a.t.Shape()
	global := append([]int{dc.globalRows}, local[1:]...)
	offset := make([]int, len(local))
	offset[0] = dc.rows[0]
	if a.sharded {
		last := len(local) - 1
		global[last] *= dc.e.nm
		offset[last] = dc.k * local[last]
	}
	full := l.Forward(tensor.Ones(global...), nil, true, seed)
	return tensor.New(local, extract(full.Data(), global, offset, local))
}

func (dc *devCtx) dense(li int, l *layers.DenseLayer, a act) (act, error) {
	e := dc.e
	plan := e.plans[li]
	kernel := plan.params[0]
	bias := -1
	if len(plan.params) > 1 {
		bias = plan.params[1]
	}
	actFn := l.Activation()
	var err error
	switch plan.kernelDim {
	case -1, 1: // replicated or column-split kernel: whole input features
		if a, err = dc.toReplicated(a); err != nil {
			return a, err
		}
		ps := plan.params
		out := dc.local(a.t, ps, func(u *tensor.Tensor, pv []*tensor.Tensor) *tensor.Tensor {
			y := tensor.MatMul(u, pv[0], false, false)
			if bias >= 0 {
				b := pv[1]
				if plan.kernelDim == 1 && !plan.biasSplit {
					b = tensor.Split(b, e.nm, 0)[dc.k]
				}
				y = tensor.BiasAdd(y, b)
			}
			if actFn != layers.Softmax {
				y = actFn.Apply(y)
			}
			return y
		})
		res := act{t: out, sharded: plan.kernelDim == 1}
		if actFn == layers.Softmax {
			if res, err = dc.toReplicated(res); err != nil {
				return res, err
			}
			res.t = dc.local(res.t, nil, func(u *tensor.Tensor, _ []*tensor.Tensor) *tensor.Tensor { return actFn.Apply(u) })
		}
		return res, nil
	}
	// Row-split kernel: this device's input features times its rows of the kernel give
	// partial sums of the whole output.
	if a, err = dc.toSharded(a); err != nil {
		return a, err
	}
	partial := dc.local(a.t, []int{kernel}, func(u *tensor.Tensor, pv []*tensor.Tensor) *tensor.Tensor {
		return tensor.MatMul(u, pv[0], false, false)
	})
	var sum *tensor.Tensor
	res := act{}
	if plan.scatterOut {
		if sum, err = dc.reduceScatterCols(partial); err != nil {
			return a, err
		}
		res.sharded = true
		if dc.grad {
			dc.recs = append(dc.recs, rec{kind: recReduceScatter, in: partial, out: sum})
		}
	} else {
		if sum, err = dc.allReduce(partial); err != nil {
			return a, err
		}
		if dc.grad {
			dc.recs = append(dc.recs, rec{kind: recAllReduce, in: partial, out: sum})
		}
	}
	var ps []int
	if bias >= 0 {
		ps = []int{bias}
	}
	res.t = dc.local(sum, ps, func(u *tensor.Tensor, pv []*tensor.Tensor) *tensor.Tensor {
		y := u
		if bias >= 0 {
			b := pv[0]
			if res.sharded && !plan.biasSplit {
				b = tensor.Split(b, e.nm, 0)[dc.k]
			}
			y = tensor.BiasAdd(y, b)
		}
		if actFn != layers.Softmax || !res.sharded {
			y = actFn.Apply(y)
		}
		return y
	})
	if actFn == layers.Softmax && res.sharded {
		if res, err = dc.toReplicated(res); err != nil {
			return res, err
		}
		res.t = dc.local(res.t, nil, func(u *tensor.Tensor, _ []*tensor.Tensor) *tensor.Tensor { return actFn.Apply(u) })
	}
	return res, nil
}

// backward walks the stages in reverse and returns the synchronized gradient of every
// parameter this device holds.
func (dc *devCtx) backward() ([]*tensor.Tensor, error) {
	e := dc.e
	pg := make([]*tensor.Tensor, len(dc.vars))
	var g *tensor.Tensor
	var err error
	for i := len(dc.recs) - 1; i >= 0; i-- {
		r := dc.recs[i]
		switch r.kind {
		case recLoss:
			g = tensor.NewGradientTape().Gradient(r.out, r.in)[0]
		case recLocal:
			target := tensor.ReduceSum(tensor.Mul(r.out, g))
			srcs := []any{r.in}
			for _, v := range r.pvals {
				srcs = append(srcs, v)
			}
			gs := tensor.NewGradientTape().Gradient(target, srcs...)
			for j, p := range r.params {
				if gs[1+j] == nil || !e.params[p].Trainable {
					continue
				}
				if pg[p] == nil {
					pg[p] = gs[1+j]
				} else {
					pg[p] = tensor.Add(pg[p], gs[1+j])
				}
			}
			g = gs[0]
		case recGather:
			g, err = dc.reduceScatterCols(g)
		case recSlice:
			g, err = padCols(g, dc.k, e.nm)
		case recAllReduce:
			g, err = dc.allReduce(g)
		case recReduceScatter:
			g, err = dc.gatherCols(g)
		}
		if err != nil {
			return nil, err
		}
		if g == nil {
			g = tensor.Zeros(r.in.Shape()...)
		}
	}
	// Synchronize: sharded parameters over the batch axis, replicated ones over the mesh.
	var shardedIdx, replIdx []int
	for p := range pg {
		if !e.params[p].Trainable {
			continue
		}
		if pg[p] == nil {
			pg[p] = tensor.Zeros(dc.vars[p].Shape()...)
		}
		if e.split[p] >= 0 {
			shardedIdx = append(shardedIdx, p)
		} else {
			replIdx = append(replIdx, p)
		}
	}
	if err := dc.sumGrads(pg, shardedIdx, dc.c.batch[dc.d], "grads-sharded"); err != nil {
		return nil, err
	}
	if err := dc.sumGrads(pg, replIdx, dc.c.all[dc.d], "grads-replicated"); err != nil {
		return nil, err
	}
	return pg, nil
}

// sumGrads all-reduces (sum) the gradients idx of pg in one buffer over t.
func (dc *devCtx) sumGrads(pg []*tensor.Tensor, idx []int, t collective.Transport, what string) error {
	if len(idx) == 0 || t.Size() == 1 {
		return nil
	}
	var buf []float32
	for _, p := range idx {
		buf = append(buf, pg[p].Data()...)
	}
	if err := collective.AllReduce(dc.ctx, t, buf, collective.Sum, dc.tag(what)); err != nil {
		return fmt.Errorf("mesh: all-reduce %s: %w", what, err)
	}
	off := 0
	for _, p := range idx {
		n := pg[p].Size()
		pg[p] = tensor.MustNew(pg[p].Shape(), buf[off:off+n])
		off += n
	}
	return nil
}

func (dc *devCtx) allReduce(t *tensor.Tensor) (*tensor.Tensor, error) {
	buf := append([]float32(nil), t.Data()...)
	if err := collective.AllReduce(dc.ctx, dc.c.model[dc.d], buf, collective.Sum, dc.tag("allreduce")); err != nil {
		return nil, fmt.Errorf("mesh: all-reduce over the model axis: %w", err)
	}
	return tensor.New(t.Shape(), buf)
}

// gatherCols all-gathers the feature blocks of the model axis: (rows, c) -> (rows, c*M).
func (dc *devCtx) gatherCols(t *tensor.Tensor) (*tensor.Tensor, error) {
	parts, err := collective.AllGather(dc.ctx, dc.c.model[dc.d], t.Data(), dc.tag("allgather"))
	if err != nil {
		return nil, fmt.Errorf("mesh: all-gather over the model axis: %w", err)
	}
	shape := t.Shape()
	last := len(shape) - 1
	c := shape[last]
	rows := t.Size() / max(c, 1)
	m := len(parts)
	out := make([]float32, 0, t.Size()*m)
	for r := 0; r < rows; r++ {
		for _, p := range parts {
			if len(p) != len(t.Data()) {
				return nil, errorf("Engine", "all-gather: a peer sent %d values, this device has %d", len(p), len(t.Data()))
			}
			out = append(out, p[r*c:(r+1)*c]...)
		}
	}
	shape[last] = c * m
	return tensor.New(shape, out)
}

// reduceScatterCols sums t over the model axis and keeps this device's feature block:
// (rows, C) -> (rows, C/M), with a ring reduce-scatter.
func (dc *devCtx) reduceScatterCols(t *tensor.Tensor) (*tensor.Tensor, error) {
	m := dc.e.nm
	shape := t.Shape()
	last := len(shape) - 1
	C := shape[last]
	if C%m != 0 {
		return nil, errorf("Engine", "reduce-scatter: %d features do not split over %d devices", C, m)
	}
	c := C / m
	rows := t.Size() / max(C, 1)
	// Lay the blocks out one after another so that segment j is device j's block.
	buf := make([]float32, 0, t.Size())
	data := t.Data()
	for j := 0; j < m; j++ {
		for r := 0; r < rows; r++ {
			buf = append(buf, data[r*C+j*c:r*C+(j+1)*c]...)
		}
	}
	seg, err := reduceScatter(dc.ctx, dc.c.model[dc.d], buf, dc.tagName("reducescatter"))
	if err != nil {
		return nil, fmt.Errorf("mesh: reduce-scatter over the model axis: %w", err)
	}
	shape[last] = c
	return tensor.New(shape, seg)
}

// sliceCols returns block k of m of t's last dimension.
func sliceCols(t *tensor.Tensor, k, m int) (*tensor.Tensor, error) {
	shape := t.Shape()
	last := len(shape) - 1
	if shape[last]%m != 0 {
		return nil, errorf("Engine", "cannot split %d features over %d devices", shape[last], m)
	}
	local := append([]int(nil), shape...)
	local[last] /= m
	off := make([]int, len(shape))
	off[last] = k * local[last]
	return tensor.New(local, extract(t.Data(), shape, off, local))
}

// padCols is the inverse of sliceCols with zeros elsewhere (the backward of a slice).
func padCols(g *tensor.Tensor, k, m int) (*tensor.Tensor, error) {
	shape := g.Shape()
	last := len(shape) - 1
	c := shape[last]
	full := append([]int(nil), shape...)
	full[last] = c * m
	out := make([]float32, g.Size()*m)
	rows := g.Size() / max(c, 1)
	data := g.Data()
	for r := 0; r < rows; r++ {
		copy(out[r*c*m+k*c:], data[r*c:(r+1)*c])
	}
	return tensor.New(full, out)
}

// reduceScatter sums buf (the same length on every rank, a multiple of the group size)
// over t's ranks and returns rank r's segment r of the sum, with a ring: at step s rank r
// sends its running sum of segment r-s-1 to the right and adds what the left sends into
// segment r-s-2; after n-1 steps segment r holds every rank's contribution. The
// collective package's all-reduce does this internally but does not export it.
func reduceScatter(ctx context.Context, t collective.Transport, buf []float32, tag string) ([]float32, error) {
	n, r := t.Size(), t.Rank()
	if len(buf)%n != 0 {
		return nil, errorf("reduceScatter", "buffer of %d values does not split into %d segments", len(buf), n)
	}
	seg := len(buf) / n
	part := func(i int) []float32 { i = ((i % n) + n) % n; return buf[i*seg : (i+1)*seg] }
	if n == 1 {
		return append([]float32(nil), buf...), nil
	}
	right, left := (r+1)%n, (r-1+n)%n
	for s := 0; s < n-1; s++ {
		if err := t.Send(ctx, right, tag, encodeF32(part(r-s-1))); err != nil {
			return nil, err
		}
		b, err := t.Recv(ctx, left, tag)
		if err != nil {
			return nil, err
		}
		dst := part(r - s - 2)
		if len(b) != 4*len(dst) {
			return nil, errorf("reduceScatter", "rank %d sent %d bytes, want %d", left, len(b), 4*len(dst))
		}
		for i, v := range decodeF32(b) {
			dst[i] += v
		}
	}
	return append([]float32(nil), part(r)...), nil
}

func encodeF32(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func decodeF32(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// deviceKnown reports whether name resolves to a device of this process (meshes built from
// names alone, in tests, run without device scopes).
func deviceKnown(name string) bool {
	_, err := device.Resolve(name)
	return err == nil
}
