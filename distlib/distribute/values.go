package distribute

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"godist/distlib/data"
	"godist/distlib/tensor"
)

// PerReplica holds one tensor per local replica, such as the results of Strategy.Run.
// It prints like TensorFlow's PerReplica:{ 0: ..., 1: ... }.
type PerReplica struct {
	values []*tensor.Tensor
}

// NewPerReplica returns a PerReplica holding values, one per local replica.
func NewPerReplica(values ...*tensor.Tensor) *PerReplica {
	return &PerReplica{values: append([]*tensor.Tensor(nil), values...)}
}

// Values returns the per-replica tensors (a copy of the slice).
func (p *PerReplica) Values() []*tensor.Tensor {
	if p == nil {
		return nil
	}
	return append([]*tensor.Tensor(nil), p.values...)
}

// Len returns the number of replicas.
func (p *PerReplica) Len() int {
	if p == nil {
		return 0
	}
	return len(p.values)
}

// Get returns replica r's tensor.
func (p *PerReplica) Get(r int) *tensor.Tensor {
	if r < 0 || r >= p.Len() {
		panic(fmt.Errorf("%w: replica %d of a PerReplica with %d values", ErrReplicas, r, p.Len()))
	}
	return p.values[r]
}

// String formats the values like TensorFlow. With one replica it is the tensor itself,
// as TensorFlow's Run returns a plain tensor then.
func (p *PerReplica) String() string {
	if p.Len() == 1 {
		return fmt.Sprint(p.values[0])
	}
	var b strings.Builder
	b.WriteString("PerReplica:{\n")
	for i, v := range p.Values() {
		fmt.Fprintf(&b, "  %d: %v", i, v)
		if i < p.Len()-1 {
			b.WriteString(",")
		}
		b.WriteString("\n")
	}
	b.WriteString("}")
	return b.String()
}

// DistributedValue holds one data.Element per local replica: the inputs of one step
// produced by a DistributedDataset, and the inputs argument of Strategy.Run.
type DistributedValue struct {
	values []data.Element
}

// NewDistributedValue returns a DistributedValue holding one Element per local replica.
func NewDistributedValue(values ...data.Element) *DistributedValue {
	return &DistributedValue{values: append([]data.Element(nil), values...)}
}

// Values returns the per-replica elements (a copy of the slice).
func (d *DistributedValue) Values() []data.Element {
	if d == nil {
		return nil
	}
	return append([]data.Element(nil), d.values...)
}

// Len returns the number of replicas.
func (d *DistributedValue) Len() int {
	if d == nil {
		return 0
	}
	return len(d.values)
}

// Get returns replica r's element.
func (d *DistributedValue) Get(r int) data.Element {
	if r < 0 || r >= d.Len() {
		panic(fmt.Errorf("%w: replica %d of a DistributedValue with %d values", ErrReplicas, r, d.Len()))
	}
	return d.values[r]
}

// Component returns component i (e.g. 0 images, 1 labels) of every replica's element as
// a PerReplica.
func (d *DistributedValue) Component(i int) *PerReplica {
	out := make([]*tensor.Tensor, d.Len())
	for r, el := range d.values {
		if i < 0 || i >= len(el) {
			panic(fmt.Errorf("%w: component %d of replica %d's element with %d components", ErrReplicas, i, r, len(el)))
		}
		out[r] = el[i]
	}
	return &PerReplica{values: out}
}

// String formats the values like TensorFlow's PerReplica, one tuple per replica.
func (d *DistributedValue) String() string {
	var b strings.Builder
	b.WriteString("PerReplica:{\n")
	for r, el := range d.values {
		fmt.Fprintf(&b, "  %d: (", r)
		for i, t := range el {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprint(&b, t)
		}
		b.WriteString(")")
		if r < len(d.values)-1 {
			b.WriteString(",")
		}
		b.WriteString("\n")
	}
	b.WriteString("}")
	return b.String()
}

// MirroredVariable is a variable with one copy per replica that are kept identical:
// every Assign applies to all copies. Strategies that do not mirror variables
// (Extended().MirrorsVariables() false) give it a single copy that all replicas share.
type MirroredVariable struct {
	mu      sync.Mutex
	name    string
	vars    []*tensor.Variable // one per replica, or a single shared copy
	devices []string
	mirror  bool
}

// NewVariable creates a variable under the current strategy (GetStrategy): inside a
// MirroredStrategy's Scope one copy per replica device, otherwise one copy on the
// strategy's variable device. Like tf.Variable inside strategy.scope().
func NewVariable(name string, init *tensor.Tensor, trainable bool) *MirroredVariable {
	return NewMirroredVariable(GetStrategy(), name, init, trainable)
}

// newMirroredVariable is NewMirroredVariable with ctx bounding the broadcast of the chief's
// value across workers.
func newMirroredVariable(ctx context.Context, s Strategy, name string, init *tensor.Tensor, trainable bool) *MirroredVariable {
	if s == nil {
		panic(fmt.Errorf("%w: NewMirroredVariable %q with a nil strategy", ErrReplicas, name))
	}
	if init == nil {
		panic(fmt.Errorf("distribute: NewMirroredVariable %q: nil initial value", name))
	}
	if bc, ok := s.(chiefBroadcaster); ok {
		// Multi-worker: every worker starts from the chief's value.
		chief, err := bc.broadcastFromChiefContext(ctx, init)
		if err != nil {
			panic(fmt.Errorf("distribute: NewMirroredVariable %q: %w", name, err))
		}
		init = chief
	}
	ext := s.Extended()
	v := &MirroredVariable{name: name, mirror: ext.MirrorsVariables()}
	if v.mirror {
		v.devices = ext.ReplicaDevices()
	} else {
		v.devices = []string{ext.VariableDevice()}
	}
	for _, dev := range v.devices {
		v.vars = append(v.vars, newVariableOn(dev, name, init, trainable))
	}
	return v
}

// NewMirroredVariables creates several variables under s at once, the way a model's
// variables are made: every worker starts from the chief's values (BroadcastFromChief),
// then each variable gets one copy per replica device when s mirrors variables, otherwise
// one copy on s.Extended().VariableDevice(). names, inits and trainable go together. The
// broadcast waits within ctx.
func NewMirroredVariablesContext(ctx context.Context, s Strategy, names []string, inits []*tensor.Tensor, trainable []bool) (vars []*MirroredVariable, err error) {
	if s == nil {
		return nil, fmt.Errorf("%w: NewMirroredVariables with a nil strategy", ErrReplicas)
	}
	if len(inits) != len(names) || len(trainable) != len(names) {
		return nil, fmt.Errorf("distribute: NewMirroredVariables: %d names, %d initial values, %d trainable flags", len(names), len(inits), len(trainable))
	}
	for i, t := range inits {
		if t == nil {
			return nil, fmt.Errorf("distribute: NewMirroredVariables %q: nil initial value", names[i])
		}
	}
	if inits, err = BroadcastFromChiefContext(ctx, s, inits); err != nil {
		return nil, fmt.Errorf("distribute: broadcast the initial values from the chief: %w", err)
	}
	defer func() {
		if p := recover(); p != nil { // a device that cannot hold the copies
			vars, err = nil, fmt.Errorf("distribute: NewMirroredVariables: %w", panicError(p))
		}
	}()
	ext := s.Extended()
	mirror := ext.MirrorsVariables()
	devices := []string{ext.VariableDevice()}
	if mirror {
		devices = ext.ReplicaDevices()
	}
	for i, name := range names {
		v := &MirroredVariable{name: name, mirror: mirror, devices: append([]string(nil), devices...)}
		for _, dev := range devices {
			v.vars = append(v.vars, newVariableOn(dev, name, inits[i], trainable[i]))
		}
		vars = append(vars, v)
	}
	return vars, nil
}

// Name returns the variable's name.
func (v *MirroredVariable) Name() string { return v.name }

// Shape returns the variable's shape.
func (v *MirroredVariable) Shape() []int { return v.vars[0].Shape() }

// Mirrored reports whether the variable has one copy per replica.
func (v *MirroredVariable) Mirrored() bool { return v.mirror }

// Value returns the primary (replica 0's) value.
func (v *MirroredVariable) Value() *tensor.Tensor {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.vars[0].Value()
}

// Get returns the copy replica r reads and writes (the shared copy when not mirrored).
func (v *MirroredVariable) Get(r int) *tensor.Variable {
	if !v.mirror {
		return v.vars[0]
	}
	if r < 0 || r >= len(v.vars) {
		panic(fmt.Errorf("%w: replica %d of variable %q with %d copies", ErrReplicas, r, v.name, len(v.vars)))
	}
	return v.vars[r]
}

// Values returns the copies, one per replica (one in all when not mirrored).
func (v *MirroredVariable) Values() []*tensor.Variable {
	return append([]*tensor.Variable(nil), v.vars...)
}

// Devices returns the device of every copy.
func (v *MirroredVariable) Devices() []string { return append([]string(nil), v.devices...) }

// Assign sets every copy to t.
func (v *MirroredVariable) Assign(t *tensor.Tensor) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, c := range v.vars {
		c.Assign(t)
	}
}

// AssignAdd adds t to every copy.
func (v *MirroredVariable) AssignAdd(t *tensor.Tensor) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, c := range v.vars {
		c.AssignAdd(t)
	}
}

// AssignSub subtracts t from every copy.
func (v *MirroredVariable) AssignSub(t *tensor.Tensor) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, c := range v.vars {
		c.AssignSub(t)
	}
}

// String formats the variable like TensorFlow's MirroredVariable:{ 0: ..., 1: ... }.
func (v *MirroredVariable) String() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.mirror {
		return fmt.Sprintf("<tf.Variable '%s' shape=%v dtype=float32, device=%s, numpy=%v>",
			v.name, v.vars[0].Shape(), v.devices[0], v.vars[0].Value())
	}
	var b strings.Builder
	b.WriteString("MirroredVariable:{\n")
	for i, c := range v.vars {
		fmt.Fprintf(&b, "  %d: <tf.Variable '%s' shape=%v dtype=float32, device=%s, numpy=%v>",
			i, v.name, c.Shape(), v.devices[i], c.Value())
		if i < len(v.vars)-1 {
			b.WriteString(",")
		}
		b.WriteString("\n")
	}
	b.WriteString("}")
	return b.String()
}

// ValueContext is what ExperimentalDistributeValuesFromFunction's function receives, like
// tf.distribute.experimental.ValueContext.
type ValueContext struct {
	// ReplicaIDInSyncGroup is the replica's index among all replicas in sync.
	ReplicaIDInSyncGroup int
	// NumReplicasInSync is the number of replicas in sync.
	NumReplicasInSync int
}

// ExperimentalDistributeValuesFromFunction calls fn once for each local replica and
// returns the values as a PerReplica placed on the replicas' devices, like
// strategy.experimental_distribute_values_from_function(value_fn); Run passes the
// values to the replica functions with inputs made from it, and Reduce combines them.
func (b *base) ExperimentalDistributeValuesFromFunction(fn func(ctx *ValueContext) *tensor.Tensor) *PerReplica {
	if fn == nil {
		panic(fmt.Errorf("%w: ExperimentalDistributeValuesFromFunction(nil)", ErrReplicas))
	}
	out := make([]*tensor.Tensor, len(b.devices))
	for r, dev := range b.devices {
		v := fn(&ValueContext{ReplicaIDInSyncGroup: b.worker*len(b.devices) + r, NumReplicasInSync: b.NumReplicasInSync()})
		if v == nil {
			panic(fmt.Errorf("%w: ExperimentalDistributeValuesFromFunction: the function returned nil for replica %d", ErrReplicas, r))
		}
		out[r] = v.To(dev)
	}
	return &PerReplica{values: out}
}
