package keras

import (
	"fmt"

	"godist/distlib/tensor"
)

// Reduction says how a Loss turns per-example losses into what Call returns, like
// tf.keras.losses.Reduction.
type Reduction int

const (
	// ReductionSumOverBatchSize averages the per-example losses (the default).
	ReductionSumOverBatchSize Reduction = iota
	// ReductionNone returns the per-example losses, for custom loops that divide by the
	// global batch size with distribute.ComputeAverageLoss.
	ReductionNone
	// ReductionSum adds the per-example losses.
	ReductionSum
)

// String returns Keras' name of the reduction.
func (r Reduction) String() string {
	switch r {
	case ReductionSumOverBatchSize:
		return "sum_over_batch_size"
	case ReductionNone:
		return "none"
	case ReductionSum:
		return "sum"
	}
	return fmt.Sprintf("Reduction(%d)", int(r))
}

// LossOption sets an optional argument of a loss.
type LossOption interface{ applyLoss(*Loss) error }

type lossOption func(*Loss) error

func (f lossOption) applyLoss(l *Loss) error { return f(l) }

// WithReduction sets the loss's reduction (default ReductionSumOverBatchSize).
func WithReduction(r Reduction) LossOption {
	return lossOption(func(l *Loss) error {
		if r < ReductionSumOverBatchSize || r > ReductionSum {
			return fmt.Errorf("unknown reduction %v (use keras.ReductionSumOverBatchSize, ReductionNone or ReductionSum)", r)
		}
		l.reduction = r
		return nil
	})
}

type lossKind int

const (
	lossSparseCCE lossKind = iota
	lossBinaryCE
	lossMSE
	lossMAE
	lossCustom
)

// Loss is a loss function, like a tf.keras.losses.Loss object. Make one with
// SparseCategoricalCrossentropy, BinaryCrossentropy, MeanSquaredError, MeanAbsoluteError or
// LossFunc.
type Loss struct {
	name       string
	kind       lossKind
	fromLogits bool
	reduction  Reduction
	fn         func(yTrue, yPred *tensor.Tensor) *tensor.Tensor
}

func newLoss(name string, kind lossKind, fromLogits bool, opts []LossOption) *Loss {
	l := &Loss{name: name, kind: kind, fromLogits: fromLogits}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.applyLoss(l); err != nil {
			panic(fmt.Errorf("%w: %s: %v", ErrInvalidArgument, name, err))
		}
	}
	return l
}

// SparseCategoricalCrossentropy returns the cross-entropy between integer class labels
// (shape (batch) or (batch, 1)) and predicted class scores (batch, classes): logits when
// fromLogits, probabilities otherwise.
func SparseCategoricalCrossentropy(fromLogits bool, opts ...LossOption) *Loss {
	return newLoss("sparse_categorical_crossentropy", lossSparseCCE, fromLogits, opts)
}

// BinaryCrossentropy returns the cross-entropy between 0/1 labels and predictions of the
// same shape (or with a trailing 1), averaged over the last axis: logits when fromLogits,
// probabilities otherwise.
func BinaryCrossentropy(fromLogits bool, opts ...LossOption) *Loss {
	return newLoss("binary_crossentropy", lossBinaryCE, fromLogits, opts)
}

// MeanSquaredError returns the squared error averaged over the last axis. Labels broadcast
// against the predictions as in Keras: labels (batch) and (batch, 1) against predictions
// (batch, 1) give the same loss; shapes that do not broadcast are an error naming both.
func MeanSquaredError(opts ...LossOption) *Loss {
	return newLoss("mean_squared_error", lossMSE, false, opts)
}

// MeanAbsoluteError returns the absolute error averaged over the last axis, like
// tf.keras.losses.MeanAbsoluteError; labels broadcast as for MeanSquaredError.
func MeanAbsoluteError(opts ...LossOption) *Loss {
	return newLoss("mean_absolute_error", lossMAE, false, opts)
}

// LossFunc wraps fn, which returns the per-example losses (shape (batch)) of a batch, as a
// Loss named name.
func LossFunc(name string, fn func(yTrue, yPred *tensor.Tensor) *tensor.Tensor, opts ...LossOption) *Loss {
	if fn == nil {
		panic(fmt.Errorf("%w: LossFunc %q: fn is nil", ErrInvalidArgument, name))
	}
	l := newLoss(name, lossCustom, false, opts)
	l.fn = fn
	return l
}

// Name returns Keras' name of the loss, such as "sparse_categorical_crossentropy".
func (l *Loss) Name() string { return l.name }

// FromLogits reports whether the loss expects logits.
func (l *Loss) FromLogits() bool { return l.fromLogits }

// Reduction returns the loss's reduction.
func (l *Loss) Reduction() Reduction { return l.reduction }

// Call computes the loss of a batch with the loss's reduction: a scalar, or the
// per-example losses with ReductionNone. It panics with an error naming the shapes when
// they do not fit.
func (l *Loss) Call(yTrue, yPred *tensor.Tensor) *tensor.Tensor {
	per := l.PerExample(yTrue, yPred)
	switch l.reduction {
	case ReductionNone:
		return per
	case ReductionSum:
		return tensor.ReduceSum(per)
	}
	n := per.Size()
	if n == 0 {
		return tensor.Scalar(0)
	}
	return tensor.Scale(tensor.ReduceSum(per), 1/float32(n))
}

const lossEpsilon = 1e-7

// PerExample returns the loss of every example, shape (batch).
func (l *Loss) PerExample(yTrue, yPred *tensor.Tensor) *tensor.Tensor {
	if yTrue == nil || yPred == nil {
		panic(fmt.Errorf("%w: %s: labels or predictions are nil", ErrShape, l.name))
	}
	pshape := yPred.Shape()
	if len(pshape) == 0 {
		panic(fmt.Errorf("%w: %s: predictions are a scalar, want a batch", ErrShape, l.name))
	}
	batch := pshape[0]
	switch l.kind {
	case lossSparseCCE:
		if len(pshape) != 2 {
			panic(fmt.Errorf("%w: %s: predictions have shape %v, want (batch, classes)", ErrShape, l.name, pshape))
		}
		if yTrue.Size() != batch {
			panic(fmt.Errorf("%w: %s: labels have shape %v, predictions %v; want one integer label per example", ErrShape, l.name, yTrue.Shape(), pshape))
		}
		labels := yTrue
		if yTrue.Rank() != 1 {
			labels = tensor.Reshape(yTrue, batch)
		}
		classes := pshape[1]
		for i, v := range labels.Data() {
			if v != float32(int(v)) || v < 0 || int(v) >= classes {
				panic(fmt.Errorf("%w: %s: label %v of example %d is not a class index in [0, %d)", ErrShape, l.name, v, i, classes))
			}
		}
		if l.fromLogits {
			return tensor.SparseSoftmaxCrossEntropyWithLogits(yPred, labels)
		}
		oh := make([]float32, batch*classes)
		for i, v := range labels.Data() {
			oh[i*classes+int(v)] = 1
		}
		onehot := tensor.MustNew([]int{batch, classes}, oh)
		p := tensor.ReduceSum(tensor.Mul(yPred, onehot), 1)
		return tensor.Neg(tensor.Log(tensor.Maximum(p, tensor.Scalar(lossEpsilon))))
	case lossBinaryCE, lossMSE, lossMAE:
		y := matchShape(l.name, yTrue, yPred)
		var e *tensor.Tensor
		switch {
		case l.kind == lossMSE:
			e = tensor.Square(tensor.Sub(yPred, y))
		case l.kind == lossMAE:
			e = tensor.Abs(tensor.Sub(yPred, y))
		case l.fromLogits:
			// max(x, 0) - x*z + log(1 + exp(-|x|)), the stable form TensorFlow uses.
			e = tensor.Add(tensor.Sub(tensor.ReLU(yPred), tensor.Mul(yPred, y)),
				tensor.Log(tensor.AddScalar(tensor.Exp(tensor.Neg(tensor.Abs(yPred))), 1)))
		default:
			// Keras clips probabilities to [eps, 1-eps].
			p := tensor.Maximum(yPred, tensor.Scalar(lossEpsilon))
			p = tensor.Neg(tensor.Maximum(tensor.Neg(p), tensor.Scalar(-(1 - lossEpsilon))))
			pos := tensor.Mul(y, tensor.Log(tensor.AddScalar(p, lossEpsilon)))
			neg := tensor.Mul(tensor.AddScalar(tensor.Neg(y), 1), tensor.Log(tensor.AddScalar(tensor.Neg(p), 1+lossEpsilon)))
			e = tensor.Neg(tensor.Add(pos, neg))
		}
		if e.Rank() == 1 {
			return e
		}
		if batch == 0 {
			return tensor.Zeros(0)
		}
		// Mean over the non-batch axes (of the broadcast shape): the last axis for the usual
		// (batch, k) predictions.
		k := e.Size() / batch
		return tensor.Scale(tensor.ReduceSum(tensor.Reshape(e, batch, k), 1), 1/float32(k))
	case lossCustom:
		per := l.fn(yTrue, yPred)
		if per == nil || per.Size() != batch {
			var got any = "nil"
			if per != nil {
				got = per.Shape()
			}
			panic(fmt.Errorf("%w: loss %q returned shape %v, want one loss per example (%d)", ErrShape, l.name, got, batch))
		}
		return per
	}
	panic(fmt.Errorf("%w: unknown loss %q", ErrInvalidArgument, l.name))
}

// compiledLabels is what a compiled model's loss and metrics (Fit, Evaluate) do to the
// labels first, as tf.keras' compile_utils.match_dtype_and_rank: labels of rank 1 against
// predictions of rank 2 become (batch, 1), so that each label is compared with every
// column of its example's predictions (Dense(10) trained with "mse" on labels (batch)).
// Labels are float32 like the predictions, so the dtype needs no cast.
func compiledLabels(y, pred *tensor.Tensor) *tensor.Tensor {
	if y != nil && pred != nil && y.Rank() == 1 && pred.Rank() == 2 {
		return tensor.Reshape(y, y.Shape()[0], 1)
	}
	return y
}

// compiledPerExample is the compiled loss's per-example losses: the labels matched to the
// predictions' rank (compiledLabels), then the loss's own rules.
func (m *Model) compiledPerExample(y, pred *tensor.Tensor) *tensor.Tensor {
	return m.loss.PerExample(compiledLabels(y, pred), pred)
}

// matchShape returns yTrue ready to broadcast against yPred, as Keras'
// squeeze_or_expand_to_same_rank does: labels with one axis more than the predictions
// whose last axis is 1 lose it; labels of rank 1 against predictions (batch, 1) gain it.
// The shapes must then have the same rank and batch size, and every other axis equal or 1
// on one side (Keras' broadcasting). A loss called directly with labels (batch) against
// predictions (batch, k) would, in Keras, broadcast the batch against the k columns
// (aligning examples with classes, or failing when batch != k): that is refused here with
// the reshape to write; a compiled model's Fit and Evaluate expand such labels to
// (batch, 1) first, as tf.keras does.
func matchShape(name string, yTrue, yPred *tensor.Tensor) *tensor.Tensor {
	ts, ps := yTrue.Shape(), yPred.Shape()
	if sameInts(ts, ps) {
		return yTrue
	}
	given := yTrue.Shape()
	switch {
	case len(ts) == len(ps)+1 && ts[len(ts)-1] == 1:
		yTrue, ts = tensor.Reshape(yTrue, ts[:len(ts)-1]...), ts[:len(ts)-1]
	case len(ps) == len(ts)+1 && ps[len(ps)-1] == 1 && len(ts) == 1:
		ts = append(ts, 1)
		yTrue = tensor.Reshape(yTrue, ts...)
	}
	ok := len(ts) == len(ps) && len(ts) > 0 && ts[0] == ps[0]
	for i := 1; ok && i < len(ts); i++ {
		ok = ts[i] == ps[i] || ts[i] == 1 || ps[i] == 1
	}
	if !ok {
		if len(given) == 1 && len(ps) == 2 && given[0] == ps[0] {
			panic(fmt.Errorf("%w: %s: labels of shape %v against predictions of shape %v: Keras would broadcast "+
				"the %d examples against the %d columns; write tensor.Reshape(labels, %d, 1) to compare each label "+
				"with its example's %d predictions (what Fit does), or give labels of shape %v",
				ErrShape, name, given, ps, given[0], ps[1], given[0], ps[1], ps))
		}
		panic(fmt.Errorf("%w: %s: labels of shape %v do not broadcast against predictions of shape %v; "+
			"give labels of shape %v, one per prediction value", ErrShape, name, given, ps, ps))
	}
	return yTrue
}

func sameInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
