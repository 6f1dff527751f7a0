package mesh

import (
	"fmt"
	"sync"

	"godist/distlib/device"
	"godist/distlib/keras"
	"godist/distlib/keras/layers"
	"godist/distlib/tensor"
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
//
// The files: engine.go plans the layouts and builds the devices' parts, engine_weights.go
// converts between global values and those parts, engine_step.go runs a step on every
// device, engine_device.go is one device's forward stages, engine_backward.go their
// backward, and engine_collectives.go the exchanges between the devices.

func init() { keras.SetDistributionHook(distributionHook) }

// distributionHook is keras' MeshEngine hook: an engine while a distribution is set.
func distributionHook() keras.MeshEngine {
	d := GetDistribution()
	if d == nil {
		return nil
	}
	return NewEngine(d)
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

// deviceKnown reports whether name resolves to a device of this process (meshes built from
// names alone, in tests, run without device scopes).
func deviceKnown(name string) bool {
	_, err := device.Resolve(name)
	return err == nil
}
