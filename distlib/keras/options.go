package keras

import (
	"fmt"

	"godist/distlib/data"
)

// FitOption sets an optional argument of Fit, like fit's keyword arguments: Epochs,
// InitialEpoch, StepsPerEpoch, ValidationData, ValidationSteps, ValidationSplit, Shuffle,
// StepsPerExecution, PSPipeline, BalanceWorkers, and the Options every call takes.
type FitOption interface{ fitOption() *runOption }

// EvaluateOption sets an optional argument of Evaluate: Steps, and the Options every
// call takes.
type EvaluateOption interface{ evaluateOption() *runOption }

// PredictOption sets an optional argument of Predict: Steps, and the Options every call
// takes.
type PredictOption interface{ predictOption() *runOption }

// Option is an optional argument Fit, Evaluate and Predict all take: Callbacks, Verbose,
// BatchSize.
type Option interface {
	FitOption
	EvaluateOption
	PredictOption
}

// StepsOption is Steps, an optional argument of Evaluate and Predict.
type StepsOption interface {
	EvaluateOption
	PredictOption
}

// runOption is one optional argument: its spelling for errors, the calls that take it,
// the trainer it needs (a Fit option of one kind of strategy), and what it sets.
type runOption struct {
	name    string // "keras.Epochs(3)"
	calls   string // "Fit", "Evaluate and Predict", ...
	trainer string // "" or the trainer kind that takes it (trainer.kind)
	set     func(*runConfig) error
}

// The option kinds: which calls' interfaces they satisfy.
type (
	fitOpt      struct{ o *runOption }
	evalPredOpt struct{ o *runOption }
	everyOpt    struct{ o *runOption }
)

func (f fitOpt) fitOption() *runOption           { return f.o }
func (e evalPredOpt) evaluateOption() *runOption { return e.o }
func (e evalPredOpt) predictOption() *runOption  { return e.o }
func (e everyOpt) fitOption() *runOption         { return e.o }
func (e everyOpt) evaluateOption() *runOption    { return e.o }
func (e everyOpt) predictOption() *runOption     { return e.o }

func fitOnly(name, trainer string, set func(*runConfig) error) FitOption {
	return fitOpt{&runOption{name: name, calls: "Fit", trainer: trainer, set: set}}
}

type runConfig struct {
	epochs, initialEpoch, steps, validationSteps int
	validation                                   *data.Dataset
	callbacks                                    []Callback
	verbose                                      int
	stepsPerExecution                            int     // ParameterServerStrategy (ps_fit.go)
	psPipeline                                   bool    // ParameterServerStrategy (ps_fit.go)
	balanceWorkers                               bool    // MultiWorkerMirroredStrategy (multiworker.go)
	batchSize                                    int     // tensor inputs (inputs.go); 0: not given
	validationSplit                              float64 // tensor inputs (inputs.go); 0: not given
	shuffleGiven, noShuffle                      bool    // tensor inputs (inputs.go)
	given                                        []*runOption
}

// Epochs sets the number of epochs Fit trains (default 1).
func Epochs(n int) FitOption {
	return fitOnly(fmt.Sprintf("keras.Epochs(%d)", n), "", func(c *runConfig) error {
		if n <= 0 {
			return fmt.Errorf("Epochs(%d): the number of epochs must be positive", n)
		}
		c.epochs = n
		return nil
	})
}

// InitialEpoch sets the epoch Fit starts counting from (default 0), to resume training.
func InitialEpoch(n int) FitOption {
	return fitOnly(fmt.Sprintf("keras.InitialEpoch(%d)", n), "", func(c *runConfig) error {
		if n < 0 {
			return fmt.Errorf("InitialEpoch(%d): must be >= 0", n)
		}
		c.initialEpoch = n
		return nil
	})
}

// StepsPerEpoch sets the number of batches per epoch. The dataset's iterator then carries
// over from one epoch to the next, and starts over when it runs out.
func StepsPerEpoch(n int) FitOption {
	return fitOnly(fmt.Sprintf("keras.StepsPerEpoch(%d)", n), "", func(c *runConfig) error {
		if n <= 0 {
			return fmt.Errorf("StepsPerEpoch(%d): must be positive", n)
		}
		c.steps = n
		return nil
	})
}

// Steps sets the number of batches Evaluate or Predict uses (default: the whole dataset).
// Fit's is StepsPerEpoch.
func Steps(n int) StepsOption {
	return evalPredOpt{&runOption{name: fmt.Sprintf("keras.Steps(%d)", n), calls: "Evaluate and Predict (Fit's is keras.StepsPerEpoch)",
		set: func(c *runConfig) error {
			if n <= 0 {
				return fmt.Errorf("Steps(%d): must be positive", n)
			}
			c.steps = n
			return nil
		}}}
}

// ValidationData makes Fit evaluate ds at the end of every epoch, adding "val_" logs.
func ValidationData(ds *data.Dataset) FitOption {
	return fitOnly("keras.ValidationData", "", func(c *runConfig) error {
		if ds == nil {
			return fmt.Errorf("ValidationData(nil)")
		}
		c.validation = ds
		return nil
	})
}

// ValidationSteps limits the validation at the end of each epoch to n batches.
func ValidationSteps(n int) FitOption {
	return fitOnly(fmt.Sprintf("keras.ValidationSteps(%d)", n), "", func(c *runConfig) error {
		if n <= 0 {
			return fmt.Errorf("ValidationSteps(%d): must be positive", n)
		}
		c.validationSteps = n
		return nil
	})
}

// every returns an option of Fit, Evaluate and Predict alike.
func every(name string, set func(*runConfig) error) Option {
	return everyOpt{&runOption{name: name, calls: "Fit, Evaluate and Predict", set: set}}
}

// Callbacks adds callbacks, called in order.
func Callbacks(cbs ...Callback) Option {
	return every("keras.Callbacks", func(c *runConfig) error {
		for i, cb := range cbs {
			if cb == nil {
				return fmt.Errorf("Callbacks: callback %d is nil", i)
			}
		}
		c.callbacks = append(c.callbacks, cbs...)
		return nil
	})
}

// Verbose sets what Fit and Evaluate print: 0 nothing, 1 a progress bar (default), 2 one
// line per epoch. Outside a notebook or terminal the bar is printed once per epoch.
func Verbose(n int) Option {
	return every(fmt.Sprintf("keras.Verbose(%d)", n), func(c *runConfig) error {
		if n < 0 || n > 2 {
			return fmt.Errorf("Verbose(%d): use 0, 1 or 2", n)
		}
		c.verbose = n
		return nil
	})
}

// parseRun applies the options of call op (each already of op's option type).
func parseRun(op string, opts []*runOption) *runConfig {
	c := &runConfig{epochs: 1, verbose: 1}
	for _, o := range opts {
		if err := o.set(c); err != nil {
			panic(fmt.Errorf("%w: %s: %v", ErrInvalidArgument, op, err))
		}
		c.given = append(c.given, o)
	}
	return c
}

// checkTrainer returns an error naming the first option given to Fit that the model's
// trainer does not take (an option of another strategy's training).
func (c *runConfig) checkTrainer(m *Model, eng trainer) error {
	for _, o := range c.given {
		if o.trainer != "" && o.trainer != eng.kind() {
			return fmt.Errorf("%w: Fit: %s applies to training under %s; model %s trains under %s: drop it",
				ErrInvalidArgument, o.name, o.trainer, m.name, m.strategy.Name())
		}
	}
	return nil
}
