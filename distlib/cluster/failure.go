package cluster

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Failure is one task's failure in a job, as the launcher observed it.
type Failure struct {
	Task Task
	Addr string // host:port of a local task ("" under Slurm)
	// ExitCode is the task's exit status; -1 when a signal killed it or it did not start.
	ExitCode int
	Signal   string    // the signal that killed the task ("SIGKILL"); "" when it exited
	Time     time.Time // when the task's process ended (where unknown: when its end was seen)
	// Stopped is true for a task that ended after the launcher had begun stopping the job:
	// a follow-on of the failure that stopped it, never its root cause.
	Stopped   bool
	LastLines []string // the task's last output lines, oldest first
	Err       error    // what waiting for the task returned (*exec.ExitError, a start error)
}

// FailureLines is how many of a task's last output lines a Failure keeps.
const FailureLines = 10

// RootCause orders a job's failures, the root cause (first observed failure) first, and
// returns it and the others: the tasks that ended before the launcher stopped anything
// come before those that ended while it stopped the job; among them one killed by a signal
// (which the launcher had not sent yet: the OOM killer, a user, a crash) comes first,
// since a task that loses a peer exits with an error rather than by a signal; then by time.
// Failures that tie keep their order. The slice is not modified.
func RootCause(failures []Failure) (root Failure, others []Failure) {
	if len(failures) == 0 {
		return Failure{}, nil
	}
	fs := append([]Failure(nil), failures...)
	sort.SliceStable(fs, func(i, j int) bool {
		a, b := fs[i], fs[j]
		if a.Stopped != b.Stopped {
			return !a.Stopped
		}
		if (a.Signal != "") != (b.Signal != "") && !a.Stopped {
			return a.Signal != ""
		}
		return a.Time.Before(b.Time)
	})
	return fs[0], fs[1:]
}

// how is the failure's end in a few words: "exit code 3", "signal SIGKILL", or its error.
func (f Failure) how() string {
	switch {
	case f.Signal != "":
		return "signal " + f.Signal
	case f.ExitCode >= 0:
		return fmt.Sprintf("exit code %d", f.ExitCode)
	case f.Err != nil:
		return f.Err.Error()
	}
	return "failed"
}

// when is the failure's time in UTC, RFC 3339 to the second ("-" when unknown).
func (f Failure) when() string {
	if f.Time.IsZero() {
		return "-"
	}
	return f.Time.UTC().Format(time.RFC3339)
}

// String is the failure in one line: "task worker 0 (127.0.0.1:4000): exit code 3 at " and
// its time (UTC, RFC 3339), marked when it ended while the job was being stopped.
func (f Failure) String() string {
	s := "task " + f.Task.String()
	if f.Addr != "" {
		s += " (" + f.Addr + ")"
	}
	s += ": " + f.how() + " at " + f.when()
	if f.Stopped {
		s += ", while the job was being stopped"
	}
	return s
}

// Block renders the failure as the root cause of a job, in the manner of torchrun's "Root
// Cause (first observed failure)": the task, its host, exit code or signal, the time and
// its last output lines, one field a line.
func (f Failure) Block() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Root cause (first observed failure): task %s failed", f.Task)
	if f.Err != nil {
		fmt.Fprintf(&b, ": %v", f.Err)
	}
	b.WriteString("\n")
	host := f.Addr
	if host == "" {
		host = "-"
	}
	fmt.Fprintf(&b, "  host:       %s\n", host)
	switch {
	case f.Signal != "":
		fmt.Fprintf(&b, "  signal:     %s\n", f.Signal)
	case f.ExitCode >= 0:
		fmt.Fprintf(&b, "  exit code:  %d\n", f.ExitCode)
	}
	fmt.Fprintf(&b, "  time:       %s\n", f.when())
	if len(f.LastLines) == 0 {
		b.WriteString("  last lines: (none)\n")
		return b.String()
	}
	fmt.Fprintf(&b, "  last lines: (%d)\n", len(f.LastLines))
	for _, l := range f.LastLines {
		b.WriteString("    | " + l + "\n")
	}
	return b.String()
}

// JobError is the error of a job that failed: its root cause and the other tasks that
// failed with or after it. It unwraps to the root cause's *TaskError.
type JobError struct {
	root   Failure
	others []Failure
	cause  *TaskError
}

// NewJobError returns the error of a job with these failures (at least one), ordered by
// RootCause.
func NewJobError(failures []Failure) *JobError {
	root, others := RootCause(failures)
	return &JobError{root: root, others: others, cause: &TaskError{Task: root.Task, Err: root.Err}}
}

// RootCause returns the first observed failure.
func (e *JobError) RootCause() Failure { return e.root }

// Others returns the other failures, in the order RootCause gives.
func (e *JobError) Others() []Failure { return append([]Failure(nil), e.others...) }

// Error is the root-cause block, then the other failures one a line.
func (e *JobError) Error() string {
	s := e.root.Block()
	if len(e.others) > 0 {
		s += fmt.Sprintf("Other failures, after it (%d):\n", len(e.others))
		for _, f := range e.others {
			s += "  " + f.String() + "\n"
		}
	}
	return strings.TrimSuffix(s, "\n")
}

// Unwrap returns the root cause's *TaskError (which unwraps to its task's error).
func (e *JobError) Unwrap() error { return e.cause }

// Summary says in one line which task failed first and how many others followed:
// "worker 1 (exit code 3) first; 1 other task failed after it, 1 was stopped".
func (e *JobError) Summary() string {
	s := fmt.Sprintf("%s (%s) first", e.root.Task, e.root.how())
	failed, stopped := 0, 0
	for _, f := range e.others {
		if f.Stopped {
			stopped++
		} else {
			failed++
		}
	}
	var parts []string
	if failed > 0 {
		parts = append(parts, fmt.Sprintf("%d other %s failed after it", failed, plural(failed, "task", "tasks")))
	}
	if stopped > 0 {
		if failed > 0 {
			parts = append(parts, fmt.Sprintf("%d %s stopped", stopped, plural(stopped, "was", "were")))
		} else {
			parts = append(parts, fmt.Sprintf("%d other %s stopped after it", stopped, plural(stopped, "task was", "tasks were")))
		}
	}
	if len(parts) > 0 {
		s += "; " + strings.Join(parts, ", ")
	}
	return s
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// lineRing keeps the last FailureLines lines of a task's output, each cut to
// maxKeptLine bytes, so that a task's failure can show them with bounded memory.
type lineRing struct {
	lines [FailureLines]string
	n     int // lines added so far
}

// maxKeptLine bounds each kept line: a task may print a line of any length.
const maxKeptLine = 1024

func (r *lineRing) add(line string) {
	if len(line) > maxKeptLine {
		line = strings.ToValidUTF8(line[:maxKeptLine], "") + " ..."
	}
	r.lines[r.n%FailureLines] = line
	r.n++
}

// last returns the kept lines, oldest first.
func (r *lineRing) last() []string {
	k := min(r.n, FailureLines)
	out := make([]string, 0, k)
	for i := r.n - k; i < r.n; i++ {
		out = append(out, r.lines[i%FailureLines])
	}
	return out
}
