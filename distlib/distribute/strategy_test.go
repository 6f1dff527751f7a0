package distribute

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"godist/distlib/data"
	"godist/distlib/device"
	"godist/distlib/tensor"
	"godist/internal/leakcheck"
)

func TestStrategyConstruction(t *testing.T) {
	tests := []struct {
		name       string
		cpus       int
		make       func() Strategy
		wantName   string
		wantDevs   []string
		wantMirror bool
		wantVarDev string
	}{
		{"default", 1, func() Strategy { return NewDefaultStrategy() }, "DefaultDistributionStrategy", []string{cpu(0)}, false, cpu(0)},
		{"one device", 2, func() Strategy { return NewOneDeviceStrategy("/cpu:1") }, "OneDeviceStrategy", []string{cpu(1)}, false, cpu(1)},
		{"mirrored one cpu", 1, func() Strategy { return NewMirroredStrategy() }, "MirroredStrategy", []string{cpu(0)}, true, cpu(0)},
		{"mirrored all logical cpus", 3, func() Strategy { return NewMirroredStrategy() }, "MirroredStrategy", []string{cpu(0), cpu(1), cpu(2)}, true, cpu(0)},
		{"mirrored devices", 3, func() Strategy { return NewMirroredStrategy(WithDevices("CPU:2", "/device:CPU:0")) }, "MirroredStrategy", []string{cpu(2), cpu(0)}, true, cpu(2)},
		{"central storage default", 2, func() Strategy { return NewCentralStorageStrategy() }, "CentralStorageStrategy", []string{cpu(0)}, false, cpu(0)},
		{"central storage two", 3, func() Strategy { return NewCentralStorageStrategy(WithDevices("/cpu:1", "/cpu:2")) }, "CentralStorageStrategy", []string{cpu(1), cpu(2)}, false, cpu(0)},
		{"central storage param", 3, func() Strategy {
			return NewCentralStorageStrategy(WithDevices("/cpu:0", "/cpu:1"), WithParameterDevice("/cpu:2"))
		}, "CentralStorageStrategy", []string{cpu(0), cpu(1)}, false, cpu(2)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			splitCPU(t, tt.cpus)
			captureLog(t)
			s := tt.make()
			if got := s.Name(); got != tt.wantName {
				t.Errorf("Name() = %q, want %q", got, tt.wantName)
			}
			if got := s.Extended().ReplicaDevices(); strings.Join(got, ",") != strings.Join(tt.wantDevs, ",") {
				t.Errorf("Extended().ReplicaDevices() = %v, want %v", got, tt.wantDevs)
			}
			if got := s.NumReplicasInSync(); got != len(tt.wantDevs) {
				t.Errorf("NumReplicasInSync() = %d, want %d", got, len(tt.wantDevs))
			}
			if got := s.Extended().MirrorsVariables(); got != tt.wantMirror {
				t.Errorf("Extended().MirrorsVariables() = %v, want %v", got, tt.wantMirror)
			}
			if got := s.Extended().VariableDevice(); got != tt.wantVarDev {
				t.Errorf("Extended().VariableDevice() = %q, want %q", got, tt.wantVarDev)
			}
			if i, n := s.Extended().Worker(); i != 0 || n != 1 || !s.Extended().IsChief() {
				t.Errorf("Extended().Worker() = %d, %d, chief %v; want 0, 1, true", i, n, s.Extended().IsChief())
			}
		})
	}
}

func TestMirroredPrintsDevices(t *testing.T) {
	splitCPU(t, 2)
	log := captureLog(t)
	NewMirroredStrategy()
	want := "Using MirroredStrategy with devices ('" + cpu(0) + "', '" + cpu(1) + "')"
	if !strings.Contains(log.String(), want) {
		t.Fatalf("log = %q, want a line containing %q", log.String(), want)
	}
}

func TestDeviceErrors(t *testing.T) {
	tests := []struct {
		name    string
		fn      func()
		mention string
	}{
		{"missing gpu", func() { NewMirroredStrategy(WithDevices("/gpu:0", "/gpu:1")) }, "/gpu:0"},
		{"missing cpu", func() { NewOneDeviceStrategy("/cpu:7") }, "/cpu:7"},
		{"duplicate", func() { NewMirroredStrategy(WithDevices("/cpu:0", "CPU:0")) }, "given twice"},
		{"no devices", func() { NewMirroredStrategy(WithDevices()) }, "no devices"},
		{"malformed", func() { NewOneDeviceStrategy("/cpu:x") }, "/cpu:x"},
		{"bad parameter device", func() { NewCentralStorageStrategy(WithParameterDevice("/gpu:3")) }, "/gpu:3"},
		{"bad reduce device", func() { NewReductionToOneDevice("/cpu:9") }, "/cpu:9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			splitCPU(t, 2)
			captureLog(t)
			err := recoverErr(tt.fn)
			var de *DeviceError
			if !errors.As(err, &de) || !errors.Is(err, ErrDevice) {
				t.Fatalf("panic = %v; want a *DeviceError", err)
			}
			if !strings.Contains(err.Error(), tt.mention) {
				t.Fatalf("error %q does not mention %q", err, tt.mention)
			}
		})
	}
}

func TestScopeNesting(t *testing.T) {
	splitCPU(t, 2)
	captureLog(t)
	a := NewMirroredStrategy()
	b := NewOneDeviceStrategy("/cpu:0")
	if GetStrategy() != Strategy(NewDefaultStrategy()) || HasStrategy() {
		t.Fatalf("outside any scope GetStrategy() = %v, HasStrategy() = %v; want the default strategy", GetStrategy(), HasStrategy())
	}
	var inner, innerSame, innerDefault Strategy
	var has bool
	a.Scope(func() {
		inner, has = GetStrategy(), HasStrategy()
		a.Scope(func() { innerSame = GetStrategy() })
		NewDefaultStrategy().Scope(func() { innerDefault = GetStrategy() })
		err := recoverErr(func() { b.Scope(func() { t.Error("entered a different strategy's scope") }) })
		if !errors.Is(err, ErrMixedStrategies) || !strings.Contains(err.Error(), "OneDeviceStrategy") {
			t.Errorf("entering OneDeviceStrategy inside MirroredStrategy panicked with %v; want ErrMixedStrategies naming both", err)
		}
		if GetStrategy() != Strategy(a) {
			t.Errorf("after the failed nesting GetStrategy() = %v, want %v", GetStrategy(), a)
		}
	})
	if inner != Strategy(a) || !has || innerSame != Strategy(a) || innerDefault != Strategy(a) {
		t.Fatalf("inside scope: GetStrategy %v (has %v), nested same %v, nested default %v; want %v", inner, has, innerSame, innerDefault, a)
	}
	// Scopes are process-wide: a goroutine started inside a's scope sees it (as the code of
	// a `with strategy.scope():` block would), and another strategy's scope cannot open
	// meanwhile in any goroutine.
	var other Strategy
	var otherErr error
	a.Scope(func() {
		done := make(chan struct{})
		go func() {
			defer close(done)
			other = GetStrategy()
			otherErr = recoverErr(func() { b.Scope(func() {}) })
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("goroutine did not finish")
		}
	})
	if other != Strategy(a) {
		t.Fatalf("a goroutine started inside a scope got %v; want the scope's strategy %v", other, a)
	}
	if !errors.Is(otherErr, ErrMixedStrategies) {
		t.Fatalf("another strategy's scope opened in a goroutine while a's was open: %v; want ErrMixedStrategies", otherErr)
	}
	if GetStrategy() != Strategy(NewDefaultStrategy()) {
		t.Fatalf("after the scope closed GetStrategy() = %v; want the default", GetStrategy())
	}
	// A panic inside the scope leaves it.
	_ = recoverErr(func() { b.Scope(func() { panic("boom") }) })
	if GetStrategy() != Strategy(NewDefaultStrategy()) {
		t.Fatalf("after a panic in Scope, GetStrategy() = %v; want the default", GetStrategy())
	}
	// Any strategy may be entered inside the default one.
	var got Strategy
	NewDefaultStrategy().Scope(func() { b.Scope(func() { got = GetStrategy() }) })
	if got != Strategy(b) {
		t.Fatalf("inside default then OneDevice scope GetStrategy() = %v, want %v", got, b)
	}
}

func TestRunAndReduce(t *testing.T) {
	leakcheck.Check(t)
	splitCPU(t, 2)
	captureLog(t)
	s := NewMirroredStrategy()
	var inRun [2]Strategy
	var devs [2]string
	res := s.Run(func(ctx *ReplicaContext, _ data.Element) *tensor.Tensor {
		id := ctx.ReplicaIDInSync()
		inRun[id] = GetStrategy()
		devs[id] = device.Current()
		if ctx.NumReplicasInSync() != 2 {
			t.Errorf("NumReplicasInSync() = %d in replica %d, want 2", ctx.NumReplicasInSync(), id)
		}
		return vec(float32(id+1), float32(10*(id+1)))
	}, nil)
	for r := 0; r < 2; r++ {
		if inRun[r] != Strategy(s) || devs[r] != cpu(r) {
			t.Errorf("replica %d ran with strategy %v on %q; want %v on %q", r, inRun[r], devs[r], s, cpu(r))
		}
	}
	local := s.ExperimentalLocalResults(res)
	if len(local) != 2 || !equalData(local[0].Data(), []float32{1, 10}) || !equalData(local[1].Data(), []float32{2, 20}) {
		t.Fatalf("ExperimentalLocalResults = %v", local)
	}
	if str := res.String(); !strings.HasPrefix(str, "PerReplica:{\n  0: ") || !strings.Contains(str, "\n  1: ") {
		t.Errorf("PerReplica String = %q", str)
	}
	tests := []struct {
		name string
		op   ReduceOp
		axis int
		want []float32
	}{
		{"sum none", ReduceSum, -1, []float32{3, 30}},
		{"mean none", ReduceMean, -1, []float32{1.5, 15}},
		{"sum axis 0", ReduceSum, 0, []float32{33}},
		{"mean axis 0", ReduceMean, 0, []float32{33.0 / 4}},
	}
	for _, tt := range tests {
		got := s.Reduce(tt.op, res, tt.axis)
		if !equalData(got.Data(), tt.want) {
			t.Errorf("%s: Reduce(%v, axis %d) = %v, want %v", tt.name, tt.op, tt.axis, got.Data(), tt.want)
		}
	}
	// Uneven batches: MEAN along the batch divides by the total number of examples.
	uneven := NewPerReplica(mat(2, 2, 1, 2, 3, 4), mat(1, 2, 5, 6))
	if got := s.Reduce(ReduceMean, uneven, 0); !equalData(got.Data(), []float32{3, 4}) {
		t.Errorf("Reduce(MEAN, uneven, 0) = %v, want [3 4]", got.Data())
	}
	if got := s.Reduce(ReduceSum, uneven, 0); !equalData(got.Data(), []float32{9, 12}) {
		t.Errorf("Reduce(SUM, uneven, 0) = %v, want [9 12]", got.Data())
	}
	wantPanic(t, "Reduce of 1 value with 2 replicas", ErrReplicas, "1 values", func() { s.Reduce(ReduceSum, NewPerReplica(vec(1)), -1) })
	wantPanic(t, "Reduce with a bad op", ErrReduceOp, "", func() { s.Reduce(ReduceOp("MAX"), res, -1) })
	wantPanic(t, "Reduce axis out of range", tensor.ErrShape, "axis 3", func() { s.Reduce(ReduceSum, res, 3) })
}

func TestDefaultStrategyRun(t *testing.T) {
	device.Reset()
	t.Cleanup(device.Reset)
	s := GetStrategy()
	res := s.Run(func(ctx *ReplicaContext, in data.Element) *tensor.Tensor {
		return tensor.Scale(in[0], 2)
	}, NewDistributedValue(data.Element{vec(1, 2)}))
	if got := s.Reduce(ReduceSum, res, -1); !equalData(got.Data(), []float32{2, 4}) {
		t.Fatalf("default strategy Run+Reduce = %v, want [2 4]", got.Data())
	}
	if str := res.String(); strings.Contains(str, "PerReplica") {
		t.Errorf("one replica's PerReplica prints as %q; want the plain tensor like TensorFlow", str)
	}
}

func TestReplicaAllReduce(t *testing.T) {
	leakcheck.Check(t)
	splitCPU(t, 3)
	captureLog(t)
	s := NewMirroredStrategy()
	withTimeout(t, 10*time.Second, func() {
		res := s.Run(func(ctx *ReplicaContext, _ data.Element) *tensor.Tensor {
			x := vec(float32(ctx.ReplicaIDInSync() + 1))
			sum := ctx.AllReduce(ReduceSum, x)
			mean := ctx.AllReduce(ReduceMean, x)
			return tensor.Add(sum, mean)
		}, nil)
		for r, v := range res.Values() {
			if !equalData(v.Data(), []float32{6 + 2}) {
				t.Errorf("replica %d: AllReduce sum+mean = %v, want [8]", r, v.Data())
			}
			if v.Device() != cpu(r) {
				t.Errorf("replica %d: AllReduce result on %q, want %q", r, v.Device(), cpu(r))
			}
		}
	})
}

func TestReplicaFailures(t *testing.T) {
	leakcheck.Check(t)
	splitCPU(t, 2)
	captureLog(t)
	s := NewMirroredStrategy()
	tests := []struct {
		name    string
		fn      func(ctx *ReplicaContext, _ data.Element) *tensor.Tensor
		replica int
		mention string
	}{
		{"panic", func(ctx *ReplicaContext, _ data.Element) *tensor.Tensor {
			if ctx.ReplicaIDInSync() == 1 {
				panic("bad replica")
			}
			return vec(1)
		}, 1, "bad replica"},
		{"panic while another waits in AllReduce", func(ctx *ReplicaContext, _ data.Element) *tensor.Tensor {
			if ctx.ReplicaIDInSync() == 1 {
				time.Sleep(20 * time.Millisecond)
				panic(errors.New("late failure"))
			}
			return ctx.AllReduce(ReduceSum, vec(1))
		}, 1, "late failure"},
		{"return without AllReduce", func(ctx *ReplicaContext, _ data.Element) *tensor.Tensor {
			if ctx.ReplicaIDInSync() == 0 {
				return vec(1)
			}
			return ctx.AllReduce(ReduceSum, vec(1))
		}, 1, "without calling it"},
		{"shape mismatch in AllReduce", func(ctx *ReplicaContext, _ data.Element) *tensor.Tensor {
			return ctx.AllReduce(ReduceSum, tensor.Zeros(ctx.ReplicaIDInSync()+1))
		}, -1, "shape"}, // whichever replica arrives last detects it
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			withTimeout(t, 10*time.Second, func() {
				err := recoverErr(func() { s.Run(tt.fn, nil) })
				var re *ReplicaError
				if !errors.As(err, &re) || !errors.Is(err, ErrReplicaFailed) {
					t.Fatalf("Run panicked with %v; want a *ReplicaError", err)
				}
				if (tt.replica >= 0 && re.Replica != tt.replica) || !strings.Contains(err.Error(), tt.mention) || !strings.Contains(err.Error(), "replica") {
					t.Fatalf("Run error %q (replica %d); want replica %d and %q", err, re.Replica, tt.replica, tt.mention)
				}
			})
		})
	}
	err := s.Extended().RunReplicas(context.Background(), func(r int) error {
		if r == 1 {
			return errors.New("out of data")
		}
		return nil
	})
	var re *ReplicaError
	if !errors.As(err, &re) || re.Replica != 1 || re.Device != cpu(1) || !strings.Contains(err.Error(), "out of data") {
		t.Fatalf("Extended().RunReplicas = %v; want replica 1's error", err)
	}
	if err := s.Extended().RunReplicas(context.Background(), func(int) error { return nil }); err != nil {
		t.Fatalf("Extended().RunReplicas of a good function = %v", err)
	}
}

func TestComputeAverageLoss(t *testing.T) {
	device.Reset()
	t.Cleanup(device.Reset)
	per := vec(1, 2, 3, 4)
	if got := ComputeAverageLoss(per, 8).Item(); got != 1.25 {
		t.Errorf("ComputeAverageLoss([1 2 3 4], 8) = %v, want 1.25", got)
	}
	if got := ComputeAverageLoss(per, 0).Item(); got != 2.5 {
		t.Errorf("ComputeAverageLoss([1 2 3 4], 0) under the default strategy = %v, want 2.5", got)
	}
	splitCPU(t, 2)
	captureLog(t)
	s := NewMirroredStrategy()
	s.Scope(func() {
		if got := ComputeAverageLoss(per, 0).Item(); got != 1.25 {
			t.Errorf("ComputeAverageLoss([1 2 3 4], 0) with 2 replicas = %v, want 1.25", got)
		}
	})
	wantPanic(t, "ComputeAverageLoss(-1)", ErrBatchSize, "-1", func() { ComputeAverageLoss(per, -1) })
	// The loss keeps its gradient: d/dx sum(x)/4 = 1/4.
	v := tensor.NewVariable("x", vec(1, 2), true)
	tape := tensor.NewGradientTape()
	loss := ComputeAverageLoss(v.Value(), 4)
	g := tape.Gradient(loss, v)
	if !equalData(g[0].Data(), []float32{0.25, 0.25}) {
		t.Errorf("gradient of ComputeAverageLoss = %v, want [0.25 0.25]", g[0].Data())
	}
}

func TestReduceOpString(t *testing.T) {
	for op, want := range map[ReduceOp]string{ReduceSum: "SUM", ReduceMean: "MEAN", "mean": "MEAN", ReduceOp("MAX"): `ReduceOp("MAX")`} {
		if got := op.String(); got != want {
			t.Errorf("ReduceOp(%q).String() = %q, want %q", string(op), got, want)
		}
	}
}

// TestNewMirroredVariables: a model's variables made at once get one copy per replica under
// a mirroring strategy and one shared copy otherwise, all with the initial values.
func TestNewMirroredVariables(t *testing.T) {
	splitCPU(t, 2)
	inits := []*tensor.Tensor{vec(1, 2), vec(3)}
	for _, tc := range []struct {
		s      Strategy
		copies int
	}{
		{NewMirroredStrategy(), 2},
		{NewCentralStorageStrategy(WithDevices(cpu(0), cpu(1))), 1},
		{NewOneDeviceStrategy(cpu(1)), 1},
	} {
		vs, err := NewMirroredVariables(tc.s, []string{"w", "b"}, inits, []bool{true, false})
		if err != nil {
			t.Fatalf("%s: NewMirroredVariables: %v", tc.s.Name(), err)
		}
		for i, v := range vs {
			if got := len(v.Values()); got != tc.copies {
				t.Errorf("%s: variable %s has %d copies, want %d", tc.s.Name(), v.Name(), got, tc.copies)
			}
			for _, c := range v.Values() {
				if !equalData(c.Value().Data(), inits[i].Data()) {
					t.Errorf("%s: %s copy = %v, want %v", tc.s.Name(), v.Name(), c.Value().Data(), inits[i].Data())
				}
			}
		}
	}
	if _, err := NewMirroredVariables(NewMirroredStrategy(), []string{"w"}, inits, []bool{true}); err == nil {
		t.Error("NewMirroredVariables with 1 name for 2 initial values succeeded")
	}
}
