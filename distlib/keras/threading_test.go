package keras

import (
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"

	"godist/distlib/device"
	"godist/distlib/distribute"
	"godist/distlib/keras/layers"
	"godist/distlib/tensor"
)

// goroutinesCreated returns how many goroutines the process has started so far.
func goroutinesCreated(t *testing.T) uint64 {
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		t.Skip("runtime/metrics has no goroutines-created counter")
	}
	return s[0].Value.Uint64()
}

// TestIntraOpParallelismThreads: the setting caps the goroutines a matrix multiply splits
// into (tf.config.threading.set_intra_op_parallelism_threads).
func TestIntraOpParallelismThreads(t *testing.T) {
	device.Reset()
	t.Cleanup(device.Reset)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(2, runtime.GOMAXPROCS(0))))
	if device.Threads(device.Default()) < 2 {
		t.Skip("one core: kernels run in one goroutine whatever the setting")
	}
	a := tensor.RandomNormal([]int{512, 256}, 0, 1, 1)
	b := tensor.RandomNormal([]int{256, 256}, 0, 1, 2)
	const calls = 5
	for _, tc := range []struct {
		intra          int
		threads        int
		wantGoroutines bool
	}{
		{0, device.Threads(device.Default()), true},
		{1, 1, false},
		{2, 2, true},
	} {
		if err := device.SetIntraOpParallelismThreads(tc.intra); err != nil {
			t.Fatal(err)
		}
		if got := device.Threads(device.Default()); got != tc.threads || device.GetIntraOpParallelismThreads() != tc.intra {
			t.Errorf("intra %d: Threads = %d, want %d", tc.intra, got, tc.threads)
		}
		// Goroutines other code starts meanwhile (a previous test's servers) only add to
		// the count: the fewest of three tries is the kernels' own.
		started := uint64(1 << 62)
		for range 3 {
			before := goroutinesCreated(t)
			for range calls {
				tensor.MatMul(a, b, false, false)
			}
			started = min(started, goroutinesCreated(t)-before)
		}
		if tc.wantGoroutines && started < calls || !tc.wantGoroutines && started >= calls {
			t.Errorf("intra %d: %d MatMuls started %d goroutines; want %v at least one each", tc.intra, calls, started, tc.wantGoroutines)
		}
	}
	if err := device.SetIntraOpParallelismThreads(-1); err == nil {
		t.Error("SetIntraOpParallelismThreads(-1) = nil, want an error")
	}
}

// TestInterOpParallelismThreads: at most n matrix kernels run at once, from goroutines of
// one's own or from a MirroredStrategy's replicas, and results do not change.
func TestInterOpParallelismThreads(t *testing.T) {
	splitCPU(t, 2)
	a := tensor.RandomNormal([]int{128, 128}, 0, 1, 1)
	want := tensor.MatMul(a, a, false, false).Data()
	for _, n := range []int{1, 2} {
		if err := device.SetInterOpParallelismThreads(n); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 10 {
					if d := maxAbsDiff(tensor.MatMul(a, a, false, false).Data(), want); d > 0 {
						t.Errorf("inter %d: MatMul differs by %g", n, d)
					}
				}
			}()
		}
		wg.Wait()
		if got := device.PeakConcurrentOps(); got < 1 || got > n || device.GetInterOpParallelismThreads() != n {
			t.Errorf("inter %d: %d matrix kernels ran at once", n, got)
		}
	}

	// Fit with 2 replicas and one slot trains as without a limit.
	x, y := blobs(64, 2)
	fit := func() [][]float32 {
		SetRandomSeed(3)
		var m *Model
		distribute.NewMirroredStrategy(distribute.WithDevices("/cpu:0", "/cpu:1")).Scope(func() {
			m = Sequential(layers.Dense(32, layers.ReLU, layers.InputShape(2)), layers.Dense(2))
			m.Compile(SGD(0.1), SparseCategoricalCrossentropy(true))
		})
		quiet(m)
		m.Fit(x, y, BatchSize(32), Shuffle(false), Epochs(2), Verbose(0))
		var out [][]float32
		for _, w := range m.GetWeights() {
			out = append(out, w.Data())
		}
		return out
	}
	if err := device.SetInterOpParallelismThreads(0); err != nil {
		t.Fatal(err)
	}
	free := fit()
	if err := device.SetInterOpParallelismThreads(1); err != nil {
		t.Fatal(err)
	}
	limited := fit()
	if got := device.PeakConcurrentOps(); got != 1 {
		t.Errorf("Fit on 2 replicas with inter-op 1: %d matrix kernels at once", got)
	}
	for i := range free {
		if d := maxAbsDiff(free[i], limited[i]); d > 1e-6 {
			t.Errorf("weight %d differs by %g with inter-op 1", i, d)
		}
	}
	if err := device.SetInterOpParallelismThreads(-2); err == nil {
		t.Error("SetInterOpParallelismThreads(-2) = nil, want an error")
	}
	device.Reset()
	if device.GetInterOpParallelismThreads() != 0 || device.GetIntraOpParallelismThreads() != 0 {
		t.Error("device.Reset keeps the thread settings")
	}
}
