package distribute

import (
	"testing"

	"godist/distlib/cluster"
)

// TestStrategyClusterResolver: strategy.cluster_resolver's task_type and task_id, which the
// multi-worker tutorials' _is_chief reads: the resolver the strategy was made with, the
// worker's rank over a transport, "" for a single worker.
func TestStrategyClusterResolver(t *testing.T) {
	got := make([]cluster.Resolver, 2)
	runWorkers(t, 2, func(w int) []string { return []string{cpu(0)} }, func(w int, s *MultiWorkerMirroredStrategy) {
		got[w] = s.ClusterResolver()
	})
	for w, r := range got {
		if r == nil || r.TaskType() != "worker" || r.TaskID() != w {
			t.Errorf("worker %d: ClusterResolver() = %v", w, r)
		}
	}
	empty, _ := cluster.NewClusterSpec(nil)
	single, _ := cluster.NewSimpleClusterResolver(empty, "", 0, "grpc")
	s := NewMultiWorkerMirroredStrategy(WithClusterResolver(single), WithDevices(cpu(0)))
	if r := s.ClusterResolver(); r.TaskType() != "" || r.TaskID() != 0 {
		t.Errorf("single worker: task %q %d, want \"\" 0", r.TaskType(), r.TaskID())
	}
	ps, _ := psCluster(t, 1, 1)
	if r := ps.ClusterResolver(); r.TaskType() != "chief" || r.TaskID() != 0 {
		t.Errorf("ParameterServerStrategy: task %q %d, want chief 0", r.TaskType(), r.TaskID())
	}
}
