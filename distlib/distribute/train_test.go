package distribute

import (
	"context"
	"errors"
	"math"
	"math/rand"
	"strings"
	"testing"
	"time"

	"godist/distlib/data"
	"godist/distlib/tensor"
	"godist/internal/leakcheck"
)

// toyData returns 32 examples of 4 features in 3 classes.
func toyData() *data.Dataset {
	rng := rand.New(rand.NewSource(7))
	const n = 32
	xs := make([]float32, n*4)
	ys := make([]float32, n)
	for i := 0; i < n; i++ {
		c := i % 3
		for j := 0; j < 4; j++ {
			xs[i*4+j] = float32(rng.NormFloat64()*0.5) + float32(c*(j%2))
		}
		ys[i] = float32(c)
	}
	return data.FromTensorSlices(tensor.MustNew([]int{n, 4}, xs), tensor.MustNew([]int{n}, ys))
}

// trainToy trains a 4-5-3 MLP with SGD through s on global batches of 8 for 2 epochs (one
// uneven last batch per epoch: 32 = 3*10 + 2), and returns the model's variables.
func trainToy(t *testing.T, s Strategy) []*MirroredVariable {
	t.Helper()
	const globalBatch, lr = 10, 0.5
	// NewMirroredVariable names the strategy: in-process workers (runWorkers) create their
	// variables at once, and scopes are process-wide (see Scope).
	vars := []*MirroredVariable{
		NewMirroredVariable(s, "w1", tensor.GlorotUniform([]int{4, 5}, 1), true),
		NewMirroredVariable(s, "b1", tensor.Zeros(5), true),
		NewMirroredVariable(s, "w2", tensor.GlorotUniform([]int{5, 3}, 2), true),
		NewMirroredVariable(s, "b2", tensor.Zeros(3), true),
	}
	step := func(ctx *ReplicaContext, in data.Element) *tensor.Tensor {
		r := ctx.LocalReplicaID()
		local := make([]*tensor.Variable, len(vars))
		for i, v := range vars {
			local[i] = v.Get(r)
		}
		tape := tensor.NewGradientTape()
		h := tensor.Tanh(tensor.BiasAdd(tensor.MatMul(in[0], local[0].Value(), false, false), local[1].Value()))
		logits := tensor.BiasAdd(tensor.MatMul(h, local[2].Value(), false, false), local[3].Value())
		loss := ComputeAverageLoss(tensor.SparseSoftmaxCrossEntropyWithLogits(logits, in[1]), globalBatch)
		grads := tape.Gradient(loss, local)
		grads = ctx.AllReduceList(ReduceSum, grads)
		for i, v := range vars {
			if v.Mirrored() || r == 0 { // a single shared copy is updated once
				local[i].AssignSub(tensor.Scale(grads[i], lr))
			}
		}
		return loss
	}
	dist := s.ExperimentalDistributeDataset(toyData().Batch(globalBatch, false))
	for epoch := 0; epoch < 2; epoch++ {
		it := dist.Iterator()
		for in, ok := it.Next(); ok; in, ok = it.Next() {
			loss := s.Reduce(ReduceSum, s.Run(step, in), -1)
			if l := loss.Item(); math.IsNaN(float64(l)) || l <= 0 {
				t.Errorf("%s: loss %v", s.Name(), l)
				return vars
			}
		}
	}
	return vars
}

// TestMirroredTrainingMatchesOneDevice is the key acceptance test: data-parallel training
// over 2 (and 4) logical CPUs ends with the weights of training on one device with the same
// global batches, and every replica's copy of every variable is identical.
func TestMirroredTrainingMatchesOneDevice(t *testing.T) {
	leakcheck.Check(t)
	splitCPU(t, 4)
	captureLog(t)
	ref := trainToy(t, NewOneDeviceStrategy("/cpu:0"))
	initial := NewOneDeviceStrategy("/cpu:0")
	var w0 *MirroredVariable
	initial.Scope(func() { w0 = NewVariable("w1", tensor.GlorotUniform([]int{4, 5}, 1), true) })
	if closeData(w0.Value().Data(), ref[0].Value().Data(), 1e-3) {
		t.Fatalf("training did not change w1: the comparison below would be vacuous")
	}
	tests := []struct {
		name string
		s    Strategy
	}{
		{"mirrored 2 cpus", NewMirroredStrategy(WithDevices("/cpu:0", "/cpu:1"))},
		{"mirrored 4 cpus hierarchical copy", NewMirroredStrategy(WithCrossDeviceOps(NewHierarchicalCopyAllReduce()))},
		{"mirrored 3 cpus nccl fallback", NewMirroredStrategy(WithDevices("/cpu:0", "/cpu:1", "/cpu:2"), WithCrossDeviceOps(NewNcclAllReduce()))},
		{"central storage 2 cpus", NewCentralStorageStrategy(WithDevices("/cpu:1", "/cpu:2"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			withTimeout(t, 30*time.Second, func() {
				got := trainToy(t, tt.s)
				for i, v := range got {
					copies := v.Values()
					if tt.s.Extended().MirrorsVariables() && len(copies) != tt.s.NumReplicasInSync() {
						t.Fatalf("variable %s has %d copies, want %d", v.Name(), len(copies), tt.s.NumReplicasInSync())
					}
					for r, c := range copies {
						if !equalData(c.Value().Data(), copies[0].Value().Data()) {
							t.Errorf("variable %s: replica %d's copy %v differs from replica 0's %v", v.Name(), r, c.Value().Data(), copies[0].Value().Data())
						}
						if want := v.Devices()[r]; c.Device() != want {
							t.Errorf("variable %s copy %d on %q, want %q", v.Name(), r, c.Device(), want)
						}
					}
					if !closeData(v.Value().Data(), ref[i].Value().Data(), 1e-5) {
						t.Errorf("variable %s = %v, one device gives %v (relative tolerance 1e-5)", v.Name(), v.Value().Data(), ref[i].Value().Data())
					}
				}
			})
		})
	}
}

func TestMirroredVariable(t *testing.T) {
	splitCPU(t, 2)
	captureLog(t)
	s := NewMirroredStrategy()
	var v *MirroredVariable
	s.Scope(func() { v = NewVariable("v", vec(1, 2), true) })
	if !v.Mirrored() || len(v.Values()) != 2 || v.Get(1).Device() != cpu(1) {
		t.Fatalf("NewVariable in MirroredStrategy scope: mirrored %v, %d copies, copy 1 on %q", v.Mirrored(), len(v.Values()), v.Get(1).Device())
	}
	v.Assign(vec(5, 6))
	v.AssignAdd(vec(1, 1))
	v.AssignSub(vec(0.5, 0.5))
	for r, c := range v.Values() {
		if !equalData(c.Value().Data(), []float32{5.5, 6.5}) {
			t.Errorf("copy %d = %v after Assign/AssignAdd/AssignSub, want [5.5 6.5]", r, c.Value().Data())
		}
	}
	if str := v.String(); !strings.HasPrefix(str, "MirroredVariable:{\n  0: <tf.Variable 'v'") || !strings.Contains(str, "1: ") {
		t.Errorf("String() = %q", str)
	}
	wantPanic(t, "Get(2)", ErrReplicas, "replica 2", func() { v.Get(2) })
	outside := NewVariable("plain", vec(1), false)
	if outside.Mirrored() || len(outside.Values()) != 1 {
		t.Errorf("NewVariable outside any scope: mirrored %v with %d copies; want one plain copy", outside.Mirrored(), len(outside.Values()))
	}
	c := NewCentralStorageStrategy(WithDevices("/cpu:0", "/cpu:1"), WithParameterDevice("/cpu:1"))
	var cv *MirroredVariable
	c.Scope(func() { cv = NewVariable("c", vec(1), true) })
	if cv.Mirrored() || cv.Get(0) != cv.Get(1) || cv.Get(0).Device() != cpu(1) {
		t.Errorf("CentralStorage variable: mirrored %v, shared %v, on %q; want one copy on %q", cv.Mirrored(), cv.Get(0) == cv.Get(1), cv.Get(0).Device(), cpu(1))
	}
}

func TestCrossDeviceOps(t *testing.T) {
	splitCPU(t, 4)
	captureLog(t)
	devs := []string{cpu(0), cpu(1), cpu(2), cpu(3)}
	rng := rand.New(rand.NewSource(1))
	sizes := []int{1, 7, parallelMin + 3} // the last takes the parallel path
	per := make([][]*tensor.Tensor, len(devs))
	for r := range per {
		for _, n := range sizes {
			buf := make([]float32, n)
			for k := range buf {
				buf[k] = float32(rng.NormFloat64())
			}
			per[r] = append(per[r], tensor.MustNew([]int{n}, buf))
		}
	}
	want := func(op ReduceOp, i int) []float32 {
		out := make([]float32, sizes[i])
		for k := range out {
			var s float64
			for r := range per {
				s += float64(per[r][i].Data()[k])
			}
			if op == ReduceMean {
				s /= float64(len(per))
			}
			out[k] = float32(s)
		}
		return out
	}
	for _, ops := range []CrossDeviceOps{NewReductionToOneDevice(), NewReductionToOneDevice("/cpu:3"), NewHierarchicalCopyAllReduce(), NewNcclAllReduce()} {
		for _, op := range []ReduceOp{ReduceSum, ReduceMean} {
			got, err := ops.BatchAllReduce(op, per, devs)
			if err != nil {
				t.Fatalf("%s %v: %v", ops.Name(), op, err)
			}
			for r := range got {
				for i := range sizes {
					if !closeAbs(got[r][i].Data(), want(op, i), 1e-5) {
						t.Fatalf("%s %v: replica %d tensor %d differs from the float64 reference", ops.Name(), op, r, i)
					}
					if got[r][i].Device() != devs[r] {
						t.Fatalf("%s: replica %d result on %q, want %q", ops.Name(), r, got[r][i].Device(), devs[r])
					}
				}
			}
		}
		if _, err := ops.BatchAllReduce(ReduceSum, per[:2], devs); !errors.Is(err, ErrReplicas) {
			t.Errorf("%s with 2 replicas' tensors over 4 devices = %v, want ErrReplicas", ops.Name(), err)
		}
	}
}

// TestNcclFallbackLoggedOnce checks TensorFlow's rule: NCCL cannot reduce across CPU
// devices, so NcclAllReduce falls back to ReductionToOneDevice and says so once.
func TestNcclFallbackLoggedOnce(t *testing.T) {
	splitCPU(t, 2)
	log := captureLog(t)
	s := NewMirroredStrategy(WithCrossDeviceOps(NewNcclAllReduce()))
	for i := 0; i < 3; i++ {
		out, err := s.Extended().AllReduce(context.Background(), ReduceMean, [][]*tensor.Tensor{{vec(1, 2)}, {vec(3, 4)}})
		if err != nil || !equalData(out[1][0].Data(), []float32{2, 3}) {
			t.Fatalf("Extended().AllReduce(MEAN) = %v, %v; want [2 3]", out, err)
		}
	}
	lines := strings.Count(log.String(), "NcclAllReduce cannot serve")
	if lines != 1 {
		t.Fatalf("fallback logged %d times, want once; log:\n%s", lines, log)
	}
	if !strings.Contains(log.String(), "falling back to ReductionToOneDevice") || !strings.Contains(log.String(), "not GPUs") {
		t.Fatalf("fallback line does not say what and why:\n%s", log)
	}
	// The default choice on CPUs is ReductionToOneDevice, as in TensorFlow.
	if got := NewMirroredStrategy().CrossDeviceOps().Name(); got != "ReductionToOneDevice" {
		t.Fatalf("default cross-device ops on CPUs = %s, want ReductionToOneDevice", got)
	}
}
