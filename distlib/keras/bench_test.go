package keras

import (
	"context"
	"testing"

	"godist/distlib/data"
	"godist/distlib/keras/layers"
	"godist/distlib/tensor"
)

// BenchmarkFitStepCNN measures one training step of the quickstart CNN on a batch of 64
// MNIST-sized images (run with -bench FitStep; reports samples/s).
func BenchmarkFitStepCNN(b *testing.B) {
	SetRandomSeed(1)
	m := peerCNN()
	m.Compile(Adam(1e-3), SparseCategoricalCrossentropy(true), "accuracy")
	x := tensor.RandomUniform([]int{64, 28, 28, 1}, 0, 1, 1)
	y := tensor.Fill(3, 64)
	el := data.Element{x, y}
	metrics := m.compiledMetrics()
	paths := m.trainerFor().(*syncTrainer).paths
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := m.trainStep(context.Background(), el, metrics, 0, paths); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(64*b.N)/b.Elapsed().Seconds(), "samples/s")
}

// BenchmarkFitLoopCNN is BenchmarkFitStepCNN through Fit's loop: batches of 64 taken from
// the data by the iterator, the callbacks and the statistics (run with -benchmem: the bytes
// allocated per step, mostly what a collection must scan and free).
func BenchmarkFitLoopCNN(b *testing.B) {
	SetRandomSeed(1)
	m := peerCNN()
	m.Compile(Adam(1e-3), SparseCategoricalCrossentropy(true), "accuracy")
	ds := data.FromTensorSlices(tensor.RandomUniform([]int{64 * 8, 28, 28, 1}, 0, 1, 1), tensor.Fill(3, 64*8)).Batch(64, true)
	m.Fit(ds, Epochs(1), StepsPerEpoch(8), Verbose(0))
	b.ReportAllocs()
	b.ResetTimer()
	m.Fit(ds, Epochs(1), StepsPerEpoch(b.N), Verbose(0))
	b.ReportMetric(float64(64*b.N)/b.Elapsed().Seconds(), "samples/s")
}

// peerCNN is the quickstart's CNN, the peers' model (shared/peers/model.py).
func peerCNN() *Model {
	return Sequential(
		layers.Conv2D(32, 3, layers.ReLU, layers.InputShape(28, 28, 1)),
		layers.MaxPooling2D(2),
		layers.Flatten(),
		layers.Dense(64, layers.ReLU),
		layers.Dense(10))
}
