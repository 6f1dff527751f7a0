package keras

import (
	"errors"
	"strings"
	"testing"

	"godist/distlib/data"
	"godist/distlib/distribute"
	"godist/distlib/keras/layers"
	"godist/distlib/tensor"
)

// TestDatasetCreatorPSFit: the parameter-server tutorial's
// model.fit(tf.keras.utils.experimental.DatasetCreator(dataset_fn), epochs=5,
// steps_per_epoch=20): dataset_fn gets one input pipeline and the global batch, the
// Dense(10) model trains with "mse" on labels (10,), its variables on the ps; a strategy
// with several replicas in sync refuses it, saying what to write.
func TestDatasetCreatorPSFit(t *testing.T) {
	var got []*distribute.InputContext
	datasetFn := func(inputContext *distribute.InputContext) *data.Dataset {
		got = append(got, inputContext)
		globalBatchSize := 64
		batchSize := inputContext.GetPerReplicaBatchSize(globalBatchSize)
		x := tensor.RandomUniform([]int{10, 10}, 0, 1, 1)
		y := tensor.RandomUniform([]int{10}, 0, 1, 2)
		dataset := data.FromTensorSlices(x, y).Shuffle(10, 1).Repeat(-1)
		dataset = dataset.Shard(inputContext.NumInputPipelines, inputContext.InputPipelineID)
		return dataset.Batch(batchSize, false).Prefetch(2)
	}
	s, servers := psStrategy(t, 1, 2)
	var model *Model
	s.Scope(func() {
		model = Sequential(layers.Dense(10))
		model.Compile(SGD(0), MeanSquaredError())
	})
	h := model.Fit(DatasetCreator(datasetFn), Epochs(5), StepsPerEpoch(20), Verbose(0))
	if l := h.History["loss"]; len(l) != 5 || !(l[4] < l[0]) {
		t.Errorf("loss %v, want 5 epochs, falling", l)
	}
	if len(got) != 1 || got[0].NumInputPipelines != 1 || got[0].GetPerReplicaBatchSize(64) != 64 {
		t.Errorf("dataset_fn called %d times with %v, want once with one pipeline and the global batch", len(got), got)
	}
	if st := servers[0].Stats(); st.Applied == 0 {
		t.Errorf("the ps applied no update: %+v", st)
	}

	splitCPU(t, 2)
	mirrored := distribute.NewMirroredStrategy()
	var mm *Model
	inProcessScopes.Lock()
	mirrored.Scope(func() {
		mm = Sequential(layers.Dense(10, layers.InputShape(10)))
		mm.Compile(SGD(0), MeanSquaredError())
	})
	inProcessScopes.Unlock()
	err := catch(func() { mm.Fit(DatasetCreator(datasetFn), Epochs(1), StepsPerEpoch(1), Verbose(0)) })
	if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "DistributeDatasetsFromFunction") {
		t.Errorf("Fit(DatasetCreator) under MirroredStrategy on 2 devices: %v, want an error saying what to write", err)
	}
}
