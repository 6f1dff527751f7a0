package distribute

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"godist/distlib/cluster"
	"godist/distlib/tensor"
	"godist/internal/leakcheck"
	"godist/internal/taskproc"
)

const (
	mwHelperEnv = "GODIST_TEST_MW_HELPER_OUT"
	mwHealthEnv = "GODIST_TEST_MW_HEALTH" // "interval,timeout" for WithHealthCheck; default settings when unset
)

// lockedFile serializes the writes of the log and the helper's own lines.
type lockedFile struct {
	mu sync.Mutex
	f  *os.File
}

func (l *lockedFile) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Write(p)
}

// TestMWWorkerHelperProcess is not a test: it is the worker task that the multi-worker
// process tests start by hand, with TF_CONFIG and GODIST_CLUSTER_TOKEN as a user or Slurm
// would set them (not through godist launch). With default settings it all-reduces in a
// loop, writing the strategy's log, "STEP n" lines and at last "ERROR message" to the file
// mwHelperEnv names, and exits 1 on the first error.
func TestMWWorkerHelperProcess(t *testing.T) {
	out := os.Getenv(mwHelperEnv)
	if out == "" {
		t.Skip("helper process for the multi-worker process tests")
	}
	f, err := os.Create(out)
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(2)
	}
	w := &lockedFile{f: f}
	SetLogOutput(w)
	var opts []MultiWorkerOption
	if h := os.Getenv(mwHealthEnv); h != "" {
		var interval, timeout time.Duration
		if is, ts, ok := strings.Cut(h, ","); ok {
			interval, _ = time.ParseDuration(is)
			timeout, _ = time.ParseDuration(ts)
		}
		opts = append(opts, WithHealthCheck(interval, timeout))
	}
	var s *MultiWorkerMirroredStrategy
	if err := recoverErr(func() { s = NewMultiWorkerMirroredStrategy(opts...) }); err != nil {
		fmt.Println("ERROR", err)
		os.Exit(2)
	}
	fmt.Println("READY", s.t.Rank())
	for step := 1; ; step++ {
		x := tensor.MustNew([]int{256}, make([]float32, 256))
		if _, err := s.allReduceWorkers(context.Background(), ReduceSum, []*tensor.Tensor{x}); err != nil {
			fmt.Fprintf(w, "ERROR %v\n", err)
			f.Close()
			os.Exit(1)
		}
		fmt.Fprintf(w, "STEP %d\n", step)
		time.Sleep(5 * time.Millisecond)
	}
}

// startMWWorker starts worker index of a cluster of workers at addrs as a process of its
// own, configured by TF_CONFIG, and returns it with the file it writes.
func startMWWorker(t *testing.T, addrs []string, index int, env ...string) (*exec.Cmd, string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), fmt.Sprintf("worker%d.out", index))
	tfConfig := fmt.Sprintf(`{"cluster": {"worker": ["%s"]}, "task": {"type": "worker", "index": %d}}`,
		strings.Join(addrs, `", "`), index)
	cmd, _ := taskproc.Start(t, taskproc.Task{Name: fmt.Sprintf("worker process %d", index), Test: "TestMWWorkerHelperProcess",
		Env:   append([]string{mwHelperEnv + "=" + out, "TF_CONFIG=" + tfConfig, cluster.TokenEnv + "=process-test-token", cluster.BindAllEnv + "="}, env...),
		Ready: "READY"})
	return cmd, out
}

func loopbackAddrs(t *testing.T, n int) []string {
	t.Helper()
	addrs := make([]string, n)
	for i := range addrs {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Skipf("no loopback TCP: %v", err)
		}
		addrs[i] = l.Addr().String()
		l.Close()
	}
	return addrs
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// TestMWProcessLostWorkerNamed: two workers started by hand with TF_CONFIG all-reduce in
// a loop; worker 1 is lost; worker 0 exits within the bound with an error naming worker 1
// and its address, and what to do. Killed (SIGKILL, default settings): its connections
// close, worker 0 fails at once, well within the 60 s asked. Stopped (SIGSTOP: connections
// open, no answer): a health check times out; shortened here to 5 s, while the defaults
// (a check every 10 s, 30 s to answer) report it within 60 s.
func TestMWProcessLostWorkerNamed(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes; skipped under -short")
	}
	leakcheck.Check(t)
	for _, tc := range []struct {
		name   string
		env    []string
		sig    syscall.Signal
		within time.Duration
		cause  string
	}{
		{"killed", nil, syscall.SIGKILL, 60 * time.Second, "its data connection closed"},
		{"stopped", []string{mwHealthEnv + "=200ms,5s"}, syscall.SIGSTOP, 45 * time.Second, "did not answer a health check within 5s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addrs := loopbackAddrs(t, 2)
			w0, out0 := startMWWorker(t, addrs, 0, tc.env...)
			w1, out1 := startMWWorker(t, addrs, 1, tc.env...)
			eventually(t, 60*time.Second, "both workers all-reduce", func() bool {
				return strings.Contains(readFile(out0), "STEP 20\n") && strings.Contains(readFile(out1), "STEP 20\n")
			})
			exited := make(chan error, 1)
			go func() { exited <- w0.Wait() }()
			if err := w1.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			lost := time.Now()
			select {
			case err := <-exited:
				t.Logf("worker 0 exited %v after worker 1 got %v (%v)", time.Since(lost).Round(time.Millisecond), tc.sig, err)
			case <-time.After(tc.within):
				t.Fatalf("worker 0 still runs %v after worker 1 got %v; its output:\n%s", tc.within, tc.sig, tail(readFile(out0), 2000))
			}
			got := readFile(out0)
			want := fmt.Sprintf("ERROR distribute: worker 1 (%s) was lost during allreduce", addrs[1])
			for _, w := range []string{want, tc.cause, "restart the job"} {
				if !strings.Contains(got, w) {
					t.Fatalf("worker 0's output does not say %q:\n%s", w, tail(got, 2000))
				}
			}
		})
	}
}

// TestMWProcessAloneNamesMissing: one worker started alone names the missing worker in its
// log within 35 s (default settings).
func TestMWProcessAloneNamesMissing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a worker process; skipped under -short")
	}
	leakcheck.Check(t)
	addrs := loopbackAddrs(t, 2)
	_, out0 := startMWWorker(t, addrs, 0)
	want := fmt.Sprintf("INFO:distribute:waiting for the cluster: worker 1 (%s) has not connected yet (", addrs[1])
	eventually(t, 35*time.Second, "worker 0 names the missing worker 1", func() bool {
		return strings.Contains(readFile(out0), want)
	})
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
