package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"godist/distlib/cluster"
	"godist/distlib/progress"
	"godist/interp"
)

// The %%distributed cell magic and the worker-cell subcommand it starts.
//
//	%%distributed --workers 2
//	strategy := distribute.NewMultiWorkerMirroredStrategy()
//	...
//
// runs the rest of the cell as Go in N fresh processes (`godist worker-cell FILE`), each a
// task of a local cluster with its own TF_CONFIG and the job's cluster token, started by
// cluster.Launch; their output streams into the cell, every line prefixed by its task
// ("[worker 1] "). A task that fails stops the others and the cell fails with its error,
// the root-cause block (cluster.JobError) first.
// The workers do not share the notebook's variables: the cell must import and define what
// it uses. GODIST_BIN names the godist binary to start (default: this executable).

func init() {
	register("worker-cell", "interpret a Go notebook cell (a file, or - for stdin) as one task of a cluster; %%distributed starts these", runWorkerCell)
	interp.RegisterCellMagic("distributed", distributedMagic)
	interp.DescribeMagic("%%distributed", "%%distributed [--workers N] [--timeout D] [--no-pin] runs the cell's Go code on N worker processes (TF_CONFIG set, each bound to its share of the CPUs unless --no-pin) and shows their prefixed output")
}

// stdOutput is an interp.Output that writes a cell's output to the process's stdout and
// stderr: rich display data as its text/plain form.
type stdOutput struct{ out, err io.Writer }

func (o stdOutput) Stream(name, text string) {
	if name == "stderr" {
		io.WriteString(o.err, text)
		return
	}
	io.WriteString(o.out, text)
}

func (o stdOutput) Display(data, _ map[string]any, _ string, _ bool) {
	if s, ok := data["text/plain"].(string); ok {
		io.WriteString(o.out, strings.TrimSuffix(s, "\n")+"\n")
		return
	}
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Fprintf(o.out, "<display %s>\n", strings.Join(keys, ", "))
}

func (o stdOutput) ClearOutput(bool) {}

// PlainText tells the display package that this output is a pipe read line by line:
// progress bars print their lines once instead of redrawing a display.
func (o stdOutput) PlainText() bool { return true }

func (o stdOutput) Input(string, bool) (string, error) {
	return "", errors.New("godist worker-cell: a worker cannot read input")
}

// runWorkerCell interprets one cell file in a fresh session.
func runWorkerCell(args []string) error {
	fs := flag.NewFlagSet("worker-cell", flag.ContinueOnError)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("want one cell file (or - for stdin), got %d arguments", fs.NArg())
	}
	var code []byte
	var err error
	if name := fs.Arg(0); name == "-" {
		code, err = io.ReadAll(os.Stdin)
	} else {
		code, err = os.ReadFile(name)
	}
	if err != nil {
		return fmt.Errorf("read the cell: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s, err := interp.New(interp.Options{})
	if err != nil {
		return err
	}
	defer s.Close()
	out := stdOutput{out: os.Stdout, err: os.Stderr}
	res, err := s.Execute(ctx, string(code), out)
	if err != nil {
		var ee *interp.EvalError
		if errors.As(err, &ee) && ee.Name == "ExitError" {
			// A worker is a process of its own: os.Exit ends it with its code, as in a program.
			s.Close()
			os.Exit(ee.ExitCode)
		}
		if errors.As(err, &ee) {
			return errors.New(strings.Join(ee.Traceback, "\n"))
		}
		return err
	}
	if res != nil && res.Data != nil {
		out.Display(res.Data, res.Metadata, "", false)
	}
	return nil
}

// distributedArgs are the options of %%distributed.
type distributedArgs struct {
	workers int
	timeout time.Duration
	noPin   bool
	elastic int // the least number of workers the job goes on with; 0: a lost worker stops it
}

const distributedUsage = "usage: %%distributed [--workers N] [--elastic MIN] [--timeout 5m] [--no-pin]"

func parseDistributedArgs(line string) (distributedArgs, error) {
	a := distributedArgs{}
	fs := flag.NewFlagSet("%%distributed", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.IntVar(&a.workers, "workers", 2, "number of worker processes")
	fs.DurationVar(&a.timeout, "timeout", 0, "stop the workers after this long (0: no limit)")
	fs.BoolVar(&a.noPin, "no-pin", false, "leave the workers free to run on any CPU (default: each bound to its share of them)")
	fs.IntVar(&a.elastic, "elastic", 0, "go on while at least this many workers remain (elastic MultiWorkerMirroredStrategy)")
	if err := fs.Parse(strings.Fields(line)); err != nil {
		return a, fmt.Errorf("%%%%distributed %s: %v (%s)", line, err, distributedUsage)
	}
	if fs.NArg() > 0 {
		return a, fmt.Errorf("%%%%distributed: unexpected argument %q (%s)", fs.Arg(0), distributedUsage)
	}
	if a.workers < 1 || a.workers > 64 {
		return a, fmt.Errorf("%%%%distributed --workers %d: want 1 to 64 workers", a.workers)
	}
	if a.elastic < 0 || a.elastic > a.workers {
		return a, fmt.Errorf("%%%%distributed --elastic %d: want the least number of workers to go on with, 1 to --workers (%d)", a.elastic, a.workers)
	}
	if a.timeout < 0 {
		return a, fmt.Errorf("%%%%distributed --timeout %v: must not be negative", a.timeout)
	}
	return a, nil
}

func magicError(msg string) error {
	return &interp.EvalError{Name: "MagicError", Value: msg, Traceback: []string{"MagicError: " + msg}}
}

// cellWriter hands the tasks' prefixed lines to the cell and keeps each task's error
// report (the lines from "godist worker-cell: ..." on) for the cell's error. It feeds the
// cluster panel (drawn by widgets, which installs itself as package progress' UI): each
// task's lines, and the progress.PanelLinePrefix progress lines, which it takes out of
// the cell's output.
type cellWriter struct {
	m       *interp.Magic
	panel   progress.JobPanel
	partial string
	errs    map[string][]string // task prefix -> its error lines
}

func (w *cellWriter) Write(b []byte) (int, error) {
	text := w.partial + string(b)
	lines := strings.Split(text, "\n")
	w.partial = lines[len(lines)-1]
	var shown strings.Builder
	for _, l := range lines[:len(lines)-1] {
		if !w.panel.Line(l) {
			continue // a progress line for the panel
		}
		shown.WriteString(l + "\n")
		end := strings.Index(l, "] ")
		if !strings.HasPrefix(l, "[") || end < 0 {
			continue
		}
		prefix, rest := l[:end+2], l[end+2:]
		if strings.HasPrefix(rest, "godist worker-cell: ") {
			w.errs[prefix] = []string{strings.TrimPrefix(rest, "godist worker-cell: ")}
		} else if w.errs[prefix] != nil && len(w.errs[prefix]) < 20 {
			w.errs[prefix] = append(w.errs[prefix], rest)
		}
	}
	if shown.Len() > 0 {
		w.m.Print(shown.String())
	}
	return len(b), nil
}

// flush prints a last line that had no newline.
func (w *cellWriter) flush() {
	if w.partial != "" {
		w.m.Print(w.partial)
		w.partial = ""
	}
}

// distributedMagic runs the cell on N worker processes.
func distributedMagic(ctx context.Context, m *interp.Magic) (*interp.Result, error) {
	a, err := parseDistributedArgs(m.Args)
	if err != nil {
		return nil, magicError(err.Error())
	}
	bin := os.Getenv("GODIST_BIN")
	if bin == "" {
		if bin, err = os.Executable(); err != nil {
			return nil, magicError("%%distributed: find the godist binary: " + err.Error())
		}
	}
	dir, err := os.MkdirTemp("", "godist-cell-")
	if err != nil {
		return nil, magicError("%%distributed: " + err.Error())
	}
	defer os.RemoveAll(dir)
	// m.Code keeps the cell's line numbers in the workers' errors.
	file := filepath.Join(dir, "cell.go")
	if err := os.WriteFile(file, []byte(m.Code), 0o644); err != nil {
		return nil, magicError("%%distributed: " + err.Error())
	}
	if a.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, a.timeout)
		defer cancel()
	}
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	panel := progress.NewJobPanel("%%distributed "+strings.TrimSpace(m.Args), func() { stop(cluster.ErrStopped) })
	w := &cellWriter{m: m, panel: panel, errs: map[string][]string{}}
	err = cluster.Launch(ctx, cluster.LaunchSpec{
		Workers: a.workers, Program: bin, Args: []string{"worker-cell", file},
		Output: w, GracePeriod: 2 * time.Second, Env: []string{progress.PanelEnv + "=1"}, NoPinning: a.noPin, MinWorkers: a.elastic,
		Events: func(ev cluster.TaskEvent) { panel.Update(ev.PanelEvent()) },
	})
	w.flush()
	if table := panel.Finish(cluster.PanelStatus(ctx, err)); table != "" {
		m.Print("\n" + table)
	}
	switch {
	case err == nil:
		return nil, nil
	case ctx.Err() != nil:
		return nil, magicError(fmt.Sprintf("%%%%distributed: the workers were stopped: %v", context.Cause(ctx)))
	}
	var je *cluster.JobError
	if errors.As(err, &je) {
		return nil, workerError(je, w.errs["["+je.RootCause().Task.String()+"] "])
	}
	return nil, magicError("%%distributed: " + err.Error())
}

// workerError is the cell's error for a failed job: the root-cause block first (the first
// task that failed, its host, exit code or signal, time and last lines), the tasks that
// failed after it, then the root cause's error report (its worker-cell error and the
// lines after it) where its last lines do not hold all of it.
func workerError(je *cluster.JobError, report []string) *interp.EvalError {
	root := je.RootCause()
	value := je.Summary()
	if len(report) > 0 {
		value = fmt.Sprintf("%s: %s", root.Task, strings.Join(report, "\n"))
	}
	tb := append([]string{"WorkerError: " + je.Summary()}, strings.Split(je.Error(), "\n")...)
	kept := map[string]bool{}
	for _, l := range root.LastLines {
		kept[l] = true
	}
	for i, l := range report {
		if !kept[l] && !(i == 0 && kept["godist worker-cell: "+l]) {
			tb = append(append(tb, root.Task.String()+"'s error:"), indent(report)...)
			break
		}
	}
	return &interp.EvalError{Name: "WorkerError", Value: value, Traceback: tb}
}

// indent returns lines, each indented by two spaces.
func indent(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = "  " + l
	}
	return out
}
