package main

import (
	"bytes"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"godist/distlib/cluster"
	"godist/interp"
)

// TestLaunchRootCause: `godist launch` of 3 tasks where worker 1 prints 12 lines and exits
// with status 3 and the others fail when the launcher stops them: stderr holds the root-cause
// block (worker 1, its address, exit code, time, last 10 lines) before the other two, and
// the command's error names worker 1.
func TestLaunchRootCause(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	script := `case "$TF_CONFIG" in *'"index":1}'*)
  i=1; while [ $i -le 12 ]; do echo "worker 1 line $i"; i=$((i+1)); done; exit 3;;
esac
trap 'echo "lost worker 1"; exit 3' TERM
sleep 30 & wait $!`
	var stdout, stderr bytes.Buffer
	err := launchMain([]string{"--workers", "3", "--grace", "5s", "--", "sh", "-c", script}, &stdout, &stderr)
	want := "the job failed: worker 1 (exit code 3) first; 2 other tasks were stopped after it"
	if err == nil || err.Error() != want {
		t.Fatalf("godist launch = %v, want %q\nstdout:\n%s\nstderr:\n%s", err, want, &stdout, &stderr)
	}
	block := regexp.MustCompile(`^\nRoot cause \(first observed failure\): task worker 1 failed: exit status 3\n` +
		`  host: +127\.0\.0\.1:\d+\n  exit code: +3\n  time: +\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\n` +
		`  last lines: \(10\)\n    \| worker 1 line 3\n(    \| .*\n){8}    \| worker 1 line 12\n` +
		`Other failures, after it \(2\):\n  task worker [02] \(127\.0\.0\.1:\d+\): .*, while the job was being stopped\n` +
		`  task worker [02] \(127\.0\.0\.1:\d+\): .*, while the job was being stopped\n\n$`)
	if !block.MatchString(stderr.String()) {
		t.Errorf("stderr:\n%s\nwant it to match %s", &stderr, block)
	}
	if !strings.Contains(stdout.String(), "[worker 1] worker 1 line 12\n") {
		t.Errorf("stdout lacks worker 1's lines:\n%s", &stdout)
	}
}

// TestLaunchElastic: `godist launch --elastic 2` goes on when worker 1 of 3 exits with an
// error: the job succeeds, the launcher's line names the loss, and the tasks are told the
// minimum (GODIST_ELASTIC_MIN); an --elastic above the workers is refused.
func TestLaunchElastic(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	script := `echo "min=$GODIST_ELASTIC_MIN"
case "$TF_CONFIG" in *'"index":1}'*) exit 3;; esac
sleep 0.5`
	var stdout, stderr bytes.Buffer
	if err := launchMain([]string{"--workers", "3", "--elastic", "2", "--", "sh", "-c", script}, &stdout, &stderr); err != nil {
		t.Fatalf("godist launch --elastic 2 = %v\nstdout:\n%s\nstderr:\n%s", err, &stdout, &stderr)
	}
	lost := regexp.MustCompile(`(?m)^\[launch\] task worker 1 lost at \d\d:\d\d:\d\d\.\d{3}: exit status 3; the job goes on with 2 chief and worker tasks \(at least 2\)$`)
	if !lost.MatchString(stdout.String()) || strings.Count(stdout.String(), "min=2") != 3 {
		t.Errorf("stdout:\n%s\nwant the loss of worker 1 (%s) and min=2 from every task", &stdout, lost)
	}
	err := launchMain([]string{"--workers", "2", "--elastic", "3", "--", "true"}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "MinWorkers 3: an elastic job") {
		t.Errorf("godist launch --workers 2 --elastic 3 = %v, want the elastic job's error", err)
	}
}

// TestWorkerError: a %%distributed cell's error starts with the root-cause block and adds
// the worker's error report only where its last lines do not hold it.
func TestWorkerError(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	je := cluster.NewJobError([]cluster.Failure{
		{Task: cluster.Task{Type: cluster.Worker, Index: 0}, ExitCode: -1, Signal: "SIGTERM", Time: at.Add(time.Second), Stopped: true},
		{Task: cluster.Task{Type: cluster.Worker, Index: 1}, Addr: "127.0.0.1:4001", ExitCode: 1, Time: at,
			LastLines: []string{"about to fail", "godist worker-cell: in the cell, line 3:1: panic: boom"}, Err: errors.New("exit status 1")},
	})
	block := []string{
		"WorkerError: worker 1 (exit code 1) first; 1 other task was stopped after it",
		"Root cause (first observed failure): task worker 1 failed: exit status 1",
		"  host:       127.0.0.1:4001",
		"  exit code:  1",
		"  time:       2026-01-02T03:04:05Z",
		"  last lines: (2)",
		"    | about to fail",
		"    | godist worker-cell: in the cell, line 3:1: panic: boom",
		"Other failures, after it (1):",
		"  task worker 0: signal SIGTERM at 2026-01-02T03:04:06Z, while the job was being stopped",
	}
	tests := []struct {
		name      string
		report    []string
		value     string
		traceback []string
	}{
		{"no report", nil, "worker 1 (exit code 1) first; 1 other task was stopped after it", block},
		{"a report in the last lines", []string{"in the cell, line 3:1: panic: boom"},
			"worker 1: in the cell, line 3:1: panic: boom", block},
		{"a longer report", []string{"in the cell, line 3:1: panic: boom", "goroutine 1"},
			"worker 1: in the cell, line 3:1: panic: boom\ngoroutine 1",
			append(append([]string(nil), block...), "worker 1's error:", "  in the cell, line 3:1: panic: boom", "  goroutine 1")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ee *interp.EvalError = workerError(je, tt.report)
			if ee.Name != "WorkerError" || ee.Value != tt.value {
				t.Errorf("error %s: %q, want WorkerError: %q", ee.Name, ee.Value, tt.value)
			}
			if got, want := strings.Join(ee.Traceback, "\n"), strings.Join(tt.traceback, "\n"); got != want {
				t.Errorf("traceback:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}
