package keras

import (
	"math"
	"testing"
	"time"

	"godist/distlib/data"
	"godist/distlib/distribute"
	"godist/distlib/keras/layers"
	"godist/distlib/tensor"
)

// TestKernelRegularizerFit: one SGD step of Fit with an L2 kernel regularizer moves the
// kernel by the data gradient plus 2*l2*w, and the logged loss includes the penalty, under
// the default strategy and a 2-replica MirroredStrategy alike (each replica adds half).
func TestKernelRegularizerFit(t *testing.T) {
	splitCPU(t, 2)
	const l2, lr = 0.1, 0.5
	x := tensor.MustNew([]int{4, 2}, []float32{1, 0, 0, 1, 1, 1, 2, 1})
	y := tensor.MustNew([]int{4, 1}, []float32{1, 2, 3, 4})
	w0 := tensor.MustNew([]int{2, 1}, []float32{0.3, -0.2})
	// By hand: pred = x·w; MSE = mean((pred - y)²); dMSE/dw = 2/N xᵀ(pred - y); penalty l2*Σw².
	pred := make([]float64, 4)
	for i := range pred {
		pred[i] = float64(x.Data()[2*i])*0.3 + float64(x.Data()[2*i+1])*-0.2
	}
	var mse float64
	grad := []float64{0, 0}
	for i := range pred {
		d := pred[i] - float64(y.Data()[i])
		mse += d * d / 4
		grad[0] += 2.0 / 4 * float64(x.Data()[2*i]) * d
		grad[1] += 2.0 / 4 * float64(x.Data()[2*i+1]) * d
	}
	penalty := l2 * (0.3*0.3 + 0.2*0.2)
	want := []float64{0.3 - lr*(grad[0]+2*l2*0.3), -0.2 - lr*(grad[1]+2*l2*-0.2)}
	for _, s := range []distribute.Strategy{distribute.NewDefaultStrategy(), distribute.NewMirroredStrategy()} {
		var m *Model
		s.Scope(func() {
			m = Sequential(layers.Dense(1, layers.UseBias(false), layers.KernelRegularizer(layers.L2(l2)), layers.InputShape(2)))
			m.Compile(SGD(lr), MeanSquaredError())
		})
		quiet(m)
		if err := m.SetWeights([]*tensor.Tensor{w0}); err != nil {
			t.Fatal(err)
		}
		h := m.Fit(data.FromTensorSlices(x, y).Batch(4, false), Verbose(0))
		got := m.GetWeights()[0].Data()
		for i := range want {
			if math.Abs(float64(got[i])-want[i]) > 1e-5 {
				t.Errorf("%s: kernel after one step = %v, want %v (data gradient + 2*l2*w)", s.Name(), got, want)
				break
			}
		}
		if l := h.History["loss"][0]; math.Abs(l-(mse+penalty)) > 1e-5 {
			t.Errorf("%s: logged loss %.6f, want the MSE %.6f plus the penalty %.6f", s.Name(), l, mse, penalty)
		}
		if ls := m.Losses(); len(ls) != 1 || math.Abs(float64(ls[0].Item())-l2*(sq(got[0])+sq(got[1]))) > 1e-6 {
			t.Errorf("%s: model.Losses() = %v, want one penalty l2*Σw²", s.Name(), ls)
		}
	}
}

func sq(v float32) float64 { return float64(v) * float64(v) }

func TestRegularizerPenalty(t *testing.T) {
	w := tensor.MustNew([]int{3}, []float32{1, -2, 3})
	tests := []struct {
		r    layers.Regularizer
		want float32
		name string
	}{
		{layers.L2(0.5), 0.5 * 14, "L2(l2=0.5)"},
		{layers.L1(0.1), 0.1 * 6, "L1(l1=0.1)"},
		{layers.L1L2(0.1, 0.5), 0.6 + 7, "L1L2(l1=0.1, l2=0.5)"},
	}
	for _, tt := range tests {
		if got := tt.r.Penalty(w).Item(); math.Abs(float64(got-tt.want)) > 1e-5 || tt.r.String() != tt.name {
			t.Errorf("%s: Penalty = %v, want %v", tt.r, got, tt.want)
		}
	}
}

// TestKernelRegularizerAcrossWorkers: the bucketed multi-worker step (one replica per
// worker, gradients all-reduced layer by layer) applies the penalty once in all: two
// in-process workers end where one device does.
func TestKernelRegularizerAcrossWorkers(t *testing.T) {
	splitCPU(t, 2)
	x := tensor.RandomNormal([]int{32, 3}, 0, 1, 4)
	y := tensor.ReduceSum(x, 1)
	ds := data.FromTensorSlices(x, tensor.Reshape(y, 32, 1)).Batch(8, false).WithOptions(data.Options{AutoShardPolicy: data.AutoShardData})
	build := func(s distribute.Strategy) *Model {
		var m *Model
		inProcessScopes.Lock()
		s.Scope(func() {
			m = Sequential(layers.Dense(4, layers.ReLU, layers.KernelRegularizer(layers.L2(0.05))),
				layers.Dense(1, layers.KernelRegularizer(layers.L1(0.01))))
			m.Compile(SGD(0.05), MeanSquaredError())
		})
		inProcessScopes.Unlock()
		quiet(m)
		return m
	}
	SetRandomSeed(9)
	ref := build(distribute.NewOneDeviceStrategy("/cpu:0"))
	if err := ref.Build(3); err != nil {
		t.Fatal(err)
	}
	init := ref.GetWeights()
	ref.Fit(ds, Epochs(2), Verbose(0))
	want := ref.GetWeights()

	got := make([][]*tensor.Tensor, 2)
	memWorkers(t, 2, 20*time.Second, func(w int, s *distribute.MultiWorkerMirroredStrategy) {
		m := build(s)
		if err := m.Build(3); err != nil {
			t.Error(err)
			return
		}
		if err := m.SetWeights(init); err != nil {
			t.Error(err)
			return
		}
		m.Fit(ds, Epochs(2), Verbose(0))
		got[w] = m.GetWeights()
	})
	for w := range got {
		for i := range want {
			if got[w] == nil {
				continue
			}
			if d := maxAbsDiff(got[w][i].Data(), want[i].Data()); d > 1e-5 {
				t.Errorf("worker %d weight %d differs from one device's by %g", w, i, d)
			}
		}
	}
}
