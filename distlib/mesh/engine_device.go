package mesh

import (
	"context"
	"fmt"

	"godist/distlib/keras"
	"godist/distlib/keras/layers"
	"godist/distlib/tensor"
)

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
