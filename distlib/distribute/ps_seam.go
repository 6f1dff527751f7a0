package distribute

import (
	"context"
	"fmt"
	"sync"

	"godist/distlib/tensor"
)

// ErrPSLocalUpdate reports an optimizer update of this process's copy of variables whose
// values live on the parameter servers.
var ErrPSLocalUpdate = fmt.Errorf("distribute: ParameterServerStrategy: update of a local copy")

// Coordinated is implemented by strategies whose training steps are functions that a
// ClusterCoordinator schedules on worker tasks, against variables that live on parameter
// servers (ParameterServerStrategy). Library code (keras' Fit) trains through it instead
// of running the steps on local replicas in sync; its Extended is a PSExtended.
type Coordinated interface {
	Strategy
	// NumWorkers returns the number of worker tasks steps are scheduled on.
	NumWorkers() int
	// RemoteWorkers reports whether the steps run in the worker tasks' processes (as
	// registered functions) rather than as closures of this process.
	RemoteWorkers() bool
	// NewVariable creates a variable on the parameter servers.
	NewVariable(name string, init *tensor.Tensor, trainable bool) *ShardedVariable
	// NewCoordinator returns a ClusterCoordinator that schedules steps on the workers.
	NewCoordinator() *ClusterCoordinator
}

// placedVars maps this process's copies of variables to the ps variables they stand for.
type placedVars struct {
	mu sync.Mutex
	m  map[*tensor.Variable]*ShardedVariable
}

func (p *placedVars) get(v *tensor.Variable) *ShardedVariable {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.m[v]
}

func (p *placedVars) put(v *tensor.Variable, sv *ShardedVariable) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[*tensor.Variable]*ShardedVariable{}
	}
	p.m[v] = sv
}

// psExtended is ParameterServerStrategy's extended: no ApplyGradients of local copies
// (ReplicaGradientApplier), which would not reach the parameter servers; PSExtended instead.
type psExtended struct {
	extended
	s *ParameterServerStrategy
}

// PlaceVariables implements PSExtended.
func (e *psExtended) PlaceVariables(ctx context.Context, names []string, vars []*tensor.Variable) ([]*ShardedVariable, error) {
	s := e.s
	if len(names) != len(vars) {
		return nil, fmt.Errorf("distribute: PlaceVariables: %d names for %d variables", len(names), len(vars))
	}
	out := make([]*ShardedVariable, len(vars))
	for i, v := range vars {
		if v == nil {
			return nil, fmt.Errorf("distribute: PlaceVariables: variable %d (%s) is nil", i, names[i])
		}
		sv, err := s.newVariable(ctx, names[i], v.Value(), v.Trainable())
		if err != nil {
			return nil, err
		}
		s.placed.put(v, sv)
		out[i] = sv
	}
	return out, nil
}

// sharded returns the ps variables behind placed variables vars, or an error naming the
// first that is not placed.
func (s *ParameterServerStrategy) sharded(op string, vars []*tensor.Variable) ([]*ShardedVariable, error) {
	out := make([]*ShardedVariable, len(vars))
	for i, v := range vars {
		if v == nil {
			return nil, fmt.Errorf("distribute: %s: variable %d is nil", op, i)
		}
		if out[i] = s.placed.get(v); out[i] == nil {
			return nil, fmt.Errorf("%w: %s: variable %q is this process's own, not one on the parameter servers: "+
				"create the model (or strategy.NewVariable) inside strategy.Scope so that its variables live on the ps",
				ErrPSLocalUpdate, op, v.Name())
		}
	}
	return out, nil
}

// psAccess is the coordinator's access to the ps tasks under ctx, bounded by the
// strategy's timeout.
func (s *ParameterServerStrategy) psAccess(ctx context.Context) (access, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	return access{ctx: ctx, clients: s.clients}, cancel
}

// ReadVariables implements PSExtended.
func (e *psExtended) ReadVariables(ctx context.Context, vars []*tensor.Variable) ([]*tensor.Tensor, error) {
	s := e.s
	svs, err := s.sharded("read", vars)
	if err != nil {
		return nil, err
	}
	a, cancel := s.psAccess(ctx)
	defer cancel()
	out := make([]*tensor.Tensor, len(vars))
	err = parallel(len(vars), func(i int) error {
		t, err := svs[i].read(a)
		if err == nil {
			t, err = vars[i].AsRead(t)
		}
		out[i] = t
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ApplyGradientsOnPS implements PSExtended.
func (e *psExtended) ApplyGradientsOnPS(ctx context.Context, opt *PSOptimizer, grads []*tensor.Tensor, vars []*tensor.Variable) error {
	s := e.s
	if opt == nil {
		return fmt.Errorf("distribute: ApplyGradients: nil optimizer")
	}
	if len(grads) != len(vars) {
		return fmt.Errorf("distribute: ApplyGradients: %d gradients for %d variables", len(grads), len(vars))
	}
	svs, err := s.sharded("ApplyGradients", vars)
	if err != nil {
		return err
	}
	a, cancel := s.psAccess(ctx)
	defer cancel()
	return parallel(len(vars), func(i int) error {
		if grads[i] == nil {
			return nil
		}
		return svs[i].update(a, opt.kind, opt.rule, grads[i])
	})
}

var _ Coordinated = (*ParameterServerStrategy)(nil)

// NewCoordinator returns a coordinator of s for a library's own loop (keras Fit): one
// that NewClusterCoordinator(s) would give, without the cluster panel (the loop shows its
// own progress; a panel, and its text table at Close, would only repeat it).
func (s *ParameterServerStrategy) NewCoordinator() *ClusterCoordinator {
	return newClusterCoordinator(s, false)
}
