// Command fashion measures the time to reach a test accuracy (default 90%) on the full
// Fashion-MNIST (60,000 training and 10,000 test images, Debian's dataset-fashion-mnist)
// with the talk's model (seed 003: Input 28x28, Reshape 28x28x1, Conv2D 32 3x3 ReLU,
// Flatten, Dense 128 ReLU, Dense 10), Adam 1e-3, batch 64 per worker, under
// MultiWorkerMirroredStrategy with keras Fit. It follows the protocol of
// shared/peers/fashion_tta.py, which it is compared with in bench/fashion/run.sh:
//
//   - every worker is one process with one compute thread (GOMAXPROCS=1,
//     GODIST_KERNEL_THREADS=1);
//   - the training set is shuffled each epoch (a full shuffle, another order every epoch) and
//     cut into global batches of 64 x workers; each worker trains on its 64 of every batch
//     (the DATA auto-shard policy), 468 steps an epoch with 2 workers;
//   - every -eval-every global steps the full 10,000-image test set is evaluated (with
//     model.Evaluate under the strategy, so each worker evaluates its half of every test batch
//     and the counts are all-reduced; the peer evaluates on rank 0 alone);
//   - the clock runs from the start of Fit to the evaluation that first reaches -target:
//     training and evaluation, data loading excluded.
//
// The chief prints one JSON line shaped like the peer's ({"world", "threads",
// "global_batch", "target", "reached": [step, seconds, accuracy] or null, "curve": [[step,
// seconds, accuracy], ...]}) and a summary line.
//
//	fashion -workers 2                 two worker processes on loopback (cluster.Launch re-runs
//	                                   this binary as the tasks, with TF_CONFIG)
//	fashion -workers 1                 one worker, in this process
//	fashion -max-steps 20 -eval-every 10   a short run (the smoke test)
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"godist/distlib/cluster"
	"godist/distlib/data"
	"godist/distlib/datasets"
	"godist/distlib/distribute"
	"godist/distlib/keras"
	"godist/distlib/keras/layers"
	"godist/distlib/tensor"
)

// taskEnv marks the processes cluster.Launch starts as the job's workers.
const taskEnv = "GODIST_BENCH_FASHION_TASK"

type config struct {
	workers, batch, maxEpochs, evalEvery, maxSteps int
	target                                         float64
	seed                                           int64
	dataDir, cpuProfile                            string
	timeout                                        time.Duration
}

func main() {
	var c config
	flag.IntVar(&c.workers, "workers", 2, "worker processes")
	flag.IntVar(&c.batch, "batch", 64, "per-worker batch size")
	flag.IntVar(&c.maxEpochs, "max-epochs", 5, "give up after this many epochs")
	flag.IntVar(&c.evalEvery, "eval-every", 200, "evaluate the test set every this many global steps")
	flag.IntVar(&c.maxSteps, "max-steps", 0, "stop after this many global steps (0: no limit)")
	flag.Float64Var(&c.target, "target", 0.90, "test accuracy to reach")
	flag.Int64Var(&c.seed, "seed", 0, "seed of the weights and of the shuffles")
	flag.StringVar(&c.dataDir, "data", "", "directory of the Fashion-MNIST IDX files (default: the loaders' search order, /usr/share/datasets/fashion-mnist)")
	flag.StringVar(&c.cpuProfile, "cpuprofile", "", "write each worker's CPU profile to this path with the suffix .wN (worker N)")
	flag.DurationVar(&c.timeout, "timeout", 30*time.Minute, "bound on the whole run")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	if err := run(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, "fashion:", err)
		os.Exit(1)
	}
}

func (c config) check() error {
	switch {
	case c.workers < 1:
		return fmt.Errorf("-workers %d: want at least 1", c.workers)
	case c.batch < 1:
		return fmt.Errorf("-batch %d: want at least 1", c.batch)
	case c.maxEpochs < 1:
		return fmt.Errorf("-max-epochs %d: want at least 1", c.maxEpochs)
	case c.evalEvery < 1:
		return fmt.Errorf("-eval-every %d: want at least 1", c.evalEvery)
	case c.maxSteps < 0:
		return fmt.Errorf("-max-steps %d: want 0 (no limit) or more", c.maxSteps)
	case !(c.target > 0 && c.target <= 1):
		return fmt.Errorf("-target %g: want an accuracy in (0, 1]", c.target)
	}
	return nil
}

func run(ctx context.Context, c config) error {
	if err := c.check(); err != nil {
		return err
	}
	if c.workers > 1 && os.Getenv(taskEnv) == "" {
		self, err := os.Executable()
		if err != nil {
			return err
		}
		return cluster.Launch(ctx, cluster.LaunchSpec{Workers: c.workers, Program: self, Args: os.Args[1:],
			Env:    []string{taskEnv + "=1", "GOMAXPROCS=1", "GODIST_KERNEL_THREADS=1", "OPENBLAS_NUM_THREADS=1"},
			Output: chiefOnly{}})
	}
	if c.workers == 1 {
		runtime.GOMAXPROCS(1)
		if os.Getenv("GODIST_KERNEL_THREADS") != "1" {
			return fmt.Errorf("-workers 1: run with GODIST_KERNEL_THREADS=1 (one compute thread per worker, as the peer)")
		}
	}
	res, err := train(ctx, c)
	if err != nil || res == nil {
		return err
	}
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	fmt.Println(string(b))
	if r := res.Reached; r != nil {
		fmt.Printf("godist MWMS %dx1: %.0f%% test accuracy at step %d after %.2f s\n", res.World, 100*c.target, int(r[0]), r[1])
	} else {
		fmt.Printf("godist MWMS %dx1: %.0f%% not reached\n", res.World, 100*c.target)
	}
	return nil
}

// result is the chief's report, in the peer's JSON shape; points are [step, seconds, accuracy].
type result struct {
	World       int          `json:"world"`
	Threads     int          `json:"threads"`
	GlobalBatch int          `json:"global_batch"`
	Target      float64      `json:"target"`
	Reached     []float64    `json:"reached"`
	Curve       [][3]float64 `json:"curve"`
	EvalSeconds float64      `json:"eval_seconds"`
	Config      string       `json:"config"`
}

// train runs one worker's part; it returns the result on the chief and nil elsewhere.
func train(ctx context.Context, c config) (*result, error) {
	s := distribute.NewMultiWorkerMirroredStrategy()
	defer s.Close()
	idx, n := s.Extended().Worker()
	if c.cpuProfile != "" {
		f, err := os.Create(fmt.Sprintf("%s.w%d", c.cpuProfile, idx))
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return nil, err
		}
		defer pprof.StopCPUProfile()
	}

	// Data loading: not timed.
	var opts []datasets.Option
	if c.dataDir != "" {
		opts = append(opts, datasets.Dir(c.dataDir))
	}
	tr, te, err := datasets.LoadFashionMNIST(opts...)
	if err != nil {
		return nil, err
	}
	if tr.Len() != 60000 || te.Len() != 10000 {
		return nil, fmt.Errorf("want the full Fashion-MNIST (60000/10000 images), got %s and %s", tr, te)
	}
	scaled := func(a *datasets.Arrays) *tensor.Tensor {
		return tensor.Reshape(tensor.Scale(a.Images, 1.0/255), a.Len(), 28, 28)
	}
	global := c.batch * n
	byData := data.Options{AutoShardPolicy: data.AutoShardData}
	trainDs := data.FromTensorSlices(scaled(tr), tr.Labels).
		Shuffle(tr.Len(), c.seed, data.ReshuffleEachIteration(true)).
		Batch(global, true).WithOptions(byData)
	testDs := data.FromTensorSlices(scaled(te), te.Labels).Batch(1000, false).WithOptions(byData)

	var m *keras.Model
	s.Scope(func() {
		keras.SetRandomSeed(c.seed)
		m = keras.Sequential(
			layers.Input(28, 28),
			layers.Reshape([]int{28, 28, 1}),
			layers.Conv2D(32, 3, layers.ReLU),
			layers.Flatten(),
			layers.Dense(128, layers.ReLU),
			layers.Dense(10))
		m.Compile(keras.Adam(1e-3), keras.SparseCategoricalCrossentropy(true), "accuracy")
	})

	res := &result{World: n, Threads: 1, GlobalBatch: global, Target: c.target,
		Config: fmt.Sprintf("godist keras Fit, MultiWorkerMirroredStrategy, %d worker(s) x 1 kernel thread, global batch %d, kernels %s", n, global, tensor.KernelName())}
	var (
		start   time.Time
		step    int
		evalDur time.Duration
		evalErr error
	)
	cb := keras.LambdaCallback{
		OnTrainBegin: func(keras.Logs) { start = time.Now() },
		OnTrainBatchEnd: func(int, keras.Logs) {
			step++
			if step%c.evalEvery == 0 {
				t0 := time.Now()
				acc, err := evaluate(ctx, m, testDs)
				evalDur += time.Since(t0)
				if err != nil {
					evalErr, m.StopTraining = err, true
					return
				}
				// Every worker gets the same all-reduced accuracy, so all stop at the same step.
				sec := math.Round(time.Since(start).Seconds()*100) / 100
				res.Curve = append(res.Curve, [3]float64{float64(step), sec, acc})
				if acc >= c.target {
					res.Reached = []float64{float64(step), sec, acc}
					m.StopTraining = true
				}
			}
			if c.maxSteps > 0 && step >= c.maxSteps {
				m.StopTraining = true
			}
		},
	}
	m.FitContext(ctx, trainDs, keras.Epochs(c.maxEpochs), keras.Verbose(0), keras.Callbacks(cb))
	if evalErr != nil {
		return nil, evalErr
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("after %d steps: %w", step, err)
	}
	res.EvalSeconds = math.Round(evalDur.Seconds()*100) / 100
	if !s.Extended().IsChief() {
		return nil, nil
	}
	return res, nil
}

// evaluate returns the model's accuracy on the test set; Evaluate's panics become errors.
func evaluate(ctx context.Context, m *keras.Model, ds *data.Dataset) (acc float64, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("evaluate: %v", r)
		}
	}()
	logs := m.EvaluateContext(ctx, ds, keras.Verbose(0))
	a, ok := logs["accuracy"]
	if !ok {
		return 0, fmt.Errorf("evaluate: no accuracy in the logs %v", logs)
	}
	return a, nil
}

// chiefOnly passes on the chief's report lines and any task's errors, dropping the logs.
type chiefOnly struct{}

func (chiefOnly) Write(b []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		switch {
		case strings.HasPrefix(line, "[worker 0] {"), strings.HasPrefix(line, "[worker 0] godist MWMS"):
			fmt.Println(strings.TrimPrefix(line, "[worker 0] "))
		case strings.Contains(line, "INFO:"), line == "":
		default:
			fmt.Fprintln(os.Stderr, line)
		}
	}
	return len(b), nil
}
