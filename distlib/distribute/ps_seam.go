package distribute

import (
	"fmt"

	"godist/distlib/tensor"
)

// ErrPSLocalUpdate reports an optimizer update of this process's copy of variables whose
// values live on the parameter servers.
var ErrPSLocalUpdate = fmt.Errorf("distribute: ParameterServerStrategy: update of a local copy")

// ExtendedApplyGradients refuses an optimizer's ApplyGradients under a
// ParameterServerStrategy: the variables proper live on the ps tasks, and applying the
// gradients to this process's copy would train a model nobody reads (the ps keep their
// values, strategy.Variables() does not change) without a word. It says what to write.
func (s *ParameterServerStrategy) ExtendedApplyGradients(replicaDevice string, grads []*tensor.Tensor, apply func(grads []*tensor.Tensor) error) (bool, error) {
	return true, fmt.Errorf("%w: ApplyGradients under ParameterServerStrategy would update this process's copy of the "+
		"variables, not the parameter servers' (TensorFlow applies them on the ps): train a Keras model with model.Fit, "+
		"or in a ClusterCoordinator step push the gradients with w.ApplyGradients(psOptimizer, grads, vars) "+
		"for ShardedVariables made by strategy.NewVariable", ErrPSLocalUpdate)
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
}

var _ Coordinated = (*ParameterServerStrategy)(nil)

// NewCoordinator returns NewClusterCoordinator(s).
func (s *ParameterServerStrategy) NewCoordinator() *ClusterCoordinator {
	return NewClusterCoordinator(s)
}
