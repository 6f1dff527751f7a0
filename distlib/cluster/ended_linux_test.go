package cluster

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestEnded: a running child has not ended; a killed one has, before and after it is
// reaped, and peeking at it leaves its exit status to Wait.
func TestEnded(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	if ended(pid) {
		t.Fatalf("ended(%d) = true for a running child", pid)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !ended(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("ended(%d) = false 10 s after SIGKILL", pid)
		}
		time.Sleep(time.Millisecond)
	}
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.String() != "signal: killed" {
		t.Fatalf("Wait after ended = %v, want signal: killed", err)
	}
	if !ended(pid) {
		t.Errorf("ended(%d) = false once reaped", pid)
	}
	if ended(os.Getpid()) {
		t.Errorf("ended(self) = true")
	}
}

// TestEndedReapedWhileRead: a process reaped after /proc/pid/stat was opened and before it
// was read (the launcher's check racing the task's Wait) reads as an error that is not a
// missing file; it has ended.
func TestEndedReapedWhileRead(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !ended(pid) { // a zombie now: its /proc entry is still there
		if time.Now().After(deadline) {
			t.Fatalf("ended(%d) = false 10 s after SIGKILL", pid)
		}
		time.Sleep(time.Millisecond)
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_ = cmd.Wait() // reaped between the open and the read
	b, err := io.ReadAll(f)
	if err == nil {
		t.Skipf("this kernel still reads a reaped process's stat: %q", b)
	}
	if !statEnded(b, err) {
		t.Errorf("reading the stat of a process reaped after the open gave %v: counted as running", err)
	}
}
