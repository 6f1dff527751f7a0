package keras

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"godist/distlib/cluster"
	"godist/distlib/data"
	"godist/distlib/distribute"
	"godist/distlib/keras/layers"
	"godist/distlib/tensor"
	"godist/distlib/transport"
	"godist/internal/freeport"
	"godist/internal/slurmtest"
)

// countingData returns steps global batches of batch rows in which batch j is the one-hot
// vector j with target 1: under a linear model without bias and the mean squared error,
// batch j moves weight j only, by one SGD step 2*lr*(w-1) of the whole batch's mean loss.
// So the final weights count how often each global batch was trained, and how much of it:
// a batch trained twice, skipped, or trained without the share of a lost worker leaves
// its weight elsewhere.
func countingData(steps, batch int) *data.Dataset {
	x := make([]float32, steps*batch*steps)
	y := make([]float32, steps*batch)
	for i := range steps * batch {
		x[i*steps+i/batch] = 1
		y[i] = 1
	}
	return data.FromTensorSlices(tensor.MustNew([]int{steps * batch, steps}, x), tensor.MustNew([]int{steps * batch, 1}, y)).
		Batch(batch, false).WithOptions(data.Options{AutoShardPolicy: data.AutoShardData})
}

// sgdStep is one SGD step of countingData's batch on weight w.
func sgdStep(w, lr float32) float32 { return w - lr*(2*(w-1)) }

// memElastic is a group of in-process elastic workers (WithElastic(min, 0)) over
// transport.NewMem, worker w on /cpu:w, each training a linear model without bias under the
// mean squared error with SGD(0.1), countingData's.
type memElastic struct {
	t    *testing.T
	mems []*transport.Mem
	min  int
	opts []distribute.MultiWorkerOption // more options of every worker's strategy
	wg   sync.WaitGroup
	errs []error // each worker's Fit error (a recovered panic)
}

func newMemElastic(t *testing.T, n, min int, opts ...distribute.MultiWorkerOption) *memElastic {
	splitCPU(t, n)
	return &memElastic{t: t, mems: transport.NewMem(n), min: min, opts: opts, errs: make([]error, n)}
}

// start makes worker w's strategy and model, waits for ready when not nil (the workers
// that start together: Fit looks for the strategy in scope, where no worker may be then),
// and runs fn in its own goroutine; a panic there is w's error. Its transport closes when
// fn returns.
func (g *memElastic) start(w int, ready *sync.WaitGroup, fn func(m *Model)) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		defer g.mems[w].Close()
		defer func() {
			if p := recover(); p != nil {
				if e, ok := p.(error); ok {
					g.errs[w] = e
				} else {
					g.errs[w] = fmt.Errorf("%v", p)
				}
			}
		}()
		opts := append([]distribute.MultiWorkerOption{distribute.WithTransport(g.mems[w]),
			distribute.WithDevices(fmt.Sprintf("/cpu:%d", w)), distribute.WithCommunicationTimeout(20 * time.Second),
			distribute.WithElastic(g.min, 0)}, g.opts...)
		s := distribute.NewMultiWorkerMirroredStrategy(opts...)
		defer s.Close()
		var m *Model
		inProcessScopes.Lock()
		s.Scope(func() {
			m = Sequential(layers.Dense(1, layers.UseBias(false)))
			m.Compile(SGD(0.1), MeanSquaredError())
		})
		inProcessScopes.Unlock()
		if ready != nil {
			ready.Done()
			ready.Wait()
		}
		fn(m)
	}()
}

// wait waits for the workers started, at most 60 s.
func (g *memElastic) wait() {
	done := make(chan struct{})
	go func() { g.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		g.t.Fatalf("the %d workers did not finish within 60 s", len(g.mems))
	}
}

// elasticFit trains countingData on n elastic workers (WithElastic(min, 0)) in this process
// for epochs; worker victim's transport closes at the start of step killStep of epoch
// killEpoch, and its goroutine ends there (kill -9 as the others see it). It returns the
// weights of every worker after its first step and at the end (nil for the victim), and
// the errors of Fit (recovered panics).
func elasticFit(t *testing.T, n, min, epochs, steps, batch, victim, killEpoch, killStep int) (first, final [][]float32, errs []error) {
	t.Helper()
	g := newMemElastic(t, n, min)
	ds := countingData(steps, batch)
	first, final = make([][]float32, n), make([][]float32, n)
	var ready sync.WaitGroup
	ready.Add(n)
	for w := range n {
		g.start(w, &ready, func(m *Model) {
			epoch := 0
			cb := LambdaCallback{
				OnEpochBegin: func(e int, _ Logs) { epoch = e },
				OnTrainBatchBegin: func(b int, _ Logs) {
					if w == victim && epoch == killEpoch && b == killStep {
						g.mems[w].Close()
						runtime.Goexit()
					}
				},
				OnTrainBatchEnd: func(b int, _ Logs) {
					if epoch == 0 && b == 0 {
						first[w] = append([]float32(nil), m.GetWeights()[0].Data()...)
					}
				},
			}
			m.Fit(ds, Epochs(epochs), Callbacks(cb), Verbose(0))
			final[w] = m.GetWeights()[0].Data()
		})
	}
	g.wait()
	return first, final, g.errs
}

// checkTrainedOnce checks that weight j of final went through one SGD step per epoch from
// its value in first (weight 0, whose batch comes first, one step fewer).
func checkTrainedOnce(t *testing.T, who string, first, final []float32, epochs int) {
	t.Helper()
	if len(first) != len(final) {
		t.Errorf("%s: weights after its first step %v and at the end %v: want both, of one length (did it train from the start?)", who, first, final)
		return
	}
	for j := range final {
		want := first[j]
		for e := range epochs {
			if j > 0 || e > 0 {
				want = sgdStep(want, 0.1)
			}
		}
		if math.Abs(float64(final[j]-want)) > 1e-5 {
			t.Errorf("%s: weight %d is %v, want %v (its global batch trained once per epoch, whole)", who, j, final[j], want)
		}
	}
}

// kill -9 of one of three elastic workers mid-epoch, as the others see it: they regroup, go
// on with the global batches split between the two of them, and end with equal weights in
// which every global batch was trained exactly once, whole.
func TestElasticFitLosesAWorker(t *testing.T) {
	for _, c := range []struct {
		name                           string
		epochs, victim, killEp, killAt int
	}{
		{"mid-epoch", 1, 2, 0, 5},
		{"chief", 1, 0, 0, 5},
		{"second epoch's first step", 2, 1, 1, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			first, final, errs := elasticFit(t, 3, 2, c.epochs, 10, 6, c.victim, c.killEp, c.killAt)
			var left []int
			for w := range 3 {
				if w == c.victim {
					continue
				}
				left = append(left, w)
				if errs[w] != nil {
					t.Fatalf("worker %d: Fit failed: %v", w, errs[w])
				}
				checkTrainedOnce(t, fmt.Sprintf("worker %d", w), first[w], final[w], c.epochs)
			}
			if !slices.Equal(final[left[0]], final[left[1]]) {
				t.Errorf("the two workers left end with different weights:\n%v\n%v", final[left[0]], final[left[1]])
			}
		})
	}
}

// A fourth worker started while three train joins at an epoch's end: it takes the state
// there, trains the following epochs with the others, and all four end with the same
// weights, every global batch trained once per epoch, whole.
func TestElasticFitWorkerJoins(t *testing.T) {
	const n, epochs, steps, batch = 4, 3, 10, 6
	g := newMemElastic(t, n, 3, distribute.WithHealthCheck(0, time.Second))
	ds := countingData(steps, batch)
	first, final := make([][]float32, n), make([][]float32, n)
	hist := make([]*History, n)
	started := make(chan struct{}) // worker 3 starts once the others have trained a step
	asking := make(chan struct{})  // worker 3 is about to ask to join (its Fit)
	var once sync.Once
	run := func(w int) func(m *Model) {
		return func(m *Model) {
			epoch := 0
			cb := LambdaCallback{
				OnEpochBegin: func(e int, _ Logs) { epoch = e },
				OnTrainBatchEnd: func(b int, _ Logs) {
					if epoch == 0 && b == 0 {
						first[w] = append([]float32(nil), m.GetWeights()[0].Data()...)
					}
					if w == 0 && epoch == 0 && b == 2 {
						once.Do(func() { close(started) })
					}
					if w == 0 && epoch == 0 && b == steps-1 {
						// Worker 3 asks before the first epoch ends, and is admitted there.
						<-asking
						time.Sleep(200 * time.Millisecond)
					}
				},
			}
			if w == n-1 {
				close(asking)
			}
			hist[w] = m.Fit(ds, Epochs(epochs), Callbacks(cb), Verbose(0))
			final[w] = m.GetWeights()[0].Data()
		}
	}
	var ready sync.WaitGroup
	ready.Add(n - 1)
	for w := range n - 1 {
		g.start(w, &ready, run(w))
	}
	// Worker 3 makes its model once the others train (past Fit's look for the strategy).
	<-started
	g.start(n-1, nil, run(n-1))
	g.wait()
	for w := range n - 1 {
		if g.errs[w] != nil {
			t.Fatalf("worker %d: %v", w, g.errs[w])
		}
		checkTrainedOnce(t, fmt.Sprintf("worker %d", w), first[w], final[w], epochs)
	}
	if g.errs[n-1] != nil {
		t.Fatalf("worker 3: %v", g.errs[n-1])
	}
	if !slices.Equal(final[0], final[n-1]) || !slices.Equal(final[0], final[1]) {
		t.Errorf("the workers end with different weights:\n%v\n%v", final[0], final[n-1])
	}
	// Worker 3 asks during the first epoch; on a loaded machine its request may come after
	// the chief's look at that epoch's end, and it joins at the next.
	if got := len(hist[n-1].Epoch); got < 1 || got >= epochs {
		t.Errorf("worker 3 trained %d epochs (%v), want the last 1 or 2 of %d", got, hist[n-1].Epoch, epochs)
	}
}

// A worker lost during the validation at an epoch's end: the others regroup, evaluate again
// and go on; every global batch is still trained once per epoch, whole.
func TestElasticFitLosesAWorkerInValidation(t *testing.T) {
	const n, epochs, steps, batch, victim = 3, 2, 8, 6, 1
	g := newMemElastic(t, n, 2)
	first, final := make([][]float32, n), make([][]float32, n)
	hist := make([]*History, n)
	var ready sync.WaitGroup
	ready.Add(n)
	for w := range n {
		g.start(w, &ready, func(m *Model) {
			// The victim's transport closes while it reads its second validation batch.
			seen := 0
			val := countingData(steps, batch).Take(3).Map(func(el data.Element) data.Element {
				if seen++; w == victim && seen == 2 {
					g.mems[w].Close()
				}
				return el
			})
			cb := LambdaCallback{OnTrainBatchEnd: func(b int, _ Logs) {
				if first[w] == nil {
					first[w] = append([]float32(nil), m.GetWeights()[0].Data()...)
				}
			}}
			hist[w] = m.Fit(countingData(steps, batch), Epochs(epochs), ValidationData(val), Callbacks(cb), Verbose(0))
			final[w] = m.GetWeights()[0].Data()
		})
	}
	g.wait()
	for _, w := range []int{0, 2} {
		if g.errs[w] != nil {
			t.Fatalf("worker %d: %v", w, g.errs[w])
		}
		checkTrainedOnce(t, fmt.Sprintf("worker %d", w), first[w], final[w], epochs)
		if got := len(hist[w].History["val_loss"]); got != epochs {
			t.Errorf("worker %d: %d validation losses, want %d", w, got, epochs)
		}
	}
	if !slices.Equal(final[0], final[2]) {
		t.Errorf("the two workers left end with different weights:\n%v\n%v", final[0], final[2])
	}
}

// Below min the survivors stop, naming the lost worker.
func TestElasticFitBelowMin(t *testing.T) {
	_, _, errs := elasticFit(t, 2, 2, 1, 6, 4, 1, 0, 2)
	var tf *distribute.TooFewWorkersError
	if errs[0] == nil || !errors.As(errs[0], &tf) {
		t.Fatalf("worker 0: Fit error %v, want a TooFewWorkersError", errs[0])
	}
	if got := errs[0].Error(); !strings.Contains(got, "worker 1 was lost after step 2; 1 worker remains, fewer than the 2 of WithElastic") {
		t.Errorf("worker 0: error %q does not name the lost worker and the minimum", got)
	}
}

// elasticResult is what a worker of TestElasticFitProcesses reports.
type elasticResult struct {
	First, Final []float32
	Workers      int // the workers at the end
	Epochs       int // the epochs this worker trained
}

// readElasticResult reads what worker w of an elastic job wrote to out.w; a missing or
// unreadable file fails the test, with log (the job's output).
func readElasticResult(t *testing.T, out string, w int, log string) elasticResult {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("%s.%d", out, w))
	if err != nil {
		t.Fatalf("worker %d: %v\n%s", w, err, log)
	}
	var r elasticResult
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("worker %d's result: %v", w, err)
	}
	return r
}

// elasticHelper is one worker task of TestElasticFitProcesses: it trains countingData for 2
// epochs under MultiWorkerMirroredStrategy over gRPC, elastic from the launcher's
// GODIST_ELASTIC_MIN; worker GODIST_KERAS_ELASTIC_VICTIM kills itself (SIGKILL) at the end
// of step GODIST_KERAS_ELASTIC_STEP of the first epoch. It writes an elasticResult to
// GODIST_KERAS_MW_OUT.N (N: its worker index at the start).
func elasticHelper(string) error {
	// A late worker (GODIST_KERAS_ELASTIC_LATE) starts 3 s after the others, which wait 1 s
	// for it (GODIST_KERAS_ELASTIC_WAIT) and start without it; each epoch of theirs takes
	// about 1 s.
	late := os.Getenv("GODIST_KERAS_ELASTIC_LATE")
	if late != "" {
		var cfg cluster.TFConfig
		if err := json.Unmarshal([]byte(os.Getenv("TF_CONFIG")), &cfg); err != nil {
			return err
		}
		if strconv.Itoa(cfg.Task.Index) == late {
			time.Sleep(3 * time.Second)
		}
	}
	// The regroup wait, which is also how long the chief waits for every worker at the start:
	// long, so that a worker slow to start on a loaded machine is not left to join later,
	// but where a test has a late worker (GODIST_KERAS_ELASTIC_WAIT).
	wait := 10 * time.Second
	if d, err := time.ParseDuration(os.Getenv("GODIST_KERAS_ELASTIC_WAIT")); err == nil {
		wait = d
	}
	opts := []distribute.MultiWorkerOption{distribute.WithCommunicationTimeout(30 * time.Second), distribute.WithHealthCheck(0, wait)}
	if base := os.Getenv("GODIST_KERAS_ELASTIC_SLURM_PORT"); base != "" {
		// Under srun (godist launch --slurm): the cluster from Slurm's variables.
		port, _ := strconv.Atoi(base)
		r, err := cluster.NewSlurmClusterResolver(cluster.SlurmOptions{PortBase: port})
		if err != nil {
			return err
		}
		opts = append(opts, distribute.WithClusterResolver(r))
	}
	s := distribute.NewMultiWorkerMirroredStrategy(opts...)
	defer s.Close()
	index, _ := s.Extended().Worker()
	victim, err := strconv.Atoi(os.Getenv("GODIST_KERAS_ELASTIC_VICTIM"))
	if err != nil {
		victim = -1
	}
	at, _ := strconv.Atoi(os.Getenv("GODIST_KERAS_ELASTIC_STEP"))
	epochs, slow := 2, late != "" || os.Getenv("GODIST_KERAS_ELASTIC_SLOW") != ""
	if slow {
		epochs = 5
	}
	var m *Model
	s.Scope(func() {
		m = Sequential(layers.Dense(1, layers.UseBias(false)))
		m.Compile(SGD(0.1), MeanSquaredError())
	})
	var res elasticResult
	epoch := 0
	cb := LambdaCallback{
		OnEpochBegin: func(e int, _ Logs) { epoch = e },
		OnTrainBatchEnd: func(b int, _ Logs) {
			if epoch == 0 && b == 0 {
				res.First = append([]float32(nil), m.GetWeights()[0].Data()...)
			}
			if index == victim && epoch == 0 && b == at {
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				time.Sleep(time.Minute)
			}
			if slow && index == 0 {
				time.Sleep(100 * time.Millisecond)
			}
		},
	}
	res.Epochs = len(m.Fit(countingData(10, 6), Epochs(epochs), Callbacks(cb), Verbose(0)).Epoch)
	res.Final = m.GetWeights()[0].Data()
	_, res.Workers = s.Extended().Worker()
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	return os.WriteFile(fmt.Sprintf("%s.%d", os.Getenv("GODIST_KERAS_MW_OUT"), index), b, 0o644)
}

// kill -9 of one of three worker processes (gRPC, godist's launcher with --elastic 2):
// the job succeeds, the two others end with equal weights in which every global batch
// was trained once per epoch, whole, and the launcher reports the loss. The kill comes
// right after the victim's step, when its last messages may or may not have reached the
// others: a worker one step behind takes the state from one that completed the step.
func TestElasticFitProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes; skipped under -short")
	}
	for _, c := range []struct{ victim, step int }{{1, 4}, {0, 6}} {
		t.Run(fmt.Sprintf("worker %d after step %d", c.victim, c.step), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "result")
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			var log bytes.Buffer
			err := cluster.Launch(ctx, cluster.LaunchSpec{Workers: 3, MinWorkers: 2, Program: os.Args[0], Args: []string{"-test.run=^$"},
				Env: []string{mwHelperEnv + "=elastic", "GODIST_KERAS_MW_OUT=" + out,
					"GODIST_KERAS_ELASTIC_VICTIM=" + strconv.Itoa(c.victim), "GODIST_KERAS_ELASTIC_STEP=" + strconv.Itoa(c.step)},
				Output: &log, GracePeriod: time.Second})
			if err != nil {
				t.Fatalf("the elastic job failed: %v\n%s", err, log.String())
			}
			if w := fmt.Sprintf("[launch] task worker %d lost at ", c.victim); !strings.Contains(log.String(), w) {
				t.Errorf("the launcher did not report the loss (%q):\n%s", w, log.String())
			}
			if w := fmt.Sprintf("worker %d (127.0.0.1:", c.victim); !strings.Contains(log.String(), w) {
				t.Errorf("the workers' log does not name the lost worker (%q):\n%s", w, log.String())
			}
			var res []elasticResult
			for w := range 3 {
				if w == c.victim {
					continue
				}
				r := readElasticResult(t, out, w, log.String())
				if r.Workers != 2 {
					t.Errorf("worker %d ends with %d workers, want 2", w, r.Workers)
				}
				checkTrainedOnce(t, fmt.Sprintf("worker %d", w), r.First, r.Final, 2)
				res = append(res, r)
			}
			if !slices.Equal(res[0].Final, res[1].Final) {
				t.Errorf("the two workers left end with different weights:\n%v\n%v", res[0].Final, res[1].Final)
			}
			if t.Failed() || testing.Verbose() {
				t.Logf("the job's output:\n%s", log.String())
			}
		})
	}
}

// A fourth worker process of the cluster (gRPC, TF_CONFIG from godist's launcher) starts 3 s
// after the other three, which start without it: it is admitted at an epoch's end, takes
// the chief's state there, and the four end with equal weights in which every global batch
// was trained once per epoch, whole.
func TestElasticFitProcessJoins(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes; skipped under -short")
	}
	out := filepath.Join(t.TempDir(), "result")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var log bytes.Buffer
	err := cluster.Launch(ctx, cluster.LaunchSpec{Workers: 4, MinWorkers: 3, Program: os.Args[0], Args: []string{"-test.run=^$"},
		Env:    []string{mwHelperEnv + "=elastic", "GODIST_KERAS_MW_OUT=" + out, "GODIST_KERAS_ELASTIC_LATE=3", "GODIST_KERAS_ELASTIC_WAIT=1s"},
		Output: &log, GracePeriod: time.Second})
	if err != nil {
		t.Fatalf("the elastic job failed: %v\n%s", err, log.String())
	}
	for _, w := range []string{"elastic training starts with 3 of the 4 workers; worker 3 (127.0.0.1:", "[worker 3] INFO:distribute:admitted by worker 0 (127.0.0.1:"} {
		if !strings.Contains(log.String(), w) {
			t.Errorf("the job's output lacks %q", w)
		}
	}
	res := make([]elasticResult, 4)
	for w := range 4 {
		res[w] = readElasticResult(t, out, w, log.String())
		if res[w].Workers != 4 {
			t.Errorf("worker %d ends with %d workers, want 4", w, res[w].Workers)
		}
		if w < 3 {
			checkTrainedOnce(t, fmt.Sprintf("worker %d", w), res[w].First, res[w].Final, 5)
		}
		if !slices.Equal(res[w].Final, res[0].Final) {
			t.Errorf("worker %d ends with other weights than worker 0:\n%v\n%v", w, res[w].Final, res[0].Final)
		}
	}
	if res[3].Epochs > 4 {
		t.Errorf("worker 3 trained %d epochs, want at most 4 of the 5 (it joined during the job)", res[3].Epochs)
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("the job's output:\n%s", log.String())
	}
}

// A worker process killed (SIGKILL) in the first epoch and started again by hand, with the
// same TF_CONFIG, comes back: the two others go on without it, then admit it at an epoch's
// end; the three end with equal weights, every global batch trained once per epoch, whole.
// The tasks are started as a user or a script would, without godist's launcher.
func TestElasticFitWorkerComesBack(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes; skipped under -short")
	}
	ports, err := freeport.Consecutive("127.0.0.1", 3)
	if err != nil {
		t.Fatal(err)
	}
	spec := map[string][]string{cluster.Worker: nil}
	for _, p := range ports {
		spec[cluster.Worker] = append(spec[cluster.Worker], fmt.Sprintf("127.0.0.1:%d", p))
	}
	cs, err := cluster.NewClusterSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "result")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var logs [4]bytes.Buffer // workers 0, 1, 2 and 2 again
	start := func(i, rank int, extra ...string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
		cfg := cluster.TFConfig{Cluster: cs, Task: cluster.Task{Type: cluster.Worker, Index: rank}}
		cmd.Env = append(os.Environ(), mwHelperEnv+"=elastic", "GODIST_KERAS_MW_OUT="+out, "GODIST_KERAS_ELASTIC_SLOW=1",
			cluster.TokenEnv+"=comes-back", cluster.ElasticEnv+"=2", "TF_CONFIG="+cfg.String())
		cmd.Env = append(cmd.Env, extra...)
		cmd.Stdout, cmd.Stderr = &logs[i], &logs[i]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	cmds := []*exec.Cmd{start(0, 0), start(1, 1), start(2, 2, "GODIST_KERAS_ELASTIC_VICTIM=2", "GODIST_KERAS_ELASTIC_STEP=4")}
	if err := cmds[2].Wait(); err == nil {
		t.Fatalf("worker 2 was to kill itself; it ended well:\n%s", logs[2].String())
	}
	again := start(3, 2)
	defer func() {
		if t.Failed() || testing.Verbose() {
			for i := range logs {
				t.Logf("task %d's output:\n%s", i, logs[i].String())
			}
		}
	}()
	for i, c := range []*exec.Cmd{cmds[0], cmds[1], again} {
		if err := c.Wait(); err != nil {
			t.Fatalf("task %d: %v", i, err)
		}
	}
	all := logs[0].String() + logs[1].String() + logs[3].String()
	for _, w := range []string{"worker 2 (127.0.0.1:", "lost; the 2 remaining workers go on after step", "joined; the 3 workers go on from epoch"} {
		if !strings.Contains(all, w) {
			t.Errorf("the workers' logs lack %q", w)
		}
	}
	res := make([]elasticResult, 3)
	for w := range 3 {
		res[w] = readElasticResult(t, out, w, "")
		if w < 2 {
			checkTrainedOnce(t, fmt.Sprintf("worker %d", w), res[w].First, res[w].Final, 5)
		}
		if res[w].Workers != 3 || !slices.Equal(res[w].Final, res[0].Final) {
			t.Errorf("worker %d ends as one of %d workers with weights\n%v\nwant one of 3 with worker 0's\n%v", w, res[w].Workers, res[w].Final, res[0].Final)
		}
	}
	if res[2].Epochs > 4 {
		t.Errorf("worker 2, started again, trained %d epochs, want at most 4 of the 5", res[2].Epochs)
	}
}

// Under a real Slurm (godist's launcher with srun, the cluster from SlurmClusterResolver),
// srun's task 1 of 3 is killed (SIGKILL) in the first epoch: srun leaves the others running,
// they regroup and end with equal weights, every global batch trained once, and the
// launcher names the lost task.
func TestElasticFitSlurm(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Slurm cluster")
	}
	c := slurmtest.Start(t) // skips without root or without slurm-wlm and munge
	ports, err := freeport.Consecutive("127.0.0.1", 3)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "result")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var log bytes.Buffer
	env := append(c.Env(), mwHelperEnv+"=elastic", "GODIST_KERAS_MW_OUT="+out, "GODIST_KERAS_ELASTIC_VICTIM=1",
		"GODIST_KERAS_ELASTIC_STEP=4", fmt.Sprintf("GODIST_KERAS_ELASTIC_SLURM_PORT=%d", ports[0]))
	err = cluster.Launch(ctx, cluster.LaunchSpec{Workers: 3, MinWorkers: 2, Slurm: true, Program: os.Args[0],
		Args: []string{"-test.run=^$"}, Env: env, Output: &log, GracePeriod: time.Second})
	if err != nil {
		t.Fatalf("the elastic job under srun failed: %v\n%s\n%s", err, log.String(), c.Logs())
	}
	if w := "[launch] task worker 1 lost: Killed; the job went on with 2 chief and worker tasks (at least 2)"; !strings.Contains(log.String(), w) {
		t.Errorf("the launcher did not name the lost task (%q):\n%s", w, log.String())
	}
	var res []elasticResult
	for _, w := range []int{0, 2} {
		r := readElasticResult(t, out, w, log.String())
		checkTrainedOnce(t, fmt.Sprintf("worker %d", w), r.First, r.Final, 2)
		res = append(res, r)
	}
	if !slices.Equal(res[0].Final, res[1].Final) || res[0].Workers != 2 {
		t.Errorf("the workers left end as %d workers with weights\n%v\n%v\nwant 2, equal", res[0].Workers, res[0].Final, res[1].Final)
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("the job's output:\n%s", log.String())
	}
}
