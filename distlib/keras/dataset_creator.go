package keras

import (
	"fmt"

	"godist/distlib/data"
	"godist/distlib/distribute"
)

// DatasetCreatorInput is what DatasetCreator returns: input for Fit, Evaluate and Predict.
type DatasetCreatorInput struct {
	fn func(ctx *distribute.InputContext) *data.Dataset
}

// DatasetCreator wraps a function that makes the input dataset, like
// tf.keras.utils.experimental.DatasetCreator(dataset_fn) in the parameter-server
// tutorial: model.Fit(keras.DatasetCreator(datasetFn), keras.Epochs(5), ...). Fit calls
// datasetFn once, with an InputContext of one input pipeline that feeds every worker
// (under ParameterServerStrategy the coordinator hands its batches to the workers), so
// ctx.GetPerReplicaBatchSize(global) is the global batch; under a strategy with several
// replicas in sync, whose replicas TF feeds from per-replica batches, it is refused with
// what to write instead.
func DatasetCreator(datasetFn func(ctx *distribute.InputContext) *data.Dataset) *DatasetCreatorInput {
	if datasetFn == nil {
		panic(fmt.Errorf("%w: DatasetCreator(nil): give the function that makes the dataset", ErrInvalidArgument))
	}
	return &DatasetCreatorInput{fn: datasetFn}
}

// dataset calls the function for the model's strategy.
func (c *DatasetCreatorInput) dataset(op string, s distribute.Strategy) *data.Dataset {
	if n := s.NumReplicasInSync(); n != 1 {
		panic(fmt.Errorf("%w: %s(keras.DatasetCreator(...)) under %s with %d replicas in sync: its batches would be "+
			"per-replica batches; pass the dataset itself, batched with the global batch size, or use "+
			"strategy.DistributeDatasetsFromFunction in a custom loop", ErrInvalidArgument, op, s.Name(), n))
	}
	ds := c.fn(&distribute.InputContext{NumInputPipelines: 1, InputPipelineID: 0, NumReplicasInSync: 1})
	if ds == nil {
		panic(fmt.Errorf("%w: %s: the DatasetCreator's function returned a nil dataset", ErrInvalidArgument, op))
	}
	return ds
}
