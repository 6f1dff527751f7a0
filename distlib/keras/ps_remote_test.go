package keras

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"godist/distlib/cluster"
	"godist/distlib/distribute"
	"godist/internal/taskproc"
)

// psHelperEnv makes the test binary a task of TestPSFitRemoteWorkers: "worker <i> <jobs
// json>" or "chief <jobs json>".
const psHelperEnv = "GODIST_KERAS_PS_HELPER"

// TestPSFitHelperProcess is not a test: it is a worker task or the coordinator that
// TestPSFitRemoteWorkers starts (the test binary run again with psHelperEnv set).
func TestPSFitHelperProcess(t *testing.T) {
	mode := os.Getenv(psHelperEnv)
	if mode == "" {
		t.Skip("helper process for TestPSFitRemoteWorkers")
	}
	if err := psHelper(mode); err != nil {
		fmt.Println("ERROR", err)
		os.Exit(2)
	}
	os.Exit(0)
}

func psHelper(mode string) error {
	f := strings.SplitN(mode, " ", 3)
	var jobs map[string][]string
	if err := json.Unmarshal([]byte(f[len(f)-1]), &jobs); err != nil {
		return err
	}
	spec, err := cluster.NewClusterSpec(jobs)
	if err != nil {
		return err
	}
	// The same program on every task: the same model, built first (same names).
	SetRandomSeed(1)
	switch f[0] {
	case "worker":
		i, _ := strconv.Atoi(f[1])
		r, _ := cluster.NewSimpleClusterResolver(spec, "worker", i, "grpc")
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		mnistModel().RegisterPSTrainStep()
		if _, err := distribute.ServeWorker(r, lis, distribute.WithClusterToken(psTestToken)); err != nil {
			return err
		}
		fmt.Println("ADDR", lis.Addr().String())
		time.Sleep(2 * time.Minute) // killed by the test long before
		return fmt.Errorf("not stopped by the test")
	case "chief":
		train, test, err := mnistData()
		if err != nil {
			return err
		}
		r, _ := cluster.NewSimpleClusterResolver(spec, "chief", 0, "grpc")
		s := distribute.NewParameterServerStrategy(r, distribute.WithClusterToken(psTestToken), distribute.WithRemoteWorkers())
		defer s.Close()
		var pm *Model
		s.Scope(func() { pm = mnistModel() })
		rec := &psBatchLog{stopAtBatch: -1, m: pm}
		pm.Fit(train, Epochs(1), Verbose(0), StepsPerExecution(4), Callbacks(rec.callback()))
		ends, _ := json.Marshal(rec.ends)
		fmt.Println("ACC", pm.Evaluate(test, Verbose(0))["accuracy"], string(ends))
		return nil
	}
	return fmt.Errorf("unknown helper mode %q", mode)
}

// startPSHelper starts the test binary as a helper and returns the first ADDR or ACC
// line's value.
func startPSHelper(t *testing.T, mode, want string, timeout time.Duration) string {
	t.Helper()
	_, rest := taskproc.Start(t, taskproc.Task{Name: fmt.Sprintf("helper %q", mode), Test: "TestPSFitHelperProcess",
		Env: []string{psHelperEnv + "=" + mode, "GOMAXPROCS=1"}, Ready: want, Timeout: timeout})
	return rest
}

// 1 ps + 2 worker processes (GOMAXPROCS=1) train the MNIST model through Fit, with the
// coordinator as a third process, to the accuracy of one process.
func TestPSFitRemoteWorkers(t *testing.T) {
	train, test := mnistSmall(t)
	SetRandomSeed(1)
	local := mnistModel()
	local.Fit(train, Epochs(1), Verbose(0))
	want := local.Evaluate(test, Verbose(0))["accuracy"]

	_, servers := psStrategy(t, 1, 1)
	jobs := map[string][]string{"chief": {"127.0.0.1:1"}, "ps": {servers[0].Addr().String()},
		"worker": {"127.0.0.1:2", "127.0.0.1:3"}}
	for i := range 2 {
		b, _ := json.Marshal(jobs)
		jobs["worker"][i] = startPSHelper(t, fmt.Sprintf("worker %d %s", i, b), "ADDR", 20*time.Second)
	}
	b, _ := json.Marshal(jobs)
	accLine := startPSHelper(t, "chief "+string(b), "ACC", 60*time.Second)
	accText, endsText, _ := strings.Cut(accLine, " ")
	acc, err := strconv.ParseFloat(accText, 64)
	if err != nil {
		t.Fatalf("chief's ACC line %q: %v", accLine, err)
	}
	// The batch-end callbacks ran on the coordinator once per scheduled function: 125
	// batches of 64, 4 per function.
	var ends [][2]int
	if err := json.Unmarshal([]byte(endsText), &ends); err != nil {
		t.Fatalf("chief's ACC line %q: batch ends: %v", accLine, err)
	}
	if _, want := psWantBatches(1, 125, 4); fmt.Sprint(ends) != fmt.Sprint(want) {
		t.Errorf("TrainBatchEnd (epoch, batch) with worker processes = %v, want %v", ends, want)
	}
	t.Logf("accuracy: one process %.3f, 1 ps + 2 worker processes %.3f", want, acc)
	if acc < 0.8 || math.Abs(acc-want) > 0.05 {
		t.Errorf("accuracy with worker processes = %.3f, want >= 0.8 and within 0.05 of one process's %.3f", acc, want)
	}
	if st := servers[0].Stats(); st.Applied == 0 || st.BytesIn == 0 {
		t.Errorf("ps stats %+v, want applied updates and bytes received", st)
	}
}

// Fit with remote workers that were never started refuses after the worker timeout with
// an error naming the worker tasks and how to start them, instead of waiting forever.
func TestPSFitRemoteWorkersUnreachable(t *testing.T) {
	train, _ := mnistSmall(t)
	s, _ := psStrategy(t, 1, 2, distribute.WithRemoteWorkers(), distribute.WithWorkerTimeout(300*time.Millisecond))
	var m *Model
	s.Scope(func() { m = mnistModel() })
	done := make(chan any, 1)
	go func() {
		defer func() { done <- recover() }()
		m.Fit(train.Take(4), Epochs(1), Verbose(0))
	}()
	var p any
	select {
	case p = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Fit with no worker process running did not return within 20s")
	}
	err, ok := p.(error)
	if !ok || !errors.Is(err, distribute.ErrWorkerUnreachable) {
		t.Fatalf("Fit with no worker process panicked with %v, want a distribute.ErrWorkerUnreachable error", p)
	}
	for _, want := range []string{"worker 0 at 127.0.0.1:2", "worker 1 at 127.0.0.1:3", "godist launch --workers N --ps M", "distribute.ServeWorker"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Fit error %q does not contain %q", err, want)
		}
	}
}
