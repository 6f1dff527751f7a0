package distribute

import (
	"errors"
	"slices"
	"testing"

	"godist/distlib/tensor"
)

// TestGather: strategy.gather concatenates the replicas' values along the axis in replica
// order, and across workers in worker order, every worker getting the whole.
func TestGather(t *testing.T) {
	splitCPU(t, 2)
	s := NewMirroredStrategy(WithDevices(cpu(0), cpu(1)))
	v := NewPerReplica(mat(2, 2, 1, 2, 3, 4), mat(1, 2, 5, 6))
	if got := s.Gather(v, 0); !slices.Equal(got.Shape(), []int{3, 2}) || !equalData(got.Data(), []float32{1, 2, 3, 4, 5, 6}) {
		t.Errorf("Gather axis 0 = %v %v", got.Shape(), got.Data())
	}
	w := NewPerReplica(mat(2, 1, 1, 2), mat(2, 2, 3, 4, 5, 6))
	if got := s.Gather(w, 1); !slices.Equal(got.Shape(), []int{2, 3}) || !equalData(got.Data(), []float32{1, 3, 4, 2, 5, 6}) {
		t.Errorf("Gather axis 1 = %v %v", got.Shape(), got.Data())
	}
	if err := recoverErr(func() { s.Gather(tensor.Scalar(1), 0) }); !errors.Is(err, ErrReplicas) {
		t.Errorf("Gather of a plain tensor over 2 replicas: %v, want ErrReplicas", err)
	}
	if err := recoverErr(func() { s.Gather(v, 2) }); !errors.Is(err, tensor.ErrShape) {
		t.Errorf("Gather axis 2 of matrices: %v, want ErrShape", err)
	}
	if got := NewDefaultStrategy().Gather(vec(1, 2), 0); !equalData(got.Data(), []float32{1, 2}) {
		t.Errorf("default strategy Gather of a tensor = %v", got.Data())
	}

	got := make([]*tensor.Tensor, 2)
	runWorkers(t, 2, func(w int) []string { return []string{cpu(w)} }, func(w int, s *MultiWorkerMirroredStrategy) {
		rows := []*tensor.Tensor{mat(1, 2, 1, 2), mat(2, 2, 3, 4, 5, 6)}
		got[w] = s.Gather(NewPerReplica(rows[w]), 0)
	})
	for w, g := range got {
		if g == nil || !slices.Equal(g.Shape(), []int{3, 2}) || !equalData(g.Data(), []float32{1, 2, 3, 4, 5, 6}) {
			t.Errorf("worker %d: Gather across 2 workers = %v", w, g)
		}
	}
}
