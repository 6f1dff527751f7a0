package main

import (
	"path/filepath"
	"testing"
	"time"
)

// TestTrainingInterrupt runs testdata/training.py through jupyter_client: an interrupted
// model.Fit, custom loop, %%distributed Fit and ClusterCoordinator loop stop within a second, leave the kernel idle, and
// the next cells' Evaluate and Fit work.
func TestTrainingInterrupt(t *testing.T) {
	kernelNeedPython(t, "jupyter_client")
	env := kernelEnv(t)
	script, _ := filepath.Abs("testdata/training.py")
	out, err := kernelRun(t, env, 5*time.Minute, kernelPython, script)
	if err != nil {
		t.Fatalf("training interrupt tests: %v\n%s", err, out)
	}
	if n := len(kernelTestLine.FindAllString(out, -1)); n < 4 {
		t.Errorf("training interrupt tests ran %d tests, want 4\n%s", n, out)
	}
}
