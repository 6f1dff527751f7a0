package keras

import (
	"math"
	"slices"
	"testing"

	"godist/distlib/data"
	"godist/distlib/device"
	"godist/distlib/distribute"
	"godist/distlib/keras/layers"
	"godist/distlib/tensor"
	"godist/internal/leakcheck"
)

// splitCPU splits the CPU into n logical devices for one test.
func splitCPU(t *testing.T, n int) {
	t.Helper()
	device.Reset()
	cfg := make([]device.LogicalDeviceConfiguration, n)
	if err := device.SetLogicalDeviceConfiguration(device.ListPhysicalDevices("CPU")[0], cfg); err != nil {
		t.Fatalf("SetLogicalDeviceConfiguration(%d) = %v", n, err)
	}
	t.Cleanup(device.Reset)
}

// trainIn builds, compiles and trains a small CNN inside strategy s (nil: no scope) and
// returns its weights and last logs.
func trainIn(t *testing.T, s distribute.Strategy, ds *data.Dataset) ([]*tensor.Tensor, Logs) {
	t.Helper()
	SetRandomSeed(21)
	var m *Model
	build := func() {
		m = Sequential(
			layers.Input(6, 6),
			layers.Reshape([]int{6, 6, 1}),
			layers.Conv2D(3, 3, layers.ReLU),
			layers.MaxPooling2D(2),
			layers.Flatten(),
			layers.Dense(2))
		m.Compile(SGD(0.1, Momentum(0.5)), SparseCategoricalCrossentropy(true), "accuracy")
	}
	if s == nil {
		build()
	} else {
		s.Scope(build)
	}
	quiet(m)
	h := m.Fit(ds, Epochs(2), Verbose(0))
	logs := Logs{}
	for k, v := range h.History {
		logs[k] = v[len(v)-1]
	}
	return m.GetWeights(), logs
}

func imageData() *data.Dataset {
	n := 20
	x := tensor.RandomNormal([]int{n, 6, 6}, 0, 1, 4).Data()
	y := make([]float32, n)
	for i := 0; i < n; i++ {
		y[i] = float32(i % 2)
		for j := 0; j < 18; j++ { // class 1: bright top half
			x[i*36+j] += 2 * y[i]
		}
	}
	// Batches of 7, 7, 6: uneven splits over replicas.
	return data.FromTensorSlices(tensor.MustNew([]int{n, 6, 6}, x), tensor.MustNew([]int{n}, y)).Batch(7, false)
}

func TestStrategiesTrainAlike(t *testing.T) {
	leakcheck.Check(t)
	splitCPU(t, 3)
	ds := imageData()
	want, wantLogs := trainIn(t, distribute.NewOneDeviceStrategy("/cpu:0"), ds)
	tests := []struct {
		name string
		s    distribute.Strategy
	}{
		{"default", nil},
		{"mirrored 2", distribute.NewMirroredStrategy(distribute.WithDevices("/cpu:0", "/cpu:1"))},
		{"mirrored 3", distribute.NewMirroredStrategy()},
		{"central storage", distribute.NewCentralStorageStrategy(distribute.WithDevices("/cpu:1", "/cpu:2"))},
	}
	for _, tc := range tests {
		got, logs := trainIn(t, tc.s, ds)
		for i := range want {
			a, b := want[i].Data(), got[i].Data()
			for j := range a {
				if math.Abs(float64(a[j]-b[j])) > 1e-4 {
					t.Fatalf("%s: weight %d value %d = %v, one-device training gives %v", tc.name, i, j, b[j], a[j])
				}
			}
		}
		for k, v := range wantLogs {
			if math.Abs(logs[k]-v) > 1e-4 {
				t.Errorf("%s: logs[%s] = %v, one-device training gives %v", tc.name, k, logs[k], v)
			}
		}
	}
}

// TestFitRecycledBatchesTrainAsFresh: Fit hands each batch back to its iterator after the
// step (data.Iterator.Recycle), so the next batch is written into the same storage; under
// every strategy that trains in sync, the weights and logs are bit for bit those of a Fit
// over fresh batches (a Map after Batch: nothing to recycle), with and without a Prefetch
// after the Batch. A layer or strategy that kept
// a batch past its step would read the next one's rows instead.
func TestFitRecycledBatchesTrainAsFresh(t *testing.T) {
	leakcheck.Check(t)
	splitCPU(t, 3)
	ds := imageData()
	fresh := ds.Map(func(e data.Element) data.Element { return e })
	for _, tc := range []struct {
		name string
		s    func() distribute.Strategy
	}{
		{"default", func() distribute.Strategy { return nil }},
		{"one device", func() distribute.Strategy { return distribute.NewOneDeviceStrategy("/cpu:1") }},
		{"mirrored 2", func() distribute.Strategy {
			return distribute.NewMirroredStrategy(distribute.WithDevices("/cpu:0", "/cpu:1"))
		}},
		{"mirrored 3", func() distribute.Strategy { return distribute.NewMirroredStrategy() }},
		{"central storage", func() distribute.Strategy {
			return distribute.NewCentralStorageStrategy(distribute.WithDevices("/cpu:1", "/cpu:2"))
		}},
	} {
		want, wantLogs := trainIn(t, tc.s(), fresh)
		for _, recycled := range []struct {
			name string
			ds   *data.Dataset
		}{{"batch", ds}, {"batch, prefetch", ds.Prefetch(2)}} {
			got, logs := trainIn(t, tc.s(), recycled.ds)
			for i := range want {
				if !slices.Equal(got[i].Data(), want[i].Data()) {
					t.Fatalf("%s, %s: weight %d = %v over recycled batches, %v over fresh ones", tc.name, recycled.name, i, got[i].Data(), want[i].Data())
				}
			}
			for k, v := range wantLogs {
				if logs[k] != v {
					t.Errorf("%s, %s: logs[%s] = %v over recycled batches, %v over fresh ones", tc.name, recycled.name, k, logs[k], v)
				}
			}
		}
	}
}

func TestMirroredCopiesStayEqualAndPlaced(t *testing.T) {
	splitCPU(t, 2)
	s := distribute.NewMirroredStrategy()
	var m *Model
	s.Scope(func() {
		m = Sequential(layers.Dense(2, layers.InputShape(3)))
		m.Compile(Adam(0.01), SparseCategoricalCrossentropy(true))
	})
	quiet(m)
	x := tensor.RandomNormal([]int{8, 3}, 0, 1, 1)
	y := tensor.MustNew([]int{8}, []float32{0, 1, 0, 1, 1, 0, 1, 0})
	m.Fit(data.FromTensorSlices(x, y).Batch(4, false), Epochs(1), Verbose(0))
	devs := s.Extended().ReplicaDevices()
	for r := range devs {
		for i, v := range m.ReplicaTrainableVariables(r) {
			if v.Device() != devs[r] {
				t.Errorf("replica %d variable %s on %q, want %q", r, v.Name(), v.Device(), devs[r])
			}
			a, b := m.ReplicaTrainableVariables(0)[i].Value().Data(), v.Value().Data()
			for j := range a {
				if a[j] != b[j] {
					t.Fatalf("replica %d variable %s differs from replica 0", r, v.Name())
				}
			}
		}
	}
}

func TestCustomLoopUnderMirroredMatchesFit(t *testing.T) {
	leakcheck.Check(t)
	splitCPU(t, 2)
	x, y := blobs(24, 8)
	ds := data.FromTensorSlices(x, y).Batch(8, false)
	build := func(s distribute.Strategy) (m *Model, opt *Optimizer) {
		SetRandomSeed(4)
		s.Scope(func() {
			m = Sequential(layers.Dense(4, layers.Tanh, layers.InputShape(2)), layers.Dense(2))
			opt = Adam(0.05)
			m.Compile(opt, SparseCategoricalCrossentropy(true))
		})
		quiet(m)
		return m, opt
	}
	ref, _ := build(distribute.NewOneDeviceStrategy("/cpu:0"))
	ref.Fit(ds, Epochs(2), Verbose(0))

	s := distribute.NewMirroredStrategy()
	m, opt := build(s)
	lossObj := SparseCategoricalCrossentropy(true, WithReduction(ReductionNone))
	trainAcc := SparseCategoricalAccuracy("train_accuracy")
	dist := s.ExperimentalDistributeDataset(ds)
	for epoch := 0; epoch < 2; epoch++ {
		it := dist.Iterator()
		for inputs, ok := it.Next(); ok; inputs, ok = it.Next() {
			s.Run(func(ctx *distribute.ReplicaContext, el data.Element) *tensor.Tensor {
				tape := tensor.NewGradientTape()
				pred := m.Call(el[0], true)
				loss := distribute.ComputeAverageLoss(lossObj.Call(el[1], pred), 8)
				vars := m.TrainableVariables()
				grads := tape.Gradient(loss, vars)
				grads = ctx.AllReduceList(distribute.ReduceSum, grads)
				if err := opt.ApplyGradients(grads, vars); err != nil {
					t.Error(err)
				}
				trainAcc.UpdateState(el[1], pred)
				return loss
			}, inputs)
		}
	}
	if got := opt.Iterations(); got != 6 {
		t.Errorf("optimizer iterations = %d, want 6 (3 steps x 2 epochs, replicas counted once)", got)
	}
	if trainAcc.Result() <= 0 {
		t.Errorf("train accuracy = %v, want > 0", trainAcc.Result())
	}
	want := ref.GetWeights()
	for r := 0; r < 2; r++ {
		for i, v := range m.ReplicaTrainableVariables(r) {
			a, b := want[i].Data(), v.Value().Data()
			for j := range a {
				if math.Abs(float64(a[j]-b[j])) > 1e-4 {
					t.Fatalf("replica %d %s[%d] = %v after the custom loop, Fit gives %v", r, v.Name(), j, b[j], a[j])
				}
			}
		}
	}
}

// TestFitReusedOutputsMatchFresh: Fit keeps a convolution layer's pooled output in storage
// reused from step to step (Model.stepReuse); the weights it trains are those of the same
// Fit with fresh storage at every step, bit for bit, on one replica and on two (each with
// its own storage), over batches of 8 and a last one of 4.
func TestFitReusedOutputsMatchFresh(t *testing.T) {
	leakcheck.Check(t)
	splitCPU(t, 2)
	ds := threeClassImages(20, 10, 5).Batch(8, false)
	train := func(s distribute.Strategy, fresh bool) []*tensor.Tensor {
		SetRandomSeed(5)
		var m *Model
		s.Scope(func() {
			m = Sequential(layers.Input(10, 10, 1), layers.Conv2D(16, 3, layers.ReLU), layers.MaxPooling2D(2),
				layers.Flatten(), layers.Dense(3))
			m.Compile(Adam(0.01), SparseCategoricalCrossentropy(true))
		})
		quiet(m)
		if fresh { // nil storage for every layer of every replica: fresh outputs each step
			m.reuse = make([][]*tensor.Reuse, len(s.Extended().ReplicaDevices()))
			for r := range m.reuse {
				m.reuse[r] = make([]*tensor.Reuse, len(m.layers))
			}
		}
		m.Fit(ds, Epochs(3), Verbose(0))
		if !fresh && m.reuse[0][0] == nil {
			t.Fatalf("Fit made no storage to reuse")
		}
		return m.GetWeights()
	}
	for _, tc := range []struct {
		name string
		s    func() distribute.Strategy
	}{
		{"one device", func() distribute.Strategy { return distribute.NewOneDeviceStrategy("/cpu:0") }},
		{"mirrored 2", func() distribute.Strategy {
			return distribute.NewMirroredStrategy(distribute.WithDevices("/cpu:0", "/cpu:1"))
		}},
	} {
		got, want := train(tc.s(), false), train(tc.s(), true)
		for i := range want {
			for j, v := range want[i].Data() {
				if g := got[i].Data()[j]; g != v {
					t.Fatalf("%s: weight %d [%d] = %v with reused outputs, %v with fresh ones", tc.name, i, j, g, v)
				}
			}
		}
	}
}

// wrappedOps embeds the default ops to wrap BatchAllReduce, as a user's counting or
// logging ops would: Fit must call it.
type wrappedOps struct {
	*distribute.ReductionToOneDevice
	calls int
}

func (w *wrappedOps) BatchAllReduce(op distribute.ReduceOp, perReplica [][]*tensor.Tensor, devices []string) ([][]*tensor.Tensor, error) {
	w.calls++
	return w.ReductionToOneDevice.BatchAllReduce(op, perReplica, devices)
}

// TestMirroredFitSumsTermsAsItReads: under MirroredStrategy on CPUs with the default ops,
// every replica's optimizer reads all replicas' gradients where they lie and sums them as
// it reads; it trains the same weights, bit for bit, and logs the same losses, as the ops'
// all-reduce (forced here by ops that wrap it), for 2 and 3 replicas, and the wrapper's
// BatchAllReduce is called at every step.
func TestMirroredFitSumsTermsAsItReads(t *testing.T) {
	leakcheck.Check(t)
	splitCPU(t, 3)
	ds := threeClassImages(30, 6, 7).Batch(9, false)
	var termSteps int64 // steps of the last model that summed the terms as they read them
	train := func(s distribute.Strategy) ([]*tensor.Tensor, []float64) {
		SetRandomSeed(6)
		var m *Model
		s.Scope(func() {
			m = Sequential(layers.Input(6, 6, 1), layers.Conv2D(4, 3, layers.ReLU), layers.Flatten(),
				layers.Dense(8, layers.ReLU), layers.Dense(3))
			m.Compile(Adam(0.01), SparseCategoricalCrossentropy(true))
		})
		quiet(m)
		h := m.Fit(ds, Epochs(3), Verbose(0))
		termSteps = m.counters.replicaTermSteps.Load()
		return m.GetWeights(), h.History["loss"]
	}
	for _, devs := range [][]string{{"/cpu:0", "/cpu:1"}, {"/cpu:0", "/cpu:1", "/cpu:2"}} {
		got, gotLoss := train(distribute.NewMirroredStrategy(distribute.WithDevices(devs...)))
		if steps := termSteps; steps != 3*4 {
			t.Fatalf("%d replicas: %d steps summed the terms as they read them, want 12", len(devs), steps)
		}
		ops := &wrappedOps{ReductionToOneDevice: distribute.NewReductionToOneDevice()}
		want, wantLoss := train(distribute.NewMirroredStrategy(distribute.WithDevices(devs...), distribute.WithCrossDeviceOps(ops)))
		if steps := termSteps; steps != 0 || ops.calls != 3*4 {
			t.Fatalf("%d replicas, wrapped ops: %d steps took the terms, %d called BatchAllReduce, want 0 and 12", len(devs), steps, ops.calls)
		}
		for i := range want {
			for j, v := range want[i].Data() {
				if g := got[i].Data()[j]; g != v {
					t.Fatalf("%d replicas: weight %d [%d] = %v summing as it reads, %v through the all-reduce", len(devs), i, j, g, v)
				}
			}
		}
		if !slices.Equal(gotLoss, wantLoss) {
			t.Fatalf("%d replicas: losses %v summing as it reads, %v through the all-reduce", len(devs), gotLoss, wantLoss)
		}
	}
}

// threeClassImages is n random side x side x 1 images (seed) labelled 0, 1, 2 in turn.
func threeClassImages(n, side int, seed uint64) *data.Dataset {
	x := tensor.RandomNormal([]int{n, side, side, 1}, 0, 1, seed)
	y := make([]float32, n)
	for i := range y {
		y[i] = float32(i % 3)
	}
	return data.FromTensorSlices(x, tensor.MustNew([]int{n}, y))
}
