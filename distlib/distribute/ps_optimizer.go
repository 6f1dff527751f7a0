package distribute

import (
	"fmt"

	"godist/distlib/optim"
	"godist/distlib/transport"
)

// PSOptimizer is an optimizer rule applied on the parameter servers: the workers push
// gradients and each ps task applies the rule to its shards, keeping the rule's slots
// (momenta, moving averages) beside them. The rule is package optim's, the one keras's
// optimizers apply in the replicas.
type PSOptimizer struct {
	kind transport.UpdateKind
	rule transport.Rule
	name string
}

// NewPSOptimizer returns the rule spec applied on the parameter servers, with its own
// hyperparameters (any SGD, momentum, Nesterov, Adam or RMSprop setting). It fails with an
// error wrapping optim.ErrInvalidSpec that names a bad value.
func NewPSOptimizer(spec optim.Spec) (*PSOptimizer, error) {
	if err := spec.Validate(); err != nil {
		return nil, fmt.Errorf("distribute: NewPSOptimizer: %w", err)
	}
	return &PSOptimizer{kind: transport.UpdateOptimizer, rule: spec, name: spec.String()}, nil
}

func mustPSOptimizer(op string, spec optim.Spec) *PSOptimizer {
	o, err := NewPSOptimizer(spec)
	if err != nil {
		panic(fmt.Errorf("distribute: %s: %w", op, err))
	}
	return o
}

// NewPSSGD returns SGD with learning rate lr and momentum (0 for none), Keras's rule.
// NewPSOptimizer takes Nesterov momentum too.
func NewPSSGD(lr, momentum float32) *PSOptimizer {
	if lr <= 0 {
		panic(fmt.Errorf("distribute: NewPSSGD(learning_rate=%v, momentum=%v): want learning_rate > 0 and momentum in [0, 1)", lr, momentum))
	}
	return mustPSOptimizer(fmt.Sprintf("NewPSSGD(learning_rate=%v, momentum=%v)", lr, momentum),
		optim.NewSGD(float64(lr), float64(momentum), false))
}

// NewPSAdam returns Adam with learning rate lr and Keras's defaults (beta_1 0.9, beta_2
// 0.999, epsilon 1e-7); moments live on the parameter servers beside the variables.
// NewPSOptimizer takes other betas and epsilon.
func NewPSAdam(lr float32) *PSOptimizer {
	if lr <= 0 {
		panic(fmt.Errorf("distribute: NewPSAdam(learning_rate=%v): want learning_rate > 0", lr))
	}
	return mustPSOptimizer(fmt.Sprintf("NewPSAdam(learning_rate=%v)", lr), optim.NewAdam(float64(lr), 0.9, 0.999, 1e-7))
}

// NewPSRMSprop returns RMSprop with learning rate lr and Keras's defaults (rho 0.9, no
// momentum, epsilon 1e-7). NewPSOptimizer takes other settings.
func NewPSRMSprop(lr float32) *PSOptimizer {
	if lr <= 0 {
		panic(fmt.Errorf("distribute: NewPSRMSprop(learning_rate=%v): want learning_rate > 0", lr))
	}
	return mustPSOptimizer(fmt.Sprintf("NewPSRMSprop(learning_rate=%v)", lr), optim.NewRMSprop(float64(lr), 0.9, 0, 1e-7))
}

// Spec returns the rule the parameter servers apply.
func (o *PSOptimizer) Spec() optim.Spec { return o.rule }

// String describes the optimizer.
func (o *PSOptimizer) String() string { return o.name }
