package distribute

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"godist/distlib/cluster"
	"godist/distlib/tensor"
	"godist/internal/leakcheck"
	"godist/internal/taskproc"
)

const psHelperEnv = "GODIST_TEST_PS_HELPER_ADDR"

// TestPSHelperProcess is not a test: it is the ps task that the process tests start (the
// test binary run again with psHelperEnv set). It serves until it is killed.
func TestPSHelperProcess(t *testing.T) {
	addr := os.Getenv(psHelperEnv)
	if addr == "" {
		t.Skip("helper process for the ps process tests")
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(2)
	}
	spec, _ := cluster.NewClusterSpec(map[string][]string{"ps": {lis.Addr().String()}})
	r, _ := cluster.NewSimpleClusterResolver(spec, "ps", 0, "grpc")
	if _, err := ServeParameterServer(r, lis, WithClusterToken(testToken)); err != nil {
		fmt.Println("ERROR", err)
		os.Exit(2)
	}
	fmt.Println("ADDR", lis.Addr().String())
	time.Sleep(time.Minute) // killed by the test long before
	os.Exit(3)
}

// startPSProcess starts a ps task as a separate process listening on addr and returns it
// with its address.
func startPSProcess(t *testing.T, addr string) (*exec.Cmd, string) {
	t.Helper()
	return taskproc.Start(t, taskproc.Task{Name: "ps process", Test: "TestPSHelperProcess",
		Env: []string{psHelperEnv + "=" + addr}, Ready: "ADDR"})
}

func strategyFor(t *testing.T, psAddr string, workers int) *ParameterServerStrategy {
	t.Helper()
	jobs := map[string][]string{"chief": {"127.0.0.1:1"}, "ps": {psAddr}}
	for i := 0; i < workers; i++ {
		jobs["worker"] = append(jobs["worker"], fmt.Sprintf("127.0.0.1:%d", 2+i))
	}
	spec, err := cluster.NewClusterSpec(jobs)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := cluster.NewSimpleClusterResolver(spec, "chief", 0, "grpc")
	s, err := newParameterServerStrategy(r, []PSOption{WithClusterToken(testToken), WithPSTimeout(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The counter sample with a ps in its own process: the ps is killed (SIGKILL) in the
// middle, the coordinator reports which task failed within its timeout; a restarted ps
// and a restarted coordinator resume from the last checkpoint and end at exactly 1000.
func TestPSProcessKilledCoordinatorResumes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	leakcheck.Check(t)
	ps, addr := startPSProcess(t, "127.0.0.1:0")
	s := strategyFor(t, addr, 2)
	c := NewClusterCoordinator(s)
	v := s.NewVariable("counter", tensor.Scalar(0), false)
	for i := 0; i < 500; i++ {
		c.Schedule(counterStep(v, nil))
	}
	if err := c.Join(); err != nil {
		t.Fatal(err)
	}
	ckpt := filepath.Join(t.TempDir(), "ckpt")
	if err := s.SaveCheckpoint(ckpt); err != nil {
		t.Fatal(err)
	}
	// Steps after the checkpoint are lost with the ps.
	for i := 0; i < 1000; i++ {
		c.Schedule(counterStep(v, nil))
	}
	time.Sleep(20 * time.Millisecond)
	if err := ps.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err := c.Join()
	var pf *PSFailureError
	if !errors.As(err, &pf) || pf.Task != 0 || !strings.Contains(err.Error(), "ps 0 at "+addr) {
		t.Fatalf("Join() after killing the ps = %v, want a *PSFailureError naming ps 0 at %s", err, addr)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the ps failure took %v to report, want about the 1 s timeout", d)
	}
	c.Close()
	s.Close()

	// Restart the ps on its address and the coordinator; resume from the checkpoint.
	startPSProcess(t, addr)
	s2 := strategyFor(t, addr, 2)
	defer s2.Close()
	c2 := NewClusterCoordinator(s2)
	defer c2.Close()
	v2 := s2.NewVariable("counter", tensor.Scalar(0), false)
	if err := s2.RestoreCheckpoint(ckpt); err != nil {
		t.Fatal(err)
	}
	if got := v2.Value().Item(); got != 500 {
		t.Fatalf("counter after restore = %v, want 500", got)
	}
	for i := 0; i < 500; i++ {
		c2.Schedule(counterStep(v2, nil))
	}
	if err := c2.Join(); err != nil {
		t.Fatal(err)
	}
	if got := v2.Value().Item(); got != 1000 {
		t.Errorf("counter = %v, want exactly 1000", got)
	}
	// The evaluator reads the checkpoint without a cluster.
	vals, err := ReadCheckpoint(ckpt)
	if err != nil || vals["counter"].Item() != 500 {
		t.Errorf("ReadCheckpoint = %v, %v, want counter 500", vals, err)
	}
	if _, err := ReadCheckpoint(filepath.Join(t.TempDir(), "none")); !errors.Is(err, ErrCheckpoint) {
		t.Errorf("ReadCheckpoint of a missing file: %v, want ErrCheckpoint", err)
	}
}
