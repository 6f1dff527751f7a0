package distribute

import (
	"net"
	"sync/atomic"
	"testing"
	"time"

	"godist/distlib/cluster"
	"godist/distlib/tensor"
	"godist/internal/leakcheck"
)

var serialInflight, serialMax atomic.Int32

func init() {
	RegisterFunction("test.serial_add", func(w *WorkerContext, args []*tensor.Tensor) (*tensor.Tensor, error) {
		n := serialInflight.Add(1)
		defer serialInflight.Add(-1)
		for m := serialMax.Load(); n > m && !serialMax.CompareAndSwap(m, n); m = serialMax.Load() {
		}
		v, err := w.Variable("counter")
		if err != nil {
			return nil, err
		}
		time.Sleep(20 * time.Millisecond)
		return nil, w.AssignAdd(v, tensor.Scalar(1))
	})
}

// The coordinator sends a remote worker task its next function while the task runs one
// (one ahead), and the task still runs them one at a time, each exactly once.
func TestRemoteWorkerFunctionAhead(t *testing.T) {
	leakcheck.Check(t)
	_, servers := psCluster(t, 1, 1)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	spec := remoteSpec(t, servers[0].Addr().String(), []string{lis.Addr().String()})
	wr, _ := cluster.NewSimpleClusterResolver(spec, "worker", 0, "grpc")
	task, err := ServeWorker(wr, lis, WithClusterToken(testToken))
	if err != nil {
		t.Fatal(err)
	}
	defer task.Close()
	cr, _ := cluster.NewSimpleClusterResolver(spec, "chief", 0, "grpc")
	s, err := newParameterServerStrategy(cr, []PSOption{WithClusterToken(testToken), WithPSTimeout(2 * time.Second), WithRemoteWorkers()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	v := s.NewVariable("counter", tensor.Scalar(0), false)
	c := NewClusterCoordinator(s)
	defer c.Close()
	serialMax.Store(0)
	const n = 8
	for i := 0; i < n; i++ {
		c.ScheduleFunction("test.serial_add")
	}
	withTimeout(t, 20*time.Second, func() {
		if err := c.Join(); err != nil {
			t.Error(err)
		}
	})
	if got := v.Value().Item(); got != n {
		t.Errorf("counter = %v, want %d", got, n)
	}
	if got := serialMax.Load(); got != 1 {
		t.Errorf("functions running at once on the worker task = %d, want 1", got)
	}
	if got := task.ahead.Load(); got < 1 {
		t.Errorf("functions that arrived while another ran = %d, want at least 1 (sent one ahead)", got)
	}
	if got := task.Runs(); got != n {
		t.Errorf("task ran %d functions, want %d", got, n)
	}
}
