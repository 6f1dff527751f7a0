package distribute

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"godist/distlib/cluster"
	"godist/distlib/data"
	"godist/distlib/tensor"
	"godist/distlib/transport"
	"godist/internal/leakcheck"
)

const testToken = "ps-test-token"

// psCluster starts nps parameter servers on loopback and returns a strategy whose
// coordinator (the chief) has nworkers worker executors.
func psCluster(t *testing.T, nps, nworkers int, opts ...PSOption) (*ParameterServerStrategy, []*transport.PSServer) {
	t.Helper()
	var servers []*transport.PSServer
	jobs := map[string][]string{"chief": {"127.0.0.1:1"}}
	for i := 0; i < nworkers; i++ {
		jobs["worker"] = append(jobs["worker"], fmt.Sprintf("127.0.0.1:%d", 2+i))
	}
	for i := 0; i < nps; i++ {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		jobs["ps"] = append(jobs["ps"], lis.Addr().String())
		spec, _ := cluster.NewClusterSpec(map[string][]string{"ps": {lis.Addr().String()}})
		r, _ := cluster.NewSimpleClusterResolver(spec, "ps", 0, "grpc")
		srv, err := ServeParameterServer(r, lis, WithClusterToken(testToken))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Close() })
		servers = append(servers, srv)
	}
	spec, err := cluster.NewClusterSpec(jobs)
	if err != nil {
		t.Fatal(err)
	}
	r, err := cluster.NewSimpleClusterResolver(spec, "chief", 0, "grpc")
	if err != nil {
		t.Fatal(err)
	}
	s, err := newParameterServerStrategy(r, append([]PSOption{WithClusterToken(testToken), WithPSTimeout(2 * time.Second)}, opts...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, servers
}

func reads(servers []*transport.PSServer) []int64 {
	out := make([]int64, len(servers))
	for i, s := range servers {
		out[i] = s.Stats().Reads
	}
	return out
}

func TestShardedVariable(t *testing.T) {
	leakcheck.Check(t)
	s, servers := psCluster(t, 2, 1, WithVariablePartitioner(NewFixedShardsPartitioner(3)))
	init := make([]float32, 20)
	for i := range init {
		init[i] = float32(i)
	}
	v := s.NewVariable("emb", tensor.MustNew([]int{10, 2}, init), true)
	wantShards := []ShardInfo{{"emb/part_0", 0, 0, 4}, {"emb/part_1", 1, 4, 3}, {"emb/part_2", 0, 7, 3}}
	if got := v.Shards(); !slices.Equal(got, wantShards) {
		t.Fatalf("Shards() = %v, want %v", got, wantShards)
	}
	if got := v.Value().Data(); !slices.Equal(got, init) {
		t.Fatalf("Value() = %v, want %v", got, init)
	}
	// A second variable continues the round robin; a repeated name gets a suffix.
	b := s.NewVariable("emb", tensor.MustNew([]int{2}, []float32{1, 2}), true)
	if b.Name() != "emb_1" || b.NumShards() != 2 || b.Shards()[0].Task != 1 {
		t.Errorf("second variable = %v %v, want emb_1 with 2 shards starting on ps 1", b, b.Shards())
	}
	v.AssignAdd(tensor.Fill(1, 10, 2))
	if got := v.Value().Data(); got[0] != 1 || got[19] != 20 {
		t.Errorf("after AssignAdd(1): %v", got)
	}
	tests := []struct {
		ids       []int
		wantReads []int64 // per ps
	}{
		{[]int{5, 6, 4}, []int64{0, 1}}, // shard 1 only
		{[]int{0, 9}, []int64{2, 0}},    // shards 0 and 2, both on ps 0
		{[]int{3, 3}, []int64{1, 0}},    // shard 0 once
		{[]int{1, 5, 8}, []int64{2, 1}}, // all three shards
	}
	for _, tt := range tests {
		before := reads(servers)
		got := v.EmbeddingLookup(tt.ids)
		after := reads(servers)
		for i := range after {
			if after[i]-before[i] != tt.wantReads[i] {
				t.Errorf("EmbeddingLookup(%v): %d reads on ps %d, want %d", tt.ids, after[i]-before[i], i, tt.wantReads[i])
			}
		}
		if !slices.Equal(got.Shape(), []int{len(tt.ids), 2}) {
			t.Errorf("EmbeddingLookup(%v) shape %v", tt.ids, got.Shape())
		}
		for j, id := range tt.ids {
			if w := float32(2*id + 1); got.Data()[2*j] != w {
				t.Errorf("EmbeddingLookup(%v) row %d = %v, want [%v ...]", tt.ids, j, got.Data()[2*j:2*j+2], w)
			}
		}
	}
	v.ScatterAdd([]int{9, 0}, tensor.MustNew([]int{2, 2}, []float32{100, 100, 10, 10}))
	if got := v.EmbeddingLookup([]int{0, 9}).Data(); !slices.Equal(got, []float32{11, 12, 119, 120}) {
		t.Errorf("after ScatterAdd: rows 0, 9 = %v, want [11 12 119 120]", got)
	}
	if err := recoverErr(func() { v.EmbeddingLookup([]int{10}) }); err == nil || !strings.Contains(err.Error(), "id 10") {
		t.Errorf("EmbeddingLookup([10]) error = %v, want one naming id 10", err)
	}
	if err := recoverErr(func() { v.AssignAdd(tensor.Fill(1, 3)) }); err == nil || !strings.Contains(err.Error(), `"emb"`) {
		t.Errorf("AssignAdd of a wrong shape: error = %v, want one naming the variable", err)
	}
	if got := s.NumReplicasInSync(); got != 1 {
		t.Errorf("NumReplicasInSync() = %d, want 1 (one CPU per worker)", got)
	}
}

func TestNewParameterServerStrategyErrors(t *testing.T) {
	noPS, _ := cluster.NewClusterSpec(map[string][]string{"worker": {"127.0.0.1:2"}, "chief": {"127.0.0.1:1"}})
	r, _ := cluster.NewSimpleClusterResolver(noPS, "chief", 0, "grpc")
	if _, err := newParameterServerStrategy(r, []PSOption{WithClusterToken("x")}); !errors.Is(err, ErrCluster) || !strings.Contains(err.Error(), "ps") {
		t.Errorf("cluster without ps: error = %v, want ErrCluster naming ps", err)
	}
	noW, _ := cluster.NewClusterSpec(map[string][]string{"ps": {"127.0.0.1:3"}, "chief": {"127.0.0.1:1"}})
	r, _ = cluster.NewSimpleClusterResolver(noW, "chief", 0, "grpc")
	if _, err := newParameterServerStrategy(r, []PSOption{WithClusterToken("x")}); !errors.Is(err, ErrCluster) || !strings.Contains(err.Error(), "worker") {
		t.Errorf("cluster without workers: error = %v, want ErrCluster naming workers", err)
	}
}

// counterStep is the counter sample's step: add 1 to the counter, then read it.
func counterStep(v *ShardedVariable, after func(w *WorkerContext)) WorkerFunc {
	return func(w *WorkerContext) (*tensor.Tensor, error) {
		if err := w.AssignAdd(v, tensor.Scalar(1)); err != nil {
			return nil, err
		}
		if after != nil {
			after(w)
		}
		return w.Read(v)
	}
}

func TestCoordinatorCounter(t *testing.T) {
	leakcheck.Check(t)
	s, _ := psCluster(t, 1, 2)
	c := NewClusterCoordinator(s)
	defer c.Close()
	v := s.NewVariable("counter", tensor.Scalar(0), false)
	var rvs []*RemoteValue
	for i := 0; i < 1000; i++ {
		rvs = append(rvs, c.Schedule(counterStep(v, nil)))
	}
	if err := c.Join(); err != nil {
		t.Fatal(err)
	}
	if !c.Done() {
		t.Error("Done() = false after Join")
	}
	if got := v.Value().Item(); got != 1000 {
		t.Errorf("counter = %v, want 1000", got)
	}
	perWorker := map[int]int{}
	for _, rv := range rvs {
		val, err := rv.Fetch()
		if err != nil || val.Item() < 1 || val.Item() > 1000 {
			t.Fatalf("Fetch() = %v, %v", val, err)
		}
		perWorker[rv.Worker()]++
	}
	if len(perWorker) != 2 {
		t.Errorf("steps per worker = %v, want both workers used", perWorker)
	}
}

func TestCoordinatorWorkerKilled(t *testing.T) {
	leakcheck.Check(t)
	s, servers := psCluster(t, 1, 2)
	c := NewClusterCoordinator(s)
	defer c.Close()
	v := s.NewVariable("counter", tensor.Scalar(0), false)
	var killed atomic.Bool
	restarted := make(chan struct{})
	// Worker 1 is killed right after its increment reached the ps and before its step
	// finished: the step runs again on worker 0, whose increment must not count twice.
	after := func(w *WorkerContext) {
		if w.Worker() == 1 && v.Value().Item() >= 300 && killed.CompareAndSwap(false, true) {
			c.workers[1].kill()
			go func() {
				time.Sleep(50 * time.Millisecond)
				c.workers[1].revive()
				close(restarted)
			}()
		}
	}
	for i := 0; i < 1000; i++ {
		c.Schedule(counterStep(v, after))
	}
	if err := c.Join(); err != nil {
		t.Fatal(err)
	}
	if !killed.Load() {
		t.Fatal("worker 1 was never killed")
	}
	if got := v.Value().Item(); got != 1000 {
		t.Errorf("counter = %v, want exactly 1000", got)
	}
	if c.Retries() < 1 || servers[0].Stats().Duplicates < 1 {
		t.Errorf("retries %d, duplicate updates %d: want the killed worker's step rerun and deduplicated", c.Retries(), servers[0].Stats().Duplicates)
	}
	select {
	case <-restarted:
	case <-time.After(5 * time.Second):
		t.Fatal("worker 1 was not restarted")
	}
	// The restarted worker rejoins and takes work again.
	before := c.workers[1].ran.Load()
	deadline := time.Now().Add(10 * time.Second)
	for c.workers[1].ran.Load() == before && time.Now().Before(deadline) {
		for i := 0; i < 50; i++ {
			c.Schedule(counterStep(v, nil))
		}
		if err := c.Join(); err != nil {
			t.Fatal(err)
		}
	}
	if c.workers[1].ran.Load() == before {
		t.Error("worker 1 did not rejoin after its restart")
	}
}

func TestCoordinatorPSKilled(t *testing.T) {
	leakcheck.Check(t)
	s, servers := psCluster(t, 2, 2, WithPSTimeout(500*time.Millisecond))
	c := NewClusterCoordinator(s)
	defer c.Close()
	a := s.NewVariable("a", tensor.Scalar(0), false)
	b := s.NewVariable("b", tensor.Scalar(0), false) // on ps 1
	var n atomic.Int64
	step := func(w *WorkerContext) (*tensor.Tensor, error) {
		if n.Add(1) == 100 {
			servers[1].Close()
		}
		if err := w.AssignAdd(a, tensor.Scalar(1)); err != nil {
			return nil, err
		}
		return nil, w.AssignAdd(b, tensor.Scalar(1))
	}
	for i := 0; i < 1000; i++ {
		c.Schedule(step)
	}
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- c.Join() }()
	select {
	case err := <-done:
		var pf *PSFailureError
		if !errors.As(err, &pf) || pf.Task != 1 || !errors.Is(err, ErrPSFailed) || !strings.Contains(err.Error(), "ps 1") {
			t.Fatalf("Join() = %v, want a *PSFailureError naming ps 1", err)
		}
		t.Logf("Join after %v: %v", time.Since(start), err)
	case <-time.After(10 * time.Second):
		t.Fatal("Join hung after a ps was killed")
	}
	if rv := c.Schedule(step); !errors.Is(rv.err, ErrPSFailed) {
		_, err := rv.Fetch()
		t.Errorf("Schedule after the ps failure: %v, want ErrPSFailed", err)
	}
}

func TestCoordinatorErrorsAndDatasets(t *testing.T) {
	leakcheck.Check(t)
	s, _ := psCluster(t, 1, 2)
	c := NewClusterCoordinator(s)
	defer c.Close()
	// Per-worker datasets: each worker reads its own shard of 0..7.
	xs := make([]float32, 8)
	for i := range xs {
		xs[i] = float32(i)
	}
	pwd := c.CreatePerWorkerDataset(func(ctx *InputContext) *data.Dataset {
		return data.FromTensorSlices(tensor.MustNew([]int{8}, xs)).Shard(ctx.NumInputPipelines, ctx.InputPipelineID)
	})
	it := pwd.Iterator()
	defer it.Close()
	sum := s.NewVariable("sum", tensor.Scalar(0), false)
	for i := 0; i < 8; i++ {
		c.Schedule(func(w *WorkerContext) (*tensor.Tensor, error) {
			el, ok := w.Next(it)
			if !ok {
				return nil, nil // this worker's shard is exhausted
			}
			if int(el[0].Item())%2 != w.Worker() {
				return nil, fmt.Errorf("worker %d got element %v of another worker", w.Worker(), el[0].Item())
			}
			return el[0], w.AssignAdd(sum, el[0])
		})
	}
	if err := c.Join(); err != nil {
		t.Fatal(err)
	}
	if got := sum.Value().Item(); got > 28 || got < 0 {
		t.Errorf("sum = %v, want at most 28", got)
	}
	// A failing function: Join returns its error once; a panic becomes an error.
	boom := errors.New("boom")
	rv := c.Schedule(func(w *WorkerContext) (*tensor.Tensor, error) { return nil, boom })
	if err := c.Join(); !errors.Is(err, boom) {
		t.Errorf("Join() = %v, want boom", err)
	}
	if _, err := rv.Fetch(); !errors.Is(err, boom) {
		t.Errorf("Fetch() = %v, want boom", err)
	}
	if err := c.Join(); err != nil {
		t.Errorf("second Join() = %v, want nil", err)
	}
	c.Schedule(func(w *WorkerContext) (*tensor.Tensor, error) { panic("bad step") })
	if err := c.Join(); err == nil || !strings.Contains(err.Error(), "bad step") {
		t.Errorf("Join() after a panic = %v, want an error with the panic", err)
	}
	c.Close()
	if _, err := c.Schedule(counterStep(sum, nil)).Fetch(); !errors.Is(err, ErrCoordinatorClosed) {
		t.Errorf("Schedule after Close: %v, want ErrCoordinatorClosed", err)
	}
}
