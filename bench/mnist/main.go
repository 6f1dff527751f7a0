// Command mnist trains the peer CNN of shared/peers/model.py (Conv2D 1->32 3x3 + ReLU,
// MaxPool 2, Flatten, Dense 5408->64 + ReLU, Dense 64->10) on the real MNIST through
// distlib's keras and distribute packages, as a notebook would.
//
// Two modes, each one process (the logical device configuration is per process):
//
//	mnist -mode accuracy -epochs 3 -batch 64
//	    trains on the training split (with only the t10k files: the first 8,000 examples),
//	    evaluates on the test split (the last 2,000) after every epoch, and prints the
//	    epoch accuracies and times, then one JSON line.
//	mnist -mode throughput -devices N [-logical L] -windows W -steps S
//	    splits the CPU into L logical devices (default N; L = 1: the whole CPU as one
//	    device, whose kernels use every core), trains with MirroredStrategy over the first
//	    N (N = 1: the default strategy, on the first device) with a global batch of 64 x N,
//	    and prints the samples per second of each window of S steps after a warm-up window,
//	    then one JSON line with the median. -devices 1 -logical 2 is one device with half
//	    of the cores, the single-replica baseline of -devices 2.
//
// The data come from -data, else GODIST_DATA_DIR, else ../shared/data/mnist beside the
// repository (the t10k files are enough).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"time"

	"godist/distlib/data"
	"godist/distlib/datasets"
	"godist/distlib/device"
	"godist/distlib/distribute"
	"godist/distlib/keras"
	"godist/distlib/keras/layers"
	"godist/distlib/tensor"
)

func main() {
	mode := flag.String("mode", "accuracy", "accuracy or throughput")
	dir := flag.String("data", "", "directory of the MNIST IDX files (default $GODIST_DATA_DIR, else ../shared/data/mnist)")
	epochs := flag.Int("epochs", 3, "accuracy mode: training epochs")
	batch := flag.Int("batch", 64, "batch size per replica")
	lr := flag.Float64("lr", 1e-3, "Adam learning rate")
	seed := flag.Int64("seed", 1, "random seed (weights and shuffling)")
	devices := flag.Int("devices", 1, "throughput mode: replicas (one per logical CPU device)")
	logical := flag.Int("logical", 0, "throughput mode: logical CPU devices to split the CPU into (default -devices)")
	windows := flag.Int("windows", 5, "throughput mode: timed windows")
	steps := flag.Int("steps", 20, "throughput mode: steps per window")
	flag.Parse()
	if *logical == 0 {
		*logical = *devices
	}
	if err := run(*mode, *dir, *epochs, *batch, *lr, *seed, *devices, *logical, *windows, *steps); err != nil {
		fmt.Fprintln(os.Stderr, "mnist:", err)
		os.Exit(1)
	}
}

// dataDir returns the MNIST directory: the flag, GODIST_DATA_DIR, or ../shared/data/mnist
// relative to the repository root (found from the working directory upwards).
func dataDir(flagDir string) (string, error) {
	if flagDir != "" {
		return flagDir, nil
	}
	if d := os.Getenv(datasets.DataDirEnv); d != "" {
		return d, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return filepath.Join(d, "..", "shared", "data", "mnist"), nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no -data, no %s, and no go.mod above %s to find ../shared/data/mnist", datasets.DataDirEnv, wd)
		}
	}
}

// scale divides the raw 0..255 pixels by 255, the seeds' map(scale).
func scale(el data.Element) data.Element {
	return data.Element{tensor.Scale(el[0], 1.0/255), el[1]}
}

// newModel builds and compiles the peer CNN under the current strategy.
func newModel(lr float64) *keras.Model {
	m := keras.Sequential(
		layers.Conv2D(32, 3, layers.ReLU, layers.InputShape(28, 28, 1)),
		layers.MaxPooling2D(2),
		layers.Flatten(),
		layers.Dense(64, layers.ReLU),
		layers.Dense(10))
	m.Compile(keras.Adam(lr), keras.SparseCategoricalCrossentropy(true), "accuracy")
	return m
}

func run(mode, flagDir string, epochs, batch int, lr float64, seed int64, devices, logical, windows, steps int) error {
	if batch < 1 || epochs < 1 || devices < 1 || windows < 1 || steps < 1 {
		return fmt.Errorf("-batch %d, -epochs %d, -devices %d, -windows %d, -steps %d must all be at least 1", batch, epochs, devices, windows, steps)
	}
	if logical < devices {
		return fmt.Errorf("-logical %d: fewer logical devices than the %d replicas of -devices", logical, devices)
	}
	dir, err := dataDir(flagDir)
	if err != nil {
		return err
	}
	train, test, err := datasets.LoadMNIST(datasets.Dir(dir))
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "data: train %s\n      test  %s\n", train, test)
	distribute.SetLogOutput(io.Discard)
	keras.SetRandomSeed(seed)
	switch mode {
	case "accuracy":
		return accuracy(train, test, epochs, batch, lr, seed)
	case "throughput":
		return throughput(train, devices, logical, batch, lr, seed, windows, steps)
	}
	return fmt.Errorf("-mode %q: want accuracy or throughput", mode)
}

// accuracy trains on one device (the whole CPU) and evaluates after every epoch.
func accuracy(train, test *datasets.Arrays, epochs, batch int, lr float64, seed int64) error {
	model := newModel(lr)
	trainDS := train.Dataset().Map(scale).Cache().Shuffle(10000, seed).Batch(batch, false)
	testDS := test.Dataset().Map(scale).Batch(256, false)
	type epochResult struct {
		Epoch         int     `json:"epoch"`
		TrainLoss     float64 `json:"train_loss"`
		TrainAccuracy float64 `json:"train_accuracy"`
		TestAccuracy  float64 `json:"test_accuracy"`
		Seconds       float64 `json:"seconds"`
	}
	var results []epochResult
	var total time.Duration
	for e := 0; e < epochs; e++ {
		start := time.Now()
		h := model.Fit(trainDS, keras.Epochs(1), keras.Verbose(0))
		d := time.Since(start)
		total += d
		logs := model.Evaluate(testDS, keras.Verbose(0))
		r := epochResult{Epoch: e + 1, TrainLoss: h.History["loss"][0], TrainAccuracy: h.History["accuracy"][0],
			TestAccuracy: logs["accuracy"], Seconds: d.Seconds()}
		results = append(results, r)
		fmt.Printf("epoch %d: train loss %.4f, train accuracy %.4f, test accuracy %.4f, %.1f s (%.0f samples/s)\n",
			r.Epoch, r.TrainLoss, r.TrainAccuracy, r.TestAccuracy, r.Seconds, float64(train.Len())/r.Seconds)
	}
	out, err := json.Marshal(map[string]any{
		"mode": "accuracy", "train": train.Len(), "test": test.Len(), "batch": batch, "lr": lr,
		"epochs": results, "train_seconds": total.Seconds(), "final_test_accuracy": results[len(results)-1].TestAccuracy,
		"gomaxprocs": runtime.GOMAXPROCS(0), "kernel": tensor.KernelName(), "loadavg": loadavg(),
	})
	if err != nil {
		return err
	}
	fmt.Println(string(out))
	return nil
}

// throughput times windows of training steps with n replicas on the first n of the
// logical CPU devices the CPU is split into.
func throughput(train *datasets.Arrays, n, logical, batch int, lr float64, seed int64, windows, steps int) error {
	cpus := device.ListPhysicalDevices("CPU")
	if logical > 1 {
		if err := device.SetLogicalDeviceConfiguration(cpus[0], make([]device.LogicalDeviceConfiguration, logical)); err != nil {
			return err
		}
	}
	var strategy distribute.Strategy = distribute.NewDefaultStrategy()
	if n > 1 {
		var devs []string
		for _, d := range device.ListLogicalDevices("CPU")[:n] {
			devs = append(devs, d.Name)
		}
		strategy = distribute.NewMirroredStrategy(distribute.WithDevices(devs...))
	}
	var model *keras.Model
	strategy.Scope(func() { model = newModel(lr) })
	global := batch * strategy.NumReplicasInSync()
	ds := train.Dataset().Map(scale).Cache().Shuffle(10000, seed).Repeat(-1).Batch(global, true)
	var starts []time.Time
	var secs []float64
	var cpu0, cpu1 float64 // this process's CPU seconds at the start of window 1 and at the end
	timer := keras.LambdaCallback{
		OnEpochBegin: func(e int, _ keras.Logs) {
			if e == 1 {
				cpu0 = cpuSeconds()
			}
			starts = append(starts, time.Now())
		},
		OnEpochEnd: func(int, keras.Logs) {
			secs = append(secs, time.Since(starts[len(starts)-1]).Seconds())
			cpu1 = cpuSeconds()
		},
	}
	// Window 0 warms up (allocations, caches, the dataset's cache) and is not counted.
	model.Fit(ds, keras.Epochs(windows+1), keras.StepsPerEpoch(steps), keras.Verbose(0), keras.Callbacks(timer))
	if len(secs) != windows+1 {
		return fmt.Errorf("timed %d windows, want %d", len(secs), windows+1)
	}
	var rates []float64
	for _, s := range secs[1:] {
		rates = append(rates, float64(global*steps)/s)
	}
	sorted := append([]float64(nil), rates...)
	sort.Float64s(sorted)
	median := sorted[len(sorted)/2]
	devs := strategy.Extended().ReplicaDevices()
	perCPU := float64(global*steps*windows) / (cpu1 - cpu0)
	fmt.Fprintf(os.Stderr, "%s over %s: global batch %d, windows (samples/s) %s, median %.0f; %.0f samples per CPU-second\n",
		strategy.Name(), strings.Join(devs, ", "), global, fmtRates(rates), median, perCPU)
	out, err := json.Marshal(map[string]any{
		"mode": "throughput", "strategy": strategy.Name(), "devices": n, "logical_devices": logical, "replica_devices": devs,
		"threads_per_device": device.Threads(devs[0]), "global_batch": global, "steps": steps,
		"samples_per_s": rates, "median_samples_per_s": median, "samples_per_cpu_s": perCPU,
		"gomaxprocs": runtime.GOMAXPROCS(0), "kernel": tensor.KernelName(), "loadavg": loadavg(),
	})
	if err != nil {
		return err
	}
	fmt.Println(string(out))
	return nil
}

func fmtRates(rs []float64) string {
	var s []string
	for _, r := range rs {
		s = append(s, fmt.Sprintf("%.0f", r))
	}
	return strings.Join(s, " ")
}

// cpuSeconds returns the user and system CPU time this process has used.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

// loadavg returns the first three fields of /proc/loadavg, or "" where there is none.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
