package main

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"godist/distlib/datasets"
)

// TestSmoke builds the bench and runs it briefly on two worker processes: 20 global steps,
// the test set evaluated every 10. It checks the chief's JSON report (the shape
// bench/fashion/run.sh and report.py read) and that the model learns: measured on 2 shared
// cores (2026-11-26), accuracy 0.72 after 10 steps and 0.77 after 20; the bound 0.5 is far
// above chance (0.1).
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("fashion: the smoke run trains for a few seconds; skipped under -short")
	}
	if _, _, err := datasets.LoadFashionMNIST(datasets.NoDownload()); err != nil {
		t.Skipf("fashion: no Fashion-MNIST here (apt-get install dataset-fashion-mnist): %v", err)
	}
	bin := filepath.Join(t.TempDir(), "fashion")
	if out, err := exec.Command("go", "build", "-o", bin, "godist/bench/fashion").CombinedOutput(); err != nil {
		t.Fatalf("go build ./bench/fashion: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-workers", "2", "-max-steps", "20", "-eval-every", "10", "-timeout", "2m")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("fashion -workers 2 -max-steps 20: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "{") {
		t.Fatalf("stdout = %q, want the JSON report and the summary line", out)
	}
	var res result
	if err := json.Unmarshal([]byte(lines[0]), &res); err != nil {
		t.Fatalf("report %q: %v", lines[0], err)
	}
	if res.World != 2 || res.Threads != 1 || res.GlobalBatch != 128 || res.Target != 0.9 {
		t.Errorf("report world %d threads %d global batch %d target %g, want 2 1 128 0.9", res.World, res.Threads, res.GlobalBatch, res.Target)
	}
	if len(res.Curve) != 2 || res.Curve[0][0] != 10 || res.Curve[1][0] != 20 {
		t.Fatalf("curve = %v, want points at steps 10 and 20", res.Curve)
	}
	if !(res.Curve[0][1] > 0 && res.Curve[1][1] > res.Curve[0][1]) {
		t.Errorf("curve times %v and %v: want positive and increasing", res.Curve[0][1], res.Curve[1][1])
	}
	if acc := res.Curve[1][2]; acc < 0.5 || acc > 1 {
		t.Errorf("accuracy after 20 steps %.4f, want in [0.5, 1]", acc)
	}
	if res.Reached != nil || lines[1] != "godist MWMS 2x1: 90% not reached" {
		t.Errorf("20 steps reached 90%%? reached %v, summary %q", res.Reached, lines[1])
	}
}

// TestConfigCheck checks that bad flags are refused with an error naming the flag.
func TestConfigCheck(t *testing.T) {
	good := config{workers: 2, batch: 64, maxEpochs: 5, evalEvery: 200, target: 0.9}
	if err := good.check(); err != nil {
		t.Fatalf("check(%+v) = %v, want nil", good, err)
	}
	for _, tc := range []struct {
		mut  func(*config)
		want string
	}{
		{func(c *config) { c.workers = 0 }, "-workers 0"},
		{func(c *config) { c.batch = -1 }, "-batch -1"},
		{func(c *config) { c.maxEpochs = 0 }, "-max-epochs 0"},
		{func(c *config) { c.evalEvery = 0 }, "-eval-every 0"},
		{func(c *config) { c.maxSteps = -3 }, "-max-steps -3"},
		{func(c *config) { c.target = 1.5 }, "-target 1.5"},
	} {
		c := good
		tc.mut(&c)
		if err := c.check(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("check(%+v) = %v, want an error naming %q", c, err, tc.want)
		}
	}
}
