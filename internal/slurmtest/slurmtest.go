// Package slurmtest starts a real one-node Slurm cluster for a test: Debian's munged,
// slurmctld and slurmd, run as root with their own key, sockets, ports, state directories and
// logs under a fresh temporary directory, so that several clusters (several tests, several
// packages) can run on one machine at once and nothing under /etc or /var is used.
//
// A test calls Start, then runs commands with Srun, Sbatch or Command, which set SLURM_CONF
// to the cluster's configuration. Start skips the test with a reason when it does not run as
// root or when the Slurm or munge binaries are missing (installer/deps.sh installs them), and
// fails it, with the daemons' logs, when the cluster does not come up. Everything started is
// stopped when the test ends.
package slurmtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"godist/internal/freeport"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// StartTimeout bounds how long Start waits for the node to show up idle.
const StartTimeout = 30 * time.Second

// Binaries are the programs Start needs; a test skips when one is missing.
var Binaries = []string{"munged", "slurmctld", "slurmd", "slurmstepd", "srun", "sbatch", "sinfo", "squeue", "scontrol", "scancel"}

// Options configures StartWith; the zero value is what Start uses.
type Options struct {
	// CPUs is the node's declared CPU count; 0 means the number of usable CPUs but at least
	// 4, so that steps of up to 4 tasks (srun -n 4) run on a small machine. Slurm is told to
	// trust the declared count (SlurmdParameters=config_overrides); tasks share cores.
	CPUs int
}

// Cluster is a running one-node Slurm cluster.
type Cluster struct {
	// Dir holds the configuration, keys, state, spool and logs.
	Dir string
	// Conf is the path of slurm.conf (what SLURM_CONF is set to).
	Conf string
	// Node is the node's name (the short host name), as it appears in SLURM_STEP_NODELIST.
	Node string
	// CPUs is the node's declared CPU count.
	CPUs int

	t       testing.TB
	env     []string
	daemons []*daemon
	once    sync.Once
}

type daemon struct {
	name string
	log  string // file with the daemon's stdout and stderr
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	err  error         // Wait's result, set before done is closed
}

// Start brings up a one-node cluster with the default Options.
func Start(t testing.TB) *Cluster { return StartWith(t, Options{}) }

// StartWith brings up a one-node cluster: it skips the test without root or without the
// binaries, and fails it (with the daemons' logs) when the node is not idle within
// StartTimeout. The cluster stops when the test ends.
func StartWith(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if reason := Unavailable(); reason != "" {
		t.Skip("slurmtest: " + reason)
	}
	if opts.CPUs < 0 {
		t.Fatalf("slurmtest: Options.CPUs = %d: want 0 (default) or a positive count", opts.CPUs)
	}
	c, err := start(t, opts)
	if c != nil {
		t.Cleanup(c.Stop)
	}
	if err != nil {
		logs := ""
		if c != nil {
			logs = c.Logs()
		}
		t.Fatalf("slurmtest: %v\n%s", err, logs)
	}
	return c
}

// Unavailable returns why no cluster can be started here ("" when one can): not root, or a
// binary missing from PATH.
func Unavailable() string {
	if os.Geteuid() != 0 {
		return "needs root to run slurmctld, slurmd and munged (run the tests as root, as CI does)"
	}
	var missing []string
	for _, b := range Binaries {
		if _, err := lookPath(b); err != nil {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 {
		return fmt.Sprintf("missing %s: install Debian's slurm-wlm and munge (bash installer/deps.sh)", strings.Join(missing, ", "))
	}
	return ""
}

// lookPath finds a binary on PATH or in the sbin directories, which a non-login PATH may lack.
func lookPath(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/sbin", "/usr/local/sbin"} {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("slurmtest: %s not found on PATH or in /usr/sbin", name)
}

var validNode = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]*$`)

// nodeName is the short host name, which is what slurmd calls itself.
func nodeName() (string, error) {
	h, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("host name: %w", err)
	}
	h, _, _ = strings.Cut(h, ".")
	if !validNode.MatchString(h) {
		return "", fmt.Errorf("host name %q cannot be a Slurm node name", h)
	}
	return h, nil
}

func start(t testing.TB, opts Options) (*Cluster, error) {
	node, err := nodeName()
	if err != nil {
		return nil, err
	}
	// A short directory of our own: munge's and slurmd's unix sockets must fit in 108 bytes,
	// and munged wants every directory above its socket to be searchable by all.
	dir, err := os.MkdirTemp("", "godist-slurm-")
	if err != nil {
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	c := &Cluster{Dir: dir, Conf: filepath.Join(dir, "slurm.conf"), Node: node, t: t}
	if err := os.Chmod(dir, 0o755); err != nil {
		return c, err
	}
	for _, sub := range []string{"munge", "state", "spool", "log"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o755); err != nil {
			return c, err
		}
	}
	c.CPUs = opts.CPUs
	if c.CPUs == 0 {
		c.CPUs = max(runtime.NumCPU(), 4)
	}
	c.env = append(cleanEnv(os.Environ()), "SLURM_CONF="+c.Conf)

	// munge: a fresh key, its own socket.
	key := make([]byte, 1024)
	if _, err := rand.Read(key); err != nil {
		return c, fmt.Errorf("munge key: %w", err)
	}
	keyFile := filepath.Join(dir, "munge", "munge.key")
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		return c, fmt.Errorf("munge key: %w", err)
	}
	socket := filepath.Join(dir, "munge", "munge.socket")
	if err := c.spawn("munged", "munged", "--foreground", "--socket="+socket, "--key-file="+keyFile,
		"--pid-file="+filepath.Join(dir, "munge", "munged.pid"),
		"--log-file="+filepath.Join(dir, "log", "munged.log"),
		"--seed-file="+filepath.Join(dir, "munge", "munged.seed"), "--num-threads=2"); err != nil {
		return c, err
	}
	if err := c.waitFor(func() bool { _, err := os.Stat(socket); return err == nil }, "munged", "munged did not create its socket"); err != nil {
		return c, err
	}

	ports, err := freePorts(2)
	if err != nil {
		return c, err
	}
	conf := fmt.Sprintf(`# written by godist internal/slurmtest
ClusterName=godisttest
SlurmctldHost=%[1]s(127.0.0.1)
SlurmctldPort=%[3]d
SlurmdPort=%[4]d
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=%[5]s
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=2
InactiveLimit=0
MessageTimeout=10
StateSaveLocation=%[2]s/state
SlurmdSpoolDir=%[2]s/spool
SlurmctldPidFile=%[2]s/slurmctld.pid
SlurmdPidFile=%[2]s/slurmd.pid
SlurmctldLogFile=%[2]s/log/slurmctld.log
SlurmdLogFile=%[2]s/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
NodeName=%[1]s NodeAddr=127.0.0.1 CPUs=%[6]d State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
`, node, dir, ports[0], ports[1], socket, c.CPUs)
	if err := os.WriteFile(c.Conf, []byte(conf), 0o644); err != nil {
		return c, fmt.Errorf("write slurm.conf: %w", err)
	}
	// -i: ignore state left by another run (there is none: the state directory is new).
	if err := c.spawn("slurmctld", "slurmctld", "-D", "-i", "-f", c.Conf); err != nil {
		return c, err
	}
	if err := c.spawn("slurmd", "slurmd", "-D", "-N", node, "-f", c.Conf); err != nil {
		return c, err
	}
	if err := c.waitFor(c.idle, "", fmt.Sprintf("node %s not idle within %v (sinfo: %s)", node, StartTimeout, c.sinfo())); err != nil {
		return c, err
	}
	return c, nil
}

// cleanEnv drops the variables of any Slurm job the test itself runs in, which would make
// srun and sbatch think they are inside an allocation of another cluster.
func cleanEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "SLURM_") || strings.HasPrefix(k, "SBATCH_") || strings.HasPrefix(k, "SALLOC_") ||
			strings.HasPrefix(k, "SRUN_") || strings.HasPrefix(k, "SQUEUE_") || strings.HasPrefix(k, "SINFO_") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// freePorts returns n consecutive TCP ports (a Slurm job's tasks on one node take PortBase,
// PortBase+1, ...) that were free a moment ago, below the kernel's ephemeral range
// (package freeport; seen in CI before: "bind: address already in use" for rank 1 at
// base+1, a port inside the range that another process's connection took).
func freePorts(n int) ([]int, error) { return freeport.Consecutive("127.0.0.1", n) }

// spawn starts a daemon in the foreground, in its own process group, with its output in
// log/<name>.out.
func (c *Cluster) spawn(name, bin string, args ...string) error {
	path, err := lookPath(bin)
	if err != nil {
		return err
	}
	logPath := filepath.Join(c.Dir, "log", name+".out")
	f, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := exec.Command(path, args...)
	cmd.Env = c.env
	cmd.Dir = c.Dir
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	d := &daemon{name: name, log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		d.err = cmd.Wait()
		close(d.done)
	}()
	c.daemons = append(c.daemons, d)
	return nil
}

// waitFor polls ok until it holds, a daemon exits, or StartTimeout passes.
func (c *Cluster) waitFor(ok func() bool, what, timeoutMsg string) error {
	deadline := time.Now().Add(StartTimeout)
	for delay := 20 * time.Millisecond; ; delay = min(delay*2, 250*time.Millisecond) {
		if ok() {
			return nil
		}
		for _, d := range c.daemons {
			select {
			case <-d.done:
				return fmt.Errorf("%s exited while starting: %v", d.name, d.err)
			default:
			}
		}
		if time.Now().After(deadline) {
			return errors.New(timeoutMsg)
		}
		time.Sleep(delay)
	}
}

func (c *Cluster) sinfo() string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := c.Command(ctx, "sinfo", "-h", "-N", "-o", "%N %T %E").CombinedOutput()
	if err != nil {
		return fmt.Sprintf("%v: %s", err, bytes.TrimSpace(out))
	}
	return string(bytes.TrimSpace(out))
}

func (c *Cluster) idle() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := c.Command(ctx, "sinfo", "-h", "-N", "-n", c.Node, "-o", "%T").Output()
	return err == nil && strings.TrimSpace(string(out)) == "idle"
}

// Env returns the environment commands of this cluster run with: the test's own, without
// any Slurm job variables, plus SLURM_CONF.
func (c *Cluster) Env() []string { return append([]string{}, c.env...) }

// Command returns a command (a Slurm client such as squeue or scontrol, or anything else)
// that runs in the cluster's environment; the test must run it.
func (c *Cluster) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	if p, err := lookPath(name); err == nil {
		name = p
	}
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = c.Env()
	cmd.WaitDelay = 2 * time.Second
	return cmd
}

// Srun runs `srun args...` and returns its standard output; on failure the error holds the
// exit status and srun's standard error.
func (c *Cluster) Srun(ctx context.Context, args ...string) ([]byte, error) {
	return c.run(ctx, nil, "srun", args...)
}

// SrunEnv is Srun with extra environment variables ("NAME=value") for the tasks; srun
// passes its whole environment to them (its --export option cannot carry values with commas).
func (c *Cluster) SrunEnv(ctx context.Context, env []string, args ...string) ([]byte, error) {
	return c.run(ctx, env, "srun", args...)
}

func (c *Cluster) run(ctx context.Context, env []string, name string, args ...string) ([]byte, error) {
	cmd := c.Command(ctx, name, args...)
	cmd.Env = append(cmd.Env, env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return out, fmt.Errorf("slurmtest: %s %s: %w\nstderr:\n%s", name, strings.Join(args, " "), err, stderr.Bytes())
	}
	return out, nil
}

// Job is a batch job submitted with Sbatch.
type Job struct {
	// ID is Slurm's job id.
	ID string
	// Output is the path of the job's standard output and error.
	Output string

	c *Cluster
}

// Sbatch submits script (a shell script; "#!/bin/sh\n" is added when it has no "#!" line)
// with `sbatch args...`; the job's output goes to a file in the cluster's directory.
func (c *Cluster) Sbatch(ctx context.Context, script string, args ...string) (*Job, error) {
	if !strings.HasPrefix(script, "#!") {
		script = "#!/bin/sh\n" + script
	}
	f, err := os.CreateTemp(c.Dir, "job-*.sh")
	if err != nil {
		return nil, fmt.Errorf("slurmtest: sbatch: %w", err)
	}
	if _, err := f.WriteString(script); err != nil {
		f.Close()
		return nil, fmt.Errorf("slurmtest: sbatch: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("slurmtest: sbatch: %w", err)
	}
	output := strings.TrimSuffix(f.Name(), ".sh") + ".out"
	all := append([]string{"--parsable", "--output=" + output, "--chdir=" + c.Dir}, args...)
	out, err := c.run(ctx, nil, "sbatch", append(all, f.Name())...)
	if err != nil {
		return nil, err
	}
	id, _, _ := strings.Cut(strings.TrimSpace(string(out)), ";")
	if _, err := strconv.Atoi(id); err != nil {
		return nil, fmt.Errorf("slurmtest: sbatch printed %q, want a job id", out)
	}
	return &Job{ID: id, Output: output, c: c}, nil
}

// terminal are the job states after which a job runs no more.
var terminal = map[string]bool{"COMPLETED": true, "FAILED": true, "CANCELLED": true, "TIMEOUT": true,
	"NODE_FAIL": true, "OUT_OF_MEMORY": true, "PREEMPTED": true, "BOOT_FAIL": true, "DEADLINE": true}

var jobState = regexp.MustCompile(`\bJobState=(\S+)`)

// State returns the job's state as scontrol shows it ("PENDING", "RUNNING", "COMPLETED"...).
func (j *Job) State(ctx context.Context) (string, error) {
	out, err := j.c.run(ctx, nil, "scontrol", "-o", "show", "job", j.ID)
	if err != nil {
		return "", err
	}
	m := jobState.FindSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("slurmtest: no JobState in scontrol's output for job %s: %q", j.ID, out)
	}
	return string(m[1]), nil
}

// Wait waits until the job has ended and returns its final state and its output; it returns
// an error when ctx ends first.
func (j *Job) Wait(ctx context.Context) (state string, output []byte, err error) {
	for delay := 20 * time.Millisecond; ; delay = min(delay*2, 250*time.Millisecond) {
		state, err = j.State(ctx)
		if err != nil {
			return "", nil, err
		}
		if terminal[state] {
			output, err = os.ReadFile(j.Output)
			return state, output, err
		}
		select {
		case <-ctx.Done():
			return state, nil, fmt.Errorf("slurmtest: job %s still %s: %w", j.ID, state, ctx.Err())
		case <-time.After(delay):
		}
	}
}

// Logs returns the daemons' logs, for failure messages.
func (c *Cluster) Logs() string {
	var b strings.Builder
	files, _ := filepath.Glob(filepath.Join(c.Dir, "log", "*"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil || len(bytes.TrimSpace(data)) == 0 {
			continue
		}
		if len(data) > 8<<10 {
			data = append([]byte("...\n"), data[len(data)-8<<10:]...)
		}
		fmt.Fprintf(&b, "==== %s\n%s\n", filepath.Base(f), data)
	}
	return b.String()
}

// Stop cancels the cluster's jobs, stops the daemons and removes the directory; it runs when
// the test ends and may be called earlier.
func (c *Cluster) Stop() {
	c.once.Do(c.stop)
}

func (c *Cluster) stop() {
	running := func(name string) bool {
		for _, d := range c.daemons {
			if d.name == name {
				select {
				case <-d.done:
					return false
				default:
					return true
				}
			}
		}
		return false
	}
	if running("slurmctld") && running("slurmd") {
		// Cancel what still runs so that no slurmstepd outlives the cluster.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = c.Command(ctx, "scancel", "--full", "--partition=debug").Run()
		for ctx.Err() == nil {
			out, err := c.Command(ctx, "squeue", "-h", "-o", "%i").Output()
			if err != nil || len(bytes.TrimSpace(out)) == 0 {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		cancel()
	}
	// slurmd, then slurmctld, then munged.
	for i := len(c.daemons) - 1; i >= 0; i-- {
		d := c.daemons[i]
		_ = d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
			<-d.done
		}
	}
	if c.t.Failed() {
		c.t.Logf("slurmtest: daemons' logs of the failed test:\n%s", c.Logs())
	}
	if err := os.RemoveAll(c.Dir); err != nil {
		c.t.Logf("slurmtest: remove %s: %v", c.Dir, err)
	}
}
