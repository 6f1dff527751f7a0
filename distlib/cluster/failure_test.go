package cluster

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestRootCause(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	w := func(i int) Task { return Task{Worker, i} }
	tests := []struct {
		name     string
		failures []Failure
		want     []Task // root first
	}{
		{"none", nil, nil},
		{"one", []Failure{{Task: w(0), ExitCode: 3, Time: at(0)}}, []Task{w(0)}},
		{"the earliest exit first", []Failure{
			{Task: w(0), ExitCode: 3, Time: at(20)},
			{Task: w(1), ExitCode: 3, Time: at(10)},
			{Task: w(2), ExitCode: 1, Time: at(30)},
		}, []Task{w(1), w(0), w(2)}},
		{"a signal before an earlier exit: the exit is the peer's", []Failure{
			{Task: w(0), ExitCode: 3, Time: at(10)},
			{Task: w(1), ExitCode: -1, Signal: "SIGKILL", Time: at(20)},
		}, []Task{w(1), w(0)}},
		{"stopped tasks after the others, whatever their signal and time", []Failure{
			{Task: w(0), ExitCode: -1, Signal: "SIGTERM", Time: at(0), Stopped: true},
			{Task: w(2), ExitCode: 3, Time: at(5), Stopped: true},
			{Task: w(1), ExitCode: 3, Time: at(10)},
		}, []Task{w(1), w(0), w(2)}},
		{"ties keep their order", []Failure{
			{Task: w(2), ExitCode: 3, Time: at(10)},
			{Task: w(0), ExitCode: 3, Time: at(10)},
		}, []Task{w(2), w(0)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := append([]Failure(nil), tt.failures...)
			root, others := RootCause(in)
			var got []Task
			if len(tt.failures) > 0 {
				got = append(got, root.Task)
			}
			for _, f := range others {
				got = append(got, f.Task)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("RootCause order %v, want %v", got, tt.want)
			}
			for i := range in {
				if in[i].Task != tt.failures[i].Task {
					t.Fatalf("RootCause reordered its argument")
				}
			}
		})
	}
}

func TestFailureRendering(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 600_000_000, time.FixedZone("CET", 3600))
	exit3 := Failure{Task: Task{Worker, 1}, Addr: "127.0.0.1:4001", ExitCode: 3, Time: t0,
		LastLines: []string{"epoch 1", "panic: boom"}, Err: errors.New("exit status 3")}
	killed := Failure{Task: Task{Worker, 0}, Addr: "127.0.0.1:4000", ExitCode: -1, Signal: "SIGKILL", Time: t0.Add(time.Second),
		Err: errors.New("signal: killed")}
	stopped := Failure{Task: Task{Chief, 0}, ExitCode: -1, Signal: "SIGTERM", Time: t0.Add(2 * time.Second), Stopped: true}
	noStart := Failure{Task: Task{PS, 0}, ExitCode: -1, Err: errors.New("fork/exec /x: no such file")}
	tests := []struct {
		name string
		got  string
		want string
	}{
		{"block of an exit", exit3.Block(), `Root cause (first observed failure): task worker 1 failed: exit status 3
  host:       127.0.0.1:4001
  exit code:  3
  time:       2026-01-02T02:04:05Z
  last lines: (2)
    | epoch 1
    | panic: boom
`},
		{"block of a signal", killed.Block(), `Root cause (first observed failure): task worker 0 failed: signal: killed
  host:       127.0.0.1:4000
  signal:     SIGKILL
  time:       2026-01-02T02:04:06Z
  last lines: (none)
`},
		{"block of a task that did not start", noStart.Block(), `Root cause (first observed failure): task ps 0 failed: fork/exec /x: no such file
  host:       -
  time:       -
  last lines: (none)
`},
		{"line of an exit", exit3.String(), "task worker 1 (127.0.0.1:4001): exit code 3 at 2026-01-02T02:04:05Z"},
		{"line of a stopped task", stopped.String(), "task chief 0: signal SIGTERM at 2026-01-02T02:04:07Z, while the job was being stopped"},
		{"line of a task that did not start", noStart.String(), "task ps 0: fork/exec /x: no such file at -"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s:\n%s\nwant:\n%s", tt.name, tt.got, tt.want)
		}
	}
}

func TestJobError(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	w := func(i int) Task { return Task{Worker, i} }
	exitErr := errors.New("exit status 3")
	tests := []struct {
		name     string
		failures []Failure
		summary  string
		others   []string // the lines after the block
	}{
		{"alone", []Failure{{Task: w(1), ExitCode: 3, Time: t0, Err: exitErr}},
			"worker 1 (exit code 3) first", nil},
		{"a peer failed, another was stopped", []Failure{
			{Task: w(0), ExitCode: 3, Time: t0.Add(time.Second), Err: exitErr},
			{Task: w(2), ExitCode: -1, Signal: "SIGTERM", Time: t0.Add(2 * time.Second), Stopped: true},
			{Task: w(1), ExitCode: 3, Time: t0, Err: exitErr, LastLines: []string{"bye"}},
		}, "worker 1 (exit code 3) first; 1 other task failed after it, 1 was stopped", []string{
			"Other failures, after it (2):",
			"  task worker 0: exit code 3 at 2026-01-02T03:04:06Z",
			"  task worker 2: signal SIGTERM at 2026-01-02T03:04:07Z, while the job was being stopped",
		}},
		{"two stopped", []Failure{
			{Task: w(1), ExitCode: -1, Signal: "SIGKILL", Time: t0},
			{Task: w(0), ExitCode: 3, Time: t0, Stopped: true},
			{Task: w(2), ExitCode: 3, Time: t0, Stopped: true},
		}, "worker 1 (signal SIGKILL) first; 2 other tasks were stopped after it", []string{
			"Other failures, after it (2):",
			"  task worker 0: exit code 3 at 2026-01-02T03:04:05Z, while the job was being stopped",
			"  task worker 2: exit code 3 at 2026-01-02T03:04:05Z, while the job was being stopped",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error = NewJobError(tt.failures)
			var je *JobError
			if !errors.As(err, &je) {
				t.Fatalf("errors.As(%T, *JobError) = false", err)
			}
			root := je.RootCause()
			if got := je.Summary(); got != tt.summary {
				t.Errorf("Summary() = %q, want %q", got, tt.summary)
			}
			block := strings.TrimSuffix(root.Block(), "\n")
			if !strings.HasPrefix(err.Error(), block) {
				t.Errorf("Error() does not start with the root cause's block:\n%s", err)
			}
			rest := strings.TrimPrefix(strings.TrimPrefix(err.Error(), block), "\n")
			if got := strings.Split(rest, "\n"); rest != "" || tt.others != nil {
				if fmt.Sprint(got) != fmt.Sprint(tt.others) {
					t.Errorf("after the block: %q, want %q", got, tt.others)
				}
			}
			if len(je.Others()) != len(tt.failures)-1 {
				t.Errorf("Others() = %v, want %d", je.Others(), len(tt.failures)-1)
			}
			var te *TaskError
			if !errors.As(err, &te) || te.Task != root.Task || !errors.Is(err, root.Err) && root.Err != nil {
				t.Errorf("the JobError does not unwrap to the root cause's TaskError: %v", te)
			}
		})
	}
}

func TestLineRing(t *testing.T) {
	tests := []struct {
		add  int
		want []string
	}{
		{0, []string{}},
		{3, []string{"l0", "l1", "l2"}},
		{FailureLines, nil},
		{FailureLines + 5, nil},
	}
	for _, tt := range tests {
		var r lineRing
		for i := range tt.add {
			r.add(fmt.Sprintf("l%d", i))
		}
		want := tt.want
		if want == nil { // the last FailureLines lines
			for i := tt.add - FailureLines; i < tt.add; i++ {
				want = append(want, fmt.Sprintf("l%d", i))
			}
		}
		if got := r.last(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("after %d lines: %q, want %q", tt.add, got, want)
		}
	}
	var r lineRing
	r.add(strings.Repeat("é", maxKeptLine)) // 2 bytes a rune: cut in the middle of one
	got := r.last()[0]
	if len(got) > maxKeptLine+4 || !strings.HasSuffix(got, " ...") || !strings.HasPrefix(got, "éé") || strings.ContainsRune(got, '\uFFFD') {
		t.Errorf("a long line kept as %d bytes %q...", len(got), got[:10])
	}
}
