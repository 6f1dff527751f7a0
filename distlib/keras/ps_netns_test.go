package keras

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"godist/distlib/cluster"
	"godist/distlib/distribute"
	"godist/distlib/keras/layers"
	"godist/internal/leakcheck"
	"godist/internal/netns"
)

// Issue 5: 1 parameter server, 2 workers and the coordinator, each a process on a host of
// its own (a network namespace of internal/netns), train the MNIST CNN (mnistCNN) through
// Fit to the accuracy of one process; then the ps host's cable is cut in the middle of a Fit, and the
// coordinator reports the ps by task and address within its timeouts instead of hanging.

// psNetnsHelperEnv makes the test binary a task of TestPSFitAcrossHosts: "ps", "worker <i>"
// or "chief"; psNetnsJobsEnv holds the cluster's jobs (JSON).
const (
	psNetnsHelperEnv = "GODIST_KERAS_PSNETNS_HELPER"
	psNetnsJobsEnv   = "GODIST_KERAS_PSNETNS_JOBS"
)

const (
	psNetnsPort      = "7070"           // every task listens on it, on its own host
	psNetnsPSTimeout = time.Second      // WithPSTimeout of the coordinator and the workers
	psNetnsWorkerTO  = 2 * time.Second  // WithWorkerTimeout of the coordinator
	psNetnsFailBound = 15 * time.Second // the cut is reported within this
	psNetnsStartup   = 20 * time.Second // a task says READY within this
	psNetnsTrainTime = 60 * time.Second // the coordinator trains within this
	psNetnsCloseTime = 10 * time.Second // a task exits within this once told to
	psNetnsCutEpochs = 2                // short epochs of the second Fit before the cut
	psNetnsEndless   = 1_000_000        // epochs of the second Fit: it only ends by failing
)

// TestPSNetnsHelperProcess is not a test: it is a task of TestPSFitAcrossHosts (the test
// binary run again on a host with psNetnsHelperEnv set).
func TestPSNetnsHelperProcess(t *testing.T) {
	mode := os.Getenv(psNetnsHelperEnv)
	if mode == "" {
		t.Skip("helper process for TestPSFitAcrossHosts")
	}
	if err := psNetnsHelper(mode, os.Stdin); err != nil {
		fmt.Println("ERROR", strconv.Quote(err.Error()))
		os.Exit(2)
	}
	os.Exit(0)
}

// psNetnsHelper runs one task. Every task prints READY when it serves (the chief: ACC after
// training, then TRAINING during its second Fit and FAILED when that Fit fails); the ps and
// workers serve until their stdin closes, then close and print what they did.
func psNetnsHelper(mode string, stdin io.Reader) error {
	var jobs map[string][]string
	if err := json.Unmarshal([]byte(os.Getenv(psNetnsJobsEnv)), &jobs); err != nil {
		return fmt.Errorf("%s: %w", psNetnsJobsEnv, err)
	}
	spec, err := cluster.NewClusterSpec(jobs)
	if err != nil {
		return err
	}
	opts := []distribute.PSOption{distribute.WithClusterToken(psTestToken), distribute.WithPSTimeout(psNetnsPSTimeout)}
	SetRandomSeed(1) // the same program on every task: the same model, built first (same names)
	role, index, _ := strings.Cut(mode, " ")
	switch role {
	case "ps":
		r, err := cluster.NewSimpleClusterResolver(spec, "ps", 0, "grpc")
		if err != nil {
			return err
		}
		srv, err := distribute.ServeParameterServer(r, nil, opts...)
		if err != nil {
			return err
		}
		fmt.Println("READY", srv.Addr())
		io.Copy(io.Discard, stdin)
		st := srv.Stats()
		srv.Close()
		fmt.Printf("CLOSED variables=%d applied=%d\n", st.Variables, st.Applied)
		return nil
	case "worker":
		i, err := strconv.Atoi(index)
		if err != nil {
			return fmt.Errorf("worker index %q: %w", index, err)
		}
		r, err := cluster.NewSimpleClusterResolver(spec, "worker", i, "grpc")
		if err != nil {
			return err
		}
		mnistCNN().RegisterPSTrainStep()
		w, err := distribute.ServeWorker(r, nil, opts...)
		if err != nil {
			return err
		}
		fmt.Println("READY", w.Addr())
		io.Copy(io.Discard, stdin)
		runs := w.Runs()
		w.Close()
		fmt.Printf("CLOSED runs=%d\n", runs)
		return nil
	case "chief":
		train, test, err := mnistData()
		if err != nil {
			return err
		}
		r, err := cluster.NewSimpleClusterResolver(spec, "chief", 0, "grpc")
		if err != nil {
			return err
		}
		s := distribute.NewParameterServerStrategy(r, append(opts, distribute.WithRemoteWorkers(),
			distribute.WithWorkerTimeout(psNetnsWorkerTO))...)
		defer s.Close()
		var m *Model
		s.Scope(func() { m = mnistCNN() })
		fmt.Println("READY")
		if err := psRecover(func() { m.Fit(train, Epochs(psNetnsEpochs), Verbose(0), StepsPerExecution(4)) }); err != nil {
			return fmt.Errorf("fit: %w", err)
		}
		fmt.Println("ACC", m.Evaluate(test, Verbose(0))["accuracy"])

		// Train on until the test cuts the ps host's cable: Fit must fail, naming the ps.
		said := false
		cb := LambdaCallback{OnEpochEnd: func(e int, _ Logs) {
			if e+1 >= psNetnsCutEpochs && !said {
				said = true
				fmt.Println("TRAINING")
			}
		}}
		err = psRecover(func() {
			m.Fit(train.Repeat(-1), Epochs(psNetnsEndless), Verbose(0), StepsPerEpoch(8), StepsPerExecution(4), Callbacks(cb))
		})
		var pf *distribute.PSFailureError
		if !errors.As(err, &pf) {
			return fmt.Errorf("fit after the cut = %v, want a *distribute.PSFailureError", err)
		}
		fmt.Println("FAILED", strconv.Quote(err.Error()))
		return nil
	}
	return fmt.Errorf("unknown helper mode %q", mode)
}

// mnistCNN is the MNIST CNN of the course's peers (../shared/peers/model.py) and
// bench/ps: Conv2D 32 3x3 ReLU, MaxPooling2D 2, Flatten, Dense 64 ReLU, Dense 10.
func mnistCNN() *Model {
	m := Sequential(layers.Conv2D(32, 3, layers.ReLU, layers.InputShape(28, 28, 1)), layers.MaxPooling2D(2),
		layers.Flatten(), layers.Dense(64, layers.ReLU), layers.Dense(10))
	m.Compile(Adam(1e-3), SparseCategoricalCrossentropy(true), "accuracy")
	return m
}

// psNetnsTask is a task running on a host.
type psNetnsTask struct {
	name   string
	stdin  io.WriteCloser
	lines  chan string
	stderr *strings.Builder
	done   chan error // the process's exit
}

func startPSNetnsTask(t *testing.T, ctx context.Context, h *netns.Hosts, host int, mode, jobs string) *psNetnsTask {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := h.Command(ctx, host, exe, "-test.run=^TestPSNetnsHelperProcess$", "-test.v=false")
	// Network namespaces share /dev/shm, which hosts do not: the workers' values go over
	// the network, as between hosts.
	cmd.Env = append(os.Environ(), psNetnsHelperEnv+"="+mode, psNetnsJobsEnv+"="+jobs, "GOMAXPROCS=1", cluster.SharedMemoryEnv+"=0")
	task := &psNetnsTask{name: fmt.Sprintf("%s on %s", mode, h.Addr(host)), lines: make(chan string, 16),
		stderr: &strings.Builder{}, done: make(chan error, 1)}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if task.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = task.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			task.lines <- sc.Text()
		}
		close(task.lines)
		task.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		task.stdin.Close()
		select {
		case <-task.done:
			return
		case <-time.After(psNetnsCloseTime):
		}
		cmd.Cancel()
		for range task.lines {
		}
		<-task.done
	})
	return task
}

// expect returns the rest of the task's next line starting with word, skipping log lines;
// it fails the test on an ERROR line, an early exit or after timeout.
func (task *psNetnsTask) expect(t *testing.T, word string, timeout time.Duration) string {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case l, ok := <-task.lines:
			if !ok {
				t.Fatalf("%s ended before saying %s; stderr:\n%s", task.name, word, task.stderr)
			}
			if rest, ok := strings.CutPrefix(l, "ERROR "); ok {
				t.Fatalf("%s failed: %s; stderr:\n%s", task.name, rest, task.stderr)
			}
			if l == word {
				return ""
			}
			if rest, ok := strings.CutPrefix(l, word+" "); ok {
				return rest
			}
		case <-deadline:
			t.Fatalf("%s did not say %s within %v; stderr:\n%s", task.name, word, timeout, task.stderr)
		}
	}
}

// stop closes the task's stdin and returns its CLOSED line; the task must exit cleanly.
func (task *psNetnsTask) stop(t *testing.T) string {
	t.Helper()
	task.stdin.Close()
	closed := task.expect(t, "CLOSED", psNetnsCloseTime)
	for range task.lines {
	}
	select {
	case err := <-task.done:
		if err != nil {
			t.Errorf("%s exited with %v; stderr:\n%s", task.name, err, task.stderr)
		}
		task.done <- err // for the cleanup
	case <-time.After(psNetnsCloseTime):
		t.Fatalf("%s did not exit within %v of its CLOSED line", task.name, psNetnsCloseTime)
	}
	return closed
}

// psNetnsCount reads key=N from a CLOSED line.
func psNetnsCount(t *testing.T, line, key string) int64 {
	t.Helper()
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("CLOSED line %q: %s: %v", line, key, err)
			}
			return n
		}
	}
	t.Fatalf("CLOSED line %q lacks %s=", line, key)
	return 0
}

// psNetnsEpochs is how long TestPSFitAcrossHosts trains, in one process and across hosts.
// After one epoch (125 steps) the CNN is still on the steep part of its learning curve,
// where the workers' asynchronous updates moved the accuracy from 0.859 to 0.922 between
// runs (one process: 0.914), across the test's tolerance of 0.05 under load; after two the
// runs agree more closely.
const psNetnsEpochs = 2

func TestPSFitAcrossHosts(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a ps, two workers and a coordinator on four hosts: skipped under -short")
	}
	if reason := netns.Unavailable(); reason != "" {
		t.Skip("netns: " + reason)
	}
	train, test := mnistSmall(t)
	leakcheck.Check(t)
	SetRandomSeed(1)
	local := mnistCNN()
	local.Fit(train, Epochs(psNetnsEpochs), Verbose(0))
	want := local.Evaluate(test, Verbose(0))["accuracy"]

	h := netns.New(t, 4) // ps 0, worker 0, worker 1, chief
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const psHost, chiefHost = 0, 3
	addr := func(i int) string { return h.Addr(i) + ":" + psNetnsPort }
	b, err := json.Marshal(map[string][]string{"ps": {addr(psHost)}, "worker": {addr(1), addr(2)}, "chief": {addr(chiefHost)}})
	if err != nil {
		t.Fatal(err)
	}
	jobs := string(b)
	t.Logf("cluster: %s", jobs)

	ps := startPSNetnsTask(t, ctx, h, psHost, "ps", jobs)
	ps.expect(t, "READY", psNetnsStartup)
	workers := []*psNetnsTask{startPSNetnsTask(t, ctx, h, 1, "worker 0", jobs), startPSNetnsTask(t, ctx, h, 2, "worker 1", jobs)}
	for _, w := range workers {
		w.expect(t, "READY", psNetnsStartup)
	}
	chief := startPSNetnsTask(t, ctx, h, chiefHost, "chief", jobs)
	chief.expect(t, "READY", psNetnsStartup)
	start := time.Now()
	accLine := chief.expect(t, "ACC", psNetnsTrainTime)
	acc, err := strconv.ParseFloat(accLine, 64)
	if err != nil {
		t.Fatalf("chief's ACC line %q: %v", accLine, err)
	}
	t.Logf("accuracy: one process %.3f, ps + 2 workers + coordinator on 4 hosts (CNN) %.3f (trained in %v)", want, acc, time.Since(start).Round(time.Millisecond))
	if acc < 0.8 || math.Abs(acc-want) > 0.05 {
		t.Errorf("accuracy across hosts = %.3f, want >= 0.8 and within 0.05 of one process's %.3f", acc, want)
	}

	// Cut the ps host's cable during the next Fit: the coordinator names ps 0 and its
	// address within the timeouts, and does not hang.
	chief.expect(t, "TRAINING", psNetnsTrainTime)
	if err := h.CutLink(psHost); err != nil {
		t.Fatal(err)
	}
	cut := time.Now()
	failed := chief.expect(t, "FAILED", psNetnsFailBound)
	took := time.Since(cut)
	msg, err := strconv.Unquote(failed)
	if err != nil {
		t.Fatalf("chief's FAILED line %q: %v", failed, err)
	}
	t.Logf("coordinator after the ps host's cable was cut, in %v: %s", took.Round(time.Millisecond), msg)
	if wantMsg := "ps 0 at " + addr(psHost); !strings.Contains(msg, wantMsg) {
		t.Errorf("coordinator's error after the cut %q does not contain %q", msg, wantMsg)
	}
	if bound := psNetnsWorkerTO + psNetnsPSTimeout + 5*time.Second; took > bound {
		t.Errorf("coordinator reported the cut after %v, want within %v (worker timeout %v + ps timeout %v + slack)",
			took.Round(time.Millisecond), bound, psNetnsWorkerTO, psNetnsPSTimeout)
	}
	for _, task := range []*psNetnsTask{chief} {
		for range task.lines {
		}
		select {
		case err := <-task.done:
			if err != nil {
				t.Errorf("%s exited with %v; stderr:\n%s", task.name, err, task.stderr)
			}
			task.done <- err
		case <-time.After(psNetnsCloseTime):
			t.Fatalf("%s did not exit within %v after failing", task.name, psNetnsCloseTime)
		}
	}

	// Every task shuts down cleanly, the cut ps included; the ps applied the workers'
	// updates and both workers ran steps.
	if st := ps.stop(t); psNetnsCount(t, st, "variables") == 0 || psNetnsCount(t, st, "applied") == 0 {
		t.Errorf("ps stats %q, want variables and applied updates", st)
	}
	for _, w := range workers {
		if st := w.stop(t); psNetnsCount(t, st, "runs") == 0 {
			t.Errorf("%s: %q, want steps run", w.name, st)
		}
	}
}
