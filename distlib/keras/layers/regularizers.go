package layers

import (
	"fmt"

	"godist/distlib/tensor"
)

// Regularizer is a penalty on a weight added to the training loss, like
// tf.keras.regularizers.L2: a layer made with KernelRegularizer adds Penalty(kernel) to the
// loss its model trains on.
type Regularizer interface {
	// Penalty returns the scalar penalty of w (differentiable).
	Penalty(w *tensor.Tensor) *tensor.Tensor
	// String names the regularizer with its factors, such as "L2(l2=0.0001)".
	String() string
}

type l1l2 struct{ l1, l2 float32 }

// L2 returns Keras's L2 regularizer: l2 * sum(w²).
func L2(l2 float64) Regularizer { return newL1L2("L2", 0, l2) }

// L1 returns Keras's L1 regularizer: l1 * sum(|w|).
func L1(l1 float64) Regularizer { return newL1L2("L1", l1, 0) }

// L1L2 returns Keras's L1L2 regularizer: l1 * sum(|w|) + l2 * sum(w²).
func L1L2(l1, l2 float64) Regularizer { return newL1L2("L1L2", l1, l2) }

func newL1L2(name string, l1, l2 float64) Regularizer {
	if l1 < 0 || l2 < 0 {
		panic(fmt.Errorf("%w: %s(l1=%v, l2=%v): factors must be >= 0", ErrInvalidArgument, name, l1, l2))
	}
	return l1l2{float32(l1), float32(l2)}
}

func (r l1l2) Penalty(w *tensor.Tensor) *tensor.Tensor {
	var out *tensor.Tensor
	if r.l1 != 0 {
		out = tensor.Scale(tensor.ReduceSum(tensor.Abs(w)), r.l1)
	}
	if r.l2 != 0 {
		sq := tensor.Scale(tensor.ReduceSum(tensor.Square(w)), r.l2)
		if out == nil {
			out = sq
		} else {
			out = tensor.Add(out, sq)
		}
	}
	if out == nil {
		out = tensor.Scalar(0)
	}
	return out
}

func (r l1l2) String() string {
	switch {
	case r.l1 == 0:
		return fmt.Sprintf("L2(l2=%v)", r.l2)
	case r.l2 == 0:
		return fmt.Sprintf("L1(l1=%v)", r.l1)
	}
	return fmt.Sprintf("L1L2(l1=%v, l2=%v)", r.l1, r.l2)
}

// KernelRegularizer adds r's penalty of the layer's main weight (the kernel of Dense and
// Conv2D, the table of Embedding) to the training loss, like kernel_regularizer= (Embedding's
// embeddings_regularizer=).
func KernelRegularizer(r Regularizer) Option {
	return optionFunc(func(o *options) error {
		if r == nil {
			return fmt.Errorf("KernelRegularizer(nil): give layers.L2(...), L1(...) or L1L2(...)")
		}
		o.regularizer = r
		o.set["kernel_regularizer"] = true
		return nil
	})
}

// Regularized is implemented by layers that add a penalty to the training loss.
type Regularized interface {
	// RegularizationLoss returns the penalty for the layer's parameter values params (in
	// Build's order), or nil when the layer has none.
	RegularizationLoss(params []*tensor.Tensor) *tensor.Tensor
	// HasRegularizer reports whether the layer has a penalty at all.
	HasRegularizer() bool
}

// kernelPenalty is the RegularizationLoss of a layer whose weight 0 is the kernel.
type kernelPenalty struct{ reg Regularizer }

// HasRegularizer implements Regularized.
func (k kernelPenalty) HasRegularizer() bool { return k.reg != nil }

// RegularizationLoss implements Regularized.
func (k kernelPenalty) RegularizationLoss(params []*tensor.Tensor) *tensor.Tensor {
	if k.reg == nil || len(params) == 0 {
		return nil
	}
	return k.reg.Penalty(params[0])
}
