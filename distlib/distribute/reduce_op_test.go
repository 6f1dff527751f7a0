package distribute

import (
	"errors"
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
