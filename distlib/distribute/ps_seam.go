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

// ExtendedApplyGradients refuses an update through the synchronous replicas' seam under a
// ParameterServerStrategy: the variables proper live on the ps tasks, and applying the
// gradients to this process's copy would train a model nobody reads (the ps keep their
// values) without a word. Optimizers update through ExtendedApplyGradientsOnPS (a Keras
// optimizer does); the error says what to write.
func (s *ParameterServerStrategy) ExtendedApplyGradients(replicaDevice string, grads []*tensor.Tensor, apply func(grads []*tensor.Tensor) error) (bool, error) {
	return true, fmt.Errorf("%w: an update of this process's copy of the variables under ParameterServerStrategy "+
		"would not reach the parameter servers: apply them with a Keras optimizer made in strategy.Scope "+
		"(optimizer.ApplyGradients pushes them to the ps), or in a ClusterCoordinator step with "+
		"w.ApplyGradients(psOptimizer, grads, vars) for ShardedVariables made by strategy.NewVariable", ErrPSLocalUpdate)
}

// Coordinated is implemented by strategies whose training steps are functions that a
// ClusterCoordinator schedules on worker tasks, against variables that live on parameter
// servers (ParameterServerStrategy). Library code (keras' Fit) trains through it instead
// of running the steps on local replicas in sync.
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

	// ExtendedPlaceVariables creates a variable on the parameter servers for each of
	// vars, named names[i], with its current value, and returns them. vars (this
	// process's copies, such as a Keras model's) then stand for the ps variables:
	// ExtendedReadVariables reads the ps values for them and
	// ExtendedApplyGradientsOnPS updates the ps variables behind them. ctx bounds the
	// calls that create them.
	ExtendedPlaceVariables(ctx context.Context, names []string, vars []*tensor.Variable) ([]*ShardedVariable, error)
	// ExtendedReadVariables reads the ps values of placed variables, in one concurrent
	// round trip: each result counts as a read of vars[i] for a GradientTape (its
	// gradient is the gradient with respect to vars[i]), so a step that computes with
	// them differentiates with respect to vars, however many steps do so at once.
	ExtendedReadVariables(ctx context.Context, vars []*tensor.Variable) ([]*tensor.Tensor, error)
	// ExtendedApplyGradientsOnPS pushes grads[i] for the ps variable behind placed
	// variable vars[i]; opt's rule updates it on its parameter server (a nil gradient is
	// skipped). This is an optimizer's ApplyGradients under the strategy, in a
	// ClusterCoordinator step or on the coordinator.
	ExtendedApplyGradientsOnPS(ctx context.Context, opt *PSOptimizer, grads []*tensor.Tensor, vars []*tensor.Variable) error
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

// ExtendedPlaceVariables implements Coordinated.
func (s *ParameterServerStrategy) ExtendedPlaceVariables(ctx context.Context, names []string, vars []*tensor.Variable) ([]*ShardedVariable, error) {
	if len(names) != len(vars) {
		return nil, fmt.Errorf("distribute: ExtendedPlaceVariables: %d names for %d variables", len(names), len(vars))
	}
	out := make([]*ShardedVariable, len(vars))
	for i, v := range vars {
		if v == nil {
			return nil, fmt.Errorf("distribute: ExtendedPlaceVariables: variable %d (%s) is nil", i, names[i])
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

// ExtendedReadVariables implements Coordinated.
func (s *ParameterServerStrategy) ExtendedReadVariables(ctx context.Context, vars []*tensor.Variable) ([]*tensor.Tensor, error) {
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

// ExtendedApplyGradientsOnPS implements Coordinated.
func (s *ParameterServerStrategy) ExtendedApplyGradientsOnPS(ctx context.Context, opt *PSOptimizer, grads []*tensor.Tensor, vars []*tensor.Variable) error {
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
