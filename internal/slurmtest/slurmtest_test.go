package slurmtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"godist/distlib/cluster"
	"godist/distlib/collective"
	"godist/internal/leakcheck"
	"godist/internal/syncbuf"
)

// helperEnv makes the test binary act as the program srun starts (see TestMain).
const helperEnv = "GODIST_SLURMTEST_HELPER"

// TestMain lets srun run this test binary as a small program: with GODIST_SLURMTEST_HELPER
// set it resolves the cluster from Slurm's environment (and, for "allreduce", all-reduces
// over it), prints one JSON line and exits instead of running the tests.
func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		if err := helper(mode); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// report is what a helper task prints.
type report struct {
	Rank     int                 `json:"rank"`
	TaskType string              `json:"task_type"`
	TaskID   int                 `json:"task_id"`
	Cluster  map[string][]string `json:"cluster"`
	Sum      []float32           `json:"sum,omitempty"`
}

func helper(mode string) error {
	opts := cluster.SlurmOptions{}
	if v := os.Getenv("GODIST_SLURMTEST_PORT_BASE"); v != "" {
		p, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("GODIST_SLURMTEST_PORT_BASE %q: %v", v, err)
		}
		opts.PortBase = p
	}
	r, err := cluster.NewSlurmClusterResolver(opts)
	if err != nil {
		return err
	}
	rep := report{Rank: r.Rank(), TaskType: r.TaskType(), TaskID: r.TaskID(), Cluster: r.ClusterSpec().AsDict()}
	switch mode {
	case "resolve":
	case "fail":
		// The last task fails at once; the others would run for a minute.
		if r.Rank() == r.ClusterSpec().NumTasks(r.TaskType())-1 {
			return fmt.Errorf("task %d fails on purpose", r.Rank())
		}
		time.Sleep(time.Minute)
	case "allreduce":
		srv, err := cluster.NewServer(r, cluster.ServerOptions{})
		if err != nil {
			return err
		}
		defer srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		buf := []float32{float32(srv.Rank() + 1), 10 * float32(srv.Rank()+1), 0.5}
		if err := collective.AllReduce(ctx, srv.Transport(), buf, collective.Sum,
			collective.CommunicationOptions{Timeout: 10 * time.Second}); err != nil {
			return err
		}
		rep.Sum = buf
		// Nobody closes before everyone has its result.
		if err := collective.Barrier(ctx, srv.Transport(), collective.CommunicationOptions{Timeout: 10 * time.Second}); err != nil {
			return err
		}
	default:
		return fmt.Errorf("%s=%q: want resolve or allreduce", helperEnv, mode)
	}
	b, err := json.Marshal(rep)
	if err != nil {
		return err
	}
	fmt.Println(string(b))
	return nil
}

// envValues returns the values of variable name in `env` output lines, sorted.
func envValues(out []byte, name string) []string {
	var vals []string
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, name+"="); ok {
			vals = append(vals, v)
		}
	}
	sort.Strings(vals)
	return vals
}

// TestCluster starts one cluster and runs the checks on it (a cluster takes about a second
// to start, so the checks share it).
func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Slurm daemons: skipped under -short")
	}
	leakcheck.Check(t) // registered first, so it runs after the cluster has stopped
	c := Start(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}

	t.Run("procid", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := c.Srun(ctx, "-n", "2", "env")
		if err != nil {
			t.Fatal(err)
		}
		if got, want := envValues(out, "SLURM_PROCID"), []string{"0", "1"}; !slices.Equal(got, want) {
			t.Errorf("srun -n 2 env: SLURM_PROCID = %q, want %q", got, want)
		}
	})

	t.Run("step environment", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := c.Srun(ctx, "-N1", "-n2", "--ntasks-per-node=2", "env")
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct{ name, want string }{
			{"SLURM_STEP_NODELIST", c.Node},
			{"SLURM_STEP_TASKS_PER_NODE", "2"},
			{"SLURM_STEP_NUM_TASKS", "2"},
			{"SLURM_CONF", c.Conf},
		} {
			if got, want := envValues(out, tc.name), []string{tc.want, tc.want}; !slices.Equal(got, want) {
				t.Errorf("srun -N1 -n2 --ntasks-per-node=2 env: %s = %q, want %q", tc.name, got, want)
			}
		}
	})

	t.Run("sbatch", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// Both jobs are submitted first: slurmctld schedules batch jobs about once a second.
		job, err := c.Sbatch(ctx, "echo job=$SLURM_JOB_ID\nsrun -n 2 sh -c 'echo task=$SLURM_PROCID'\n", "-n", "2")
		if err != nil {
			t.Fatal(err)
		}
		failing, err := c.Sbatch(ctx, "exit 3\n")
		if err != nil {
			t.Fatal(err)
		}
		state, out, err := job.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if state != "COMPLETED" {
			t.Fatalf("job %s ended %s, want COMPLETED; output:\n%s", job.ID, state, out)
		}
		if got, want := envValues(out, "task"), []string{"0", "1"}; !slices.Equal(got, want) {
			t.Errorf("job output tasks = %q, want %q; output:\n%s", got, want, out)
		}
		if got, want := envValues(out, "job"), []string{job.ID}; !slices.Equal(got, want) {
			t.Errorf("job output job = %q, want %q", got, want)
		}
		if state, _, err := failing.Wait(ctx); err != nil || state != "FAILED" {
			t.Errorf("job exiting 3 ended %q (err %v), want FAILED", state, err)
		}
	})

	// The course's activity 002: the ClusterSpec of a Slurm step, as TensorFlow's
	// SlurmClusterResolver builds it, seen by every task.
	t.Run("resolver", func(t *testing.T) {
		for _, tc := range []struct {
			name  string
			n     int
			jobs  string // GODIST_SLURM_JOBS
			want  map[string][]string
			tasks []string // task of each rank, "type index"
		}{
			{"two workers", 2, "", map[string][]string{"worker": {c.Node + ":8888", c.Node + ":8889"}},
				[]string{"worker 0", "worker 1"}},
			{"ps and workers", 4, "ps:1,worker:3",
				map[string][]string{"ps": {c.Node + ":8888"}, "worker": {c.Node + ":8889", c.Node + ":8890", c.Node + ":8891"}},
				[]string{"ps 0", "worker 0", "worker 1", "worker 2"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				env := []string{helperEnv + "=resolve"}
				if tc.jobs != "" {
					env = append(env, "GODIST_SLURM_JOBS="+tc.jobs)
				}
				out, err := c.SrunEnv(ctx, env, "-n", strconv.Itoa(tc.n), exe)
				if err != nil {
					t.Fatal(err)
				}
				reps := parseReports(t, out, tc.n)
				for rank, rep := range reps {
					if got := fmt.Sprintf("%s %d", rep.TaskType, rep.TaskID); got != tc.tasks[rank] {
						t.Errorf("rank %d: task = %q, want %q", rank, got, tc.tasks[rank])
					}
					if !equalSpec(rep.Cluster, tc.want) {
						t.Errorf("rank %d: cluster = %v, want %v", rank, rep.Cluster, tc.want)
					}
				}
			})
		}
	})

	// Both tasks of `srun -n 2` start the gRPC server the resolver describes and all-reduce.
	t.Run("allreduce", func(t *testing.T) {
		if _, err := net.LookupHost(c.Node); err != nil {
			t.Skipf("the tasks' addresses use the node name %q, which does not resolve here: %v", c.Node, err)
		}
		ports, err := freePorts(2) // the two tasks listen on PortBase and PortBase+1
		if err != nil {
			t.Fatal(err)
		}
		// With a token set by hand, and with none: plain srun derives one from the job id
		// and the user's cluster secret (created by the first task).
		secret := filepath.Join(t.TempDir(), "cluster-secret")
		for _, auth := range [][]string{
			{cluster.TokenEnv + "=slurmtest-token"},
			{cluster.TokenEnv + "=", cluster.SecretFileEnv + "=" + secret},
		} {
			ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
			defer cancel()
			env := append([]string{helperEnv + "=allreduce", fmt.Sprintf("GODIST_SLURMTEST_PORT_BASE=%d", ports[0])}, auth...)
			out, err := c.SrunEnv(ctx, env, "-n", "2", exe)
			if err != nil {
				t.Fatalf("srun with %v: %v", auth, err)
			}
			want := []float32{3, 30, 1}
			for rank, rep := range parseReports(t, out, 2) {
				if !slices.Equal(rep.Sum, want) {
					t.Errorf("%v: rank %d: all-reduce sum = %v, want %v", auth, rank, rep.Sum, want)
				}
			}
		}
	})
	// godist launch --slurm: one srun starts the tasks; their output comes back labelled with
	// the task each one resolved itself to be.
	t.Run("launch", func(t *testing.T) {
		ports, err := freePorts(3) // up to 3 tasks on the node: PortBase..PortBase+2
		if err != nil {
			t.Fatal(err)
		}
		env := []string{"SLURM_CONF=" + c.Conf, fmt.Sprintf("GODIST_SLURMTEST_PORT_BASE=%d", ports[0])}
		for _, tc := range []struct {
			name    string
			spec    cluster.LaunchSpec
			mode    string
			wantErr string
			labels  []string
		}{
			{"resolve ps and workers", cluster.LaunchSpec{Workers: 2, PS: 1}, "resolve", "", []string{"ps 0", "worker 0", "worker 1"}},
			{"allreduce", cluster.LaunchSpec{Workers: 2}, "allreduce", "", []string{"worker 0", "worker 1"}},
			{"failing task", cluster.LaunchSpec{Workers: 2}, "fail", "exit status", nil},
		} {
			t.Run(tc.name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				var out syncbuf.Buffer
				spec := tc.spec
				spec.Slurm, spec.Program, spec.Output = true, exe, &out
				spec.Env = append(env, helperEnv+"="+tc.mode)
				start := time.Now()
				err := cluster.Launch(ctx, spec)
				t.Logf("Launch took %v; output:\n%s", time.Since(start), out.String())
				if tc.wantErr != "" {
					var te *cluster.TaskError
					if !errors.As(err, &te) || !strings.Contains(err.Error(), tc.wantErr) {
						t.Fatalf("Launch = %v, want a *cluster.TaskError containing %q", err, tc.wantErr)
					}
					if !strings.Contains(out.String(), "[worker 1] task 1 fails on purpose") {
						t.Errorf("the failing task's error is not in the job's output")
					}
					if time.Since(start) > 15*time.Second {
						t.Errorf("a failing task stopped the job after %v, want it stopped at once", time.Since(start))
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				seen := map[string]bool{}
				for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
					label, js, ok := strings.Cut(line, "] ")
					if !ok || !strings.HasPrefix(label, "[") || !strings.HasPrefix(js, "{") {
						continue // srun's own messages
					}
					label = label[1:]
					var rep report
					if err := json.Unmarshal([]byte(js), &rep); err != nil {
						t.Fatalf("line %q: %v", line, err)
					}
					if got := fmt.Sprintf("%s %d", rep.TaskType, rep.TaskID); got != label {
						t.Errorf("line labelled %q comes from task %q", label, got)
					}
					if tc.mode == "allreduce" && !slices.Equal(rep.Sum, []float32{3, 30, 1}) {
						t.Errorf("%s: sum %v, want [3 30 1]", label, rep.Sum)
					}
					seen[label] = true
				}
				for _, l := range tc.labels {
					if !seen[l] {
						t.Errorf("no report from %s", l)
					}
				}
			})
		}
	})

	// Stop ends a running step, the daemons, and removes the directory.
	t.Run("stop", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		marker := fmt.Sprintf("600.%d", os.Getpid()) // a sleep this test alone runs
		srun := c.Command(ctx, "srun", "-n", "1", "sleep", marker)
		if err := srun.Start(); err != nil {
			t.Fatal(err)
		}
		srunDone := make(chan error, 1)
		go func() { srunDone <- srun.Wait() }()
		for len(processes("sleep", marker)) == 0 {
			select {
			case err := <-srunDone:
				t.Fatalf("srun sleep ended before Stop: %v", err)
			case <-ctx.Done():
				t.Fatal("the step's sleep did not start within 30s")
			case <-time.After(20 * time.Millisecond):
			}
		}
		var pids []int
		for _, d := range c.daemons {
			pids = append(pids, d.cmd.Process.Pid)
		}
		start := time.Now()
		c.Stop()
		t.Logf("Stop took %v", time.Since(start))
		select {
		case <-srunDone:
		case <-ctx.Done():
			t.Fatal("srun still runs after Stop")
		}
		if p := processes("sleep", marker); len(p) > 0 {
			t.Errorf("the step's process %v still runs after Stop", p)
		}
		for _, pid := range pids {
			if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
				t.Errorf("daemon %d still exists after Stop (kill 0: %v)", pid, err)
			}
		}
		if _, err := os.Stat(c.Dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still exists after Stop: %v", c.Dir, err)
		}
	})
}

// processes returns the pids of the processes running program name (any directory) with
// exactly args.
func processes(name string, args ...string) []int {
	want := strings.Join(append([]string{name}, args...), "\x00") + "\x00"
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if i := bytes.IndexByte(b, 0); err == nil && i >= 0 && string(b[:i]) != name {
			b = b[bytes.LastIndexByte(b[:i], '/')+1:] // argv[0] without its directory
		}
		if err == nil && string(b) == want {
			pids = append(pids, pid)
		}
	}
	return pids
}

// parseReports parses one JSON report per line and orders them by rank.
func parseReports(t *testing.T, out []byte, n int) []report {
	t.Helper()
	reps := make([]report, n)
	seen := make([]bool, n)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != n {
		t.Fatalf("got %d output lines, want %d:\n%s", len(lines), n, out)
	}
	for _, line := range lines {
		var rep report
		if err := json.Unmarshal([]byte(line), &rep); err != nil {
			t.Fatalf("output line %q: %v", line, err)
		}
		if rep.Rank < 0 || rep.Rank >= n || seen[rep.Rank] {
			t.Fatalf("output line %q: rank %d repeated or outside 0..%d", line, rep.Rank, n-1)
		}
		seen[rep.Rank], reps[rep.Rank] = true, rep
	}
	return reps
}

func equalSpec(a, b map[string][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

func TestStartWithBadOptions(t *testing.T) {
	if reason := Unavailable(); reason != "" {
		t.Skip(reason)
	}
	ft := &fatalRecorder{TB: t}
	func() {
		defer func() { recover() }()
		StartWith(ft, Options{CPUs: -1})
	}()
	if !strings.Contains(ft.msg, "Options.CPUs = -1") {
		t.Errorf("StartWith(CPUs: -1) failed with %q, want a message naming Options.CPUs = -1", ft.msg)
	}
}

// fatalRecorder records Fatalf instead of failing the test, and stops the caller by panicking.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic(f)
}

func TestCleanEnv(t *testing.T) {
	in := []string{"PATH=/bin", "SLURM_JOB_ID=7", "SBATCH_PARTITION=x", "HOME=/root", "SLURMX=1", "SRUN_DEBUG=1"}
	got := cleanEnv(in)
	want := []string{"PATH=/bin", "HOME=/root", "SLURMX=1"}
	if !slices.Equal(got, want) {
		t.Errorf("cleanEnv(%q) = %q, want %q", in, got, want)
	}
}
