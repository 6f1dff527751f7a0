// Package peer is what the benches train, as shared/peers/model.py has it: the course's CNN
// (Conv2D 32 3x3, max-pooling, Dense 64, Dense 10) and synthetic 28x28x1 images with labels
// 0-9, the same in every process.
package peer

import (
	"godist/distlib/keras"
	"godist/distlib/keras/layers"
	"godist/distlib/tensor"
)

// CNN returns the peer's model, not compiled (the benches compile it with or without
// metrics).
func CNN() *keras.Model {
	return keras.Sequential(layers.Input(28, 28, 1), layers.Conv2D(32, 3, layers.ReLU), layers.MaxPooling2D(2),
		layers.Flatten(), layers.Dense(64, layers.ReLU), layers.Dense(10))
}

// Images returns rows synthetic images, uniform in [0, 1), and their labels 0-9.
func Images(rows int) (x, y *tensor.Tensor) {
	x = tensor.RandomUniform([]int{rows, 28, 28, 1}, 0, 1, 100)
	lab := tensor.RandomUniform([]int{rows}, 0, 10, 1000).Data()
	l := make([]float32, len(lab))
	for i, v := range lab {
		l[i] = float32(int(v))
	}
	return x, tensor.MustNew([]int{len(l)}, l)
}
