package distribute

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"godist/distlib/data"
	"godist/distlib/tensor"
)

// TestReduceTFSpelling: strategy.Reduce("SUM", v, -1), TensorFlow's spelling, works as the
// typed ReduceSum does; so do "MEAN" and lower case; another name fails saying what to write.
func TestReduceTFSpelling(t *testing.T) {
	splitCPU(t, 2)
	s := NewMirroredStrategy()
	res := NewPerReplica(tensor.MustNew([]int{2}, []float32{1, 2}), tensor.MustNew([]int{2}, []float32{3, 6}))
	for _, tc := range []struct {
		op   ReduceOp
		want []float32
	}{
		{"SUM", []float32{4, 8}},
		{ReduceSum, []float32{4, 8}},
		{"sum", []float32{4, 8}},
		{"MEAN", []float32{2, 4}},
		{"mean", []float32{2, 4}},
		{ReduceMean, []float32{2, 4}},
	} {
		if got := s.Reduce(tc.op, res, -1); !equalData(got.Data(), tc.want) {
			t.Errorf("Reduce(%q, v, -1) = %v, want %v", string(tc.op), got.Data(), tc.want)
		}
	}
	// In a replica context too: replicas spelling the op differently agree.
	out := s.Run(func(ctx *ReplicaContext, _ data.Element) *tensor.Tensor {
		op := ReduceOp("MEAN")
		if ctx.ReplicaIDInSync() == 1 {
			op = "mean"
		}
		return ctx.AllReduce(op, tensor.MustNew([]int{1}, []float32{float32(2 * ctx.ReplicaIDInSync())}))
	}, nil)
	if got := s.Reduce("SUM", out, -1); !equalData(got.Data(), []float32{2}) {
		t.Errorf("AllReduce(MEAN) of 0 and 2 on each of 2 replicas, summed = %v, want [2]", got.Data())
	}
	err := recoverErr(func() { s.Reduce("MAX", res, -1) })
	if !errors.Is(err, ErrReduceOp) || !strings.Contains(err.Error(), `"MAX" (write "SUM" or "MEAN"`) {
		t.Errorf("Reduce(\"MAX\") error = %v, want ErrReduceOp saying what to write", err)
	}
}

// TestReduceNonDistributedValue: strategy.reduce of a value that is not per replica, as
// TensorFlow documents and implements it (reduce_non_distributed_value and the axis path
// of Strategy.reduce): one replica gives the value back; MEAN gives it back under any
// strategy; SUM across several replicas is refused (TF's ValueError), except a number equal
// to 0, which gives 0; with an axis every replica holds the value; several
// MultiWorkerMirrored workers each add their own value.
func TestReduceNonDistributedValue(t *testing.T) {
	splitCPU(t, 2)
	mirrored := NewMirroredStrategy(WithDevices(cpu(0), cpu(1)))
	strategies := map[string]Strategy{
		"default":   NewDefaultStrategy(),
		"onedevice": NewOneDeviceStrategy(cpu(0)),
		"mirrored":  mirrored,
	}
	v := tensor.MustNew([]int{2, 2}, []float32{1, 2, 3, 4})
	for _, tc := range []struct {
		strategy string
		op       ReduceOp
		value    any
		axis     int
		want     []float32 // nil: ErrNonDistributedReduce
	}{
		{"default", "SUM", 1.0, -1, []float32{1}},
		{"default", "SUM", float32(2.5), -1, []float32{2.5}},
		{"default", "MEAN", 3, -1, []float32{3}},
		{"default", "SUM", v, 0, []float32{4, 6}},
		{"default", "MEAN", v, 1, []float32{1.5, 3.5}},
		{"onedevice", "SUM", v, -1, []float32{1, 2, 3, 4}},
		{"mirrored", "SUM", 1.0, -1, nil},
		{"mirrored", "SUM", v, -1, nil},
		{"mirrored", "SUM", 0, -1, []float32{0}},
		{"mirrored", "SUM", 0.0, -1, []float32{0}},
		{"mirrored", "MEAN", 1.0, -1, []float32{1}},
		{"mirrored", "MEAN", v, -1, []float32{1, 2, 3, 4}},
		{"mirrored", "SUM", v, 0, []float32{8, 12}}, // each of the 2 replicas holds v
		{"mirrored", "MEAN", v, 0, []float32{2, 3}}, // the mean over 2 x 2 rows
		{"mirrored", "SUM", 2, 0, nil},              // a scalar has no axis 0: a shape error
		{"mirrored", "sum", int64(5), -1, nil},      // TF's spelling, refused the same
		{"onedevice", "SUM", int32(7), -1, []float32{7}},
	} {
		name := fmt.Sprintf("%s/Reduce(%s, %v, %d)", tc.strategy, tc.op, tc.value, tc.axis)
		var got *tensor.Tensor
		err := recoverErr(func() { got = strategies[tc.strategy].Reduce(tc.op, tc.value, tc.axis) })
		if tc.want == nil {
			if err == nil {
				t.Errorf("%s = %v, want an error", name, got)
			} else if tc.axis < 0 && (!errors.Is(err, ErrNonDistributedReduce) || !strings.Contains(err.Error(), `use "MEAN"`)) {
				t.Errorf("%s error = %v, want ErrNonDistributedReduce saying what to write", name, err)
			}
			continue
		}
		if err != nil || !equalData(got.Data(), tc.want) {
			t.Errorf("%s = %v, %v; want %v", name, got, err, tc.want)
		}
	}
	err := recoverErr(func() { mirrored.Reduce("SUM", "1", -1) })
	if err == nil || !strings.Contains(err.Error(), "Reduce of a string: pass the *PerReplica") {
		t.Errorf("Reduce of a string: %v, want an error saying what to pass", err)
	}

	// Several workers: each worker's value is one term.
	got := make([][]float32, 2)
	runWorkers(t, 2, func(w int) []string { return []string{cpu(w)} }, func(w int, s *MultiWorkerMirroredStrategy) {
		sum := s.Reduce("SUM", float64(w+1), -1)
		mean := s.Reduce("MEAN", tensor.MustNew([]int{1}, []float32{float32(10 * (w + 1))}), -1)
		got[w] = []float32{sum.Item(), mean.Data()[0]}
	})
	for w, g := range got {
		if !equalData(g, []float32{3, 15}) {
			t.Errorf("worker %d: SUM of 1 and 2, MEAN of 10 and 20 across 2 workers = %v, want [3 15]", w, g)
		}
	}
}

// TestReduceNonDistributedUnderPS: ParameterServerStrategy's worker has one replica, so the
// tutorial's Reduce(SUM, value, -1) gives the value back.
func TestReduceNonDistributedUnderPS(t *testing.T) {
	s, _ := psCluster(t, 1, 1)
	if got := s.Reduce(ReduceSum, 1.0, -1).Item(); got != 1 {
		t.Errorf("ParameterServerStrategy.Reduce(SUM, 1.0, -1) = %v, want 1", got)
	}
}

// TestScaleRegularizationLoss: tf.nn.scale_regularization_loss divides by the replicas in
// sync of the current strategy.
func TestScaleRegularizationLoss(t *testing.T) {
	splitCPU(t, 2)
	if got := ScaleRegularizationLoss(tensor.Scalar(3)).Item(); got != 3 {
		t.Errorf("outside any scope: %v, want 3", got)
	}
	s := NewMirroredStrategy(WithDevices(cpu(0), cpu(1)))
	out := s.Run(func(ctx *ReplicaContext, _ data.Element) *tensor.Tensor {
		return ScaleRegularizationLoss(tensor.Scalar(3))
	}, nil)
	if got := s.Reduce(ReduceSum, out, -1).Item(); got != 3 {
		t.Errorf("summed over 2 replicas: %v, want the penalty once (3)", got)
	}
}

// TestDistributeValuesFromFunction: the distributed input tutorial's
// experimental_distribute_values_from_function: one value per replica, from its id.
func TestDistributeValuesFromFunction(t *testing.T) {
	splitCPU(t, 2)
	s := NewMirroredStrategy(WithDevices(cpu(0), cpu(1)))
	v := s.ExperimentalDistributeValuesFromFunction(func(ctx *ValueContext) *tensor.Tensor {
		return tensor.Scalar(float32(10*ctx.ReplicaIDInSyncGroup + ctx.NumReplicasInSync))
	})
	local := s.ExperimentalLocalResults(v)
	if len(local) != 2 || local[0].Item() != 2 || local[1].Item() != 12 || local[1].Device() != cpu(1) {
		t.Fatalf("values %v", local)
	}
	if got := s.Reduce(ReduceSum, v, -1).Item(); got != 14 {
		t.Errorf("Reduce(SUM) = %v, want 14", got)
	}
}
