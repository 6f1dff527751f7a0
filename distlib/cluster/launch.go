package cluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"godist/distlib/progress"
	"godist/internal/freeport"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// LaunchSpec describes a job for Launch.
type LaunchSpec struct {
	Workers int  // worker tasks (at least 1)
	PS      int  // parameter-server tasks
	Chief   bool // add a chief task
	// Program and Args are what every task runs.
	Program string
	Args    []string
	// Slurm runs the tasks through srun (inside an allocation); each task then resolves its
	// cluster with SlurmClusterResolver (GODIST_SLURM_JOBS tells it the jobs).
	Slurm    bool
	SrunArgs []string // extra srun arguments, before the program
	// Output receives every task's output, line by line, prefixed "[worker 0] "; nil: os.Stdout.
	// A task's stdout and stderr share one pipe, so its lines keep the order it wrote them in.
	Output io.Writer
	// Env is added to every task's environment (after os.Environ()).
	Env []string
	// Host is the address local tasks listen on; "" means 127.0.0.1.
	Host string
	// Token is the cluster token; "" makes a random one.
	Token string
	// NoPinning leaves every local task free to run on any CPU. By default, in a job without
	// ps tasks, Launch binds each chief and worker task to its own share of the CPUs (as it
	// shares out GOMAXPROCS), when there are at least as many CPUs as those tasks; see Launch.
	NoPinning bool
	// GracePeriod is how long a stopped task has between SIGTERM and SIGKILL; 0 means 3s.
	GracePeriod time.Duration
	// MinWorkers, when above 0, makes the job elastic: a chief or worker task that fails is
	// lost, not the end of the job, while at least MinWorkers of them go on (their
	// MultiWorkerMirroredStrategy regroups; ElasticEnv tells it the minimum). The job then
	// succeeds when the tasks left do; Launch prints each loss.
	MinWorkers int
	// Events, if not nil, is told when each task starts and ends (from Launch's goroutine,
	// in order per task); a cluster panel follows the job with it. Under Slurm the one
	// task is "srun 0".
	Events func(TaskEvent)
}

// TaskEvent is what LaunchSpec.Events hears about a task.
type TaskEvent struct {
	Task Task
	Addr string // host:port of a local task ("" under Slurm)
	// State is "started", "exited" (exit status 0 or, for a serving task, stopped when the
	// job was done), "failed" (it made the job fail, or had failed with it before the
	// launcher stopped anything), "lost" (it failed and an elastic job went on without it:
	// MinWorkers) or "stopped" (ended while the job was being stopped: by a failure
	// elsewhere or a cancelled context).
	State string
	Err   error // the task's error, for failed and stopped
}

// TaskError reports the task that made the job fail.
type TaskError struct {
	Task Task
	Err  error
}

// Error names the task.
func (e *TaskError) Error() string { return fmt.Sprintf("cluster: task %s failed: %v", e.Task, e.Err) }

// Unwrap returns the task's error (an *exec.ExitError when it exited non-zero).
func (e *TaskError) Unwrap() error { return e.Err }

// Launch runs a job and waits for it. Locally, every task gets its TF_CONFIG (free ports on
// Host) and GODIST_CLUSTER_TOKEN, and the CPUs are shared out: each chief or worker task
// gets GOMAXPROCS of its share of the cores (unless the environment sets GOMAXPROCS) and,
// in a job without ps tasks, is bound to that share of the CPUs (unless spec.NoPinning),
// so that workers in lockstep do not wait for a peer the scheduler moved onto a busy core.
// Under Slurm, one srun starts them all. Every task's output
// is streamed to spec.Output, each line prefixed by its task. The job succeeds when all the
// chief and worker tasks exit 0 (ps tasks, which serve forever, are then stopped; in a
// parameter-server job, with a chief and ps tasks, the workers serve too and only the chief
// is waited for). The first
// task that fails stops the job: the others are terminated and a *JobError (which unwraps
// to the *TaskError of its root cause) names it first, with its host, exit code or signal,
// time and last output lines, then the tasks that failed with or after it. When other
// tasks had ended by then too, one of them killed by a signal is named instead, else the
// first to end: a worker that loses a peer exits with an error, often before the launcher
// sees the peer's end; the output's "[launch]" line lists every task that had failed.
// Cancelling ctx stops every task. In a notebook cell, when spec.Events is nil, Launch
// shows the cluster panel (widgets.Panel): live with a Stop button where the widget front
// end is ready (a stopped job returns an error wrapping ErrStopped), else as a text table
// written to spec.Output at the end; its tasks get widgets.PanelEnv so that Fit reports
// epoch, step and samples/s to it.
func Launch(ctx context.Context, spec LaunchSpec) error {
	if spec.Workers < 1 {
		return fmt.Errorf("cluster: launch: %d workers, want at least 1", spec.Workers)
	}
	if spec.PS < 0 {
		return fmt.Errorf("cluster: launch: %d ps tasks", spec.PS)
	}
	if trainers := spec.Workers + boolInt(spec.Chief); spec.MinWorkers < 0 || spec.MinWorkers > trainers || (spec.MinWorkers > 0 && spec.PS > 0) {
		return fmt.Errorf("cluster: launch: MinWorkers %d: an elastic job (MultiWorkerMirroredStrategy, no ps tasks) needs between 1 and its %d chief and worker tasks", spec.MinWorkers, trainers)
	}
	if spec.MinWorkers > 0 {
		spec.Env = append(append([]string(nil), spec.Env...), fmt.Sprintf("%s=%d", ElasticEnv, spec.MinWorkers))
	}
	if spec.Program == "" {
		return errors.New("cluster: launch: no program to run")
	}
	if spec.Output == nil {
		spec.Output = os.Stdout
	}
	if spec.Events == nil && inCell() {
		return launchWithPanel(ctx, spec)
	}
	if spec.GracePeriod <= 0 {
		spec.GracePeriod = 3 * time.Second
	}
	if spec.Token == "" {
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			return fmt.Errorf("cluster: launch: token: %w", err)
		}
		spec.Token = hex.EncodeToString(b)
	}
	jobs := map[string]int{Worker: spec.Workers}
	if spec.PS > 0 {
		jobs[PS] = spec.PS
	}
	if spec.Chief {
		jobs[Chief] = 1
	}
	out := &syncWriter{w: spec.Output}
	if spec.Slurm {
		return launchSlurm(ctx, spec, jobs, out)
	}
	return launchLocal(ctx, spec, jobs, out)
}

func launchLocal(ctx context.Context, spec LaunchSpec, jobs map[string]int, out *syncWriter) error {
	host := spec.Host
	if host == "" {
		host = "127.0.0.1"
	}
	// The tasks' ports lie below the kernel's ephemeral range: a port that ":0" handed out
	// and that was closed again can be taken by another process's outgoing connection
	// before the task binds it.
	total := 0
	for _, n := range jobs {
		total += n
	}
	ports, err := freeport.Consecutive(host, total)
	if err != nil {
		return fmt.Errorf("cluster: launch: %w", err)
	}
	addrs := map[string][]string{}
	for _, job := range sortedKeys(jobs) {
		for range jobs[job] {
			addrs[job] = append(addrs[job], net.JoinHostPort(host, strconv.Itoa(ports[0])))
			ports = ports[1:]
		}
	}
	cs, err := NewClusterSpec(addrs)
	if err != nil {
		return err
	}
	var tasks []*runningTask
	cpus := allowedCPUs()
	known := cpus != nil
	if !known { // GOMAXPROCS from the count, no binding
		for c := range runtime.NumCPU() {
			cpus = append(cpus, c)
		}
	}
	where := coLocated(append(os.Environ(), spec.Env...), jobs, cpus, known && !spec.NoPinning)
	for _, job := range sortedKeys(jobs) {
		for i := range jobs[job] {
			t := Task{job, i}
			cfg := TFConfig{Cluster: cs, Task: t}
			cmd := exec.Command(spec.Program, spec.Args...)
			cmd.Env = append(append(os.Environ(), spec.Env...), "TF_CONFIG="+cfg.String(), TokenEnv+"="+spec.Token)
			if p := where[t].procs; p != "" {
				cmd.Env = append(cmd.Env, "GOMAXPROCS="+p)
			}
			tasks = append(tasks, &runningTask{task: t, cmd: cmd, addr: addrs[job][i], cpus: where[t].cpus})
		}
	}
	return supervise(ctx, spec, tasks, out, func(rt *runningTask) *prefixWriter {
		return &prefixWriter{out: out, prefix: "[" + rt.task.String() + "] "}
	})
}

func launchSlurm(ctx context.Context, spec LaunchSpec, jobs map[string]int, out *syncWriter) error {
	srun, err := exec.LookPath("srun")
	if err != nil {
		return fmt.Errorf("cluster: launch --slurm: srun not found: install Slurm or run without --slurm: %w", err)
	}
	total := 0
	var counts []string
	var byRank []Task // the order SlurmClusterResolver assigns: jobs by name
	for _, job := range sortedKeys(jobs) {
		total += jobs[job]
		counts = append(counts, fmt.Sprintf("%s:%d", job, jobs[job]))
		for i := range jobs[job] {
			byRank = append(byRank, Task{job, i})
		}
	}
	kill := []string{"--kill-on-bad-exit=1"}
	if spec.MinWorkers > 0 {
		// Elastic: a failed task, or a node lost from the allocation, leaves the others
		// running; they regroup.
		kill = []string{"--kill-on-bad-exit=0", "--no-kill"}
	}
	args := append(append([]string{"--ntasks=" + strconv.Itoa(total), "--label"}, kill...), spec.SrunArgs...)
	args = append(append(args, spec.Program), spec.Args...)
	cmd := exec.Command(srun, args...)
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TF_CONFIG=") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(append(env, spec.Env...), "GODIST_SLURM_JOBS="+strings.Join(counts, ","), TokenEnv+"="+spec.Token)
	rt := &runningTask{task: Task{"srun", 0}, cmd: cmd}
	var mu sync.Mutex
	failed := map[int]string{} // srun's rank -> how srun says it ended
	if spec.MinWorkers > 0 {
		rt.survived = func() []string {
			mu.Lock()
			defer mu.Unlock()
			left := total - len(failed)
			if len(failed) == 0 || left < spec.MinWorkers {
				return nil
			}
			var lines []string
			for _, r := range slices.Sorted(maps.Keys(failed)) {
				lines = append(lines, fmt.Sprintf("[launch] task %s lost: %s; the job went on with %d chief and worker tasks (at least %d)",
					byRank[r], failed[r], left, spec.MinWorkers))
			}
			return lines
		}
	}
	return supervise(ctx, spec, []*runningTask{rt}, out, func(*runningTask) *prefixWriter {
		return &prefixWriter{out: out, relabel: func(line []byte) []byte {
			if m := srunTaskEnd.FindSubmatch(line); m != nil {
				if r, err := strconv.Atoi(string(m[1])); err == nil && r < len(byRank) {
					mu.Lock()
					failed[r] = string(m[2])
					mu.Unlock()
				}
			}
			m := srunLabel.FindSubmatch(line)
			if m == nil {
				return append([]byte("[srun] "), line...)
			}
			r, _ := strconv.Atoi(string(m[1]))
			if r < len(byRank) {
				return append([]byte("["+byRank[r].String()+"] "), m[2]...)
			}
			return line
		}}
	})
}

var srunLabel = regexp.MustCompile(`^\s*(\d+): ?(.*)$`)

// srunTaskEnd matches srun's report of a task that failed: "srun: error: node1: task 2:
// Killed", "srun: error: node1: task 1: Exited with exit code 3".
var srunTaskEnd = regexp.MustCompile(`^srun: error: [^:]+: tasks? (\d+): (.*)$`)

type runningTask struct {
	task Task
	addr string
	cpus []int // bound to these CPUs; nil: any
	cmd  *exec.Cmd
	// out is the task's stdout and stderr as one pipe, so that its lines arrive in the
	// order the task wrote them (two pipes read by two goroutines would let a panic on
	// stderr overtake the lines printed before it).
	out *prefixWriter
	// survived, when not nil, is asked about the task's failure: the lines that report the
	// losses an elastic job went on without (srun's tasks), or nil when it is a failure.
	survived func() []string
}

type result struct {
	rt  *runningTask
	err error
	at  time.Time // when the task's process ended, or where unknown when Wait returned
}

// failure returns what r tells of its task's failure (r.err not nil), with the task's last
// output lines.
func (r result) failure(stopped bool) Failure {
	f := Failure{Task: r.rt.task, Addr: r.rt.addr, ExitCode: -1, Time: r.at, Stopped: stopped, Err: r.err}
	if r.rt.out != nil {
		f.LastLines = r.rt.out.lastLines()
	}
	var ee *exec.ExitError
	if errors.As(r.err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			if f.Signal = unix.SignalName(ws.Signal()); f.Signal == "" {
				f.Signal = ws.Signal().String()
			}
		} else {
			f.ExitCode = ee.ExitCode()
		}
	}
	return f
}

// supervise starts the tasks and waits as Launch documents.
func supervise(ctx context.Context, spec LaunchSpec, tasks []*runningTask, out *syncWriter, writer func(*runningTask) *prefixWriter) error {
	results := make(chan result, len(tasks))
	started := 0
	pending := map[*runningTask]bool{} // started and not yet reaped; only this goroutine uses it
	stopAll := func(sig syscall.Signal) {
		for rt := range pending {
			_ = syscall.Kill(-rt.cmd.Process.Pid, sig) // the task's whole process group
		}
	}
	for _, rt := range tasks {
		rt.out = writer(rt)
		rt.cmd.Stdout, rt.cmd.Stderr = rt.out, rt.out // the same writer: os/exec gives the child one pipe
		rt.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		rt.cmd.WaitDelay = time.Second
		if err := startOn(rt.cmd, rt.cpus); err != nil {
			stopAll(syscall.SIGKILL)
			for range started {
				<-results
			}
			return NewJobError([]Failure{result{rt: rt, err: err, at: time.Now()}.failure(false)})
		}
		started++
		pending[rt] = true
		if spec.Events != nil {
			spec.Events(TaskEvent{Task: rt.task, Addr: rt.addr, State: "started"})
		}
		go func() {
			exited := make(chan time.Time, 1)
			go func() { waitExited(rt.cmd.Process.Pid); exited <- time.Now() }()
			err := rt.cmd.Wait()
			at := time.Now()
			if exitKnown {
				at = <-exited // the process has ended: waitExited returns (or has returned)
			}
			results <- result{rt, err, at}
		}()
	}
	var failure error
	var jobErr *JobError // failure when a task made the job fail
	var failures []Failure
	stopping := false
	var kill <-chan time.Time
	// serves reports whether a task serves until stopped: ps tasks, and in a
	// parameter-server job (a chief and ps tasks) the workers too, which run what the
	// chief's coordinator schedules; the job is done when the other tasks are.
	serves := func(t Task) bool { return t.Type == PS || (t.Type == Worker && spec.Chief && spec.PS > 0) }
	needed := 0 // tasks the job waits for
	for _, rt := range tasks {
		if !serves(rt.task) {
			needed++
		}
	}
	trainers := needed // chief and worker tasks not lost (MinWorkers)
	var lost []Failure
	stop := func(cause error) {
		if failure == nil {
			failure = cause
		}
		if !stopping {
			stopping = true
			stopAll(syscall.SIGTERM)
			kill = time.After(spec.GracePeriod)
		}
	}
	// reaped does the bookkeeping of a task whose Wait returned.
	reaped := func(r result) {
		delete(pending, r.rt)
		r.rt.out.flush()
		if !serves(r.rt.task) {
			needed--
		}
	}
	event := func(r result, state string) {
		if spec.Events != nil {
			spec.Events(TaskEvent{Task: r.rt.task, Addr: r.rt.addr, State: state, Err: r.err})
		}
	}
	for len(pending) > 0 {
		select {
		case r := <-results:
			reaped(r)
			if r.err != nil && !stopping && r.rt.survived != nil {
				if lines := r.rt.survived(); lines != nil {
					for _, l := range lines {
						out.Write([]byte(l + "\n"))
					}
					r.err = nil
				}
			}
			if r.err != nil && !stopping && spec.MinWorkers > 0 && trainers > spec.MinWorkers && !serves(r.rt.task) {
				// Elastic: the others regroup without it.
				trainers--
				f := r.failure(false)
				lost = append(lost, f)
				out.Write([]byte(fmt.Sprintf("[launch] task %s lost at %s: %v; the job goes on with %d chief and worker tasks (at least %d)\n",
					r.rt.task, f.Time.UTC().Format("15:04:05.000"), r.err, trainers, spec.MinWorkers)))
				event(r, "lost")
				continue
			}
			if r.err != nil && !stopping {
				ended := append([]result{r}, endedWith(results, tasks, pending, reaped)...)
				failures = append(failures, lost...) // the first observed failures
				for _, e := range ended {
					if e.err != nil {
						failures = append(failures, e.failure(false))
					}
				}
				jobErr = NewJobError(failures)
				root := jobErr.RootCause()
				msg := fmt.Sprintf("[launch] task %s failed: %v", root.Task, root.Err)
				for _, e := range ended {
					switch {
					case e.rt.task == root.Task:
						event(e, "failed")
					case e.err != nil:
						msg += fmt.Sprintf("; task %s also failed: %v", e.rt.task, e.err)
						event(e, "failed")
					default:
						event(e, "exited")
					}
				}
				out.Write([]byte(msg + "; stopping the job\n"))
				stop(jobErr)
				continue
			}
			if stopping && failure != nil {
				if jobErr != nil && r.err != nil {
					failures = append(failures, r.failure(true))
				}
				event(r, "stopped")
			} else {
				event(r, "exited")
			}
			if r.err == nil && needed == 0 && !stopping {
				stopping = true // the work is done: stop the ps tasks
				stopAll(syscall.SIGTERM)
				kill = time.After(spec.GracePeriod)
			}
		case <-ctx.Done():
			stop(ctx.Err())
		case <-kill:
			stopAll(syscall.SIGKILL)
			kill = nil
		}
	}
	if jobErr != nil && failure == error(jobErr) {
		return NewJobError(failures) // with the tasks that failed while the job was stopped
	}
	return failure
}

// endedWith returns what Wait returned for the tasks that had ended too (or were ending)
// when another task's failure was seen: the results already sent, then, in task order,
// those of the tasks whose process is gone or going (their Wait may still be reading their
// output), with any other result that comes meanwhile. reaped is called for each.
func endedWith(results <-chan result, tasks []*runningTask, pending map[*runningTask]bool, reaped func(result)) []result {
	var got []result
	for drained := false; !drained; { // the results already there first
		select {
		case r := <-results:
			reaped(r)
			got = append(got, r)
		default:
			drained = true
		}
	}
	for _, rt := range tasks {
		if !pending[rt] || !ended(rt.cmd.Process.Pid) {
			continue
		}
		for pending[rt] { // its process is gone: Wait returns within the task's WaitDelay
			r := <-results
			reaped(r)
			got = append(got, r)
		}
	}
	return got
}

// syncWriter serializes whole lines from the tasks onto one writer.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}

// prefixWriter cuts a task's output into lines and writes each with the task's prefix.
type prefixWriter struct {
	out     *syncWriter
	prefix  string
	relabel func(line []byte) []byte // instead of prefix, for srun --label output
	mu      sync.Mutex
	buf     []byte
	kept    lineRing // the last lines, for the task's Failure
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			break
		}
		p.emit(p.buf[:i])
		p.buf = p.buf[i+1:]
	}
	return len(b), nil
}

func (p *prefixWriter) emit(line []byte) {
	var full []byte
	text := line // the line as the task wrote it (under srun, labelled by its task)
	if p.relabel != nil {
		full = append(p.relabel(line), '\n')
		text = full[:len(full)-1]
	} else {
		full = append(append([]byte(p.prefix), line...), '\n')
	}
	if _, rest, _ := bytes.Cut(text, []byte("] ")); !bytes.HasPrefix(text, []byte(progress.PanelLinePrefix)) &&
		!(p.relabel != nil && bytes.HasPrefix(rest, []byte(progress.PanelLinePrefix))) {
		p.kept.add(string(text)) // the panel's progress lines are not the task's output
	}
	p.out.Write(full)
}

// lastLines returns the task's last output lines, oldest first.
func (p *prefixWriter) lastLines() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.kept.last()
}

// flush writes a last line that had no newline.
func (p *prefixWriter) flush() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.buf) > 0 {
		p.emit(p.buf)
		p.buf = nil
	}
}

// placement is where a local task runs.
type placement struct {
	procs string // GOMAXPROCS to set; "" leaves the environment's
	cpus  []int  // the CPUs the task is bound to; nil: any
}

// coLocated returns where every task of jobs runs when they all run on this machine, whose
// CPUs this process may use are cpus.
//
// GOMAXPROCS: the cores are shared out among the compute tasks (chief, workers), at least
// one each, and each ps task, whose work is light, gets one. Goroutines of co-located tasks
// otherwise compete for every core, and training throughput drops. Nothing is
// set when the environment already names GOMAXPROCS.
//
// CPUs, when pin is true: in a job without ps tasks whose compute tasks are no more than
// the CPUs, each compute task is bound to its own share of them (consecutive CPUs, in task
// order), provided its GOMAXPROCS fits that share. Unbound, the kernel's scheduler moves
// workers between cores whenever one waits for its peers at an all-reduce, and may wake
// one onto the core its peer is running on; bound, lockstep workers train faster
// (bench/RESULTS.md, multiworker, "workers bound to their cores"). A ps job is left
// unbound: its ps tasks need cycles on the workers' cores.
func coLocated(env []string, jobs map[string]int, cpus []int, pin bool) map[Task]placement {
	userProcs := 0 // GOMAXPROCS from the environment (the last one given wins, as in exec)
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "GOMAXPROCS="); ok {
			userProcs = -1
			if n, err := strconv.Atoi(v); err == nil && n > 0 {
				userProcs = n
			}
		}
	}
	compute := 0
	for job, n := range jobs {
		if job != PS {
			compute += n
		}
	}
	share := max(1, len(cpus)/max(1, compute))
	procs := userProcs
	if userProcs == 0 {
		procs = share
	}
	bind := pin && jobs[PS] == 0 && compute <= len(cpus) && procs > 0 && procs <= share
	out := map[Task]placement{}
	next := 0
	for _, job := range sortedKeys(jobs) {
		for i := range jobs[job] {
			var p placement
			if userProcs == 0 {
				p.procs = strconv.Itoa(share)
				if job == PS {
					p.procs = "1"
				}
			}
			if bind && job != PS {
				p.cpus = cpus[next*share : (next+1)*share]
				next++
			}
			out[Task{job, i}] = p
		}
	}
	return out
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
