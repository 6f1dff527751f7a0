// Command keras measures the training throughput of distlib/keras's model.Fit on the peer
// CNN of shared/peers/model.py: Conv2D(32, 3, relu) on 28x28x1, MaxPooling2D(2), Flatten,
// Dense(64, relu), Dense(10), SparseCategoricalCrossentropy(fromLogits), Adam(1e-3), batch
// 64 per replica, on a repeated synthetic dataset of 16 global batches.
//
// Modes (-mode):
//
//	plain     no strategy (run it with GOMAXPROCS=1 for the single-thread figure)
//	mirrored  MirroredStrategy over -replicas logical CPU devices; -split sets how many
//	          logical devices the CPU is split into (default -replicas), so that one replica
//	          on one device of a 2-way split is the per-replica baseline of 2 replicas
//
// Each window is one Fit epoch of -steps steps (timed by a callback); per window it also
// records the CPU this process and the others used, and it prints one JSON line with the
// medians (all windows, "clean" windows where others used less than -clean cores, and
// samples per second of this process's own CPU time).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"

	"godist/bench/internal/peer"
	"godist/distlib/data"
	"godist/distlib/device"
	"godist/distlib/distribute"
	"godist/distlib/keras"
	"godist/distlib/tensor"
	"godist/internal/benchwin"
)

func main() {
	mode := flag.String("mode", "plain", `"plain" (no strategy) or "mirrored"`)
	replicas := flag.Int("replicas", 1, "mirrored: replicas (one per logical CPU device)")
	split := flag.Int("split", 0, "mirrored: logical CPU devices to split the CPU into (default -replicas)")
	windows := flag.Int("windows", 5, "timed windows (Fit epochs)")
	steps := flag.Int("steps", 30, "steps per window")
	warmup := flag.Int("warmup", 1, "untimed windows first")
	batch := flag.Int("batch", 64, "batch size per replica")
	clean := flag.Float64("clean", 0.1, "a window is clean when other processes used less than this many cores")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the timed windows here")
	flag.Parse()
	if err := run(*mode, *replicas, *split, *windows, *steps, *warmup, *batch, *clean, *cpuprofile); err != nil {
		fmt.Fprintln(os.Stderr, "bench/keras:", err)
		os.Exit(1)
	}
}

func run(mode string, replicas, split, windows, steps, warmup, batch int, clean float64, cpuprofile string) error {
	if windows < 1 || steps < 1 || warmup < 0 || batch < 1 {
		return fmt.Errorf("-windows %d, -steps %d, -warmup %d, -batch %d: want positive counts", windows, steps, warmup, batch)
	}
	var s distribute.Strategy
	label := "no strategy"
	switch mode {
	case "plain":
		replicas = 1
	case "mirrored":
		if split == 0 {
			split = replicas
		}
		if replicas < 1 || split < replicas {
			return fmt.Errorf("-replicas %d -split %d: want 1 <= replicas <= split", replicas, split)
		}
		if err := device.SetLogicalDeviceConfiguration(device.ListPhysicalDevices("CPU")[0],
			make([]device.LogicalDeviceConfiguration, split)); err != nil {
			return err
		}
		devs := make([]string, replicas)
		for i := range devs {
			devs[i] = fmt.Sprintf("/cpu:%d", i)
		}
		s = distribute.NewMirroredStrategy(distribute.WithDevices(devs...))
		label = fmt.Sprintf("MirroredStrategy over %d of %d logical CPU devices (%d kernel thread(s) each)",
			replicas, split, device.Threads(device.Default()))
	default:
		return fmt.Errorf("-mode %q: use plain or mirrored", mode)
	}
	global := batch * replicas
	xs, ys := peer.Images(16 * global)
	ds := data.FromTensorSlices(xs, ys).Batch(global, true).Repeat(-1)

	var m *keras.Model
	build := func() {
		keras.SetRandomSeed(0)
		m = peer.CNN()
		m.Compile(keras.Adam(1e-3), keras.SparseCategoricalCrossentropy(true), "accuracy")
	}
	if s != nil {
		s.Scope(build)
	} else {
		build()
	}

	var wins []benchwin.Window
	var tm benchwin.Timer
	var firstLoss float64
	cb := keras.LambdaCallback{
		OnEpochBegin: func(e int, _ keras.Logs) {
			if e == warmup && cpuprofile != "" {
				f, err := os.Create(cpuprofile)
				if err == nil {
					err = pprof.StartCPUProfile(f)
				}
				if err != nil {
					fmt.Fprintln(os.Stderr, "bench/keras: cpu profile:", err)
				}
			}
			tm = benchwin.Start()
		},
		OnEpochEnd: func(e int, logs keras.Logs) {
			wall, own := tm.Wall(), tm.Own()
			if e == 0 {
				firstLoss = logs["loss"]
			}
			if e >= warmup {
				wins = append(wins, tm.StopShared(steps*global, wall, own))
			}
		},
	}
	h := m.Fit(ds, keras.Epochs(warmup+windows), keras.StepsPerEpoch(steps), keras.Verbose(0), keras.Callbacks(cb))
	if cpuprofile != "" {
		pprof.StopCPUProfile()
	}
	losses := h.History["loss"]
	out := map[string]any{
		"config": fmt.Sprintf("godist keras Fit, %s, GOMAXPROCS=%d, batch %d per replica, kernels %s",
			label, runtime.GOMAXPROCS(0), batch, tensor.KernelName()),
		"replicas":         replicas,
		"loss_first_epoch": firstLoss,
		"loss_last_epoch":  losses[len(losses)-1],
	}
	benchwin.Report(out, wins, clean, true) // windows: [samples/s wall, samples/s own CPU, other cores]
	b, err := json.Marshal(out)
	if err != nil {
		return err
	}
	fmt.Println(string(b))
	return nil
}
