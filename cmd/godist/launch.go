package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"godist/distlib/cluster"
)

func init() {
	register("launch", "run a distributed job's tasks: launch --workers N [--ps M] [--slurm] -- program args", runLaunch)
}

func runLaunch(args []string) error { return launchMain(args, os.Stdout, os.Stderr) }

// launchMain is `godist launch`: the tasks' output goes to stdout, a failed job's root
// cause to stderr.
func launchMain(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("launch", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: godist launch --workers N [--ps M] [--chief] [--elastic MIN] [--slurm] [--host ADDR] [--no-pin] -- program args\n\n"+
			"Starts the tasks of a job with their TF_CONFIG (or under srun with --slurm), prefixes\n"+
			"each output line with its task, and stops the job when a task fails; it then prints\n"+
			"the first task that failed (its host, exit code or signal, time and last lines) to\n"+
			"stderr, before the tasks that failed after it. With --elastic MIN, a chief or worker\n"+
			"task that fails is lost and the others go on while at least MIN remain (their\n"+
			"MultiWorkerMirroredStrategy is elastic: GODIST_ELASTIC_MIN).")
		fs.PrintDefaults()
	}
	workers := fs.Int("workers", 1, "number of worker tasks")
	ps := fs.Int("ps", 0, "number of parameter-server tasks")
	chief := fs.Bool("chief", false, "add a chief task")
	slurm := fs.Bool("slurm", false, "start the tasks through srun (inside a Slurm allocation)")
	host := fs.String("host", "127.0.0.1", "address the local tasks listen on")
	noPin := fs.Bool("no-pin", false, "leave every task free to run on any CPU (default: each chief and worker task bound to its share of them, in a job without ps tasks)")
	grace := fs.Duration("grace", 3*time.Second, "time between SIGTERM and SIGKILL when stopping tasks")
	elastic := fs.Int("elastic", 0, "go on while at least this many chief and worker tasks remain (0: a failed task stops the job)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	rest := fs.Args()
	if len(rest) == 0 {
		fs.Usage()
		return errors.New("no program given: put it after --")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := cluster.Launch(ctx, cluster.LaunchSpec{
		Workers: *workers, PS: *ps, Chief: *chief, Slurm: *slurm, Host: *host, GracePeriod: *grace, NoPinning: *noPin, MinWorkers: *elastic,
		Program: rest[0], Args: rest[1:], Output: stdout,
	})
	return launchFailure(stderr, err)
}

// launchFailure prints a failed job's root-cause block and the other failures to w (the
// tasks' output may have scrolled the first failure away) and returns a one-line error
// naming the root cause; other errors are returned as they are.
func launchFailure(w io.Writer, err error) error {
	var je *cluster.JobError
	if !errors.As(err, &je) {
		return err
	}
	fmt.Fprintf(w, "\n%v\n\n", je)
	return fmt.Errorf("the job failed: %s", je.Summary())
}
