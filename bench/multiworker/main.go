// Command multiworker measures keras Fit's training throughput under
// MultiWorkerMirroredStrategy on the peer CNN of shared/peers/model.py (Conv2D 1->32 3x3 +
// ReLU, MaxPool 2, Flatten, Dense 5408->64 + ReLU, Dense 64->10, Adam 1e-3), synthetic
// data (-batches batches of 64 per worker, 16 as in model.py's synthetic_batches), per-worker
// batch 64 (global batch 64*W), one compute thread per worker: its kernels
// use one thread (GODIST_KERNEL_THREADS=1) and it runs with GOMAXPROCS=-procs (default 1;
// 2 gives the all-reduce goroutines a P of their own beside the compute thread).
//
//	multiworker -workers 1   one worker, in this process
//	multiworker -workers 2   two worker processes on loopback (cluster.Launch re-runs this
//	                         binary as the tasks, with TF_CONFIG, each bound to its share
//	                         of the CPUs; -nopin leaves them unbound)
//
// Every epoch of StepsPerEpoch(steps) is one timed window; the chief prints one JSON line
// with the global samples/s of every window and the CPU other processes used meanwhile
// (in cores), as shared/peers/ddp_throughput.py does.
//
// GODIST_BENCH_MW_STEPTIMES=1 makes every worker print the percentiles of its step times in
// the timed windows (what workers in lockstep wait for); set to a path P, each worker also
// writes all its step times (ms, warm-up included) to P.<worker>.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strings"
	"time"

	"godist/bench/internal/peer"
	"godist/distlib/cluster"
	"godist/distlib/data"
	"godist/distlib/distribute"
	"godist/distlib/keras"
	"godist/distlib/tensor"
	"godist/internal/benchwin"
)

const taskEnv = "GODIST_BENCH_MW_TASK"

// profEnv names a directory: when set, every worker writes a CPU profile, block, mutex and
// allocation profiles and a runtime/trace of its run there (wNofM.cpu, .block, .mutex,
// .allocs, .trace).
const profEnv = "GODIST_BENCH_MW_PROFILE"

// balance is -balance; noPin is -nopin; custom is -custom.
var balance, noPin, custom bool

func main() {
	workers := flag.Int("workers", 1, "worker processes")
	windows := flag.Int("windows", 5, "timed windows (epochs)")
	steps := flag.Int("steps", 30, "steps per window")
	warmup := flag.Int("warmup", 1, "untimed epochs first")
	batch := flag.Int("batch", 64, "per-worker batch size")
	batches := flag.Int("batches", 16, "batches in each worker's shard of the dataset (16 as shared/peers/model.py; 256 makes a dataset no cache of this machine holds, as real data)")
	procs := flag.Int("procs", 1, "GOMAXPROCS of each worker (its kernels use one thread either way)")
	flag.BoolVar(&balance, "balance", false, "keras.BalanceWorkers(true): split every global batch by the workers' speeds")
	flag.BoolVar(&noPin, "nopin", false, "cluster.LaunchSpec.NoPinning: leave the workers free to run on any CPU")
	flag.BoolVar(&custom, "custom", false, "train with the course's custom loop (strategy.Run, GradientTape, optimizer.ApplyGradients, strategy.Reduce) instead of Fit")
	flag.Parse()
	if err := run(*workers, *windows, *steps, *warmup, *batch, *batches, *procs); err != nil {
		fmt.Fprintln(os.Stderr, "multiworker:", err)
		os.Exit(1)
	}
}

func run(workers, windows, steps, warmup, batch, batches, procs int) error {
	if procs < 1 {
		return fmt.Errorf("-procs %d: want at least 1", procs)
	}
	if batches < 1 {
		return fmt.Errorf("-batches %d: want at least 1", batches)
	}
	if workers > 1 && os.Getenv(taskEnv) == "" {
		self, err := os.Executable()
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
		defer cancel()
		return cluster.Launch(ctx, cluster.LaunchSpec{Workers: workers, Program: self, Args: os.Args[1:], NoPinning: noPin,
			Env: []string{taskEnv + "=1", fmt.Sprintf("GOMAXPROCS=%d", procs), "GODIST_KERNEL_THREADS=1", "OPENBLAS_NUM_THREADS=1"}, Output: chiefOnly{}})
	}
	if procs > 1 && os.Getenv("GODIST_KERNEL_THREADS") != "1" {
		// With one P the kernels run on one thread anyway (they use at most GOMAXPROCS).
		return fmt.Errorf("-procs %d: run with GODIST_KERNEL_THREADS=1 (one compute thread per worker)", procs)
	}
	runtime.GOMAXPROCS(procs)
	s := distribute.NewMultiWorkerMirroredStrategy()
	defer s.Close()
	idx, n := s.Extended().Worker()
	if dir := os.Getenv(profEnv); dir != "" {
		stop, err := startProfiles(dir, fmt.Sprintf("w%dof%d", idx, n))
		if err != nil {
			return err
		}
		defer stop()
	}
	global := batch * n
	xs, ys := peer.Images(batches * global)
	ds := data.FromTensorSlices(xs, ys).Batch(global, true).WithOptions(data.Options{AutoShardPolicy: data.AutoShardData})
	var m *keras.Model
	s.Scope(func() {
		keras.SetRandomSeed(0)
		m = peer.CNN()
		m.Compile(keras.Adam(1e-3), keras.SparseCategoricalCrossentropy(true))
	})
	var wins []benchwin.Window
	var tm benchwin.Timer
	// With GODIST_BENCH_MW_STEPTIMES set, every worker prints the spread of its step times
	// in the timed epochs (what workers in lockstep wait for).
	var stepTimes []float64
	var last time.Time
	cb := keras.LambdaCallback{
		OnEpochBegin: func(int, keras.Logs) { tm = benchwin.Start(); last = time.Now() },
		OnTrainBatchEnd: func(int, keras.Logs) {
			now := time.Now()
			stepTimes = append(stepTimes, float64(now.Sub(last).Microseconds())/1000)
			last = now
		},
		OnEpochEnd: func(e int, _ keras.Logs) {
			wall := tm.Wall()
			// The CPU of all workers together, to tell what other processes used.
			own, err := s.Extended().AllReduce(context.Background(), distribute.ReduceSum, [][]*tensor.Tensor{{tensor.Scalar(float32(tm.Own()))}})
			if err != nil {
				panic(err)
			}
			if e >= warmup {
				wins = append(wins, tm.StopShared(steps*global, wall, float64(own[0][0].Item())))
			}
		},
	}
	var h *keras.History
	if custom {
		h = customLoop(s, m, ds, global, warmup+windows, steps, cb)
	} else {
		h = m.Fit(ds, keras.Epochs(warmup+windows), keras.StepsPerEpoch(steps), keras.Verbose(0), keras.Callbacks(cb), keras.BalanceWorkers(balance))
	}
	if os.Getenv("GODIST_BENCH_MW_STEPTIMES") != "" {
		t := slices.Clone(stepTimes[warmup*steps:])
		slices.Sort(t)
		q := func(p float64) float64 { return t[int(p*float64(len(t)-1))] }
		if f := os.Getenv("GODIST_BENCH_MW_STEPTIMES"); f != "1" {
			_ = os.WriteFile(fmt.Sprintf("%s.%d", f, idx), []byte(fmt.Sprintln(stepTimes)), 0o644)
		}
		fmt.Fprintf(os.Stderr, "worker %d of %d: step ms p10 %.2f p50 %.2f p90 %.2f p99 %.2f max %.2f (%d steps)\n", idx, n, q(0.1), q(0.5), q(0.9), q(0.99), t[len(t)-1], len(t))
	}
	if !s.Extended().IsChief() {
		return nil
	}
	out := map[string]any{
		"config":    fmt.Sprintf("godist keras %s, MultiWorkerMirroredStrategy, %d worker(s) x 1 kernel thread, GOMAXPROCS=%d, global batch %d, %d batches, kernels %s, balanced %v", map[bool]string{false: "Fit", true: "custom loop"}[custom], n, procs, global, batches, tensor.KernelName(), balance),
		"workers":   n,
		"loss_last": h.History["loss"][len(h.History["loss"])-1],
	}
	benchwin.Report(out, wins, 0.1, false) // windows: [samples/s wall, other cores]
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
	return nil
}

// chiefOnly passes on the JSON line of worker 0 and any task's errors, dropping the logs.
type chiefOnly struct{}

func (chiefOnly) Write(b []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		switch {
		case strings.HasPrefix(line, "[worker 0] {"):
			fmt.Println(strings.TrimPrefix(line, "[worker 0] "))
		case strings.Contains(line, "INFO:"), line == "":
		default:
			fmt.Fprintln(os.Stderr, line)
		}
	}
	return len(b), nil
}

// startProfiles starts the CPU profile and the trace of this worker, and turns on block and
// mutex profiling; stop writes them all under dir, named by prefix.
func startProfiles(dir, prefix string) (stop func(), err error) {
	base := filepath.Join(dir, prefix)
	cpu, err := os.Create(base + ".cpu")
	if err != nil {
		return nil, err
	}
	tr, err := os.Create(base + ".trace")
	if err != nil {
		cpu.Close()
		return nil, err
	}
	if err := pprof.StartCPUProfile(cpu); err != nil {
		cpu.Close()
		tr.Close()
		return nil, err
	}
	if err := trace.Start(tr); err != nil {
		pprof.StopCPUProfile()
		cpu.Close()
		tr.Close()
		return nil, err
	}
	runtime.SetBlockProfileRate(10000) // one sample per 10 µs blocked
	runtime.SetMutexProfileFraction(10)
	return func() {
		trace.Stop()
		pprof.StopCPUProfile()
		tr.Close()
		cpu.Close()
		for _, name := range []string{"block", "mutex", "allocs"} {
			if f, err := os.Create(base + "." + name); err == nil {
				_ = pprof.Lookup(name).WriteTo(f, 0)
				f.Close()
			}
		}
	}, nil
}

// customLoop trains m on ds for epochs of steps steps with the custom training loop of the
// course (tf.distribute's guide, translated line by line): strategy.Run of a step that
// takes the gradients on a GradientTape and applies them with optimizer.ApplyGradients
// (which sums them over the replicas and workers), the per-replica losses summed with
// strategy.Reduce. cb's epoch and batch hooks run as Fit would run them; the returned
// History holds each epoch's last loss.
func customLoop(s *distribute.MultiWorkerMirroredStrategy, m *keras.Model, ds *data.Dataset, global, epochs, steps int, cb keras.LambdaCallback) *keras.History {
	var opt *keras.Optimizer
	s.Scope(func() { opt = keras.Adam(1e-3) })
	lossObject := keras.SparseCategoricalCrossentropy(true, keras.WithReduction(keras.ReductionNone))
	trainStep := func(_ *distribute.ReplicaContext, in data.Element) *tensor.Tensor {
		tape := tensor.NewGradientTape()
		pred := m.Call(in[0], true)
		loss := distribute.ComputeAverageLoss(lossObject.Call(in[1], pred), global)
		grads := tape.Gradient(loss, m.TrainableVariables())
		if err := opt.ApplyGradients(grads, m.TrainableVariables()); err != nil {
			panic(err)
		}
		return loss
	}
	dist := s.ExperimentalDistributeDataset(ds)
	it := dist.Iterator()
	h := &keras.History{History: map[string][]float64{}}
	for e := range epochs {
		cb.OnEpochBegin(e, nil)
		var last float64
		for b := range steps {
			in, ok := it.Next()
			if !ok {
				it = dist.Iterator()
				if in, ok = it.Next(); !ok {
					panic("multiworker: the dataset has no batch")
				}
			}
			last = float64(s.Reduce(distribute.ReduceSum, s.Run(trainStep, in), -1).Item())
			cb.OnTrainBatchEnd(b, nil)
		}
		cb.OnEpochEnd(e, nil)
		h.History["loss"] = append(h.History["loss"], last)
	}
	return h
}
