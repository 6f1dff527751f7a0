package notebooks

import (
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The course notebooks read MNIST through datasets.MNIST, which looks in GODIST_DATA_DIR.
// When the variable is unset and the shared MNIST files sit beside the checkout
// (../shared/data/mnist from the repository root), point it there: the kernels the
// harness starts inherit the test's environment, and there is no network to download from.
func init() {
	if os.Getenv("GODIST_DATA_DIR") != "" {
		return
	}
	dir, err := filepath.Abs(filepath.Join("..", "..", "shared", "data", "mnist"))
	if err != nil {
		return
	}
	if _, err := os.Stat(filepath.Join(dir, "t10k-images-idx3-ubyte.gz")); err == nil {
		os.Setenv("GODIST_DATA_DIR", dir)
	}
}

// skipWithoutMNIST skips the check when the notebook failed only because no MNIST files
// could be found or downloaded (a machine without the data and without a network).
func skipWithoutMNIST(t *testing.T, nb *notebook) {
	t.Helper()
	for i, c := range nb.Cells {
		for _, o := range c.Outputs {
			if o.Type == "error" && strings.Contains(o.EValue, "datasets: mnist") &&
				(strings.Contains(o.EValue, "not found") || strings.Contains(o.EValue, "download")) {
				t.Skipf("%s cell %d: no MNIST data (set GODIST_DATA_DIR to a directory with the IDX files): %s",
					filepath.Base(nb.Path), i, o.EValue)
			}
		}
	}
}

// wantNumber finds the first match of re (whose first group is a number) in cell i's
// output and checks that the number is within [lo, hi]; it returns the number.
func wantNumber(t *testing.T, nb *notebook, i int, re string, lo, hi float64) float64 {
	t.Helper()
	c := cellAt(t, nb, i)
	m := regexp.MustCompile(re).FindStringSubmatch(c.Text())
	if m == nil {
		t.Errorf("%s cell %d: output %q has no match for %q", filepath.Base(nb.Path), i, c.Text(), re)
		return 0
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Errorf("%s cell %d: %q in %q is not a number: %v", filepath.Base(nb.Path), i, m[1], re, err)
		return 0
	}
	if v < lo || v > hi {
		t.Errorf("%s cell %d: %s = %v, want it in [%v, %v]", filepath.Base(nb.Path), i, re, v, lo, hi)
	}
	return v
}

// checkQuickstart checks quickstart.ipynb: MNIST trained with MirroredStrategy over two
// logical CPU devices well above chance, with a progress bar and a plot.
func checkQuickstart(t *testing.T, nb *notebook) {
	skipWithoutMNIST(t, nb)
	wantNoErrors(t, nb)
	wantOutput(t, nb, findCell(t, nb, "SetLogicalDeviceConfiguration"), `device:CPU:0\n.*device:CPU:1\n$`)
	wantStdout(t, nb, findCell(t, nb, "NewMirroredStrategy()"), `^Number of devices: 2\nglobal batch: 128\n$`)
	data := findCell(t, nb, "datasets.MNIST()")
	wantOutput(t, nb, data, `train: 8000 test: 2000\n`)
	wantOutput(t, nb, data, `pixel range of the first image: 255 -> 1 label: 7\n`)
	wantOutput(t, nb, findCell(t, nb, "strategy.Scope("), `Total params: 347,146`)
	fit := findCell(t, nb, "model.Fit(")
	// Keras writes values under 1e-3 as 9.8207e-04 (after an interrupted Fit, the model
	// trains on from where it stopped and can get there).
	wantOutput(t, nb, fit, `(?s)Epoch 1/3\n.*Epoch 3/3\n63/63 ━{20} \d+s \d+[mu]?s/step - accuracy: [0-9.]+ - loss: [0-9.]+(e-[0-9]+)?(\n|$)`)
	wantNumber(t, nb, fit, `Epoch 3/3\n63/63 .* - accuracy: ([0-9.]+)`, 0.8, 1)
	wantNumber(t, nb, findCell(t, nb, "model.Evaluate("), `Eval accuracy: ([0-9.]+)`, 0.8, 1)
	wantMIME(t, nb, findCell(t, nb, "history.Plot()"), "image/png")
}

// checkEnvironment checks 01-environment.ipynb (course activity 001): devices, placement
// logging on and off, scopes, a missing device with and without soft placement, memory
// settings refused on the CPU, and the CPU split into logical devices.
func checkEnvironment(t *testing.T, nb *notebook) {
	missing := findCell(t, nb, `SetSoftDevicePlacement(false)`)
	wantNoErrors(t, nb, missing)
	const cpu0 = "/job:localhost/replica:0/task:0/device:CPU:0"
	wantOutput(t, nb, findCell(t, nb, `ListPhysicalDevices("GPU")`),
		`^Num GPUs Available: 0\n\[PhysicalDevice\(name='/physical_device:CPU:0', device_type='CPU'\)\]$`)
	// One line per op (TF logs the constants too in some versions: allowed, not required).
	wantOutput(t, nb, findCell(t, nb, "SetLogDevicePlacement(true) // TF"),
		`^(Executing op Const in device `+cpu0+`\n)*Executing op MatMul in device `+cpu0+`\ntf.Tensor\(\n\[\[22\.? 28\.?\]\n \[49\.? 64\.?\]\]`)
	wantOutput(t, nb, findCell(t, nb, `device.With("/CPU:0"`), `Executing op MatMul in device `+cpu0+`\nc lives on `+cpu0+`\n`)
	wantError(t, nb, missing, `could not satisfy device specification '/device:GPU:0'.*available devices: \[`+cpu0+`\]`)
	wantOutput(t, nb, findCell(t, nb, "device.WithErr("), `^device: could not satisfy device specification '/device:GPU:0'`)
	// The soft-placement notice goes to the log output, the rest to stdout: check each.
	soft := findCell(t, nb, "SetSoftDevicePlacement(true) // TF")
	wantOutput(t, nb, soft, `/device:GPU:0 \(no GPU devices are available in this process\); soft placement puts it on `+cpu0+`\n`)
	// stdout and stderr are separate streams, which reach the notebook in either order:
	// check stdout's lines on their own, and the soft-placement notice (stderr) on its own.
	wantStdout(t, nb, soft, `^(Executing op Const in device `+cpu0+`\n)*Executing op MatMul in device `+cpu0+`\nc lives on `+cpu0+`\nplacement logging is off: true\n$`)
	wantOutput(t, nb, soft, `(?m)^device: /device:GPU:0 \(.*\); soft placement puts it on `+cpu0+`$`)
	if n := strings.Count(cellAt(t, nb, soft).Text(), "Executing op"); n != 1 {
		t.Errorf("cell %d: %d placement lines, want 1 (logging is turned off before the second MatMul)", soft, n)
	}
	memory := findCell(t, nb, "SetMemoryGrowth(gpu, true)")
	wantOutput(t, nb, memory, `^memory growth set on 0 GPUs\ndevice: unsupported setting: memory growth is only supported on GPUs`)
	wantOutput(t, nb, memory, `memory limit on CPU virtual devices is not supported`)
	wantOutput(t, nb, memory, `the CPU cannot be hidden`)
	wantOutput(t, nb, findCell(t, nb, "{{}, {}, {}, {}})\nfmt.Println(err)"), `virtual devices cannot be modified after being initialized`)
	wantOutput(t, nb, findCell(t, nb, "device.Reset()"),
		`^1 Physical CPU, 4 Logical CPUs\n(/job:localhost/replica:0/task:0/device:CPU:[0-3] threads: \d+\n){4}$`)
	wantOutput(t, nb, findCell(t, nb, `device.With("/CPU:3"`),
		`^Executing op MatMul in device /job:localhost/replica:0/task:0/device:CPU:3\nc lives on /job:localhost/replica:0/task:0/device:CPU:3\n$`)
}

// checkTensorsAndKeras checks 02-tensors-and-keras.ipynb: the course's tensor operators,
// variables, a gradient tape, gradient descent by hand and a Keras model on MNIST.
func checkTensorsAndKeras(t *testing.T, nb *notebook) {
	skipWithoutMNIST(t, nb)
	wantNoErrors(t, nb)
	x := findCell(t, nb, "x := tensor.Constant(")
	wantTensor(t, nb, x, "", []float64{1, 2, 3, 4, 5, 6}, "(2, 3)")
	wantOutput(t, nb, x, `\n\[2 3\]\nfloat32\n$`)
	ops := findCell(t, nb, "tensor.Add(x, x)")
	wantTensor(t, nb, ops, "x + x = ", []float64{2, 4, 6, 8, 10, 12}, "(2, 3)")
	wantTensor(t, nb, ops, "5 * x = ", []float64{5, 10, 15, 20, 25, 30}, "(2, 3)")
	wantTensor(t, nb, ops, "x @ x^T = ", []float64{14, 32, 32, 77}, "(2, 2)")
	wantTensor(t, nb, findCell(t, nb, "tensor.Transpose(x)"), "", []float64{1, 4, 2, 5, 3, 6}, "(3, 2)")
	wantTensor(t, nb, findCell(t, nb, "tensor.Concat(0, x, x, x)"), "", []float64{1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6}, "(6, 3)")
	sums := findCell(t, nb, "tensor.ReduceSum(x)")
	wantTensor(t, nb, sums, "", []float64{21}, "()")
	wantTensor(t, nb, sums, "shape=(), dtype=float32)\n", []float64{5, 7, 9}, "(3,)")
	wantTensor(t, nb, sums, "shape=(3,), dtype=float32)\n", []float64{6, 15}, "(2,)")
	e1, e2, e3 := 0.09003057, 0.24472848, 0.66524094
	wantTensor(t, nb, findCell(t, nb, "tensor.Softmax(x, -1)"), "", []float64{e1, e2, e3, e1, e2, e3}, "(2, 3)")
	wantOutput(t, nb, findCell(t, nb, `tensor.NewVariable("v"`), `<tf.Variable 'v' shape=\[3\] dtype=float32, numpy=\[ ?5\.? +6\.? +7\.?\]>\nvalue: (?s:.*) trainable: true\n$`)
	wantOutput(t, nb, findCell(t, nb, "tensor.NewGradientTape()"), `^dy/dx at 3 = 6\n$`)
	wantOutput(t, nb, findCell(t, nb, "for step := 0; step < 200"), `step   0  loss 41.0000\n(?s:.*)W = 2.00, b = (0.99|1.00)\n$`)
	wantOutput(t, nb, findCell(t, nb, "datasets.LoadMNIST()"), `^x_train: \[8000 28 28 1\] x_test: \[2000 28 28 1\]\n$`)
	wantOutput(t, nb, findCell(t, nb, "layers.Dropout(0.2)"), `Total params: 101,770`)
	wantNumber(t, nb, findCell(t, nb, "model.Call(x1, false)"), `loss before training: ([0-9.]+)`, 1.5, 3.2)
	fit := findCell(t, nb, "model.Fit(")
	wantOutput(t, nb, fit, `(?s)Epoch 1/3\n250/250 ━{20} .*Epoch 3/3\n250/250 ━{20} `)
	wantNumber(t, nb, findCell(t, nb, "model.Evaluate("), `test accuracy: ([0-9.]+)`, 0.85, 1)
	predict := findCell(t, nb, "model.Predict(xTest)")
	c := cellAt(t, nb, predict)
	m := regexp.MustCompile(`predicted: \[([0-9 ]+)\]\nlabels: +\[([0-9 ]+)\]`).FindStringSubmatch(c.Text())
	if m == nil {
		t.Fatalf("cell %d: output %q lacks the predicted and true labels", predict, c.Text())
	}
	pred, labels := strings.Fields(m[1]), strings.Fields(m[2])
	same := 0
	for i := range pred {
		if i < len(labels) && pred[i] == labels[i] {
			same++
		}
	}
	if len(pred) != 10 || same < 7 {
		t.Errorf("cell %d: %d of %d predictions match the labels (%v vs %v), want at least 7 of 10", predict, same, len(pred), pred, labels)
	}
}

// wantTensor checks the first printed tensor ("tf.Tensor(<values>, shape=..." as TF prints
// it) after the text after in cell i's output: its values within 1e-5 and its shape,
// whatever the spacing and number formatting.
func wantTensor(t *testing.T, nb *notebook, i int, after string, want []float64, shape string) {
	t.Helper()
	text := cellAt(t, nb, i).Text()
	at := strings.Index(text, after)
	if at < 0 {
		t.Errorf("%s cell %d: output %q lacks %q", filepath.Base(nb.Path), i, text, after)
		return
	}
	m := regexp.MustCompile(`(?s)^tf\.Tensor\((.*?), shape=(\([0-9, ]*\))`).FindStringSubmatch(text[at+len(after):])
	if m == nil {
		t.Errorf("%s cell %d: no tf.Tensor(...) after %q in %q", filepath.Base(nb.Path), i, after, text)
		return
	}
	var got []float64
	for _, f := range regexp.MustCompile(`-?[0-9]+(\.[0-9]*)?(e[-+]?[0-9]+)?`).FindAllString(m[1], -1) {
		v, err := strconv.ParseFloat(f, 64)
		if err != nil {
			t.Errorf("%s cell %d: bad number %q in %q", filepath.Base(nb.Path), i, f, m[1])
			return
		}
		got = append(got, v)
	}
	ok := len(got) == len(want) && m[2] == shape
	for k := 0; ok && k < len(want); k++ {
		ok = math.Abs(got[k]-want[k]) <= 1e-5
	}
	if !ok {
		t.Errorf("%s cell %d: tensor after %q = %v shape %s, want %v shape %s", filepath.Base(nb.Path), i, after, got, m[2], want, shape)
	}
}

// checkOneNode checks 03-one-node.ipynb (course activity 003): MNIST without a strategy,
// with MirroredStrategy and Fit, and with a custom loop over strategy.Run and Reduce, on two
// logical CPUs, each well above chance, and the table and plot of their step times.
func checkOneNode(t *testing.T, nb *notebook) {
	skipWithoutMNIST(t, nb)
	wantNoErrors(t, nb)
	wantOutput(t, nb, findCell(t, nb, "SetLogicalDeviceConfiguration"), `^(/job:localhost/replica:0/task:0/device:CPU:[01] threads: \d+\n){2}$`)
	wantOutput(t, nb, findCell(t, nb, "func buildModel()"), `train: 8000 test: 2000\n`)
	single := findCell(t, nb, "single := &run{")
	wantOutput(t, nb, single, `^strategy: DefaultDistributionStrategy replicas: 1\n`)
	wantOutput(t, nb, single, `(?s)Epoch 4/4\n12/12 ━{20} `)
	wantNumber(t, nb, single, `test accuracy ([0-9.]+), [0-9.]+ ms/step`, 0.6, 1)
	mirrored := findCell(t, nb, "NewMirroredStrategy()")
	wantOutput(t, nb, mirrored, `Number of devices: 2\n`)
	wantOutput(t, nb, mirrored, `(?s)Epoch 4/4\n12/12 ━{20} `)
	wantNumber(t, nb, mirrored, `test accuracy ([0-9.]+), [0-9.]+ ms/step`, 0.6, 1)
	loop := findCell(t, nb, "func trainEpoch()")
	first := wantNumber(t, nb, loop, `Epoch 1, Loss: ([0-9.]+), Accuracy: [0-9.]+%`, 0, 10)
	last := wantNumber(t, nb, loop, `Epoch 4, Loss: ([0-9.]+), Accuracy: [0-9.]+%`, 0, 10)
	if last >= first {
		t.Errorf("custom loop: loss went from %v (epoch 1) to %v (epoch 4), want it to decrease", first, last)
	}
	wantNumber(t, nb, loop, `test accuracy ([0-9.]+), [0-9.]+ ms/step`, 0.6, 1)
	table := findCell(t, nb, "display.HTML(table")
	wantMIME(t, nb, table, "text/html")
	for _, name := range []string{"no strategy", "MirroredStrategy \\+ Fit", "MirroredStrategy \\+ custom loop"} {
		wantOutput(t, nb, table, `<tr><td>`+name+`</td><td>[12]</td><td>(64|128)</td><td>[0-9.]+</td><td>[0-9]+</td><td>[0-9.]+x</td><td>0\.[6-9][0-9]*</td></tr>`)
	}
	wantMIME(t, nb, findCell(t, nb, "throughput.Plot()"), "image/png")
}
