package distribute

import (
	"context"
	"errors"
	"fmt"
	"godist/internal/freeport"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"godist/distlib/cluster"
	"godist/distlib/tensor"
	"godist/distlib/transport"
	"godist/internal/leakcheck"
	"godist/internal/taskproc"
)

const workerHelperEnv = "GODIST_TEST_WORKER_HELPER"

func init() {
	// Compiled into the test binary, so the worker processes (the binary run again) have it.
	RegisterFunction("test.counter_add", func(w *WorkerContext, args []*tensor.Tensor) (*tensor.Tensor, error) {
		if len(args) != 2 {
			return nil, fmt.Errorf("test.counter_add: want (delta, sleep_ms), got %d arguments", len(args))
		}
		v, err := w.Variable("counter")
		if err != nil {
			return nil, err
		}
		if err := w.AssignAdd(v, args[0]); err != nil {
			return nil, err
		}
		time.Sleep(time.Duration(args[1].Item()) * time.Millisecond)
		return w.Read(v)
	})
	RegisterFunction("test.fail", func(w *WorkerContext, args []*tensor.Tensor) (*tensor.Tensor, error) {
		return nil, errors.New("test.fail: failing on purpose")
	})
}

// remoteSpec is the cluster of the remote-worker tests: the chief (this process), one ps
// and the workers.
func remoteSpec(t *testing.T, psAddr string, workers []string) cluster.ClusterSpec {
	t.Helper()
	spec, err := cluster.NewClusterSpec(map[string][]string{"chief": {"127.0.0.1:1"}, "ps": {psAddr}, "worker": workers})
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// TestWorkerHelperProcess is not a test: it is the worker task that the remote-worker tests
// start (the test binary run again with workerHelperEnv = "psaddr,worker0,worker1,...,index").
// It serves until it is killed.
func TestWorkerHelperProcess(t *testing.T) {
	env := os.Getenv(workerHelperEnv)
	if env == "" {
		t.Skip("helper process for the remote-worker tests")
	}
	parts := strings.Split(env, ",")
	index, _ := strconv.Atoi(parts[len(parts)-1])
	r, err := cluster.NewSimpleClusterResolver(remoteSpec(t, parts[0], parts[1:len(parts)-1]), "worker", index, "grpc")
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(2)
	}
	w, err := ServeWorker(r, nil, WithClusterToken(testToken))
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(2)
	}
	fmt.Println("ADDR", w.Addr().String())
	time.Sleep(time.Minute) // killed by the test long before
	os.Exit(3)
}

// startWorkerProcess starts worker task index of the cluster (ps at psAddr, workers at
// addrs) as a separate process and waits until it serves.
func startWorkerProcess(t *testing.T, psAddr string, addrs []string, index int) *exec.Cmd {
	t.Helper()
	cmd, _ := taskproc.Start(t, taskproc.Task{Name: fmt.Sprintf("worker process %d", index), Test: "TestWorkerHelperProcess",
		Env: []string{fmt.Sprintf("%s=%s,%s,%d", workerHelperEnv, psAddr, strings.Join(addrs, ","), index)}, Ready: "ADDR"})
	return cmd
}

// freeAddrs returns n loopback addresses with ports free now, below the ephemeral range
// (package freeport).
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	addrs, err := freeport.LoopbackAddrs(n)
	if err != nil {
		t.Fatal(err)
	}
	return addrs
}

// The counter sample with worker processes: 2 worker tasks add 1 in 1000 scheduled steps;
// worker 1 is killed (SIGKILL) in the middle and restarted; its step runs again on the
// other worker, it rejoins, and the counter ends at exactly 1000.
func TestRemoteWorkerKilledAndRestarted(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	leakcheck.Check(t)
	_, psAddr := startPSProcess(t, "127.0.0.1:0")
	addrs := freeAddrs(t, 2)
	startWorkerProcess(t, psAddr, addrs, 0)
	victim := startWorkerProcess(t, psAddr, addrs, 1)

	r, _ := cluster.NewSimpleClusterResolver(remoteSpec(t, psAddr, addrs), "chief", 0, "grpc")
	s, err := newParameterServerStrategy(r, []PSOption{WithClusterToken(testToken), WithPSTimeout(2 * time.Second), WithRemoteWorkers()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := NewClusterCoordinator(s)
	defer c.Close()
	v := s.NewVariable("counter", tensor.Scalar(0), false)

	if _, err := c.Schedule(counterStep(v, nil)).Fetch(); err == nil || !strings.Contains(err.Error(), "RegisterFunction") {
		t.Fatalf("Schedule(closure) with remote workers: %v, want an error pointing to RegisterFunction", err)
	}
	const steps = 1000
	rvs := make([]*RemoteValue, steps)
	for i := range rvs {
		rvs[i] = c.ScheduleFunction("test.counter_add", tensor.Scalar(1), tensor.Scalar(2))
	}
	// Kill worker 1 once a quarter of the steps are done, then restart it on its address.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := rvs[steps/4].FetchContext(ctx); err != nil {
		t.Fatal(err)
	}
	if err := victim.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	victim.Wait()
	restarted := time.Now()
	startWorkerProcess(t, psAddr, addrs, 1)
	if err := c.Join(); err != nil {
		t.Fatal(err)
	}
	if got := v.Value().Item(); got != steps {
		t.Errorf("counter = %v, want exactly %d", got, steps)
	}
	if c.Retries() < 1 {
		t.Errorf("Retries() = %d, want at least 1 (worker 1 was killed while running a step)", c.Retries())
	}
	// Worker 1 rejoined: it ran some of the last steps.
	late := 0
	for _, rv := range rvs[steps*3/4:] {
		if rv.Worker() == 1 {
			late++
		}
	}
	if late == 0 {
		t.Errorf("restarted worker 1 (at %v) ran none of the last %d steps, want it to rejoin", restarted.Format(time.StampMilli), steps/4)
	}
	st, err := psStats(psAddr)
	if err != nil {
		t.Fatal(err)
	}
	if st.Applied != steps { // every step's update applied once, a rerun's refused
		t.Errorf("ps applied %d updates, want exactly %d (stats %+v)", st.Applied, steps, st)
	}
	t.Logf("retries %d, bytes sent %d, last quarter on worker 1: %d, ps %+v", c.Retries(), c.BytesSent(), late, st)

	// A function that fails, and a name no worker knows, come back as errors naming them.
	if _, err := c.ScheduleFunction("test.fail").Fetch(); err == nil || !strings.Contains(err.Error(), "failing on purpose") {
		t.Errorf("test.fail: %v, want its error", err)
	}
	c.Join()
	if _, err := c.ScheduleFunction("test.nope").Fetch(); err == nil || !strings.Contains(err.Error(), `"test.nope"`) {
		t.Errorf("unknown function: %v, want an error naming it", err)
	}
	c.Join()
}

func psStats(addr string) (transport.PSStats, error) {
	cl, err := transport.DialPS(addr, transport.PSClientOptions{Token: testToken})
	if err != nil {
		return transport.PSStats{}, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return cl.Stats(ctx)
}

func TestScheduleFunctionInProcess(t *testing.T) {
	leakcheck.Check(t)
	s, _ := psCluster(t, 1, 2)
	c := NewClusterCoordinator(s)
	defer c.Close()
	v := s.NewVariable("counter", tensor.Scalar(0), false)
	for i := 0; i < 100; i++ {
		c.ScheduleFunction("test.counter_add", tensor.Scalar(2), tensor.Scalar(0))
	}
	if err := c.Join(); err != nil {
		t.Fatal(err)
	}
	if got := v.Value().Item(); got != 200 {
		t.Errorf("counter = %v, want 200", got)
	}
	tests := []struct {
		name string
		args []*tensor.Tensor
		want string
	}{
		{"test.nope", nil, `no function registered as "test.nope"`},
		{"test.counter_add", []*tensor.Tensor{nil}, "argument 0 is nil"},
		{"test.counter_add", []*tensor.Tensor{tensor.Scalar(1)}, "want (delta, sleep_ms)"},
	}
	for _, tt := range tests {
		_, err := c.ScheduleFunction(tt.name, tt.args...).Fetch()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ScheduleFunction(%q, %v) = %v, want an error containing %q", tt.name, tt.args, err, tt.want)
		}
		c.Join()
	}
}

func TestEncodeCallRoundTrip(t *testing.T) {
	s, _ := psCluster(t, 2, 1, WithVariablePartitioner(NewFixedShardsPartitioner(3)))
	v := s.NewVariable("emb", tensor.Zeros(10, 2), true)
	arg := tensor.MustNew([]int{2, 3}, []float32{1, 2, 3, 4, 5, 6})
	vars, args, err := decodeCall(encodeCall([]*ShardedVariable{v}, []*tensor.Tensor{arg}))
	if err != nil {
		t.Fatal(err)
	}
	if len(vars) != 1 || vars[0].String() != v.String() || fmt.Sprint(vars[0].Shards()) != fmt.Sprint(v.Shards()) || vars[0].rowSize != 2 {
		t.Errorf("decoded variables %v, want %v", vars, v)
	}
	if len(args) != 1 || fmt.Sprint(args[0].Data()) != fmt.Sprint(arg.Data()) {
		t.Errorf("decoded args %v, want %v", args, arg)
	}
	for _, b := range [][]byte{{1}, {5, 0, 0, 0}, append(encodeCall(nil, nil), 9)} {
		if _, _, err := decodeCall(b); err == nil {
			t.Errorf("decodeCall(%v) = nil error, want one", b)
		}
	}
}

// Remote workers that were never started: every wait ends after the worker timeout with
// an error naming the worker tasks and what to do; a later round waits the timeout again.
func TestRemoteWorkersUnreachable(t *testing.T) {
	leakcheck.Check(t)
	s, _ := psCluster(t, 1, 2, WithRemoteWorkers(), WithWorkerTimeout(300*time.Millisecond))
	s.NewVariable("counter", tensor.Scalar(0), false)
	c := NewClusterCoordinator(s)
	defer c.Close()
	for _, tc := range []struct {
		name string
		wait func(rv *RemoteValue) error
	}{
		{"Fetch", func(rv *RemoteValue) error { _, err := rv.Fetch(); return err }},
		{"Join", func(*RemoteValue) error { return c.Join() }},
		{"FetchContext", func(rv *RemoteValue) error {
			_, err := rv.FetchContext(context.Background())
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			start := time.Now()
			withTimeout(t, 10*time.Second, func() {
				rv := c.ScheduleFunction("test.counter_add", tensor.Scalar(1), tensor.Scalar(0))
				err = tc.wait(rv)
			})
			c.Join() // forget the error for the next round
			var ue *WorkerUnreachableError
			if !errors.As(err, &ue) || !errors.Is(err, ErrWorkerUnreachable) {
				t.Fatalf("%s = %v, want a *WorkerUnreachableError", tc.name, err)
			}
			for _, want := range []string{"worker 0 at 127.0.0.1:2", "worker 1 at 127.0.0.1:3", "godist launch --workers N --ps M", "distribute.ServeWorker"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%s error %q does not contain %q", tc.name, err, want)
				}
			}
			if d := time.Since(start); d < 300*time.Millisecond {
				t.Errorf("%s failed after %v, before the worker timeout 300ms", tc.name, d)
			}
		})
	}
}
