package keras

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"godist/distlib/cluster"
	"godist/distlib/data"
	"godist/distlib/distribute"
	"godist/distlib/keras/layers"
	"godist/distlib/tensor"
	"godist/distlib/transport"
	"godist/internal/testdata"
)

// mwHelperEnv turns the test binary into one worker task of the multi-worker tests: its
// value names what the task does (see mwHelper).
const mwHelperEnv = "GODIST_KERAS_MW_HELPER"

// TestMain runs the worker task when the test binary is started by cluster.Launch.
func TestMain(m *testing.M) {
	if mode := os.Getenv(mwHelperEnv); mode != "" {
		run := mwHelper
		if mode == "elastic" {
			run = elasticHelper
		}
		if err := run(mode); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			os.Exit(3)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// mwData is a small deterministic classification problem: 6x6x1 images, 3 classes.
func mwData(n int) (*tensor.Tensor, *tensor.Tensor) { return testdata.Images(n, 6, 12345, 5, 0.3) }

// mwModel is a small CNN, with a layer without variables between layers with variables.
// Its hidden dense layer has 8 units, or GODIST_KERAS_MW_WIDTH: with 1024, its kernel (16
// x 1024, 64 KiB) is large enough for the all-reduce to read it in shared memory.
func mwModel() *Model {
	width := 8
	if w, err := strconv.Atoi(os.Getenv("GODIST_KERAS_MW_WIDTH")); err == nil {
		width = w
	}
	return Sequential(
		layers.Input(6, 6, 1),
		layers.Conv2D(4, 3, layers.ReLU),
		layers.MaxPooling2D(2),
		layers.Flatten(),
		layers.Dense(width, layers.ReLU),
		layers.Dense(3),
	)
}

// mwResult is what a worker task reports.
type mwResult struct {
	Worker  int         `json:"worker"`
	Workers int         `json:"workers"`
	Weights [][]float32 `json:"weights"`
	Logs    Logs        `json:"logs"`
	Eval    Logs        `json:"eval"`
	Epochs  []int       `json:"epochs"` // epochs whose end this task saw, in order
	Latest  string      `json:"latest"` // LatestCheckpoint's file name after Fit (mode "checkpoint")
}

// mwHelper is one worker: it trains mwModel under MultiWorkerMirroredStrategy from TF_CONFIG
// on global batches of GODIST_KERAS_MW_BATCH and writes an mwResult to GODIST_KERAS_MW_OUT.N.
func mwHelper(mode string) error {
	s := distribute.NewMultiWorkerMirroredStrategy(distribute.WithCommunicationTimeout(30 * time.Second))
	defer s.Close()
	index, workers := s.Extended().Worker()
	gradientBucketBytes = 128 // several buckets for this small model
	// Worker 0's seed decides the initial weights: the others start elsewhere and must be
	// overwritten by the broadcast from the chief.
	SetRandomSeed(int64(7 + 1000*index))
	batch, _ := strconv.Atoi(os.Getenv("GODIST_KERAS_MW_BATCH"))
	epochs, _ := strconv.Atoi(os.Getenv("GODIST_KERAS_MW_EPOCHS"))
	x, y := mwData(96)
	ds := data.FromTensorSlices(x, y).Batch(batch, false).WithOptions(data.Options{AutoShardPolicy: data.AutoShardData})
	var m *Model
	s.Scope(func() {
		m = mwModel()
		m.Compile(SGD(0.2, Momentum(0.5)), SparseCategoricalCrossentropy(true), "accuracy")
	})
	res := mwResult{Worker: index, Workers: workers}
	cbs := []Callback{LambdaCallback{OnEpochEnd: func(e int, _ Logs) { res.Epochs = append(res.Epochs, e) }}}
	if dir := os.Getenv("GODIST_KERAS_MW_BACKUP"); dir != "" {
		cbs = append(cbs, BackupAndRestore(dir))
	}
	ckptDir := os.Getenv("GODIST_KERAS_MW_CKPT")
	if ckptDir != "" {
		if index == 0 {
			// A slow chief: its checkpoint of each epoch is written well after the other
			// worker's epoch ended.
			cbs = append(cbs, LambdaCallback{OnEpochEnd: func(int, Logs) { time.Sleep(300 * time.Millisecond) }})
		}
		cbs = append(cbs, ModelCheckpoint(filepath.Join(ckptDir, "ckpt_{epoch}"), SaveWeightsOnly(true)))
	}
	if mode == "die" && index == 1 {
		// Killed for real in the middle of epoch 2 (of 0..): SIGKILL, no clean-up.
		cbs = append(cbs, LambdaCallback{OnTrainBatchEnd: func(b int, _ Logs) {
			if len(res.Epochs) == 2 && b == 1 {
				p, _ := os.FindProcess(os.Getpid())
				p.Kill()
				time.Sleep(time.Minute)
			}
		}})
	}
	h := &History{}
	if mode == "customloop" {
		// The course's custom loop, line by line: ApplyGradients inside Run sums the
		// gradients across the replicas of every worker.
		dist := s.ExperimentalDistributeDataset(ds)
		lossObject := SparseCategoricalCrossentropy(true, WithReduction(ReductionNone))
		optimizer := m.Optimizer()
		for epoch := 0; epoch < epochs; epoch++ {
			it := dist.Iterator()
			for inputs, ok := it.Next(); ok; inputs, ok = it.Next() {
				s.Run(func(ctx *distribute.ReplicaContext, el data.Element) *tensor.Tensor {
					tape := tensor.NewGradientTape()
					predictions := m.Call(el[0], true)
					loss := distribute.ComputeAverageLoss(lossObject.Call(el[1], predictions), batch)
					gradients := tape.Gradient(loss, m.TrainableVariables())
					if err := optimizer.ApplyGradients(gradients, m.TrainableVariables()); err != nil {
						panic(err)
					}
					return loss
				}, inputs)
			}
			res.Epochs = append(res.Epochs, epoch)
		}
	} else {
		opts := []any{Epochs(epochs), Verbose(0), Callbacks(cbs...)}
		if os.Getenv("GODIST_KERAS_MW_BALANCE") != "" {
			opts = append(opts, BalanceWorkers(true))
			if index == 1 {
				// A slower worker: a goroutine that competes for its processor.
				stop := make(chan struct{})
				defer close(stop)
				go func() {
					for {
						select {
						case <-stop:
							return
						//lint:ignore SA5004 the loop spins on purpose: it keeps a core busy
						default:
						}
					}
				}()
			}
		}
		h = m.Fit(ds, opts...)
		if m.mw.balance.active {
			fmt.Printf("balanced: speeds %.6g, shares of %d: %v\n", m.mw.balance.speed, batch, m.mw.balance.shares(workers, batch))
		}
	}
	if len(h.Epoch) > 0 {
		res.Logs = Logs{}
		for k, v := range h.History {
			res.Logs[k] = v[len(v)-1]
		}
	}
	if ckptDir != "" {
		res.Latest = filepath.Base(LatestCheckpoint(ckptDir))
	}
	res.Eval = m.Evaluate(data.FromTensorSlices(x, y).Batch(batch, false), Verbose(0))
	for _, w := range m.GetWeights() {
		res.Weights = append(res.Weights, w.Data())
	}
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	if m.mw.bucketer != nil {
		fmt.Printf("buckets %d, steps summed from shared memory %d\n", m.mw.bucketer.NumBuckets(), m.counters.sharedTermSteps.Load())
	}
	fmt.Printf("worker %d of %d: loss %.6f accuracy %.4f\n", index, workers, res.Logs["loss"], res.Logs["accuracy"])
	return os.WriteFile(fmt.Sprintf("%s.%d", os.Getenv("GODIST_KERAS_MW_OUT"), index), b, 0o644)
}

// launchMW runs the helper as a job of n workers and returns each worker's result.
func launchMW(t *testing.T, mode string, n, batch, epochs int, extraEnv ...string) ([]mwResult, string, error) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "result")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var log bytes.Buffer
	env := append([]string{mwHelperEnv + "=" + mode, "GODIST_KERAS_MW_OUT=" + out,
		"GODIST_KERAS_MW_BATCH=" + strconv.Itoa(batch), "GODIST_KERAS_MW_EPOCHS=" + strconv.Itoa(epochs)}, extraEnv...)
	err := cluster.Launch(ctx, cluster.LaunchSpec{Workers: n, Program: os.Args[0], Args: []string{"-test.run=^$"},
		Env: env, Output: &log, GracePeriod: time.Second})
	if err != nil {
		return nil, log.String(), err
	}
	res := make([]mwResult, n)
	for i := range n {
		b, err := os.ReadFile(fmt.Sprintf("%s.%d", out, i))
		if err != nil {
			return nil, log.String(), err
		}
		if err := json.Unmarshal(b, &res[i]); err != nil {
			return nil, log.String(), fmt.Errorf("worker %d result: %w", i, err)
		}
	}
	return res, log.String(), nil
}

// maxWeightDiff returns the largest absolute difference between two weight lists.
func maxWeightDiff(t *testing.T, a, b [][]float32) float64 {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("weight lists of %d and %d tensors", len(a), len(b))
	}
	d := 0.0
	for i := range a {
		if len(a[i]) != len(b[i]) {
			t.Fatalf("weight %d has %d and %d values", i, len(a[i]), len(b[i]))
		}
		for j := range a[i] {
			d = math.Max(d, math.Abs(float64(a[i][j]-b[i][j])))
		}
	}
	return d
}

// TestMultiWorkerFitMatchesOneWorker: two worker processes, each training on half of every
// global batch of 16, end with the weights (and logs) of one worker training on batches of 16.
// With a 1024-unit hidden layer, its kernel's bucket lies in the memory the workers share and
// the optimizer sums the two workers' gradients as it reads them, every step after the first.
func TestMultiWorkerFitMatchesOneWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes; skipped under -short")
	}
	const batch, epochs = 16, 2
	for _, width := range []struct {
		name    string
		env     []string
		buckets string
	}{
		{"8 units", nil, "buckets 5, steps summed from shared memory 0"},
		// 12 steps: the first runs the ring, the rest read the workers' memory.
		{"1024 units", []string{"GODIST_KERAS_MW_WIDTH=1024"}, "buckets 6, steps summed from shared memory 11"},
	} {
		t.Run(width.name, func(t *testing.T) {
			one, log1, err := launchMW(t, "fit", 1, batch, epochs, width.env...)
			if err != nil {
				t.Fatalf("one worker: %v\n%s", err, log1)
			}
			// The default GOMAXPROCS (more than one P on a multi-core machine) runs the
			// backward pass in segments that overlap the all-reduce; GOMAXPROCS=1 runs it in
			// one pass.
			for _, tc := range []struct {
				name string
				env  []string
			}{
				{"default GOMAXPROCS", nil},
				{"GOMAXPROCS=1", []string{"GOMAXPROCS=1"}},
			} {
				t.Run(tc.name, func(t *testing.T) {
					checkTwoWorkersMatchOne(t, one, batch, epochs, width.buckets, append(tc.env, width.env...))
				})
			}
		})
	}
}

// TestMultiWorkerBalancedMatchesOneWorker: with BalanceWorkers, two workers (one slowed by
// a goroutine competing for its processor) split every global batch by their measured
// speeds, agree on the split (the same speeds on both), and still end with one worker's
// weights: the same gradient of the same global batch, grouped differently.
func TestMultiWorkerBalancedMatchesOneWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes; skipped under -short")
	}
	const batch, epochs = 16, 2
	one, log1, err := launchMW(t, "fit", 1, batch, epochs)
	if err != nil {
		t.Fatalf("one worker: %v\n%s", err, log1)
	}
	two, log2, err := launchMW(t, "fit", 2, batch, epochs, "GOMAXPROCS=1", "GODIST_KERAS_MW_BALANCE=1")
	if err != nil {
		t.Fatalf("two workers: %v\n%s", err, log2)
	}
	if d := maxWeightDiff(t, two[0].Weights, two[1].Weights); d != 0 {
		t.Errorf("the two workers' weights differ by up to %g, want identical", d)
	}
	if d := maxWeightDiff(t, one[0].Weights, two[0].Weights); d > 1e-5 {
		t.Errorf("balanced two workers vs one worker: weights differ by up to %g, want <= 1e-5", d)
	}
	for _, key := range []string{"loss", "accuracy"} {
		if a, b := one[0].Logs[key], two[1].Logs[key]; math.Abs(a-b) > 1e-5 {
			t.Errorf("logs[%q]: one worker %g, balanced two workers %g; want the same", key, a, b)
		}
	}
	var lines []string
	for _, w := range []string{"[worker 0] ", "[worker 1] "} {
		i := strings.Index(log2, w+"balanced: ")
		if i < 0 {
			t.Fatalf("%sdid not report balanced shares:\n%s", w, log2)
		}
		line := log2[i+len(w):]
		lines = append(lines, line[:strings.IndexByte(line, '\n')])
	}
	if lines[0] != lines[1] {
		t.Errorf("the workers disagree on the speeds and shares:\n%s\n%s", lines[0], lines[1])
	}
	t.Logf("%s", lines[0])
}

// TestWorkerBalanceShares checks BalanceWorkers's split: equal shares until every worker's
// speed is known or for small batches, then shares in proportion to the speeds, never under
// a quarter of an equal share, summing to the batch.
func TestWorkerBalanceShares(t *testing.T) {
	for _, tc := range []struct {
		name   string
		active bool
		speed  []float64
		b      int
		want   []int
	}{
		{"not active", false, []float64{3, 1}, 128, []int{64, 64}},
		{"speeds unknown", true, nil, 9, []int{5, 4}},
		{"small batch", true, []float64{3, 1}, 7, []int{4, 3}},
		{"3 to 1", true, []float64{3, 1}, 128, []int{88, 40}},
		{"equal", true, []float64{2, 2, 2}, 100, []int{34, 33, 33}},
		{"one very slow", true, []float64{100, 1}, 64, []int{56, 8}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wb := workerBalance{active: tc.active, speed: tc.speed}
			got := wb.shares(len(tc.want), tc.b)
			if !slices.Equal(got, tc.want) {
				t.Errorf("shares(%d, %d) with speeds %v = %v, want %v", len(tc.want), tc.b, tc.speed, got, tc.want)
			}
		})
	}
	// update: a step's rows per second, smoothed; no speeds until every worker measured.
	var wb workerBalance
	wb.update([]float32{64, 0.004, 0, 0})
	if wb.speed != nil {
		t.Errorf("speeds %v after a step that measured one worker of 2, want none", wb.speed)
	}
	wb.update([]float32{64, 0.004, 64, 0.008})
	if want := []float64{16000, 8000}; !slices.EqualFunc(wb.speed, want, func(a, b float64) bool { return math.Abs(a-b) < 1e-6*b }) {
		t.Fatalf("speeds %v, want %v", wb.speed, want)
	}
	wb.update([]float32{80, 0.004, 48, 0.004})
	if want := []float64{16000 + balanceSmoothing*(20000-16000), 8000 + balanceSmoothing*(12000-8000)}; !slices.EqualFunc(wb.speed, want, func(a, b float64) bool { return math.Abs(a-b) < 1e-6*b }) {
		t.Errorf("smoothed speeds %v, want %v", wb.speed, want)
	}
}

// TestMultiWorkerCheckpointAfterFit: when Fit returns on any worker, the chief's checkpoint
// of the last epoch is complete (the workers leave every epoch together), so a worker that
// loads LatestCheckpoint after Fit, as the talk's script does, gets the last epoch's and never
// a file still being written; here the chief is slow at every epoch's end.
func TestMultiWorkerCheckpointAfterFit(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes; skipped under -short")
	}
	dir := t.TempDir()
	res, log, err := launchMW(t, "fit", 2, 16, 3, "GODIST_KERAS_MW_CKPT="+dir)
	if err != nil {
		t.Fatalf("two workers: %v\n%s", err, log)
	}
	for _, r := range res {
		if !strings.HasPrefix(r.Latest, "ckpt_3") {
			t.Errorf("worker %d: LatestCheckpoint after Fit = %q, want the last epoch's ckpt_3", r.Worker, r.Latest)
		}
	}
}

// TestMultiWorkerCustomLoopMatchesOneWorker: the course's custom loop (strategy.Run with a
// step that calls optimizer.ApplyGradients, no explicit all-reduce) in two worker processes
// ends with identical weights on both, equal to one worker's on the same global batches.
func TestMultiWorkerCustomLoopMatchesOneWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes; skipped under -short")
	}
	const batch, epochs = 16, 2
	one, log1, err := launchMW(t, "customloop", 1, batch, epochs)
	if err != nil {
		t.Fatalf("one worker: %v\n%s", err, log1)
	}
	two, log2, err := launchMW(t, "customloop", 2, batch, epochs)
	if err != nil {
		t.Fatalf("two workers: %v\n%s", err, log2)
	}
	if len(one[0].Weights) != 6 || len(two[0].Epochs) != epochs {
		t.Fatalf("one worker reported %d weight tensors, worker 0 of two %d epochs; want 6 and %d", len(one[0].Weights), len(two[0].Epochs), epochs)
	}
	if d := maxWeightDiff(t, two[0].Weights, two[1].Weights); d != 0 {
		t.Errorf("the two workers' weights differ by up to %g after the custom loop, want identical", d)
	}
	if d := maxWeightDiff(t, one[0].Weights, two[0].Weights); d > 1e-5 {
		t.Errorf("custom loop, two workers vs one: weights differ by up to %g, want <= 1e-5", d)
	}
	if d := maxWeightDiff(t, one[0].Weights, two[1].Weights); d > 1e-5 {
		t.Errorf("custom loop, worker 1 of two vs one worker: weights differ by up to %g, want <= 1e-5", d)
	}
}

// checkTwoWorkersMatchOne runs two workers with the extra environment env and compares their
// weights and logs with one's, the result of one worker on the same global batches.
func checkTwoWorkersMatchOne(t *testing.T, one []mwResult, batch, epochs int, buckets string, env []string) {
	t.Helper()
	two, log2, err := launchMW(t, "fit", 2, batch, epochs, env...)
	if err != nil {
		t.Fatalf("two workers: %v\n%s", err, log2)
	}
	if d := maxWeightDiff(t, two[0].Weights, two[1].Weights); d != 0 {
		t.Errorf("the two workers' weights differ by up to %g, want identical", d)
	}
	if d := maxWeightDiff(t, one[0].Weights, two[0].Weights); d > 1e-5 {
		t.Errorf("two workers of batch %d/2 vs one worker of batch %d: weights differ by up to %g, want <= 1e-5", batch, batch, d)
	}
	if one[0].Logs["loss"] <= 0 || len(one[0].Weights) != 6 {
		t.Errorf("one worker: loss %g and %d weight tensors; want a positive loss and 6", one[0].Logs["loss"], len(one[0].Weights))
	}
	for _, key := range []string{"loss", "accuracy"} {
		a, b := one[0].Logs[key], two[1].Logs[key]
		if math.Abs(a-b) > 1e-5 {
			t.Errorf("logs[%q]: one worker %g, two workers %g; want the same (metrics over the global batch)", key, a, b)
		}
		if e1, e2 := one[0].Eval[key], two[0].Eval[key]; math.Abs(e1-e2) > 1e-5 {
			t.Errorf("Evaluate %q: one worker %g, two workers %g", key, e1, e2)
		}
	}
	if acc := two[0].Logs["accuracy"]; acc < 0 || acc > 1 {
		t.Errorf("accuracy %g outside [0, 1]", acc)
	}
	if !strings.Contains(log2, "[worker 1] worker 1 of 2") {
		t.Errorf("launch output lacks worker 1's line:\n%s", log2)
	}
	if !strings.Contains(log2, "[worker 0] "+buckets) {
		t.Errorf("worker 0 did not say %q:\n%s", buckets, log2)
	}
	if strings.Contains(log2, "Fit: AUTO sharding") {
		t.Errorf("DATA policy printed the AUTO warning:\n%s", log2)
	}
}

// TestShardModeOf checks the AutoShardPolicy rules of Fit across workers.
func TestShardModeOf(t *testing.T) {
	tr := transport.NewMem(2)
	s := distribute.NewMultiWorkerMirroredStrategy(distribute.WithTransport(tr[1]))
	var m *Model
	s.Scope(func() { m = Sequential(layers.Dense(1)) })
	x, y := mwData(5)
	base := data.FromTensorSlices(x, y).Batch(5, false)
	for _, tc := range []struct {
		policy    data.AutoShardPolicy
		want      shardMode
		wantRows  int
		wantBatch int
		wantPanic string
	}{
		{data.AutoShardAuto, shardData, 2, 5, ""},
		{data.AutoShardData, shardData, 2, 5, ""},
		{data.AutoShardOff, shardWhole, 5, 10, ""},
		{data.AutoShardHint, shardWhole, 5, 10, ""},
		{data.AutoShardFile, 0, 0, 0, "reads no files"},
	} {
		t.Run(tc.policy.String(), func(t *testing.T) {
			defer func() {
				r := recover()
				if tc.wantPanic == "" && r != nil {
					t.Fatalf("shardModeOf(%v) panicked: %v", tc.policy, r)
				}
				if tc.wantPanic != "" && (r == nil || !strings.Contains(fmt.Sprint(r), tc.wantPanic)) {
					t.Fatalf("shardModeOf(%v) = panic %v, want one containing %q", tc.policy, r, tc.wantPanic)
				}
			}()
			got := m.shardModeOf("Fit", base.WithOptions(data.Options{AutoShardPolicy: tc.policy}))
			if got != tc.want {
				t.Errorf("shardModeOf(%v) = %d, want %d", tc.policy, got, tc.want)
			}
			xs, _, gb, err := m.workerShare(got, x, y, true)
			if err != nil {
				t.Fatal(err)
			}
			if xs.Shape()[0] != tc.wantRows || gb != tc.wantBatch {
				t.Errorf("workerShare(%v) on worker 1 of 2 = %d rows, global batch %d; want %d, %d", tc.policy, xs.Shape()[0], gb, tc.wantRows, tc.wantBatch)
			}
		})
	}
}
