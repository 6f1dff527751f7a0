package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"godist/distlib/collective"
	"godist/distlib/display"
	"godist/internal/leakcheck"
	"godist/internal/slurmtest"
)

const helperEnv = "GODIST_CLUSTER_TEST_HELPER"

// TestMain turns the test binary into the tiny task program the launcher tests run.
func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		if err := helper(mode); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			os.Exit(3)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// helper is one task: it prints its TF_CONFIG, then all-reduces over the cluster's transport.
func helper(mode string) error {
	fmt.Println("TF_CONFIG=" + os.Getenv("TF_CONFIG"))
	if mode == "elastic-slurm" { // srun's task 1 is killed; the others go on a while and end well
		if os.Getenv("SLURM_PROCID") == "1" {
			return syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
		time.Sleep(time.Second)
		fmt.Printf("task %s ends well\n", os.Getenv("SLURM_PROCID"))
		return nil
	}
	if mode == "cpus" {
		return printCPUs()
	}
	if mode == "interleave" { // lines to stdout and stderr in turn
		for i := range interleaved {
			w := os.Stdout
			if i%2 == 1 {
				w = os.Stderr
			}
			fmt.Fprintf(w, "line %d\n", i)
		}
		return nil
	}
	r, err := NewTFConfigClusterResolver()
	if err != nil {
		return err
	}
	if mode == "elastic" { // worker 1 is killed; the others go on a while and end well
		fmt.Printf("%s=%s\n", ElasticEnv, os.Getenv(ElasticEnv))
		if r.TaskID() == 1 {
			fmt.Println("worker 1 is about to be killed")
			return syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
		time.Sleep(time.Second)
		return nil
	}
	if mode == "fail" {
		if r.TaskID() == 1 { // a message on stderr, then a last line without its newline
			fmt.Fprintln(os.Stderr, "helper: task 1 fails on purpose")
			fmt.Print("boom, no newline")
			os.Exit(3)
		}
		time.Sleep(time.Minute) // must be stopped by the launcher
		return nil
	}
	if r.TaskType() == PS {
		// Said before it listens: a worker that has reached this task's port (waitForPS)
		// knows the line is written, before the launcher stops the ps when the workers end.
		fmt.Printf("ps %d serves its variable store\n", r.TaskID())
	}
	s, err := NewServer(r, ServerOptions{})
	if err != nil {
		return err
	}
	defer s.Close()
	if r.TaskType() == PS {
		select {} // a ps serves until the launcher stops it
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := waitForPS(ctx, r.ClusterSpec()); err != nil {
		return err
	}
	buf := []float32{float32(s.Rank() + 1), 1}
	if err := collective.AllReduce(ctx, s.Transport(), buf, collective.Sum); err != nil {
		return err
	}
	if mode == "rootcause" {
		if s.Rank() == 1 { // some lines, then an exit with status 3
			for i := range 12 {
				fmt.Printf("worker 1 line %d\n", i)
			}
			os.Exit(3)
		}
		// The others lose worker 1 and fail when the launcher stops them (SIGTERM): an
		// all-reduce without it fails or waits until then.
		sctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM)
		defer stop()
		err := collective.AllReduce(sctx, s.Transport(), buf, collective.Sum)
		fmt.Printf("rank %d lost a peer: %v\n", s.Rank(), err)
		<-sctx.Done()
		return fmt.Errorf("rank %d: worker 1 is gone", s.Rank())
	}
	if mode == "killed" {
		if s.Rank() == 1 { // killed while a child of its own keeps its output open a while
			sleeper := exec.Command("sleep", "0.4")
			sleeper.Stdout = os.Stdout
			if err := sleeper.Start(); err != nil {
				return err
			}
			return syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
		return collective.AllReduce(ctx, s.Transport(), buf, collective.Sum) // fails: rank 1 is lost
	}
	fmt.Printf("rank %d of %d sum=%v\n", s.Rank(), s.Transport().Size(), buf)
	if err := collective.Barrier(ctx, s.Transport()); err != nil {
		return err
	}
	return nil
}

// waitForPS returns once every ps task of spec accepts connections (a worker of a real job
// reaches its ps before it trains).
func waitForPS(ctx context.Context, spec ClusterSpec) error {
	for _, addr := range spec.JobTasks(PS) {
		for {
			c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
			if err == nil {
				c.Close()
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("ps at %s: %w", addr, err)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	return nil
}

// printCPUs prints "cpus=LIST" with the CPUs every thread of this process may run on
// (Linux's Cpus_allowed_list), or an error if the threads differ.
func printCPUs() error {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	var lists []string
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + task.Name() + "/status")
		if err != nil {
			return err
		}
		m := regexp.MustCompile(`(?m)^Cpus_allowed_list:\s*(\S+)$`).FindSubmatch(b)
		if m == nil {
			return fmt.Errorf("no Cpus_allowed_list in /proc/self/task/%s/status", task.Name())
		}
		lists = append(lists, string(m[1]))
	}
	sort.Strings(lists)
	if lists[0] != lists[len(lists)-1] {
		return fmt.Errorf("threads bound differently: %v", lists)
	}
	fmt.Printf("cpus=%s threads=%d\n", lists[0], len(lists))
	return nil
}

const interleaved = 400

// TestLaunchKeepsLineOrder: a task's lines reach the output in the order it wrote them,
// whichever of stdout and stderr each went to (a panic's message on stderr must come after
// what the task printed before it).
func TestLaunchKeepsLineOrder(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := Launch(ctx, helperSpec(1, 0, "interleave", &out))
	if err != nil {
		t.Fatalf("Launch = %v\n%s", err, out.String())
	}
	next := 0
	for _, line := range strings.Split(out.String(), "\n") {
		rest, ok := strings.CutPrefix(line, "[worker 0] line ")
		if !ok {
			continue
		}
		if want := fmt.Sprint(next); rest != want {
			t.Fatalf("line %s came where line %s was due:\n%s", rest, want, out.String())
		}
		next++
	}
	if next != interleaved {
		t.Fatalf("%d of %d lines arrived:\n%s", next, interleaved, out.String())
	}
}

func TestLaunch(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	leakcheck.Check(t)
	tests := []struct {
		workers, ps int
		want        []string
	}{
		{2, 0, []string{"[worker 0] rank 0 of 2 sum=[3 2]", "[worker 1] rank 1 of 2 sum=[3 2]"}},
		{2, 1, []string{"[worker 0] rank 0 of 2 sum=[3 2]", "[worker 1] rank 1 of 2 sum=[3 2]", "[ps 0] ps 0 serves its variable store"}},
	}
	for _, tc := range tests {
		var out bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := Launch(ctx, helperSpec(tc.workers, tc.ps, "allreduce", &out))
		cancel()
		if err != nil {
			t.Fatalf("Launch(%d workers, %d ps) = %v\n%s", tc.workers, tc.ps, err, out.String())
		}
		for _, w := range tc.want {
			if !strings.Contains(out.String(), w+"\n") {
				t.Errorf("Launch(%d workers, %d ps) output lacks %q:\n%s", tc.workers, tc.ps, w, out.String())
			}
		}
		// Every task got a TF_CONFIG naming itself in the same cluster.
		var cluster string
		for _, line := range strings.Split(out.String(), "\n") {
			prefix, cfg, ok := strings.Cut(line, " TF_CONFIG=")
			if !ok {
				continue
			}
			c, err := ParseTFConfig(cfg)
			if err != nil {
				t.Fatalf("%s: bad TF_CONFIG: %v", prefix, err)
			}
			if want := "[" + c.Task.String() + "]"; prefix != want {
				t.Errorf("task %s got TF_CONFIG of %s", prefix, want)
			}
			if cluster != "" && c.Cluster.String() != cluster {
				t.Errorf("%s: cluster %s differs from %s", prefix, c.Cluster, cluster)
			}
			cluster = c.Cluster.String()
			if c.Cluster.NumTasks(Worker) != tc.workers || c.Cluster.NumTasks(PS) != tc.ps {
				t.Errorf("%s: cluster %s, want %d workers and %d ps", prefix, c.Cluster, tc.workers, tc.ps)
			}
		}
		if cluster == "" {
			t.Errorf("no TF_CONFIG printed:\n%s", out.String())
		}
	}
}

func TestLaunchFailingTask(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	leakcheck.Check(t)
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	var events []string
	spec := helperSpec(3, 0, "fail", &out)
	spec.Events = func(ev TaskEvent) {
		if !strings.HasPrefix(ev.Addr, "127.0.0.1:") {
			t.Errorf("event %+v: address %q, want 127.0.0.1:port", ev, ev.Addr)
		}
		events = append(events, ev.Task.String()+" "+ev.State)
	}
	err := Launch(ctx, spec)
	sort.Strings(events)
	if want := "[worker 0 started worker 0 stopped worker 1 failed worker 1 started worker 2 started worker 2 stopped]"; fmt.Sprint(events) != want {
		t.Errorf("events %v, want %s", events, want)
	}
	var te *TaskError
	var ee *exec.ExitError
	if !errors.As(err, &te) || te.Task != (Task{Worker, 1}) || !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("Launch with a failing worker 1 = %v, want *TaskError for worker 1 with exit status 3\n%s", err, out.String())
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("the job took %v to stop after a task failed", d)
	}
	var w1 []string // worker 1's lines, in order (the other tasks' lines may come between them)
	for _, line := range strings.Split(out.String(), "\n") {
		if rest, ok := strings.CutPrefix(line, "[worker 1] "); ok && !strings.HasPrefix(rest, "TF_CONFIG=") {
			w1 = append(w1, rest)
		}
	}
	if want := "[helper: task 1 fails on purpose boom, no newline]"; fmt.Sprint(w1) != want {
		t.Errorf("worker 1's lines %q, want %s:\n%s", w1, want, out.String())
	}
	if w := "[launch] task worker 1 failed"; !strings.Contains(out.String(), w) {
		t.Errorf("output lacks %q:\n%s", w, out.String())
	}
	var je *JobError
	if !errors.As(err, &je) {
		t.Fatalf("Launch = %T, want a *JobError", err)
	}
	if got := je.RootCause().LastLines; len(got) != 3 || !strings.HasPrefix(got[0], "TF_CONFIG=") ||
		fmt.Sprint(got[1:]) != "[helper: task 1 fails on purpose boom, no newline]" {
		t.Errorf("worker 1's last lines %q, want its TF_CONFIG line, then its 2 lines", got)
	}
}

// TestLaunchRootCause: of 3 workers, worker 1 prints 12 lines and exits with status 3; the
// others lose it and fail when the launcher stops them. The job's error starts with the
// root-cause block (worker 1, its address, exit code 3, the time, its last 10 lines), then
// lists the 2 others, and the panel's status names worker 1.
func TestLaunchRootCause(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	leakcheck.Check(t)
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now().Add(-time.Second) // the block's time is to the second
	err := Launch(ctx, helperSpec(3, 0, "rootcause", &out))
	end := time.Now()
	var je *JobError
	if !errors.As(err, &je) {
		t.Fatalf("Launch = %v, want a *JobError\n%s", err, out.String())
	}
	t.Logf("the job's error:\n%v", err)
	root := je.RootCause()
	if root.Task != (Task{Worker, 1}) || root.ExitCode != 3 || root.Signal != "" || root.Stopped {
		t.Fatalf("root cause %+v, want worker 1 with exit code 3\n%s", root, out.String())
	}
	if !regexp.MustCompile(`^127\.0\.0\.1:\d+$`).MatchString(root.Addr) || root.Time.Before(start) || root.Time.After(end) {
		t.Errorf("root cause at %q at %v, want 127.0.0.1:port between %v and %v", root.Addr, root.Time, start, end)
	}
	var want []string
	for i := 2; i < 12; i++ {
		want = append(want, fmt.Sprintf("worker 1 line %d", i))
	}
	if fmt.Sprint(root.LastLines) != fmt.Sprint(want) {
		t.Errorf("last lines %q, want %q", root.LastLines, want)
	}
	var others []string
	for _, f := range je.Others() {
		others = append(others, f.Task.String())
		if !f.Stopped || f.Time.Before(root.Time) {
			t.Errorf("%v: want a follow-on, ended while the job was stopped, after worker 1", f)
		}
	}
	sort.Strings(others)
	if fmt.Sprint(others) != "[worker 0 worker 2]" {
		t.Errorf("other failures %v, want worker 0 and worker 2", others)
	}
	msg := err.Error()
	block := regexp.MustCompile(`^Root cause \(first observed failure\): task worker 1 failed: exit status 3\n` +
		`  host: +127\.0\.0\.1:\d+\n  exit code: +3\n  time: +\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\n` +
		`  last lines: \(10\)\n    \| worker 1 line 2\n(    \| .*\n){8}    \| worker 1 line 11\n` +
		`Other failures, after it \(2\):\n  task worker [02] \(127\.0\.0\.1:\d+\): .*\n  task worker [02] \(.*$`)
	if !block.MatchString(msg) {
		t.Errorf("Error() =\n%s\nwant it to match %s", msg, block)
	}
	var te *TaskError
	var ee *exec.ExitError
	if !errors.As(err, &te) || te.Task != root.Task || !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Errorf("the error does not unwrap to worker 1's TaskError and exit status: %v, %v", te, ee)
	}
	if got, want := PanelStatus(ctx, err), "failed: worker 1 (exit code 3) first; 2 other tasks were stopped after it"; got != want {
		t.Errorf("PanelStatus = %q, want %q", got, want)
	}
}

// TestLaunchNamesKilledTask: worker 1 is killed (SIGKILL) and worker 0 fails when it loses
// it. Worker 1's Wait returns last (a child of its own holds its output open), yet the
// launcher names worker 1, the cause, and lists worker 0's failure beside it.
func TestLaunchNamesKilledTask(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var events []string
	spec := helperSpec(2, 0, "killed", &out)
	spec.Events = func(ev TaskEvent) { events = append(events, ev.Task.String()+" "+ev.State) }
	err := Launch(ctx, spec)
	var te *TaskError
	if !errors.As(err, &te) || te.Task != (Task{Worker, 1}) || !strings.Contains(err.Error(), "signal: killed") {
		t.Fatalf("Launch with worker 1 killed = %v, want *TaskError for worker 1, killed\n%s", err, out.String())
	}
	if w := "[launch] task worker 1 failed: signal: killed; task worker 0 also failed: exit status 3; stopping the job"; !strings.Contains(out.String(), w) {
		t.Errorf("output lacks %q:\n%s", w, out.String())
	}
	sort.Strings(events)
	if want := "[worker 0 failed worker 0 started worker 1 failed worker 1 started]"; fmt.Sprint(events) != want {
		t.Errorf("events %v, want %s", events, want)
	}
	var je *JobError
	if !errors.As(err, &je) {
		t.Fatalf("Launch = %T, want a *JobError", err)
	}
	root, others := je.RootCause(), je.Others()
	if root.Signal != "SIGKILL" || root.ExitCode != -1 || !strings.Contains(err.Error(), "\n  signal:     SIGKILL\n") {
		t.Errorf("root cause %+v, want worker 1 killed by SIGKILL; error:\n%s", root, err)
	}
	if len(others) != 1 || others[0].Task != (Task{Worker, 0}) || others[0].ExitCode != 3 {
		t.Errorf("other failures %v, want worker 0 with exit code 3", others)
	}
	if i, j := strings.Index(err.Error(), "Root cause"), strings.Index(err.Error(), "task worker 0 ("); i != 0 || j < 0 {
		t.Errorf("the error does not start with the root cause, then worker 0:\n%s", err)
	}
}

func TestLaunchErrors(t *testing.T) {
	tests := []struct {
		spec LaunchSpec
		want string
	}{
		{LaunchSpec{Workers: 0, Program: "x"}, "0 workers"},
		{LaunchSpec{Workers: 1}, "no program"},
		{LaunchSpec{Workers: 1, PS: -1, Program: "x"}, "-1 ps"},
		{LaunchSpec{Workers: 1, Program: "/nonexistent/prog", Output: &bytes.Buffer{}}, "task worker 0 failed"},
	}
	for _, tc := range tests {
		err := Launch(context.Background(), tc.spec)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Launch(%+v) = %v, want an error containing %q", tc.spec, err, tc.want)
		}
	}
}

// notebook is a display.Publisher like a notebook's without a widget front end.
type notebook struct{}

func (notebook) Display(data, md display.Bundle, id string) {}
func (notebook) Update(data, md display.Bundle, id string)  {}
func (notebook) ClearOutput(bool)                           {}

// TestLaunchPanelInCell: Launch in a notebook cell without widgets prints the cluster
// panel as a text table at the end of its output, each task exited with its address.
func TestLaunchPanelInCell(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	leakcheck.Check(t)
	old := display.SetPublisher(notebook{})
	defer display.SetPublisher(old)
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := Launch(ctx, helperSpec(2, 0, "allreduce", &out))
	if err != nil {
		t.Fatalf("Launch = %v\n%s", err, out.String())
	}
	_, table, ok := strings.Cut(out.String(), "\ncluster.Launch: 2 workers: done\n")
	if !ok {
		t.Fatalf("no panel table at the end:\n%s", out.String())
	}
	for _, re := range []string{`(?m)^worker 0 +127\.0\.0\.1:\d+ +exited +rank 0 of 2 sum=\[3 2\]$`, `(?m)^worker 1 +127\.0\.0\.1:\d+ +exited +rank 1 of 2 sum=\[3 2\]$`} {
		if !regexp.MustCompile(re).MatchString(table) {
			t.Errorf("table lacks %s:\n%s", re, table)
		}
	}
}

// TestLaunchPanelNamesRootCause: the panel of a failed Launch in a cell ends with a status
// naming the task that failed first and how many followed it.
func TestLaunchPanelNamesRootCause(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	old := display.SetPublisher(notebook{})
	defer display.SetPublisher(old)
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := Launch(ctx, helperSpec(3, 0, "rootcause", &out))
	if want := "\ncluster.Launch: 3 workers: failed: worker 1 (exit code 3) first; 2 other tasks were stopped after it\n"; !strings.Contains(out.String(), want) {
		t.Errorf("Launch = %v; the panel's table lacks %q:\n%s", err, want, out.String())
	}
}

// helperSpec is a job of this test binary's helper tasks (helperEnv=mode) with the given
// workers and ps tasks, writing to out.
func helperSpec(workers, ps int, mode string, out *bytes.Buffer) LaunchSpec {
	return LaunchSpec{Workers: workers, PS: ps, Program: os.Args[0], Args: []string{"-test.run=^$"},
		Env: []string{helperEnv + "=" + mode}, Output: out, GracePeriod: time.Second}
}

// TestLaunchElastic: with MinWorkers 2, worker 1 of 3 is killed and the job goes on: the
// launcher prints the loss, the panel's event marks it lost, the others end well and the
// job succeeds; the tasks are told the minimum (ElasticEnv). With MinWorkers 3 the same
// loss stops the job as without it.
func TestLaunchElastic(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	for _, c := range []struct {
		min    int
		events string
	}{
		{2, "[worker 0 exited worker 0 started worker 1 lost worker 1 started worker 2 exited worker 2 started]"},
		{3, "[worker 0 started worker 0 stopped worker 1 failed worker 1 started worker 2 started worker 2 stopped]"},
	} {
		t.Run(fmt.Sprint("min ", c.min), func(t *testing.T) {
			var out bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var mu sync.Mutex
			var events []string
			spec := helperSpec(3, 0, "elastic", &out)
			spec.MinWorkers = c.min
			spec.Events = func(ev TaskEvent) {
				mu.Lock()
				defer mu.Unlock()
				events = append(events, ev.Task.String()+" "+ev.State)
			}
			err := Launch(ctx, spec)
			sort.Strings(events)
			if fmt.Sprint(events) != c.events {
				t.Errorf("events %v, want %s", events, c.events)
			}
			if !strings.Contains(out.String(), "[worker 1] "+ElasticEnv+"="+fmt.Sprint(c.min)) { // worker 1 says it before it is killed
				t.Errorf("the tasks were not told the minimum:\n%s", out.String())
			}
			if c.min == 3 {
				var te *TaskError
				if !errors.As(err, &te) || te.Task != (Task{Worker, 1}) {
					t.Errorf("Launch = %v, want worker 1's failure", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Launch = %v, want success after losing worker 1\n%s", err, out.String())
			}
			lost := regexp.MustCompile(`\[launch\] task worker 1 lost at \d\d:\d\d:\d\d\.\d{3}: signal: killed; the job goes on with 2 chief and worker tasks \(at least 2\)`)
			if !lost.MatchString(out.String()) {
				t.Errorf("output does not report the loss as %s:\n%s", lost, out.String())
			}
		})
	}
}

// An elastic job needs a minimum between 1 and its chief and worker tasks, and no ps.
func TestLaunchElasticErrors(t *testing.T) {
	for _, spec := range []LaunchSpec{
		{Workers: 2, MinWorkers: 3, Program: "x"},
		{Workers: 2, MinWorkers: -1, Program: "x"},
		{Workers: 2, PS: 1, MinWorkers: 1, Program: "x"},
	} {
		err := Launch(context.Background(), spec)
		if err == nil || !strings.Contains(err.Error(), "an elastic job (MultiWorkerMirroredStrategy, no ps tasks) needs between 1 and its") {
			t.Errorf("Launch(%+v) = %v, want the elastic job's error", spec, err)
		}
	}
}

// TestLaunchElasticSlurm: under a real Slurm (srun), with MinWorkers 2, srun's task 1 of 3 is
// killed; srun leaves the others running (--kill-on-bad-exit=0 --no-kill) and the job
// succeeds, the launcher naming the lost task from srun's report. With MinWorkers 3, the
// same loss fails the job.
func TestLaunchElasticSlurm(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Slurm cluster")
	}
	c := slurmtest.Start(t) // skips without root or without slurm-wlm and munge
	for _, min := range []int{2, 3} {
		t.Run(fmt.Sprint("min ", min), func(t *testing.T) {
			var out bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			spec := helperSpec(3, 0, "elastic-slurm", &out)
			spec.Slurm, spec.MinWorkers = true, min
			spec.Env = append(spec.Env, c.Env()...)
			err := Launch(ctx, spec)
			if min == 3 {
				if err == nil {
					t.Fatalf("Launch = nil, want the job to fail without 3 tasks\n%s", out.String())
				}
				return
			}
			if err != nil {
				t.Fatalf("Launch = %v, want success after losing srun's task 1\n%s\n%s", err, out.String(), c.Logs())
			}
			if testing.Verbose() {
				t.Logf("the job's output:\n%s", out.String())
			}
			lost := regexp.MustCompile(`(?m)^\[launch\] task worker 1 lost: .+; the job went on with 2 chief and worker tasks \(at least 2\)$`)
			if !lost.MatchString(out.String()) || strings.Count(out.String(), "ends well") != 2 {
				t.Errorf("output does not report the loss as %s and the 2 others ending well:\n%s", lost, out.String())
			}
		})
	}
}
