package keras

import (
	"math/rand/v2"
	"testing"

	"godist/distlib/data"
	"godist/distlib/distribute"
	"godist/distlib/keras/layers"
	"godist/distlib/tensor"
)

// wordsTask is TensorFlow's parameter-server tutorial's toy data, translated: three words
// per example, label 1 when one of them is in the "positive" half of the vocabulary.
func wordsTask(n int, seed uint64) (lookup *layers.StringLookupLayer, x, y *tensor.Tensor) {
	vocab := []string{"avenger", "ironman", "batman", "hulk", "spiderman", "kingkong", "wonder_woman"}
	lookup = layers.StringLookup(vocab, 1)
	r := rand.New(rand.NewPCG(seed, 1))
	rows := make([][]string, n)
	labels := make([]float32, n)
	for i := range rows {
		for j := 0; j < 3; j++ {
			w := vocab[r.IntN(len(vocab))]
			if r.IntN(10) == 0 {
				w = "unknown_word" // out of the vocabulary: id 0
			}
			rows[i] = append(rows[i], w)
			if w == "avenger" || w == "ironman" || w == "batman" {
				labels[i] = 1
			}
		}
	}
	return lookup, lookup.LookupRows(rows), tensor.MustNew([]int{n, 1}, labels)
}

func wordsModel(vocabSize int) *Model {
	return Sequential(
		layers.Embedding(vocabSize, 8, layers.InputShape(3)),
		layers.Flatten(),
		layers.Dense(16, layers.ReLU),
		layers.Dense(1, layers.Sigmoid))
}

// TestEmbeddingStringLookupFit: strings -> StringLookup ids -> Embedding trains to the task,
// under the default strategy and MirroredStrategy alike.
func TestEmbeddingStringLookupFit(t *testing.T) {
	splitCPU(t, 2)
	lookup, x, y := wordsTask(512, 1)
	if got := lookup.Vocabulary()[0]; got != "[UNK]" || lookup.VocabularySize() != 8 {
		t.Fatalf("vocabulary %v (size %d), want [UNK] first and 8 ids", lookup.Vocabulary(), lookup.VocabularySize())
	}
	ds := data.FromTensorSlices(x, y).Batch(32, false)
	for _, s := range []distribute.Strategy{distribute.NewDefaultStrategy(), distribute.NewMirroredStrategy()} {
		SetRandomSeed(3)
		var m *Model
		s.Scope(func() {
			m = wordsModel(lookup.VocabularySize())
			m.Compile(Adam(0.01), BinaryCrossentropy(false), "accuracy")
		})
		quiet(m)
		before := m.Evaluate(ds, Verbose(0))["accuracy"]
		m.Fit(ds, Epochs(15), Verbose(0))
		after := m.Evaluate(ds, Verbose(0))
		if after["accuracy"] < 0.95 {
			t.Errorf("%s: accuracy %.3f -> %.3f after 15 epochs, want >= 0.95", s.Name(), before, after["accuracy"])
		}
	}
}

// TestEmbeddingPSCustomLoop: the parameter-server tutorial's custom loop: the Embedding's
// table lives on the ps, each step reads it and pushes its gradient.
func TestEmbeddingPSCustomLoop(t *testing.T) {
	lookup, x, y := wordsTask(512, 2)
	strategy, _ := psStrategy(t, 2, 2, distribute.WithVariablePartitioner(distribute.NewFixedShardsPartitioner(2)))
	SetRandomSeed(3)
	var model *Model
	var optimizer *Optimizer
	strategy.Scope(func() {
		model = wordsModel(lookup.VocabularySize())
		optimizer = Adam(0.01)
	})
	coordinator := distribute.NewClusterCoordinator(strategy)
	defer coordinator.Close()
	it := coordinator.CreatePerWorkerDataset(func(ctx *distribute.InputContext) *data.Dataset {
		return data.FromTensorSlices(x, y).Shard(ctx.NumInputPipelines, ctx.InputPipelineID).Repeat(-1).Batch(32, true)
	}).Iterator()
	defer it.Close()
	lossObject := BinaryCrossentropy(false, WithReduction(ReductionNone))
	step := func(w *distribute.WorkerContext) (*tensor.Tensor, error) {
		batch, _ := w.Next(it)
		tape := tensor.NewGradientTape()
		pred := model.Call(batch[0], true)
		loss := distribute.ComputeAverageLoss(lossObject.Call(batch[1], pred), 32)
		grads := tape.Gradient(loss, model.TrainableVariables())
		return loss, optimizer.ApplyGradients(grads, model.TrainableVariables())
	}
	for i := 0; i < 240; i++ {
		coordinator.Schedule(step)
	}
	if err := coordinator.Join(); err != nil {
		t.Fatal(err)
	}
	model.Compile(optimizer, BinaryCrossentropy(false), "accuracy")
	if acc := model.Evaluate(data.FromTensorSlices(x, y).Batch(128, false), Verbose(0))["accuracy"]; acc < 0.95 {
		t.Errorf("accuracy after the ps custom loop %.3f, want >= 0.95", acc)
	}
}
