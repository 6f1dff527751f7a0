package notebooks

import (
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// tutorialCases are TensorFlow's distribute tutorials translated line by line, run as
// cells of one notebook by the real kernel (after seedSetup), in this order.
var tutorialCases = []seedCase{
	{
		name: "ps/cluster",
		tf:   "Parameter server training: create_in_process_cluster(NUM_WORKERS, NUM_PS)",
		code: `import "net"

const psToken = "tf-tutorial-ps"

// startPS serves one parameter server on a free loopback port (TF: tf.distribute.Server
// for each ps task of the in-process cluster).
func startPS() (string, func() error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	spec, _ := cluster.NewClusterSpec(map[string][]string{"ps": {lis.Addr().String()}})
	r, _ := cluster.NewSimpleClusterResolver(spec, "ps", 0, "grpc")
	srv, err := distribute.ServeParameterServer(r, lis, distribute.WithClusterToken(psToken))
	if err != nil {
		panic(err)
	}
	return lis.Addr().String(), srv.Close
}

NUM_PS := 2
ps0, stopPS0 := startPS()
ps1, stopPS1 := startPS()
clusterSpec, _ := cluster.NewClusterSpec(map[string][]string{
	"chief": {"127.0.0.1:21000"}, "worker": {"127.0.0.1:21001", "127.0.0.1:21002"}, "ps": {ps0, ps1}})
clusterResolver, _ := cluster.NewSimpleClusterResolver(clusterSpec, "chief", 0, "grpc")
variablePartitioner := distribute.NewMinSizePartitioner(256<<10, NUM_PS)
strategy := distribute.NewParameterServerStrategy(clusterResolver,
	distribute.WithVariablePartitioner(variablePartitioner), distribute.WithClusterToken(psToken))
fmt.Println(strategy.Name(), strategy.NumWorkers(), "workers", strategy.NumPS(), "ps")`,
		want: `^ParameterServerStrategy 2 workers 2 ps\n$`,
	},
	{
		name: "ps/fit-mse-rank1-labels",
		tf: `with strategy.scope(): model = tf.keras.models.Sequential([tf.keras.layers.Dense(10)]); model.compile(SGD(), loss="mse", steps_per_execution=10)` +
			`; x = tf.random.uniform((10, 10)); y = tf.random.uniform((10,)); dataset = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(10).repeat().batch(64); model.fit(dataset, epochs=5, steps_per_epoch=20)`,
		code: `var fitModel *keras.Model
strategy.Scope(func() {
	fitModel = keras.Sequential(layers.Dense(10))
	fitModel.Compile(keras.SGD(0), keras.MeanSquaredError())
})
x := tensor.RandomUniform([]int{10, 10}, 0, 1, 1)
y := tensor.RandomUniform([]int{10}, 0, 1, 2) // labels of shape (10,): matched to (n, 1) as tf.keras does
fitDataset := data.FromTensorSlices(x, y).Shuffle(10, 1).Repeat(-1).Batch(64, false)
fitHistory := fitModel.Fit(fitDataset, keras.Epochs(5), keras.StepsPerEpoch(20), keras.StepsPerExecution(10), keras.Verbose(0))
losses := fitHistory.History["loss"]
fmt.Printf("epochs %d, loss falls: %v\n", len(losses), losses[4] < losses[0])`,
		want: `^epochs 5, loss falls: true\n$`,
	},
	{
		name: "ps/fit-dataset-creator",
		tf: "def dataset_fn(input_context): ... batch_size = input_context.get_per_replica_batch_size(global_batch_size); ...; " +
			"dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id) ...; " +
			"model.fit(tf.keras.utils.experimental.DatasetCreator(dataset_fn), epochs=5, steps_per_epoch=20)",
		code: `func datasetFnForFit(inputContext *distribute.InputContext) *data.Dataset {
	globalBatchSize := 64
	batchSize := inputContext.GetPerReplicaBatchSize(globalBatchSize)
	x := tensor.RandomUniform([]int{10, 10}, 0, 1, 3)
	y := tensor.RandomUniform([]int{10}, 0, 1, 4)
	dataset := data.FromTensorSlices(x, y).Shuffle(10, 1).Repeat(-1)
	dataset = dataset.Shard(inputContext.NumInputPipelines, inputContext.InputPipelineID)
	dataset = dataset.Batch(batchSize, false)
	return dataset.Prefetch(2)
}
dc := keras.DatasetCreator(datasetFnForFit)
creatorHistory := fitModel.Fit(dc, keras.Epochs(5), keras.StepsPerEpoch(20), keras.Verbose(0))
fmt.Println("epochs", len(creatorHistory.History["loss"]))`,
		want: `^epochs 5\n$`,
	},
	{
		name: "ps/custom-loop",
		tf:   "Parameter server training, custom training loop: step_fn with strategy.run(replica_fn, args=(batch_data, labels)) and strategy.reduce(SUM, losses, axis=None)",
		code: `import "math/rand/v2"

featureVocab := []string{"avenger", "ironman", "batman", "hulk", "spiderman", "kingkong", "wonder_woman"}
labelVocab := []string{"yes", "no"}
featureLookupLayer := layers.StringLookup(featureVocab, 1)
labelLookupLayer := layers.StringLookup(labelVocab, 0)

// featureAndLabelGen: three distinct words, "yes" when "avenger" is one of them.
func featureAndLabelGen(numExamples int, seed uint64) (*tensor.Tensor, *tensor.Tensor) {
	r := rand.New(rand.NewPCG(seed, seed))
	var features [][]string
	var labels []string
	for i := 0; i < numExamples; i++ {
		perm := r.Perm(len(featureVocab))
		words := []string{featureVocab[perm[0]], featureVocab[perm[1]], featureVocab[perm[2]]}
		label := "no"
		for _, w := range words {
			if w == "avenger" {
				label = "yes"
			}
		}
		features, labels = append(features, words), append(labels, label)
	}
	return featureLookupLayer.LookupRows(features), tensor.Reshape(labelLookupLayer.Lookup(labels...), numExamples, 1)
}
exampleFeatures, exampleLabels := featureAndLabelGen(200, 1)

func datasetFn(ctx *distribute.InputContext) *data.Dataset {
	return data.FromTensorSlices(exampleFeatures, exampleLabels).Shuffle(200, int64(ctx.InputPipelineID)).Batch(32, false).Repeat(-1)
}

keras.SetRandomSeed(3)
firstVariable := len(strategy.Variables()) // the variables of the Fit cell's model come first
var model *keras.Model
var optimizer *keras.Optimizer
var accuracy *keras.Metric
strategy.Scope(func() {
	model = keras.Sequential(
		layers.Embedding(featureLookupLayer.VocabularySize(), 16384, layers.InputShape(3)),
		layers.GlobalAveragePooling1D(), // tf.reduce_mean(emb_layer(model_input), axis=1)
		layers.Dense(1, layers.Sigmoid, layers.KernelRegularizer(layers.L2(1e-4))))
	// The tutorial's learning rate, 0.1, takes this data to chance accuracy here, in this
	// loop and in Fit alike: 0.01.
	optimizer = keras.RMSprop(0.01)
	accuracy = keras.Accuracy("accuracy")
})
before := []*tensor.Tensor{}
for _, v := range strategy.Variables()[firstVariable:] {
	before = append(before, v.Value())
}

coordinator := distribute.NewClusterCoordinator(strategy)
perWorkerDataset := coordinator.CreatePerWorkerDataset(datasetFn)
perWorkerIterator := perWorkerDataset.Iterator()

func stepFn(w *distribute.WorkerContext) (*tensor.Tensor, error) {
	replicaFn := func(ctx *distribute.ReplicaContext, inputs data.Element) *tensor.Tensor {
		batchData, labels := inputs[0], inputs[1]
		tape := tensor.NewGradientTape()
		pred := model.Call(batchData, true)
		perExampleLoss := keras.BinaryCrossentropy(false, keras.WithReduction(keras.ReductionNone)).Call(labels, pred)
		loss := distribute.ComputeAverageLoss(perExampleLoss, 0)
		if modelLosses := model.Losses(); len(modelLosses) > 0 {
			loss = tensor.Add(loss, distribute.ScaleRegularizationLoss(tensor.AddN(modelLosses...)))
		}
		gradients := tape.Gradient(loss, model.TrainableVariables())
		if err := optimizer.ApplyGradients(gradients, model.TrainableVariables()); err != nil {
			panic(err)
		}
		actualPred := tensor.Cast(tensor.Greater(pred, tensor.Scalar(0.5)), "int64")
		accuracy.UpdateState(labels, actualPred)
		return loss
	}
	batch, _ := w.Next(perWorkerIterator)
	losses := strategy.Run(replicaFn, distribute.NewDistributedValue(batch))
	return strategy.Reduce(distribute.ReduceSum, losses, -1), nil
}

numEpochs, stepsPerEpoch := 4, 5
for i := 0; i < numEpochs; i++ {
	accuracy.ResetState()
	for j := 0; j < stepsPerEpoch; j++ {
		coordinator.Schedule(stepFn)
	}
	if err := coordinator.Join(); err != nil {
		panic(err)
	}
	fmt.Printf("Finished epoch %d, accuracy is %f.\n", i, accuracy.Result())
}
finalLoss, err := coordinator.Schedule(stepFn).Fetch()
if err != nil {
	panic(err)
}
fmt.Printf("Final loss is %f\n", finalLoss.Item())

moved := 0
for i, v := range strategy.Variables()[firstVariable:] {
	if fmt.Sprint(v.Value().Data()) != fmt.Sprint(before[i].Data()) {
		moved++
	}
}
fmt.Printf("ps variables moved: %d of %d\n", moved, len(before))

evalFeatures, evalLabels := featureAndLabelGen(200, 2)
evalAccuracy := keras.Accuracy("eval_accuracy")
evalIt := data.FromTensorSlices(evalFeatures, evalLabels).Batch(8, false).Iterator()
for el, ok := evalIt.Next(); ok; el, ok = evalIt.Next() {
	pred := model.Call(el[0], false)
	evalAccuracy.UpdateState(el[1], tensor.Cast(tensor.Greater(pred, tensor.Scalar(0.5)), "int64"))
}
fmt.Printf("Evaluation accuracy: %f\n", evalAccuracy.Result())

// The same model trained with Fit under the same strategy, for its band.
keras.SetRandomSeed(3)
var fitted *keras.Model
strategy.Scope(func() {
	fitted = keras.Sequential(
		layers.Embedding(featureLookupLayer.VocabularySize(), 16384, layers.InputShape(3)),
		layers.GlobalAveragePooling1D(), // tf.reduce_mean(emb_layer(model_input), axis=1)
		layers.Dense(1, layers.Sigmoid, layers.KernelRegularizer(layers.L2(1e-4))))
	fitted.Compile(keras.RMSprop(0.01), keras.BinaryCrossentropy(false), "accuracy")
})
fitted.Fit(data.FromTensorSlices(exampleFeatures, exampleLabels).Shuffle(200, 1).Batch(32, false).Repeat(-1),
	keras.Epochs(numEpochs), keras.StepsPerEpoch(stepsPerEpoch), keras.Verbose(0))
fmt.Printf("Fit evaluation accuracy: %f\n", fitted.Evaluate(data.FromTensorSlices(evalFeatures, evalLabels).Batch(8, false), keras.Verbose(0))["accuracy"])
perWorkerIterator.Close()
coordinator.Close()`,
		want: `^Finished epoch 0, accuracy is [0-9.]+\.\nFinished epoch 1, accuracy is [0-9.]+\.\nFinished epoch 2, accuracy is [0-9.]+\.\nFinished epoch 3, accuracy is [0-9.]+\.\n` +
			`Final loss is [0-9.]+\nps variables moved: 3 of 3\nEvaluation accuracy: [0-9.]+\nFit evaluation accuracy: [0-9.]+\n`,
	},
	{
		name: "ps/reduce-plain-value",
		tf:   `strategy.reduce("SUM", 1., axis=None)`,
		code: `fmt.Println(strategy.Reduce("SUM", 1.0, -1).Item(), distribute.NewMirroredStrategy().Reduce("MEAN", 2.0, -1).Item())
distribute.NewMirroredStrategy().Reduce("SUM", 1.0, -1)`,
		want:  `^1 2\n.*a value that is not per replica would be counted once per replica`,
		fails: true,
	},
	{
		name: "custom-training/lines",
		tf: "train_images[..., None]; test_loss = tf.keras.metrics.Mean(name='test_loss'); test_loss.update_state(t_loss); test_loss.reset_states(); " +
			"strategy.experimental_distribute_values_from_function(value_fn)",
		code: `trainImages := tensor.Zeros(4, 28, 28)
fmt.Println(tensor.ExpandDims(trainImages, -1).Shape())
testLoss := keras.Mean("test_loss")
testLoss.UpdateState(tensor.Constant([]float32{1, 3}))
fmt.Println(testLoss.Result())
testLoss.ResetStates()
mirrored := distribute.NewMirroredStrategy()
valueFn := func(ctx *distribute.ValueContext) *tensor.Tensor {
	return tensor.Scalar(float32(ctx.ReplicaIDInSyncGroup))
}
distributedValues := mirrored.ExperimentalDistributeValuesFromFunction(valueFn)
fmt.Println(mirrored.Reduce("SUM", distributedValues, -1).Item(), testLoss.Result())`,
		want: `^\[4 28 28 1\]\n2\n1 0\n$`,
	},
	{
		name: "keras/callbacks",
		tf:   "callbacks=[tf.keras.callbacks.ReduceLROnPlateau(monitor='loss', factor=0.5, patience=1, min_delta=10), tf.keras.callbacks.CSVLogger('training.log')]",
		code: `import "strings"

reduceLR := keras.ReduceLROnPlateau("loss", 0.5, 1)
reduceLR.MinDelta = 10 // every epoch after the first is a plateau
csvLogger := keras.CSVLogger("training.log")
callbackModel := keras.Sequential(layers.Dense(1, layers.InputShape(2)))
callbackModel.Compile(keras.SGD(0.1), keras.MeanSquaredError())
callbackHistory := callbackModel.Fit(tensor.Ones(8, 2), tensor.Ones(8, 1), keras.Epochs(3), keras.Verbose(0),
	keras.Callbacks(reduceLR, csvLogger))
fmt.Println(callbackHistory.History["learning_rate"], callbackModel.Optimizer().LearningRate())
csvText, _ := os.ReadFile("training.log")
rows := strings.Split(strings.TrimSpace(string(csvText)), "\r\n")
fmt.Println(len(rows), rows[0])`,
		want: `^\[0\.1 0\.1 0\.05\] 0\.025\n4 epoch,learning_rate,loss,val_learning_rate,val_loss\n$`,
	},
	{
		name: "multi-worker/checkpoint-manager",
		tf: "task_type, task_id = (strategy.cluster_resolver.task_type, strategy.cluster_resolver.task_id); " +
			"checkpoint = tf.train.Checkpoint(model=multi_worker_model, epoch=epoch); " +
			"checkpoint_manager = tf.train.CheckpointManager(checkpoint, directory=write_checkpoint_dir, max_to_keep=1); checkpoint_manager.save()",
		code: `mwStrategy := distribute.NewMultiWorkerMirroredStrategy()
taskType, taskID := mwStrategy.ClusterResolver().TaskType(), mwStrategy.ClusterResolver().TaskID()
isChief := taskType == "" || taskType == "chief" || (taskType == "worker" && taskID == 0)
var mwModel *keras.Model
mwStrategy.Scope(func() { mwModel = keras.Sequential(layers.Dense(2, layers.InputShape(3))) })
epoch := tensor.NewVariable("epoch", tensor.Scalar(0), false)
checkpoint := keras.NewCheckpoint(mwModel, nil).Add("epoch", epoch)
checkpointManager := keras.NewCheckpointManager(checkpoint, "mw_ckpt", 1)
checkpointManager.Save()
epoch.AssignAdd(tensor.Scalar(1))
checkpointManager.Save()
epoch.Assign(tensor.Scalar(0))
if err := checkpoint.Restore(checkpointManager.LatestCheckpoint()); err != nil {
	panic(err)
}
fmt.Println(isChief, checkpointManager.LatestCheckpoint(), len(checkpointManager.Checkpoints()), epoch.Value().Item())`,
		want: `^true mw_ckpt/ckpt-2 1 1\n$`,
	},
	{
		name: "layers/global-average-pooling",
		tf:   "emb_output = tf.reduce_mean(emb_layer(model_input), axis=1) (tf.keras.layers.GlobalAveragePooling1D())",
		code: `poolModel := keras.Sequential(layers.Embedding(8, 4, layers.InputShape(3)), layers.GlobalAveragePooling1D(), layers.Dense(1, layers.Sigmoid))
fmt.Println(poolModel.Predict(tensor.Constant([][]float32{{1, 2, 3}}), keras.Verbose(0)).Shape())`,
		want: `^\[1 1\]\n$`,
	},
	{
		name: "memory/session",
		tf:   "a session's variables before an allocation that does not fit",
		code: `kept := tensor.Constant([]float32{1, 2, 3})
fmt.Println(kept.Data())`,
		want: `^\[1 2 3\]\n$`,
	},
	{
		name:  "memory/tensor",
		tf:    "np.zeros((100000, 100000, 100)): MemoryError: Unable to allocate 7.28 TiB",
		code:  `_ = tensor.Zeros(100000, 100000, 100)`,
		want:  `^MemoryError: out of memory: tensor\.Zeros of shape \[100000 100000 100\] \(float32\) needs 3\.64 TiB, more than this process may use: .* available of `,
		fails: true,
	},
	{
		name: "memory/dataset",
		tf:   "dataset.shuffle(buffer_size) with a buffer larger than memory",
		code: `it := data.FromTensors(tensor.Zeros(1 << 18)).Repeat(-1).Shuffle(1<<40, 1).Iterator()
_, _ = it.Next()`,
		want:  `^MemoryError: out of memory: Dataset\.Shuffle's buffer of 1099511627776 elements of 1\.00 MiB each needs .* available of `,
		fails: true,
	},
	{
		name: "memory/intact",
		tf:   "the session goes on",
		code: `fmt.Println(kept.Data(), "still here")
stopPS0()
stopPS1()`,
		want: `^\[1 2 3\] still here\n$`,
	},
}

// TestTFTutorials runs tutorialCases through the real kernel and checks what each cell
// shows; for the parameter-server custom loop (strategy.Run and strategy.Reduce inside the
// scheduled step_fn, as the tutorial writes it) also that the variables on the parameter
// servers moved and that the loop's accuracy is in the band of Fit's on the same model.
func TestTFTutorials(t *testing.T) {
	e := setup(t)
	path := filepath.Join(t.TempDir(), "tutorials.ipynb")
	if err := seedNotebook(path, tutorialCases); err != nil {
		t.Fatal(err)
	}
	nb := e.execute(t, path, 5*time.Minute)
	if len(nb.Cells) != len(tutorialCases)+1 {
		t.Fatalf("executed notebook has %d cells, want %d", len(nb.Cells), len(tutorialCases)+1)
	}
	for i, tc := range tutorialCases {
		c := nb.Cells[i+1]
		t.Run(tc.name, func(t *testing.T) {
			got := tc.check(t, c)
			if tc.name != "ps/custom-loop" {
				return
			}
			num := func(re string) float64 {
				m := regexp.MustCompile(re).FindStringSubmatch(got)
				if m == nil {
					t.Fatalf("no %q in %q", re, got)
				}
				v, _ := strconv.ParseFloat(m[1], 64)
				return v
			}
			loop, fit := num(`\nEvaluation accuracy: ([0-9.]+)`), num(`Fit evaluation accuracy: ([0-9.]+)`)
			if loop < 0.9 || fit < 0.9 || loop < fit-0.1 {
				t.Errorf("evaluation accuracy of the custom loop %.3f, of Fit %.3f: want both >= 0.9 and the loop within 0.1 of Fit", loop, fit)
			}
		})
	}
}
