package keras

import (
	"context"

	"godist/distlib/cell"
	"godist/distlib/tensor"
)

// The parameter-server and mesh calls of the model's context-free methods (Call, Losses,
// TrainableVariables, SetWeights, the build, an optimizer's ApplyGradients in a custom
// loop), which read the running notebook cell's context (cell.Context: context.Background()
// outside a notebook). Fit, Evaluate and Predict pass their own ctx to the Context forms.
// With fit.go's Fit, Evaluate and Predict, this is the only keras file that reads
// cell.Context (package cell's tests check it).

// psRead is psReadContext under the running cell's context.
func (m *Model) psRead(st *psModel) []*tensor.Tensor { return m.psReadContext(cell.Context(), st) }

// psContext is the running cell's context, for the parameter-server store's reads and
// writes of the optimizer state (a checkpoint's save and restore, context-free).
func psContext() context.Context { return cell.Context() }

// build is buildContext under the running cell's context: the model's context-free
// builds (Sequential with an input shape, Build, Call, loading weights).
func (m *Model) build(in []int) error { return m.buildContext(cell.Context(), in) }

// ensureBuilt is ensureBuiltContext under the running cell's context (Call, the
// sidecar's first batch).
func (m *Model) ensureBuilt(x *tensor.Tensor) { m.ensureBuiltContext(cell.Context(), x) }

// meshForward is meshForwardContext under the running cell's context (Model.Call on a mesh).
func (m *Model) meshForward(x *tensor.Tensor, training bool, stepSeed uint64) *tensor.Tensor {
	return m.meshForwardContext(cell.Context(), x, training, stepSeed)
}

// applyOnPS is applyOnPSContext under the running cell's context (Optimizer.ApplyGradients).
func (o *Optimizer) applyOnPS(c psSeam, grads []*tensor.Tensor, vars []*tensor.Variable) error {
	return o.applyOnPSContext(cell.Context(), c, grads, vars)
}

// refresh is refreshContext under the running cell's context (the model's context-free
// methods: TrainableVariables, GetWeights, ...).
func (m *Model) refresh() { m.refreshContext(cell.Context()) }
