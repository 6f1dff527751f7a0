package notebooks

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// seedCase is one row of the seed tables in README.md ("The course, snippet by snippet")
// whose Go lines no notebook runs: the Go a student types in a cell for the seed's
// TensorFlow (or PyTorch) lines, and what that cell must show.
type seedCase struct {
	name string // the row: seed number and snippet, as the README's "runs in" column names it
	tf   string // the seed's lines, for the failure message
	code string // the cell, as a student types it
	// want must match what the cell shows on stdout, its result and its error, in that
	// order (stderr, where the library logs, is checked apart: the two streams are not
	// ordered against each other).
	want string
	// stderr, when set, must match what the cell wrote to stderr.
	stderr string
	// fails: the cell is expected to end in an error (want then matches it).
	fails bool
}

// seedSetup is the first cell of the seeds' notebook: the imports every case uses, and the
// CPU split into two logical devices, so that the strategies have two replicas.
const seedSetup = `import (
	"fmt"
	"os"

	"godist/distlib/cluster"
	"godist/distlib/data"
	"godist/distlib/device"
	"godist/distlib/distribute"
	"godist/distlib/keras"
	"godist/distlib/keras/layers"
	"godist/distlib/tensor"
)

cpus := device.ListPhysicalDevices("CPU")
if err := device.SetLogicalDeviceConfiguration(cpus[0], []device.LogicalDeviceConfiguration{{}, {}}); err != nil {
	panic(err)
}
fmt.Println(len(device.ListLogicalDevices("CPU")), "logical CPUs")`

// seedCases run in this order in one kernel, after seedSetup, as cells of one notebook.
var seedCases = []seedCase{
	// Seed 000: the course slides ("TensorFlow distribuido").
	{
		name: "000/pytorch-net",
		tf:   "class Net(torch.nn.Module): def forward(self, x, y): return x * y; net = Net(); output = net(x, y)",
		code: `// A PyTorch Module is a Go type with a method; its "forward" is a plain call.
type Net struct{}

func (Net) Forward(x, y *tensor.Tensor) *tensor.Tensor { return tensor.Mul(x, y) }

net := Net{}
x := tensor.Constant([]float32{2.0, 3.0})
y := tensor.Constant([]float32{4.0, 5.0})
output := net.Forward(x, y)
fmt.Println(output) // Output: tensor([ 8., 15.])`,
		want: `^tf\.Tensor\(\n\[ ?8\.? +15\.?\], shape=\(2,\), dtype=float32\)\n$`,
	},
	{
		name: "000/tf-session",
		tf:   "output = x * y; with tf.Session() as sess: result = sess.run(output)",
		code: `x := tensor.Constant([]float32{2.0, 3.0})
y := tensor.Constant([]float32{4.0, 5.0})
output := tensor.Mul(x, y) // computed here: there is no graph to run later
result := output.Data()    // sess.run(output): the values
fmt.Println(result)        // Output: [ 8. 15.]`,
		want: `^\[8 15\]\n$`,
	},
	{
		name: "000/tf-function",
		tf:   "@tf.function def f(x): return tf.reduce_sum(x ** 2)",
		code: `// @tf.function: a Go function; there is no tracing, it runs as written each call.
func sumOfSquares(x *tensor.Tensor) *tensor.Tensor {
	return tensor.ReduceSum(tensor.Square(x))
}
fmt.Println(sumOfSquares(tensor.Constant([]float32{1, 2, 3})).Item())
fmt.Println(sumOfSquares(tensor.Constant([][]float32{{1, 1}, {1, 1}})).Item())`,
		want: `^14\n4\n$`,
	},
	{
		name: "000/module",
		tf:   "Modules: containers of variables and computation (tf.Module), as in PyTorch",
		code: `// A module is a Go type that holds its variables and computes with them.
type Linear struct{ W, B *tensor.Variable }

func NewLinear(in, out int) *Linear {
	return &Linear{
		W: tensor.NewVariable("w", tensor.RandomNormal([]int{in, out}, 0, 1, 1), true),
		B: tensor.NewVariable("b", tensor.Zeros(out), true),
	}
}

func (l *Linear) Call(x *tensor.Tensor) *tensor.Tensor {
	return tensor.BiasAdd(tensor.MatMul(x, l.W.Value(), false, false), l.B.Value())
}

func (l *Linear) TrainableVariables() []*tensor.Variable { return []*tensor.Variable{l.W, l.B} }

linear := NewLinear(3, 2)
tape := tensor.NewGradientTape()
sum := tensor.ReduceSum(linear.Call(tensor.Ones(4, 3)))
grads := tape.Gradient(sum, linear.TrainableVariables())
fmt.Println(grads[0].Shape(), grads[0].Data(), grads[1].Data())`,
		// d sum(xW + b) / dW = x^T 1 (4 rows of ones: 4 everywhere); / db = 4 rows.
		want: `^\[3 2\] \[4 4 4 4 4 4\] \[4 4\]\n$`,
	},
	{
		name: "000/training-loop-save",
		tf: "model=keras.Sequential([...]); model.compile(optimizer=..., loss=..., metrics=[...]); for epoch ...: " +
			"with tf.GradientTape() as tape: predictions=model(batch_data); loss=...; gradients = tape.gradient(loss, model.trainable_variables); " +
			"optimizer.apply_gradients(zip(gradients, model.trainable_variables)); model.save('filename')",
		code: `// Three classes of points in R^4.
keras.SetRandomSeed(3)
trainX := tensor.RandomNormal([]int{256, 4}, 0, 1, 1)
classes := make([]float32, 256)
for i := range classes {
	row := trainX.Data()[4*i : 4*i+4]
	switch {
	case row[0]+row[1] > 0.5:
		classes[i] = 2
	case row[2] > 0:
		classes[i] = 1
	}
}
trainY := tensor.MustNew([]int{256}, classes)
trainData := data.FromTensorSlices(trainX, trainY)

model := keras.Sequential(layers.Dense(32, layers.ReLU, layers.InputShape(4)), layers.Dense(3))
optimizer := keras.Adam(0.01)
model.Compile(optimizer, keras.SparseCategoricalCrossentropy(true), "accuracy")
lossFn := keras.SparseCategoricalCrossentropy(true)

numEpochs, batchSize := 20, 32
for epoch := 0; epoch < numEpochs; epoch++ {
	it := trainData.Batch(batchSize, false).Iterator()
	for batch, ok := it.Next(); ok; batch, ok = it.Next() {
		batchData, batchLabels := batch[0], batch[1]
		tape := tensor.NewGradientTape()
		predictions := model.Call(batchData, true)
		loss := lossFn.Call(batchLabels, predictions)
		gradients := tape.Gradient(loss, model.TrainableVariables())
		if err := optimizer.ApplyGradients(gradients, model.TrainableVariables()); err != nil {
			panic(err)
		}
	}
}
fmt.Printf("accuracy %.3f after %d steps\n", model.Evaluate(trainX, trainY, keras.Verbose(0))["accuracy"], optimizer.Iterations())

if err := model.Save("filename.keras"); err != nil { // model.save('filename')
	panic(err)
}
restored, err := keras.LoadModel("filename.keras")
if err != nil {
	panic(err)
}
diff := tensor.ReduceMax(tensor.Abs(tensor.Sub(restored.Predict(trainX), model.Predict(trainX)))).Item()
fmt.Println("restored: predictions differ by", diff, "optimizer steps", restored.Optimizer().Iterations())`,
		want: `^accuracy 0\.9[0-9]* after 160 steps\nrestored: predictions differ by 0 optimizer steps 160\n$`,
	},
	{
		name: "000/fit-x-y-batch-size",
		tf:   "model.fit(x, y, batch_size=32)",
		code: `keras.SetRandomSeed(1)
x := tensor.RandomNormal([]int{256, 8}, 0, 1, 4)
y := tensor.ReduceSum(x, 1) // y = sum of the features
model := keras.Sequential(layers.Dense(1, layers.InputShape(8)))
model.Compile(keras.SGD(0.05), keras.MeanSquaredError())
history := model.Fit(x, y, keras.BatchSize(32), keras.Epochs(3))
losses := history.History["loss"]
fmt.Println("loss decreases:", losses[2] < losses[1] && losses[1] < losses[0])`,
		// 256 samples in batches of 32: 8 steps per epoch.
		want: `(?s)^Epoch 1/3\n8/8 ━{20} .*Epoch 3/3\n8/8 ━{20} \d+s \d+[mu]?s/step - loss: [0-9.]+(e-[0-9]+)?\n.*loss decreases: true\n$`,
	},
	{
		name: "000/mirrored-gpu-devices",
		tf:   `mirrored_strategy = tf.distribute.MirroredStrategy(devices=["/gpu:0", "/gpu:1"])`,
		code: `func mirroredOn(devices ...string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	s := distribute.NewMirroredStrategy(distribute.WithDevices(devices...))
	fmt.Println("replicas:", s.NumReplicasInSync())
	return nil
}
if len(device.ListLogicalDevices("GPU")) < 2 {
	fmt.Println(mirroredOn("/gpu:0", "/gpu:1")) // no two GPUs here: the error says what there is
	fmt.Println(mirroredOn("/cpu:0", "/cpu:1")) // the two logical CPUs instead
} else {
	fmt.Println(mirroredOn("/gpu:0", "/gpu:1"))
}`,
		want: `^(distribute: device "/gpu:[01]": is not visible; the logical devices are \[.*CPU:0, .*CPU:1\].*\nreplicas: 2\n<nil>\n|replicas: 2\n<nil>\n)$`,
	},
	{
		name: "000/mirrored-devices-typo",
		tf:   `tf.distribute.MirroredStrategy(devices=["/gpu:o", "/gpu:1"])  (the slide's "o")`,
		code: `mirroredStrategy := distribute.NewMirroredStrategy(distribute.WithDevices("/gpu:o", "/gpu:1"))`,
		want: `device specification "/gpu:o" has index "o"; want a number`, fails: true,
	},
	{
		name: "000/slurm-cluster-resolver",
		tf: "tf.distribute.cluster_resolver.SlurmClusterResolver(jobs=None, port_base=8888, gpus_per_node=None, " +
			"gpus_per_task=None, tasks_per_node=None, auto_set_gpu=True, rpc_layer='grpc')",
		code: `// What srun tells task 1 of a two-node step (under srun, leave LookupEnv out).
step := map[string]string{"SLURM_PROCID": "1", "SLURM_STEP_NUM_TASKS": "2",
	"SLURM_STEP_NODELIST": "node[01-02]", "SLURM_STEP_TASKS_PER_NODE": "1(x2)"}
resolver, err := cluster.NewSlurmClusterResolver(cluster.SlurmOptions{
	Jobs:         nil, // jobs=None: one worker per task
	PortBase:     8888,
	GPUsPerNode:  0, // None: detect
	GPUsPerTask:  0, // None: GPUs per node / tasks per node
	TasksPerNode: nil,
	AutoSetGPU:   true,
	RPCLayer:     "grpc",
	LookupEnv:    func(name string) (string, bool) { v, ok := step[name]; return v, ok },
})
if err != nil {
	panic(err)
}
fmt.Println(resolver.ClusterSpec())
fmt.Println(resolver.TaskType(), resolver.TaskID(), resolver.RPCLayer())`,
		want: `^\{'worker': \['node01:8888', 'node02:8888'\]\}\nworker 1 grpc\n$`,
	},
	{
		name: "000/cross-device-ops",
		tf:   "MirroredStrategy(cross_device_ops=tf.distribute.ReductionToOneDevice() | NcclAllReduce() | HierarchicalCopyAllReduce())",
		code: `for _, ops := range []distribute.CrossDeviceOps{
	distribute.NewReductionToOneDevice(),
	distribute.NewNcclAllReduce(),
	distribute.NewHierarchicalCopyAllReduce(),
} {
	strategy := distribute.NewMirroredStrategy(distribute.WithCrossDeviceOps(ops))
	perReplica := strategy.Run(func(ctx *distribute.ReplicaContext, _ data.Element) *tensor.Tensor {
		return tensor.Scalar(float32(10 * (ctx.ReplicaIDInSync() + 1)))
	}, nil)
	fmt.Println(strategy.CrossDeviceOps(), "sum:", strategy.Reduce(distribute.ReduceSum, perReplica, -1).Item())
}`,
		want: `^ReductionToOneDevice\(.*\) sum: 30\nNcclAllReduce\(num_packs=1\) sum: 30\nHierarchicalCopyAllReduce\(num_packs=1\) sum: 30\n$`,
	},
	{
		name: "000/distribute-datasets-from-function",
		tf:   "strategy.distribute_datasets_from_function(dataset_fn)",
		code: `strategy := distribute.NewMirroredStrategy()
const GLOBAL_BATCH_SIZE = 8
datasetFn := func(ctx *distribute.InputContext) *data.Dataset {
	batchSize := ctx.GetPerReplicaBatchSize(GLOBAL_BATCH_SIZE)
	return data.Range(16).Shard(ctx.NumInputPipelines, ctx.InputPipelineID).Batch(batchSize, false)
}
distDataset := strategy.DistributeDatasetsFromFunction(datasetFn)
it := distDataset.Iterator()
for x, ok := it.Next(); ok; x, ok = it.Next() {
	perReplica := strategy.Run(func(ctx *distribute.ReplicaContext, inputs data.Element) *tensor.Tensor { return inputs[0] }, x)
	for r, t := range strategy.ExperimentalLocalResults(perReplica) {
		fmt.Print("replica ", r, ": ", t.Data(), "  ")
	}
	fmt.Println()
}`,
		want: `^replica 0: \[0 1 2 3\]  replica 1: \[4 5 6 7\]  \nreplica 0: \[8 9 10 11\]  replica 1: \[12 13 14 15\]  \n$`,
	},
	{
		name: "000/communication-options",
		tf: "communication_options = tf.distribute.experimental.CommunicationOptions(implementation=...NCCL | RING | AUTO); " +
			"strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=communication_options)",
		code: `for _, implementation := range []distribute.CommunicationImplementation{
	distribute.CommunicationNCCL, distribute.CommunicationRing, distribute.CommunicationAuto,
} {
	strategy := distribute.NewMultiWorkerMirroredStrategy(distribute.WithCommunication(implementation))
	fmt.Println(implementation, "->", strategy.Communication(), strategy.NumReplicasInSync(), "replicas")
	strategy.Close()
}`,
		// Without a GPU backend NCCL falls back to RING, with a warning (stderr).
		want:   `^CommunicationImplementation\.NCCL -> CommunicationImplementation\.(NCCL|RING) 2 replicas\nCommunicationImplementation\.RING -> CommunicationImplementation\.RING 2 replicas\nCommunicationImplementation\.AUTO -> CommunicationImplementation\.(AUTO|RING|NCCL) 2 replicas\n$`,
		stderr: `(?s)(NCCL needs an NCCL all-reduce.*using RING|communication = CommunicationImplementation\.NCCL)`,
	},
	{
		name: "000/tf-config",
		tf:   `os.environ["TF_CONFIG"] = json.dumps({"cluster": {"worker": [...], "ps": [...]}, "task": {"type": "worker", "index": 1}})`,
		code: `os.Setenv("TF_CONFIG", ` + "`" + `{
    "cluster": {
        "worker": ["host1:2222", "host2:2222", "host3:2222"],
        "ps": ["host4:2222", "host5:2222"]
    },
    "task": {"type": "worker", "index": 1}
}` + "`" + `)
resolver, err := cluster.NewTFConfigClusterResolver()
if err != nil {
	panic(err)
}
fmt.Println(resolver.ClusterSpec())
fmt.Println(resolver.TaskType(), resolver.TaskID())
os.Unsetenv("TF_CONFIG") // the next cells are one process again`,
		want: `^\{'ps': \['host4:2222', 'host5:2222'\], 'worker': \['host1:2222', 'host2:2222', 'host3:2222'\]\}\nworker 1\n$`,
	},
	{
		name: "000/partitioners",
		tf:   "tf.distribute.experimental.partitioners.MinSizePartitioner(min_shard_bytes=(256 << 10), max_shards=NUM_PS), MaxSizePartitioner, FixedShardsPartitioner",
		code: `const NUM_PS = 2
for _, p := range []distribute.Partitioner{
	distribute.NewMinSizePartitioner(256<<10, NUM_PS),
	distribute.NewMaxSizePartitioner(256<<10, 4),
	distribute.NewFixedShardsPartitioner(NUM_PS),
} {
	small, _ := p.Partition([]int{100, 128}, "float32")  // 50 KiB
	large, _ := p.Partition([]int{4000, 128}, "float32") // 2000 KiB
	fmt.Println(p, small, large)
}`,
		want: `^MinSizePartitioner\(min_shard_bytes=262144, max_shards=2\) \[1 1\] \[2 1\]\n` +
			`MaxSizePartitioner\(max_shard_bytes=262144, max_shards=4\) \[1 1\] \[4 1\]\n` +
			`FixedShardsPartitioner\(num_shards=2\) \[2 1\] \[2 1\]\n$`,
	},
	{
		name: "000/strategy-extended",
		tf:   "strategy.extended (tf.distribute.StrategyExtended)",
		code: `strategy := distribute.NewMirroredStrategy()
fmt.Println(strategy.Extended().ReplicaDevices())
fmt.Println("mirrored variables:", strategy.Extended().MirrorsVariables())
central := distribute.NewCentralStorageStrategy(distribute.WithDevices("/cpu:0", "/cpu:1"))
fmt.Println("central storage mirrors:", central.Extended().MirrorsVariables(), "variables on", central.Extended().VariableDevice())`,
		want: `^\[/job:localhost/replica:0/task:0/device:CPU:0 /job:localhost/replica:0/task:0/device:CPU:1\]\nmirrored variables: true\ncentral storage mirrors: false variables on /job:localhost/replica:0/task:0/device:CPU:0\n$`,
	},
	// Seed 001: notes on tf.distribute (MirroredStrategy, Keras and a custom loop).
	{
		name: "001/typos",
		tf:   "model.complie(loss=tf.keras.losses.SparseCategoricalCrossetropy(from_logits=True), ...), model(images, traianing=True), tape.gradients(...)",
		code: `model := keras.Sequential(layers.Dense(10, layers.InputShape(4)))
model.Complie(keras.Adam(0), keras.SparseCategoricalCrossentropy(true), "accuracy")`,
		// Python finds the notes' typos when the line runs; Go refuses the cell before it runs.
		want: `^CompileError: cell line 2: model\.Complie undefined \(type \*keras\.Model has no field or method Complie\)`, fails: true,
	},
	{
		name: "001/mirrored-variable",
		tf:   "Mirrored variables: with strategy.scope(): v = tf.Variable(1.)",
		code: `strategy := distribute.NewMirroredStrategy()
strategy.Scope(func() {
	v := distribute.NewVariable("v", tensor.Scalar(1), true)
	fmt.Println(v)
})`,
		want: `^MirroredVariable:\{\n  0: <tf\.Variable 'v' shape=\[\] dtype=float32, device=.*CPU:0, numpy=.*\n  1: <tf\.Variable 'v' shape=\[\] dtype=float32, device=.*CPU:1, numpy=.*\n\}\n$`,
	},
	{
		name: "001/loss-object",
		tf: "loss_object = tf.keras.losses.SparseCategoricalCrossentropy(reduction=tf.keras.losses.Reduction.NONE); " +
			"loss_fn = tf.keras.losses.sparse_categorical_crossentropy; def compute_loss(labels, predictions): ... " +
			"tf.nn.compute_average_loss(per_example_loss, global_batch_size=GLOBAL_BATCH_SIZE)",
		code: `const GLOBAL_BATCH_SIZE = 4
var lossObject *keras.Loss
strategy := distribute.NewMirroredStrategy()
strategy.Scope(func() {
	lossObject = keras.SparseCategoricalCrossentropy(false, keras.WithReduction(keras.ReductionNone))
})
lossFn := lossObject.Call // loss_fn = tf.keras.losses.sparse_categorical_crossentropy

func computeLoss(labels, predictions *tensor.Tensor) *tensor.Tensor {
	perExampleLoss := lossObject.Call(labels, predictions)
	return distribute.ComputeAverageLoss(perExampleLoss, GLOBAL_BATCH_SIZE)
}
labels := tensor.Constant([]float32{0, 1})
predictions := tensor.Constant([][]float32{{0.5, 0.5}, {0.2, 0.8}}) // probabilities: from_logits=False
fmt.Printf("per example: %.4f\n", lossFn(labels, predictions).Data())
fmt.Printf("this replica's share of the mean: %.4f\n", computeLoss(labels, predictions).Item())`,
		// -ln 0.5 = 0.6931, -ln 0.8 = 0.2231; (0.6931+0.2231)/4 = 0.2291.
		want: `^per example: \[0\.6931 0\.2231\]\nthis replica's share of the mean: 0\.2291\n$`,
	},
	{
		name: "001/checkpoint",
		tf:   "with strategy.scope(): model = ...; optimizer = tf.keras.optimizers.Adam(); checkpoint = tf.train.Checkpoint(optimizer=optimizer, model=model)",
		code: `strategy := distribute.NewMirroredStrategy()
var model *keras.Model
var optimizer *keras.Optimizer
var checkpoint *keras.Checkpoint
strategy.Scope(func() {
	model = keras.Sequential(layers.Dense(2, layers.InputShape(3)))
	optimizer = keras.Adam(0) // Keras' default learning rate
	checkpoint = keras.NewCheckpoint(model, optimizer)
})
path, err := checkpoint.Save("ckpts/ckpt") // checkpoint.save(checkpoint_prefix)
if err != nil {
	panic(err)
}
saved := fmt.Sprint(model.GetWeights())

tape := tensor.NewGradientTape()
loss := tensor.ReduceMean(tensor.Square(model.Call(tensor.Ones(4, 3), true)))
if err := optimizer.ApplyGradients(tape.Gradient(loss, model.TrainableVariables()), model.TrainableVariables()); err != nil {
	panic(err)
}
fmt.Println("after a step: iterations", optimizer.Iterations(), "weights changed:", fmt.Sprint(model.GetWeights()) != saved)

// checkpoint.restore(tf.train.latest_checkpoint(checkpoint_dir))
if err := checkpoint.Restore(keras.LatestCheckpoint("ckpts")); err != nil {
	panic(err)
}
fmt.Println(path, "restored: iterations", optimizer.Iterations(), "weights as saved:", fmt.Sprint(model.GetWeights()) == saved)`,
		want: `^after a step: iterations 1 weights changed: true\nckpts/ckpt-1 restored: iterations 0 weights as saved: true\n$`,
	},
}

// seedNotebook writes the notebook of seedSetup and the cases' cells to path.
func seedNotebook(path string, cases []seedCase) error {
	type nbCell struct {
		CellType       string         `json:"cell_type"`
		ExecutionCount any            `json:"execution_count"`
		Metadata       map[string]any `json:"metadata"`
		Outputs        []any          `json:"outputs"`
		Source         string         `json:"source"`
	}
	cells := []nbCell{{CellType: "code", Metadata: map[string]any{}, Outputs: []any{}, Source: seedSetup}}
	for _, c := range cases {
		cells = append(cells, nbCell{CellType: "code", Metadata: map[string]any{"seed_case": c.name}, Outputs: []any{}, Source: c.code})
	}
	doc := map[string]any{
		"cells": cells,
		"metadata": map[string]any{
			"kernelspec":    map[string]any{"name": "godist", "display_name": "Go (godist)", "language": "go"},
			"language_info": map[string]any{"name": "go"},
		},
		"nbformat": 4, "nbformat_minor": 5,
	}
	raw, err := json.MarshalIndent(doc, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, raw, 0o644)
}

// shown returns what a cell showed apart from stderr: stdout, results and displays as
// text, each on its own lines, and errors as "ename: evalue", in the order they came.
// check asserts what the executed cell c of case sc showed: failed or not, its outputs
// matching want, its stderr matching stderr when set. It returns what the cell showed.
func (sc seedCase) check(t *testing.T, c cell) string {
	t.Helper()
	got := shown(c)
	failed := false
	for _, o := range c.Outputs {
		failed = failed || o.Type == "error"
	}
	if failed != sc.fails {
		t.Errorf("cell failed: %v, want %v; it showed:\n%s\nstderr:\n%s", failed, sc.fails, got, c.Stream("stderr"))
	}
	if !regexp.MustCompile(sc.want).MatchString(got) {
		t.Errorf("the Go of %q showed\n%s\nwhich does not match %q\nsource:\n%s\nstderr:\n%s", sc.tf, got, sc.want, sc.code, c.Stream("stderr"))
	}
	if sc.stderr != "" && !regexp.MustCompile(sc.stderr).MatchString(c.Stream("stderr")) {
		t.Errorf("stderr %q does not match %q", c.Stream("stderr"), sc.stderr)
	}
	return got
}

func shown(c cell) string {
	var b strings.Builder
	for _, o := range c.Outputs {
		var t string
		switch {
		case o.Type == "stream" && o.Name == "stderr":
		case o.Type == "error":
			t = o.EName + ": " + o.EValue + "\n"
		default:
			t = o.text()
		}
		// Each output starts on a new line, as a front end shows it (a progress bar's
		// display has no final newline).
		if b.Len() > 0 && t != "" && !strings.HasSuffix(b.String(), "\n") {
			b.WriteString("\n")
		}
		b.WriteString(t)
	}
	return b.String()
}

// TestSeedSnippets runs the Go lines of the seed rows of README.md that no notebook runs,
// each as one cell of a notebook executed by the real kernel (in a temporary directory,
// where the cells' files go), and checks every cell's output.
func TestSeedSnippets(t *testing.T) {
	names := map[string]bool{}
	for _, c := range seedCases {
		if names[c.name] {
			t.Fatalf("two seed cases are named %q", c.name)
		}
		names[c.name] = true
		if _, err := regexp.Compile(c.want); err != nil {
			t.Fatalf("case %s: want: %v", c.name, err)
		}
	}
	e := setup(t)
	path := filepath.Join(t.TempDir(), "seeds.ipynb")
	if err := seedNotebook(path, seedCases); err != nil {
		t.Fatal(err)
	}
	nb := e.execute(t, path, 3*time.Minute)
	if len(nb.Cells) != len(seedCases)+1 {
		t.Fatalf("executed notebook has %d cells, want %d", len(nb.Cells), len(seedCases)+1)
	}
	if got := shown(nb.Cells[0]); got != "2 logical CPUs\n" {
		t.Fatalf("setup cell: %q, want the CPU split in two logical devices", got)
	}
	for i, sc := range seedCases {
		c := nb.Cells[i+1]
		t.Run(sc.name, func(t *testing.T) { sc.check(t, c) })
	}
}

// TestSeedReadmeRows checks that README.md and seedCases name the same cases: every
// "TestSeedSnippets/NAME" of the seed tables is a case, and every case is named by a row.
func TestSeedReadmeRows(t *testing.T) {
	raw, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	for _, m := range regexp.MustCompile(`TestSeedSnippets/([0-9]{3}/[a-z0-9-]+)`).FindAllStringSubmatch(string(raw), -1) {
		named[m[1]] = true
	}
	cases := map[string]bool{}
	for _, c := range seedCases {
		cases[c.name] = true
		if !named[c.name] {
			t.Errorf("seed case %s: no row of README.md names TestSeedSnippets/%s", c.name, c.name)
		}
	}
	for n := range named {
		if !cases[n] {
			t.Errorf("README.md names TestSeedSnippets/%s, which is not a case of seedCases", n)
		}
	}
}
