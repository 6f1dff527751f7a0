package cluster

import (
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
