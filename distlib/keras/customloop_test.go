package keras

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"godist/distlib/data"
	"godist/distlib/distribute"
	"godist/distlib/keras/layers"
	"godist/distlib/tensor"
	"godist/distlib/transport"
	"godist/internal/leakcheck"
)

// italianGuideLoop is the custom training loop of the course's Italian guide to
// tf.distribute, translated line by line (no AllReduceList: ApplyGradients inside Run
// aggregates the replicas' gradients as TensorFlow's apply_gradients does). It returns the
// model after epochs passes over ds. With init non-nil the model starts from those
// weights; initial, when non-nil, receives the weights it starts from.
func italianGuideLoop(t *testing.T, strategy distribute.Strategy, ds *data.Dataset, globalBatchSize, epochs int,
	init []*tensor.Tensor, initial *[]*tensor.Tensor) *Model {
	t.Helper()
	if init == nil {
		SetRandomSeed(5)
	}
	var model *Model
	var optimizer *Optimizer
	// Scopes are process-wide: in-process workers (TestCustomLoopApplyGradientsAcrossWorkers)
	// open theirs one after the other, and build their models (a collective: the chief
	// broadcasts the initial values) together, after their scopes.
	inProcessScopes.Lock()
	strategy.Scope(func() {
		model = Sequential(layers.Dense(1))
		optimizer = SGD(0.01)
	})
	inProcessScopes.Unlock()
	if err := model.Build(1); err != nil {
		t.Fatal(err)
	}
	if init != nil {
		if err := model.SetWeights(init); err != nil {
			t.Fatal(err)
		}
	}
	if initial != nil {
		*initial = model.GetWeights()
	}
	distDataset := strategy.ExperimentalDistributeDataset(ds)

	lossObject := BinaryCrossentropy(true, WithReduction(ReductionNone))
	computeLoss := func(labels, predictions *tensor.Tensor) *tensor.Tensor {
		perExampleLoss := lossObject.Call(labels, predictions)
		return distribute.ComputeAverageLoss(perExampleLoss, globalBatchSize)
	}
	trainStep := func(ctx *distribute.ReplicaContext, inputs data.Element) *tensor.Tensor {
		features, labels := inputs[0], inputs[1]
		tape := tensor.NewGradientTape()
		predictions := model.Call(features, true)
		loss := computeLoss(labels, predictions)
		gradients := tape.Gradient(loss, model.TrainableVariables())
		if err := optimizer.ApplyGradients(gradients, model.TrainableVariables()); err != nil {
			t.Error(err)
		}
		return loss
	}
	distributedTrainStep := func(distInputs *distribute.DistributedValue) *tensor.Tensor {
		perReplicaLosses := strategy.Run(trainStep, distInputs)
		return strategy.Reduce(distribute.ReduceSum, perReplicaLosses, -1)
	}
	for epoch := 0; epoch < epochs; epoch++ {
		it := distDataset.Iterator()
		for inputs, ok := it.Next(); ok; inputs, ok = it.Next() {
			distributedTrainStep(inputs)
		}
	}
	if got, want := optimizer.Iterations(), int64(epochs*ds.Cardinality()); got != want {
		t.Errorf("%s: optimizer.Iterations() = %d, want %d (one per step, replicas counted once)", strategy.Name(), got, want)
	}
	return model
}

// TestCustomLoopApplyGradientsAggregates: every replica ends with the same weights, equal to
// the single-device run's, whether the data is the guide's constant example or varies.
func TestCustomLoopApplyGradientsAggregates(t *testing.T) {
	leakcheck.Check(t)
	splitCPU(t, 3)
	guide := data.FromTensors(tensor.MustNew([]int{1}, []float32{1}), tensor.MustNew([]int{1}, []float32{1})).Repeat(100).Batch(10, false)
	n := 60
	x := tensor.RandomNormal([]int{n, 1}, 0, 1, 7)
	y := make([]float32, n)
	for i, v := range x.Data() {
		if v > 0.3 {
			y[i] = 1
		}
	}
	varied := data.FromTensorSlices(x, tensor.MustNew([]int{n, 1}, y)).Batch(12, false)
	for _, tc := range []struct {
		name  string
		ds    *data.Dataset
		batch int
	}{{"guide", guide, 10}, {"varied", varied, 12}} {
		want := italianGuideLoop(t, distribute.NewOneDeviceStrategy("/cpu:0"), tc.ds, tc.batch, 3, nil, nil).GetWeights()
		for _, s := range []distribute.Strategy{
			distribute.NewMirroredStrategy(distribute.WithDevices("/cpu:0", "/cpu:1")),
			distribute.NewMirroredStrategy(),
			distribute.NewCentralStorageStrategy(distribute.WithDevices("/cpu:1", "/cpu:2")),
		} {
			m := italianGuideLoop(t, s, tc.ds, tc.batch, 3, nil, nil)
			for r := range s.Extended().ReplicaDevices() {
				for i, v := range m.ReplicaTrainableVariables(r) {
					a, b := want[i].Data(), v.Value().Data()
					for j := range a {
						if math.Abs(float64(a[j]-b[j])) > 1e-5 {
							t.Fatalf("%s, %s with %d replicas: replica %d %s[%d] = %v, the single-device loop gives %v",
								tc.name, s.Name(), s.NumReplicasInSync(), r, v.Name(), j, b[j], a[j])
						}
					}
				}
			}
		}
	}
}

// TestCustomLoopApplyGradientsAcrossWorkers: the same loop on two workers (one replica
// each, in-memory transport) ends with the single-device weights on both: ApplyGradients
// sums across workers too.
func TestCustomLoopApplyGradientsAcrossWorkers(t *testing.T) {
	leakcheck.Check(t)
	splitCPU(t, 2)
	n := 48
	x := tensor.RandomNormal([]int{n, 1}, 0, 1, 9)
	y := make([]float32, n)
	for i, v := range x.Data() {
		if v < -0.2 {
			y[i] = 1
		}
	}
	ds := data.FromTensorSlices(x, tensor.MustNew([]int{n, 1}, y)).Batch(8, false).
		WithOptions(data.Options{AutoShardPolicy: data.AutoShardData})
	// The workers build their models at once, drawing from the package's one seed
	// sequence in any order: the chief's initial weights (every worker starts from them)
	// are the reference's too.
	got := make([][]*tensor.Tensor, 2)
	initial := make([][]*tensor.Tensor, 2)
	memWorkers(t, 2, 20*time.Second, func(w int, s *distribute.MultiWorkerMirroredStrategy) {
		got[w] = italianGuideLoop(t, s, ds, 8, 2, nil, &initial[w]).GetWeights()
	})
	if initial[0] == nil {
		t.Fatal("the chief did not build its model")
	}
	want := italianGuideLoop(t, distribute.NewOneDeviceStrategy("/cpu:0"), ds, 8, 2, initial[0], nil).GetWeights()
	for w, ws := range got {
		if ws == nil {
			continue
		}
		for i := range initial[0] {
			if a, b := initial[0][i].Data(), initial[w][i].Data(); math.Abs(float64(a[0]-b[0])) > 0 {
				t.Errorf("worker %d starts from weight %d = %v, the chief from %v (the chief broadcasts them)", w, i, b, a)
			}
		}
		for i := range want {
			a, b := want[i].Data(), ws[i].Data()
			for j := range a {
				if math.Abs(float64(a[j]-b[j])) > 1e-5 {
					t.Fatalf("worker %d: weight %d[%d] = %v, the single-device loop gives %v", w, i, j, b[j], a[j])
				}
			}
		}
	}
}

// TestFitInsideAnotherStrategysScope: a model built outside any scope and fitted inside a
// MirroredStrategy's scope would train on the default strategy: Fit refuses, naming both.
func TestFitInsideAnotherStrategysScope(t *testing.T) {
	splitCPU(t, 2)
	m := Sequential(layers.Dense(1, layers.InputShape(1)))
	m.Compile(SGD(0.1), MeanSquaredError())
	quiet(m)
	ds := data.FromTensorSlices(tensor.MustNew([]int{4, 1}, []float32{1, 2, 3, 4}), tensor.MustNew([]int{4, 1}, []float32{2, 4, 6, 8})).Batch(2, false)
	s := distribute.NewMirroredStrategy()
	var got any
	s.Scope(func() {
		defer func() { got = recover() }()
		m.Fit(ds, Verbose(0))
	})
	msg := fmt.Sprint(got)
	if got == nil || !strings.Contains(msg, "inside the scope of MirroredStrategy") || !strings.Contains(msg, "built under DefaultDistributionStrategy") {
		t.Fatalf("Fit inside another strategy's scope = panic %v, want an error naming both strategies", got)
	}
	m.Fit(ds, Verbose(0)) // outside the scope it trains
}

// TestPSCustomLoopKerasModel: TensorFlow's ClusterCoordinator custom loop, translated line
// by line (tutorial "Parameter server training", section "Custom training loop"): the model
// and the optimizer are made in the strategy's scope, the step calls the model, takes the
// gradients and applies them with the Keras optimizer. The variables live on the ps tasks:
// strategy.Variables() holds them, the steps update them there (read back from the ps),
// and the model reaches the accuracy band of Fit.
func TestPSCustomLoopKerasModel(t *testing.T) {
	train, test := mnistSmall(t)
	SetRandomSeed(1)
	local := mnistModel()
	local.Fit(train, Epochs(1), Verbose(0))
	want := local.Evaluate(test, Verbose(0))["accuracy"]

	strategy, servers := psStrategy(t, 2, 2)
	SetRandomSeed(1)
	var model *Model
	var optimizer *Optimizer
	strategy.Scope(func() {
		model = Sequential(layers.Flatten(layers.InputShape(28, 28, 1)), layers.Dense(32, layers.ReLU), layers.Dense(10))
		optimizer = Adam(2e-3)
	})
	if got := len(strategy.Variables()); got != 4 {
		t.Fatalf("strategy.Variables() after building the model in its scope: %d variables, want the model's 4", got)
	}
	initial := strategy.Variables()[0].Value()
	coordinator := distribute.NewClusterCoordinator(strategy)
	defer coordinator.Close()
	perWorkerDataset := coordinator.CreatePerWorkerDataset(func(ctx *distribute.InputContext) *data.Dataset {
		return train.Shard(ctx.NumInputPipelines, ctx.InputPipelineID).Repeat(-1)
	})
	perWorkerIterator := perWorkerDataset.Iterator()
	defer perWorkerIterator.Close()
	lossObject := SparseCategoricalCrossentropy(true, WithReduction(ReductionNone))
	stepFn := func(w *distribute.WorkerContext) (*tensor.Tensor, error) {
		batch, ok := w.Next(perWorkerIterator)
		if !ok {
			return nil, nil
		}
		x, y := batch[0], batch[1]
		tape := tensor.NewGradientTape()
		predictions := model.Call(x, true)
		loss := distribute.ComputeAverageLoss(lossObject.Call(y, predictions), x.Shape()[0])
		gradients := tape.Gradient(loss, model.TrainableVariables())
		if err := optimizer.ApplyGradients(gradients, model.TrainableVariables()); err != nil {
			return nil, err
		}
		return loss, nil
	}
	steps := train.Cardinality()
	for i := 0; i < steps; i++ {
		coordinator.Schedule(stepFn)
	}
	if err := coordinator.Join(); err != nil {
		t.Fatal(err)
	}
	// The ps hold the trained values: read them back from the ps.
	after := strategy.Variables()[0].Value()
	if maxAbsDiff(initial.Data(), after.Data()) == 0 {
		t.Fatal("the ps variable is unchanged after the loop: the steps trained a local copy")
	}
	for i, srv := range servers {
		if st := srv.Stats(); st.Applied == 0 {
			t.Errorf("ps %d applied no update: %+v", i, st)
		}
	}
	if got := optimizer.Iterations(); got != int64(steps) {
		t.Errorf("optimizer.Iterations() = %d, want one per step (%d)", got, steps)
	}
	// The model reads its variables from the ps: Evaluate sees the trained values.
	model.Compile(optimizer, SparseCategoricalCrossentropy(true), "accuracy")
	got := model.Evaluate(test, Verbose(0))["accuracy"]
	t.Logf("accuracy: Fit in one process %.3f, ClusterCoordinator loop (2 ps, 2 workers) %.3f", want, got)
	if got < 0.8 || math.Abs(got-want) > 0.05 {
		t.Errorf("accuracy of the custom loop = %.3f, want >= 0.8 and within 0.05 of Fit's %.3f", got, want)
	}
	if d := maxAbsDiff(model.GetWeights()[0].Data(), after.Data()); d != 0 {
		t.Errorf("model.GetWeights()[0] differs from the ps value by %g", d)
	}
}

// TestPSCustomLoopLocalVariableSaysWhatToWrite: ApplyGradients under ParameterServerStrategy
// on variables made outside its scope (this process's own) would train nothing the ps
// hold: it fails with an error saying what to write.
func TestPSCustomLoopLocalVariableSaysWhatToWrite(t *testing.T) {
	s, _ := psStrategy(t, 1, 1)
	var optimizer *Optimizer
	s.Scope(func() { optimizer = SGD(0.1) })
	v := tensor.NewVariable("w", tensor.MustNew([]int{1}, []float32{1}), true)
	err := optimizer.ApplyGradients([]*tensor.Tensor{tensor.MustNew([]int{1}, []float32{1})}, []*tensor.Variable{v})
	if !errors.Is(err, distribute.ErrPSLocalUpdate) || !strings.Contains(err.Error(), "inside strategy.Scope") {
		t.Fatalf("ApplyGradients on a local variable under ps = %v, want ErrPSLocalUpdate saying what to write", err)
	}
}

func maxAbsDiff(a, b []float32) float64 {
	d := 0.0
	for i := range a {
		d = max(d, math.Abs(float64(a[i]-b[i])))
	}
	return d
}

// TestCustomLoopAcrossWorkersSharedMemory: the custom loop with Adam on two workers that
// share memory, whose large gradient (20,000 values) each worker's optimizer reads from
// both workers' buckets and sums as it reads (distribute.GradientTermsApplier), ends with
// the weights of one device trained on the global batches.
func TestCustomLoopAcrossWorkersSharedMemory(t *testing.T) {
	leakcheck.Check(t)
	splitCPU(t, 2)
	const n, features, global = 32, 20_000, 8
	x := tensor.RandomNormal([]int{n, features}, 0, 1, 11)
	y := make([]float32, n)
	for i := range y {
		if x.Data()[i*features] > 0 {
			y[i] = 1
		}
	}
	ds := data.FromTensorSlices(x, tensor.MustNew([]int{n, 1}, y)).Batch(global, false).
		WithOptions(data.Options{AutoShardPolicy: data.AutoShardData})
	loop := func(s distribute.Strategy, init []*tensor.Tensor) (initial, final []*tensor.Tensor) {
		var model *Model
		var opt *Optimizer
		inProcessScopes.Lock()
		s.Scope(func() {
			if init == nil {
				SetRandomSeed(3)
			}
			model = Sequential(layers.Dense(1))
			opt = Adam(1e-3)
		})
		inProcessScopes.Unlock()
		if err := model.Build(features); err != nil {
			t.Error(err)
			return nil, nil
		}
		if init != nil {
			if err := model.SetWeights(init); err != nil {
				t.Error(err)
			}
		}
		initial = model.GetWeights()
		lossObject := BinaryCrossentropy(true, WithReduction(ReductionNone))
		step := func(_ *distribute.ReplicaContext, in data.Element) *tensor.Tensor {
			tape := tensor.NewGradientTape()
			loss := distribute.ComputeAverageLoss(lossObject.Call(in[1], model.Call(in[0], true)), global)
			if err := opt.ApplyGradients(tape.Gradient(loss, model.TrainableVariables()), model.TrainableVariables()); err != nil {
				t.Error(err)
			}
			return loss
		}
		dist := s.ExperimentalDistributeDataset(ds)
		for range 2 {
			it := dist.Iterator()
			for in, ok := it.Next(); ok; in, ok = it.Next() {
				s.Reduce(distribute.ReduceSum, s.Run(step, in), -1)
			}
		}
		return initial, model.GetWeights()
	}
	mems := transport.NewSharedMem(2, 64<<20)
	defer func() {
		for _, m := range mems {
			m.Close()
		}
	}()
	got, initial := make([][]*tensor.Tensor, 2), make([][]*tensor.Tensor, 2)
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("worker %d panicked: %v", w, p)
				}
			}()
			s := distribute.NewMultiWorkerMirroredStrategy(distribute.WithTransport(mems[w]),
				distribute.WithDevices("/cpu:"+string(rune('0'+w))), distribute.WithCommunicationTimeout(20*time.Second))
			initial[w], got[w] = loop(s, nil)
		}()
	}
	wg.Wait()
	if t.Failed() || initial[0] == nil {
		t.FailNow()
	}
	_, want := loop(distribute.NewOneDeviceStrategy("/cpu:0"), initial[0])
	for w, ws := range got {
		for i := range want {
			a, b := want[i].Data(), ws[i].Data()
			for j := range a {
				if math.Abs(float64(a[j]-b[j])) > 1e-5 {
					t.Fatalf("worker %d: weight %d[%d] = %v, one device gives %v", w, i, j, b[j], a[j])
				}
			}
		}
	}
}
