// Package keras brings the Keras API to Go: Sequential models of layers (package
// keras/layers), losses, metrics, optimizers with learning-rate schedules, callbacks, and
// Fit / Evaluate / Predict that train through any distribute.Strategy.
//
// A notebook cell translates Keras line by line:
//
//	strategy := distribute.NewMirroredStrategy()
//	var model *keras.Model
//	strategy.Scope(func() {
//		model = keras.Sequential(
//			layers.Conv2D(32, 3, layers.ReLU, layers.InputShape(28, 28, 1)),
//			layers.MaxPooling2D(2),
//			layers.Flatten(),
//			layers.Dense(64, layers.ReLU),
//			layers.Dense(10))
//		model.Compile(keras.Adam(1e-3), keras.SparseCategoricalCrossentropy(true), "accuracy")
//	})
//	history := model.Fit(ds, keras.Epochs(3), keras.Callbacks(
//		keras.ModelCheckpoint("ckpt/ckpt_{epoch}"),
//		keras.TensorBoard("logs"),
//		keras.LearningRateScheduler(func(epoch int, lr float64) float64 { return lr }),
//		keras.LambdaCallback{OnEpochEnd: func(epoch int, logs keras.Logs) { fmt.Println(logs) }}))
//	history.Plot()
//	logs := model.Evaluate(test)
//	fmt.Println(logs["loss"], logs["accuracy"])
//
// Tensors work as in Keras too, model.fit(x, y, batch_size=64, validation_split=0.2):
//
//	model.Fit(x, y, keras.BatchSize(64), keras.Epochs(5), keras.ValidationSplit(0.2))
//
// and so does the functional API for a chain of layers, with layer.trainable:
//
//	inputs := keras.Input(784)
//	base := layers.Dense(64, layers.ReLU)
//	outputs := layers.Dense(10).Call(base.Call(inputs))
//	model := keras.NewModel(inputs, outputs)
//	base.SetTrainable(false)
//
// A whole model (architecture, compile arguments, weights, optimizer state) is saved to
// one file and loaded back, like model.save("model.keras") and
// keras.models.load_model("model.keras"):
//
//	err := model.Save("model.keras")
//	restored, err := keras.LoadModel("model.keras")
//
// # Distribution
//
// A model captures distribute.GetStrategy() when Sequential or NewModel makes it. Under a
// strategy that runs replicas in sync (Mirrored, MultiWorkerMirrored, OneDevice, the
// default one) each Fit step splits the global batch with distribute.SplitBatch into one
// shard per local replica, runs the forward and backward passes of the replicas
// concurrently (strategy.Extended().RunReplicas), each on its device and, when the
// strategy mirrors variables, with its own copy of the variables. The loss of a replica is the sum of its
// per-example losses divided by the global batch size (distribute.ComputeAverageLoss
// semantics), so the SUM all-reduce of the gradients is the gradient of the mean loss over
// the global batch; the optimizer then applies it to every copy (identical updates keep
// mirrored copies equal) or to the single copy. The loss and metric sums travel in the same
// all-reduce, so the logs are means over every example seen by every replica and worker.
// Under ParameterServerStrategy the variables live on the parameter servers and Fit
// schedules its steps on the workers through a distribute.ClusterCoordinator; under a Keras
// 3 distribution (package mesh) the model's variables and steps are laid out on a device
// mesh. Checkpoints and TensorBoard files are written by the chief worker only.
//
// # Errors
//
// Constructors and Fit, Evaluate, Predict panic with errors wrapping ErrInvalidArgument,
// ErrShape, ErrNotCompiled or the strategy's errors, naming the input at fault; the notebook
// shows them as Jupyter errors. Methods that do I/O (Save, LoadModel, SaveWeights,
// LoadWeights) return errors.
//
// # FORMAT
//
// SaveWeights writes, and LoadWeights reads, this little-endian layout, under any file
// name but one that says another format: ".h5", ".hdf5" and ".weights.h5" (Keras' HDF5,
// which godist neither writes nor reads) and ".keras" (Save's archive) are refused with the
// name to write, "name.godist.weights" (WeightsExt); files written under such names by
// earlier versions still load:
//
//	offset 0   8 bytes   magic "GDKERASW"
//	offset 8   uint32    format version (1)
//	offset 12  uint32    H, the length of the JSON header
//	offset 16  H bytes   JSON header: {"model": "sequential", "input_shape": [28, 28, 1],
//	                       "variables": [{"name": "dense/kernel", "shape": [784, 64]}, ...],
//	                       "crc32c": <CRC-32C (Castagnoli) of the values section>}
//	offset 16+H          values: each variable's float32 values in row-major order, in the
//	                     order of the header's variables, with nothing between them
//
// Variables are listed in model order (layer by layer; kernel then bias). Reading the file
// needs nothing but a JSON parser; in Python:
// numpy.frombuffer(raw[16+H:], "<f4").
//
// Save writes a zip archive ending in ".keras" (Keras 3's layout, godist's contents):
//
//	metadata.json       {"keras_version": "godist", "format": "godist.keras/1", "date_saved": ...}
//	config.json         {"class_name": "Sequential" or "Functional",
//	                     "config": {"name", "trainable", "seed", "layers": [{"class_name": "Dense",
//	                                "config": {"units": 10, "activation": "relu", ...}}, ...]},
//	                     "build_config": {"input_shape": [null, 28, 28, 1]},
//	                     "compile_config": {"optimizer": {"class_name": "Adam", "config": {...}},
//	                                        "loss": {"class_name": ..., "config": {...}},
//	                                        "metrics": ["accuracy"]}}
//	model.weights.gdck  the state file of Checkpoint and BackupAndRestore: "GODISTBK", uint32
//	                    version 1, uint32 H, H bytes of JSON header (variables with shapes,
//	                    optimizer iterations, learning rate, steps per variable, slots per
//	                    variable, step, CRC-32C), then per variable its float32 values
//	                    followed by its optimizer slots, little-endian
//
// Layer configs use Keras' argument names (layers.Config); Python's Keras cannot read the
// weights entry (Keras writes HDF5).
package keras
