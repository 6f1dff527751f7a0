package layers

import (
	"fmt"

	"godist/distlib/tensor"
)

// GlobalAveragePoolingLayer averages each example over its steps (1D) or its rows and
// columns (2D); see GlobalAveragePooling1D and GlobalAveragePooling2D.
type GlobalAveragePoolingLayer struct {
	base
	rank int // the input's rank without the batch: 2 (steps, features) or 3 (h, w, channels)
}

// GlobalAveragePooling1D returns a layer that averages (batch, steps, features) over the
// steps, like tf.keras.layers.GlobalAveragePooling1D(): tf.reduce_mean(x, axis=1), the
// parameter-server tutorial's mean of an Embedding's vectors.
func GlobalAveragePooling1D(opts ...Option) *GlobalAveragePoolingLayer {
	return &GlobalAveragePoolingLayer{base: newBase("GlobalAveragePooling1D", "global_average_pooling1d",
		parseOptions("GlobalAveragePooling1D", opts)), rank: 2}
}

// GlobalAveragePooling2D returns a layer that averages (batch, height, width, channels)
// over height and width, like tf.keras.layers.GlobalAveragePooling2D() (channels last).
func GlobalAveragePooling2D(opts ...Option) *GlobalAveragePoolingLayer {
	return &GlobalAveragePoolingLayer{base: newBase("GlobalAveragePooling2D", "global_average_pooling2d",
		parseOptions("GlobalAveragePooling2D", opts)), rank: 3}
}

// Build implements Layer.
func (l *GlobalAveragePoolingLayer) Build(in []int, _ uint64) ([]int, []Param, error) {
	if len(in) != l.rank {
		want := "(steps, features)"
		if l.rank == 3 {
			want = "(height, width, channels)"
		}
		return nil, nil, fmt.Errorf("%w: %s: input shape %v, want %s per example", ErrInvalidArgument, l.Class(), in, want)
	}
	return []int{in[len(in)-1]}, nil, nil
}

// Forward implements Layer.
func (l *GlobalAveragePoolingLayer) Forward(x *tensor.Tensor, _ []*tensor.Tensor, _ bool, _ uint64) *tensor.Tensor {
	if l.rank == 3 {
		return tensor.ReduceMean(x, 1, 2)
	}
	return tensor.ReduceMean(x, 1)
}

// GetConfig implements Configurable.
func (l *GlobalAveragePoolingLayer) GetConfig() Config { return l.common() }
