package keras

import (
	"fmt"
	"hash/fnv"
	"math"

	"godist/distlib/data"
	"godist/distlib/tensor"
)

// defaultBatchSize is Keras' batch_size when Fit, Evaluate or Predict get tensors.
const defaultBatchSize = 32

// BatchSize sets how many examples of tensor inputs make one batch in Fit, Evaluate and
// Predict (default 32), like batch_size=n: model.Fit(x, y, keras.BatchSize(64)). A
// *data.Dataset brings its own batches (ds.Batch(n, false)): BatchSize with one is an error.
func BatchSize(n int) Option {
	return every(fmt.Sprintf("keras.BatchSize(%d)", n), func(c *runConfig) error {
		if n <= 0 {
			return fmt.Errorf("BatchSize(%d): the batch size must be positive", n)
		}
		c.batchSize = n
		return nil
	})
}

// ValidationSplit makes Fit on tensors x, y hold out the last fraction f (0 < f < 1) of
// the examples, taken before shuffling, and evaluate them at the end of every epoch
// ("val_loss", "val_accuracy", ... in the History), like validation_split=f. The first
// floor(n*(1-f)) examples train. With a *data.Dataset it is an error: split the dataset
// with ds.Take / ds.Skip and pass keras.ValidationData.
func ValidationSplit(f float64) FitOption {
	return fitOnly(fmt.Sprintf("keras.ValidationSplit(%v)", f), "", func(c *runConfig) error {
		if !(f > 0 && f < 1) {
			return fmt.Errorf("ValidationSplit(%v): the fraction must be between 0 and 1 (exclusive), such as 0.2", f)
		}
		c.validationSplit = f
		return nil
	})
}

// Shuffle sets whether Fit on tensors shuffles the training examples before each epoch
// (default true, as Keras' shuffle=True). A *data.Dataset is used in its own order: call
// ds.Shuffle instead.
func Shuffle(on bool) FitOption {
	return fitOnly(fmt.Sprintf("keras.Shuffle(%v)", on), "", func(c *runConfig) error {
		c.noShuffle, c.shuffleGiven = !on, true
		return nil
	})
}

// splitArgs splits the arguments after x of Fit and Evaluate: the labels y (a
// *tensor.Tensor, first if present), then the call's options (FitOption or
// EvaluateOption); an option of another call is an error that says whose it is.
func splitArgs(op string, args []any) (y *tensor.Tensor, opts []*runOption) {
	for i, a := range args {
		switch v := a.(type) {
		case *tensor.Tensor:
			if i != 0 {
				panic(fmt.Errorf("%w: %s: argument %d is a tensor; the labels come right after the inputs: %s(x, y, options...)",
					ErrInvalidArgument, op, i+2, op))
			}
			if v == nil {
				panic(fmt.Errorf("%w: %s: the labels y are nil", ErrInvalidArgument, op))
			}
			y = v
		case FitOption, EvaluateOption, PredictOption:
			o := optionFor(op, v)
			if o == nil {
				panic(fmt.Errorf("%w: %s: argument %d is nil", ErrInvalidArgument, op, i+2))
			}
			opts = append(opts, o)
		case nil:
			panic(fmt.Errorf("%w: %s: argument %d is nil; after the inputs come the labels (a *tensor.Tensor) and options such as keras.Epochs(5)",
				ErrInvalidArgument, op, i+2))
		default:
			panic(fmt.Errorf("%w: %s: argument %d has type %T; after the inputs come the labels (a *tensor.Tensor) and options "+
				"such as keras.Epochs(5), keras.BatchSize(32)", ErrInvalidArgument, op, i+2, a))
		}
	}
	return y, opts
}

// inputData returns the dataset of batches that op runs on: x itself when it is a
// *data.Dataset, or batches of x (and y) when they are tensors. For Fit on tensors it
// shuffles the training part (unless Shuffle(false)) and, with ValidationSplit, sets
// cfg.validation to the held-out last examples.
func (m *Model) inputData(op string, x any, y *tensor.Tensor, cfg *runConfig) *data.Dataset {
	bad := func(format string, a ...any) {
		panic(fmt.Errorf("%w: %s: "+format, append([]any{ErrInvalidArgument, op}, a...)...))
	}
	if dc, ok := x.(*DatasetCreatorInput); ok && dc != nil {
		x = dc.dataset(op, m.strategy)
	}
	switch v := x.(type) {
	case *data.Dataset:
		if v == nil {
			bad("the dataset is nil")
		}
		if y != nil {
			bad("got a dataset and labels y %v; a dataset holds its labels: give it (inputs, labels) elements and drop y, or pass tensors %s(x, y, ...)", y.Shape(), op)
		}
		if cfg.batchSize > 0 {
			bad("keras.BatchSize(%d) with a *data.Dataset: the dataset's own batches are used; batch it with ds.Batch(%d, false) and drop keras.BatchSize",
				cfg.batchSize, cfg.batchSize)
		}
		if cfg.validationSplit > 0 {
			bad("keras.ValidationSplit(%v) needs tensors x and y; with a dataset, hold out part of it (ds.Take(n) / ds.Skip(n)) and pass keras.ValidationData(validation)",
				cfg.validationSplit)
		}
		if cfg.shuffleGiven {
			bad("keras.Shuffle with a *data.Dataset: the dataset is used in its own order; call ds.Shuffle(buffer, seed) instead")
		}
		return v
	case *tensor.Tensor:
		if v == nil {
			bad("the inputs x are nil")
		}
		return m.tensorData(op, v, y, cfg)
	case nil:
		bad("the inputs are nil; pass a *data.Dataset or a *tensor.Tensor")
	default:
		bad("takes a *data.Dataset, a *tensor.Tensor of inputs or a keras.DatasetCreator, got %T", x)
	}
	return nil
}

// tensorData batches tensors x and y (y nil for Predict).
func (m *Model) tensorData(op string, x, y *tensor.Tensor, cfg *runConfig) *data.Dataset {
	if x.Rank() == 0 {
		panic(fmt.Errorf("%w: %s: the inputs x are a scalar; pass examples along the first axis (shape [n, ...])", ErrShape, op))
	}
	n := x.Shape()[0]
	ts := []*tensor.Tensor{x}
	if op != "Predict" {
		if y == nil {
			panic(fmt.Errorf("%w: %s(x) with tensors needs the labels too: %s(x, y, ...)", ErrInvalidArgument, op, op))
		}
		if y.Rank() == 0 || y.Shape()[0] != n {
			panic(fmt.Errorf("%w: %s: inputs x %v and labels y %v must hold the same number of examples along the first axis",
				ErrShape, op, x.Shape(), y.Shape()))
		}
		ts = append(ts, y)
	}
	if n == 0 {
		panic(fmt.Errorf("%w: %s: the inputs x %v hold no examples", ErrShape, op, x.Shape()))
	}
	bs := cfg.batchSize
	if bs == 0 {
		bs = defaultBatchSize
	}
	full := data.FromTensorSlices(ts...)
	if op != "Fit" {
		return full.Batch(bs, false)
	}
	train := full
	nTrain := n
	if cfg.validationSplit > 0 {
		if cfg.validation != nil {
			panic(fmt.Errorf("%w: Fit: keras.ValidationSplit and keras.ValidationData both given; pass one of them", ErrInvalidArgument))
		}
		nTrain = int(math.Floor(float64(n) * (1 - cfg.validationSplit)))
		if nTrain == 0 || nTrain == n {
			panic(fmt.Errorf("%w: Fit: keras.ValidationSplit(%v) of %d examples leaves %d to train and %d to validate; both must be at least 1",
				ErrInvalidArgument, cfg.validationSplit, n, nTrain, n-nTrain))
		}
		train = full.Take(nTrain)
		cfg.validation = full.Skip(nTrain).Batch(bs, false)
	}
	if !cfg.noShuffle {
		// One uniform shuffle per epoch (each epoch opens a new iterator), from the model's
		// seed. Several workers each take their part of every global batch: they must all
		// shuffle alike, so their seed comes from what they share (the model's name and
		// step count) rather than from the process's random seed.
		m.mu.Lock()
		base := m.seed
		if _, workers := m.strategy.Extended().Worker(); workers > 1 {
			h := fnv.New64a()
			h.Write([]byte(m.name))
			base = h.Sum64()
		}
		seed := int64(mix(base, uint64(m.step)) >> 1)
		m.mu.Unlock()
		train = train.Shuffle(nTrain, seed)
	}
	return train.Batch(bs, false)
}

// optionFor returns the option v of call op ("Fit" or "Evaluate"), panicking with an
// error that names the calls that take it when op does not.
func optionFor(op string, v any) *runOption {
	var o *runOption
	switch op {
	case "Fit":
		if f, ok := v.(FitOption); ok {
			return f.fitOption()
		}
	case "Evaluate":
		if e, ok := v.(EvaluateOption); ok {
			return e.evaluateOption()
		}
	}
	switch w := v.(type) {
	case FitOption:
		o = w.fitOption()
	case EvaluateOption:
		o = w.evaluateOption()
	case PredictOption:
		o = w.predictOption()
	}
	panic(fmt.Errorf("%w: %s does not take %s: it is an option of %s", ErrInvalidArgument, op, o.name, o.calls))
}
