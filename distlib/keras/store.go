package keras

import (
	"context"
	"fmt"

	"godist/distlib/device"
	"godist/distlib/distribute"
	"godist/distlib/keras/layers"
	"godist/distlib/tensor"
)

// placement is where a model's variables live: the engine of the keras distribution in
// force when the model was made (nil: the strategy places them), and the store build
// chose.
type placement struct {
	engine MeshEngine // non-nil: variables laid out on a device mesh (mesh_hook.go)
	store  varStore
}

// newPlacement captures the distribution in force, as a Keras 3 model does when it is made.
func newPlacement() placement { return placement{engine: newMeshEngine()} }

// varStore is where a built model's variables live. build chooses it once (newStore):
// the strategy's copies (one per replica, or one shared copy: mirroredStore), copies that
// stand for variables on parameter servers (psModel, for a distribute.Coordinated
// strategy), or every device's part on a keras distribution's device mesh (meshStore). The
// model's variable operations ask the store; no other keras file branches on where the
// variables live (trainerFor picks the training loop the same way).
//
// m.vars[c] is variable copy c in every store: a replica's copy, or a mesh device's part.
type varStore interface {
	// forward runs the layers on x with variable copy c read through read (Value, or
	// StepValue in a training step); reuse as in applyLayers. ctx stops its waits (a mesh's
	// exchanges).
	forward(ctx context.Context, m *Model, c int, x *tensor.Tensor, training bool, seed uint64, read func(*tensor.Variable) *tensor.Tensor, reuse []*tensor.Reuse) *tensor.Tensor
	// call is Model.Call's forward pass: the copy of the caller's replica, or values read
	// from where the variables live.
	call(m *Model, x *tensor.Tensor, training bool, seed uint64) *tensor.Tensor
	// values returns the current value of every parameter for code on the calling
	// goroutine (Losses' penalties), differentiable with respect to TrainableVariables.
	values(m *Model) []*tensor.Tensor
	// refresh brings the local copies up to date before they are read, within ctx.
	refresh(ctx context.Context, m *Model)
	// variables returns copy c's variables (the trainable ones only, or all); m.mu is held.
	variables(m *Model, c int, trainableOnly bool) []*tensor.Variable
	// assign sets parameter i of every copy (and where the variables live) to data(i).
	assign(m *Model, data func(i int) []float32)
	// fixedTrainable reports whether the trainable set is fixed when the model is built.
	fixedTrainable() bool
	// slotState returns optimizer o's state of parameter i (global variable v) with the
	// slots' global values, nil when it has none; o.mu is held.
	slotState(m *Model, o *Optimizer, i int, v *tensor.Variable) *slotState
	// slotParts returns, for parameter i's optimizer slot of global value g, the part each
	// variable copy keeps (parts[c]); copies may share memory.
	slotParts(i int, g []float32) (parts [][]float32, err error)
	// restoreSlots puts the restored optimizer states (states[i]: parameter i's, global
	// slots; nil: none) where the variables live, when the optimizer does not keep them
	// itself (the parameter servers); trained says the saved model had trained (its step
	// or its optimizer's iterations past 0).
	restoreSlots(m *Model, path string, trained bool, states []*slotState) error
}

// newStore creates the variables of a model being built: params with their initial
// values inits, laid out by the model's mesh engine when a keras distribution made it, else
// by its strategy. It sets m.devices and m.vars; m.mu is held.
func (m *Model) newStore(ctx context.Context, params []paramInfo, inits []*tensor.Tensor) (varStore, error) {
	if m.engine != nil {
		return m.newMeshStore(ctx, params, inits)
	}
	// The strategy mirrors (or places) the variables: one copy per replica, or one shared
	// copy, every worker starting from the chief's values. Frozen ones stay watched by
	// gradient tapes, so that unfreezing them later trains them.
	names := make([]string, len(params))
	trainable := make([]bool, len(params))
	for i, p := range params {
		names[i], trainable[i] = p.name, p.declared
	}
	mvs, err := distribute.NewMirroredVariablesContext(ctx, m.strategy, names, inits, trainable)
	if err != nil {
		return nil, fmt.Errorf("keras: create the variables of %s: %w", m.name, err)
	}
	var devs []string
	if len(mvs) > 0 {
		devs = mvs[0].Devices()
	} else if ext := m.strategy.Extended(); ext.MirrorsVariables() {
		devs = ext.ReplicaDevices()
	} else {
		devs = []string{ext.VariableDevice()}
	}
	vars := make([][]*tensor.Variable, len(devs))
	for c := range devs {
		vars[c] = make([]*tensor.Variable, len(params))
		for i, v := range mvs {
			vars[c][i] = v.Get(c)
		}
	}
	m.devices, m.vars = devs, vars
	if c, ok := psSeamOf(m.strategy); ok && len(vars) > 0 {
		// Variables made in a ParameterServerStrategy's scope live on the ps tasks (as in
		// TensorFlow), for Fit and for a ClusterCoordinator's custom loop alike; this
		// process's copy stands for them.
		st, err := placeOnPSContext(ctx, c, m.name, params, vars[0])
		if err != nil {
			return nil, fmt.Errorf("keras: place the variables of %s on the parameter servers: %w", m.name, err)
		}
		return st, nil
	}
	return mirroredStore{}, nil
}

// mirroredStore: the strategy's copies, one per replica (mirrored) or one shared copy.
type mirroredStore struct{}

func (mirroredStore) forward(_ context.Context, m *Model, c int, x *tensor.Tensor, training bool, seed uint64, read func(*tensor.Variable) *tensor.Tensor, reuse []*tensor.Reuse) *tensor.Tensor {
	return m.forwardVals(readValues(m.vars[c], read), x, training, seed, reuse)
}

func (s mirroredStore) call(m *Model, x *tensor.Tensor, training bool, seed uint64) *tensor.Tensor {
	return m.forwardVals(readValues(m.vars[m.currentCopy(x.Device())], (*tensor.Variable).Value), x, training, seed, nil)
}

func (mirroredStore) values(m *Model) []*tensor.Tensor {
	var vals []*tensor.Tensor
	for _, v := range m.variables(m.scopeCopy(), false) {
		vals = append(vals, v.Value())
	}
	return vals
}

func (mirroredStore) refresh(context.Context, *Model) {}

func (mirroredStore) variables(m *Model, c int, trainableOnly bool) []*tensor.Variable {
	var out []*tensor.Variable
	for i, v := range m.vars[c] {
		if !trainableOnly || m.params[i].trainable {
			out = append(out, v)
		}
	}
	return out
}

func (mirroredStore) assign(m *Model, data func(i int) []float32) {
	for _, copyVars := range m.vars {
		for i, v := range copyVars {
			v.AssignData(data(i))
		}
	}
}

func (mirroredStore) fixedTrainable() bool { return false }

func (mirroredStore) slotState(_ *Model, o *Optimizer, _ int, v *tensor.Variable) *slotState {
	return o.slots[v]
}

func (mirroredStore) slotParts(_ int, g []float32) ([][]float32, error) { return nil, nil }

func (mirroredStore) restoreSlots(*Model, string, bool, []*slotState) error { return nil }

// The parameter-server store is psModel (ps_fit.go): this process's copy stands for the
// variables on the ps tasks; reads fetch their values, assignments write them there too.

func (st *psModel) forward(ctx context.Context, m *Model, c int, x *tensor.Tensor, training bool, seed uint64, read func(*tensor.Variable) *tensor.Tensor, reuse []*tensor.Reuse) *tensor.Tensor {
	return mirroredStore{}.forward(ctx, m, c, x, training, seed, read, reuse)
}

// call computes with the values read for this call (concurrent steps on the workers each
// use their own read), differentiable with respect to TrainableVariables.
func (st *psModel) call(m *Model, x *tensor.Tensor, training bool, seed uint64) *tensor.Tensor {
	return m.forwardVals(m.psRead(st), x, training, seed, nil)
}

func (st *psModel) values(m *Model) []*tensor.Tensor { return m.psRead(st) }

func (st *psModel) refresh(ctx context.Context, m *Model) { m.psPullContext(ctx, st) }

func (st *psModel) variables(m *Model, c int, trainableOnly bool) []*tensor.Variable {
	return mirroredStore{}.variables(m, c, trainableOnly)
}

func (st *psModel) assign(m *Model, data func(i int) []float32) {
	mirroredStore{}.assign(m, data)
	// The values proper live on the parameter servers.
	for i, sv := range st.svars {
		sv.Assign(m.vars[0][i].Value())
	}
}

func (st *psModel) fixedTrainable() bool { return true }

// slotState reads the optimizer state from the parameter servers, where the rule keeps
// it beside the shards. The backup holds one step count per variable: shards at different
// steps (advanced by sparse updates outside keras) are an error naming the variable.
func (st *psModel) slotState(m *Model, o *Optimizer, i int, v *tensor.Variable) *slotState {
	ps, err := st.svars[i].OptimizerState(psContext())
	if err != nil {
		panic(fmt.Errorf("keras: optimizer state of %s: %w", v.Name(), err))
	}
	out := &slotState{slots: ps.Slots}
	for k, sh := range ps.Steps {
		if k > 0 && sh.T != out.t {
			panic(fmt.Errorf("keras: optimizer state of %s: its shards on the parameter servers are at different steps (%d and %d), and a keras backup holds one per variable: "+
				"save with the strategy's SaveCheckpoint, which records each shard's", v.Name(), out.t, sh.T))
		}
		out.t = sh.T
	}
	if out.t == 0 && len(out.slots) == 0 {
		return nil
	}
	return out
}

func (st *psModel) slotParts(int, []float32) ([][]float32, error) { return nil, nil }

// restoreSlots sets each variable's optimizer state on the parameter servers, split among
// the shards as they are laid out now. A backup whose variables carry no state although
// the model had trained (written before the ps state was saved) restores the weights
// only, with a WARNING.
func (st *psModel) restoreSlots(m *Model, path string, trained bool, states []*slotState) error {
	none := true
	for _, ss := range states {
		none = none && ss == nil
	}
	if none && trained {
		fmt.Fprintf(m.out(), "WARNING: %s holds no optimizer state (it predates saving the parameter servers' slots): the weights are restored, "+
			"the optimizer's slots and step counts on the parameter servers start afresh, so training does not resume as it would have\n", path)
	}
	ctx := psContext()
	for i, sv := range st.svars {
		var ps *distribute.OptimizerState
		if ss := states[i]; ss != nil {
			rows := 1
			if sh := sv.Shape(); len(sh) > 0 {
				rows = sh[0]
			}
			ps = &distribute.OptimizerState{Slots: ss.slots, Steps: []distribute.ShardSteps{{Offset: 0, Rows: rows, T: ss.t}}}
		}
		if err := sv.SetOptimizerState(ctx, ps); err != nil {
			return fmt.Errorf("%w: %s: %v", ErrBackup, path, err)
		}
	}
	return nil
}

// meshStore: every mesh device's part of each parameter, laid out by the engine
// (mesh_hook.go).
type meshStore struct{ e MeshEngine }

func (s meshStore) forward(ctx context.Context, m *Model, _ int, x *tensor.Tensor, training bool, seed uint64, _ func(*tensor.Variable) *tensor.Tensor, _ []*tensor.Reuse) *tensor.Tensor {
	return m.meshForwardContext(ctx, x, training, seed)
}

func (s meshStore) call(m *Model, x *tensor.Tensor, training bool, seed uint64) *tensor.Tensor {
	return m.meshForward(x, training, seed)
}

func (s meshStore) values(m *Model) []*tensor.Tensor {
	var vals []*tensor.Tensor
	for _, v := range m.variables(0, false) {
		vals = append(vals, v.Value())
	}
	return vals
}

func (meshStore) refresh(context.Context, *Model) {}

func (meshStore) variables(m *Model, _ int, trainableOnly bool) []*tensor.Variable {
	return m.meshVariables(trainableOnly)
}

func (meshStore) assign(m *Model, data func(i int) []float32) { m.meshAssign(data) }

func (meshStore) fixedTrainable() bool { return true }

// slotState assembles the optimizer state every device keeps for its part, as the
// parameter is assembled.
func (s meshStore) slotState(m *Model, o *Optimizer, i int, v *tensor.Variable) *slotState {
	var first *slotState
	parts := make([][][]float32, o.nslots) // parts[k][device]
	for d := range m.vars {
		st := o.slots[m.vars[d][i]]
		if st == nil {
			return nil // never updated (frozen, or no step yet)
		}
		if first == nil {
			first = st
		}
		for k := range parts {
			parts[k] = append(parts[k], st.slots[k])
		}
	}
	if first == nil {
		return nil
	}
	out := &slotState{t: first.t, slots: make([][]float32, o.nslots)}
	for k := range parts {
		g, err := s.e.Gather(i, parts[k])
		if err != nil {
			panic(fmt.Errorf("keras: optimizer slot %d of %s: %w", k, v.Name(), err))
		}
		out.slots[k] = g
	}
	return out
}

func (s meshStore) slotParts(i int, g []float32) ([][]float32, error) { return s.e.Scatter(i, g) }

func (meshStore) restoreSlots(*Model, string, bool, []*slotState) error { return nil }

// newMeshStore lays the parameters out on the model's device mesh, every worker starting
// from the chief's initial values; m.mu is held.
func (m *Model) newMeshStore(ctx context.Context, params []paramInfo, inits []*tensor.Tensor) (varStore, error) {
	for _, l := range m.layers {
		if r, ok := l.(layers.Regularized); ok && r.HasRegularizer() {
			return nil, fmt.Errorf("%w: model %s: layer %s has a KernelRegularizer, which a keras distribution (device mesh) does not apply yet: "+
				"remove it, or train with a distribute strategy", ErrInvalidArgument, m.name, l.Name())
		}
	}
	inits, err := distribute.BroadcastFromChiefContext(ctx, m.strategy, inits)
	if err != nil {
		return nil, fmt.Errorf("keras: broadcast the initial variables of %s from the chief: %w", m.name, err)
	}
	specs := make([]MeshParam, len(params))
	for p := range params {
		specs[p] = MeshParam{Path: params[p].name, Layer: params[p].layer, Init: inits[p], Trainable: params[p].trainable}
	}
	if err := m.engine.Build(m.layers, specs); err != nil {
		return nil, fmt.Errorf("keras: lay out model %s on the device mesh: %w", m.name, err)
	}
	m.devices, m.vars = m.engine.Devices(), m.engine.DeviceVariables()
	return meshStore{m.engine}, nil
}

// psSeam is a strategy that trains through parameter servers, as keras uses it: its
// user-facing interface (workers, coordinator) and its extended (placement, reads, pushes).
type psSeam struct {
	distribute.Coordinated
	ext distribute.PSExtended
}

// psSeamOf returns s's parameter-server seam: ok when s is Coordinated and its extended a
// PSExtended.
func psSeamOf(s distribute.Strategy) (psSeam, bool) {
	c, ok := s.(distribute.Coordinated)
	if !ok {
		return psSeam{}, false
	}
	ext, ok := c.Extended().(distribute.PSExtended)
	return psSeam{c, ext}, ok
}

// applyThrough is how an optimizer's ApplyGradients in a custom loop reaches variables
// that live where strategy s keeps them (the custom loop's trainerFor): pushed to the
// parameter servers of a Coordinated strategy; inside a Run, the replicas' gradients
// summed by s's extended (as terms read where they lie when it offers it) and apply called
// per copy. inRun is false when no Run of s is in progress, or s's extended applies no
// replicas' gradients: the caller applies grads itself.
func (o *Optimizer) applyThrough(s distribute.Strategy, grads []*tensor.Tensor, vars []*tensor.Variable, apply func([]*tensor.Tensor) error) (inRun bool, err error) {
	if c, ok := psSeamOf(s); ok {
		// The variables proper live on the parameter servers: push the gradients there,
		// where the optimizer's rule updates them (a ClusterCoordinator step, or the
		// coordinator itself).
		return true, o.applyOnPS(c, grads, vars)
	}
	ext := s.Extended()
	if ta, ok := ext.(distribute.GradientTermsApplier); ok {
		// The summed gradients as terms read where they lie (every worker's, where the
		// workers share memory): the rule sums them as it reads them.
		return ta.ApplyGradientTerms(device.Current(), grads, func(terms [][][]float32) error {
			gt := make([]gradTerms, len(terms))
			for i, t := range terms {
				gt[i] = t
			}
			return o.applyTerms([][]gradTerms{gt}, [][]*tensor.Variable{vars})
		})
	}
	if ra, ok := ext.(distribute.ReplicaGradientApplier); ok {
		return ra.ApplyGradients(device.Current(), grads, apply)
	}
	return false, nil
}
