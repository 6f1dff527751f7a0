// Command cnn measures godist's training throughput on the peer CNN of
// shared/peers/model.py: Conv2D(1->32, 3x3, valid) + ReLU, MaxPool 2, Flatten,
// Dense 5408->64 + ReLU, Dense 64->10, softmax cross-entropy, Adam (lr 1e-3), batch 64, on
// synthetic data, using distlib/tensor's ops, GradientTape and a hand-written Adam.
//
// It times windows of steps the way shared/peers/cnn_throughput.py does and, per window,
// how much CPU this process and the others used, and prints one JSON line with the medians
// (all windows, "clean" windows where others used less than -clean cores, and samples per
// second of this process's own CPU time). Run it with GOMAXPROCS=1 for the single-thread
// figure.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"

	"godist/distlib/optim"
	"godist/distlib/tensor"
	"godist/internal/benchwin"
)

type model struct {
	convK, convB, w1, b1, w2, b2 *tensor.Variable
	pooled                       tensor.Reuse // the pooled output's storage, kept from step to step as keras' Fit keeps it
}

func newModel() *model {
	return &model{
		convK: tensor.NewVariable("conv/kernel", tensor.GlorotUniform([]int{3, 3, 1, 32}, 1), true),
		convB: tensor.NewVariable("conv/bias", tensor.Zeros(32), true),
		w1:    tensor.NewVariable("dense/kernel", tensor.GlorotUniform([]int{5408, 64}, 2), true),
		b1:    tensor.NewVariable("dense/bias", tensor.Zeros(64), true),
		w2:    tensor.NewVariable("dense_1/kernel", tensor.GlorotUniform([]int{64, 10}, 3), true),
		b2:    tensor.NewVariable("dense_1/bias", tensor.Zeros(10), true),
	}
}

func (m *model) vars() []*tensor.Variable {
	return []*tensor.Variable{m.convK, m.convB, m.w1, m.b1, m.w2, m.b2}
}

func (m *model) loss(x, y *tensor.Tensor) *tensor.Tensor {
	// Conv2D(32, 3, relu) and MaxPooling2D(2) as keras runs them: one op, writing where
	// the previous step's output lay.
	h := tensor.ConvReLUMaxPool2DReusing(&m.pooled, x, m.convK.Value(), m.convB.Value())
	h = tensor.Flatten(h)
	h = tensor.Dense(h, m.w1.Value(), m.b1.Value(), true)
	logits := tensor.Dense(h, m.w2.Value(), m.b2.Value(), false)
	return tensor.ReduceMean(tensor.SparseSoftmaxCrossEntropyWithLogits(logits, y))
}

// adam is Adam with Keras/PyTorch defaults (beta1 0.9, beta2 0.999, eps 1e-7/1e-8).
type adam struct {
	spec  optim.Spec
	t     int64
	slots [][][]float32
}

// apply is one Adam step with distlib/optim's rule (the one keras and the parameter
// servers run).
func (a *adam) apply(vars []*tensor.Variable, grads []*tensor.Tensor) {
	if a.slots == nil {
		for _, v := range vars {
			n := len(v.Value().Data())
			a.slots = append(a.slots, [][]float32{make([]float32, n), make([]float32, n)})
		}
	}
	a.t++
	for i, v := range vars {
		v.UpdateData(func(w []float32) { a.spec.Apply(w, grads[i].Data(), a.slots[i], a.t) })
	}
}

// synthetic returns n batches of uniform images in [0, 1) and labels in 0..9.
func synthetic(n, batch int) (xs, ys []*tensor.Tensor) {
	for i := 0; i < n; i++ {
		xs = append(xs, tensor.RandomUniform([]int{batch, 28, 28, 1}, 0, 1, uint64(100+i)))
		lab := tensor.RandomUniform([]int{batch}, 0, 10, uint64(1000+i)).Data()
		l := make([]float32, batch)
		for j, v := range lab {
			l[j] = float32(int(v))
		}
		ys = append(ys, tensor.MustNew([]int{batch}, l))
	}
	return xs, ys
}

func main() {
	windows := flag.Int("windows", 15, "timed windows")
	steps := flag.Int("steps", 30, "steps per window")
	warmup := flag.Int("warmup", 30, "untimed steps first")
	clean := flag.Float64("clean", 0.1, "a window is clean when other processes used less than this many cores")
	batch := flag.Int("batch", 64, "batch size")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile here")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}

	m := newModel()
	opt := &adam{spec: optim.NewAdam(1e-3, 0.9, 0.999, 1e-8)}
	xs, ys := synthetic(16, *batch)
	vars := m.vars()
	var last float32
	// The gradients go into the same buffers every step (GradientInto), as keras' training
	// steps keep theirs.
	gbuf := make([][]float32, len(vars))
	for i, v := range vars {
		gbuf[i] = make([]float32, len(v.Value().Data()))
	}
	step := func(i int) {
		tape := tensor.NewGradientTape()
		loss := m.loss(xs[i%16], ys[i%16])
		grads := tape.GradientInto(loss, gbuf, vars)
		opt.apply(vars, grads)
		last = loss.Item()
	}
	for i := 0; i < *warmup; i++ {
		step(i)
	}
	first := last
	var wins []benchwin.Window
	for w := 0; w < *windows; w++ {
		tm := benchwin.Start()
		for i := 0; i < *steps; i++ {
			step(i)
		}
		wins = append(wins, tm.Stop(*steps**batch))
	}
	out := map[string]any{
		"config":            fmt.Sprintf("godist, GOMAXPROCS=%d, batch %d, kernels %s", runtime.GOMAXPROCS(0), *batch, tensor.KernelName()),
		"loss_after_warmup": first,
		"loss_last":         last,
	}
	benchwin.Report(out, wins, *clean, true) // windows: [samples/s wall, samples/s own CPU, other cores]
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
}
