package cluster

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"godist/internal/leakcheck"
)

// TestLaunchBindsWorkers: every thread of each launched worker runs on its own share of
// the CPUs this process may use, disjoint from its peer's; with NoPinning, on all of them.
func TestLaunchBindsWorkers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	leakcheck.Check(t)
	all := allowedCPUs()
	if len(all) < 2 {
		t.Skipf("this process may use %d CPU: nothing to share out between 2 workers", len(all))
	}
	half := len(all) / 2
	for _, tc := range []struct {
		noPin bool
		want  map[string]string
	}{
		{false, map[string]string{"[worker 0]": cpuList(all[:half]), "[worker 1]": cpuList(all[half : 2*half])}},
		{true, map[string]string{"[worker 0]": cpuList(all), "[worker 1]": cpuList(all)}},
	} {
		var out bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := Launch(ctx, LaunchSpec{Workers: 2, Program: os.Args[0], Args: []string{"-test.run=^$"},
			Env: []string{helperEnv + "=cpus"}, Output: &out, GracePeriod: time.Second, NoPinning: tc.noPin})
		cancel()
		if err != nil {
			t.Fatalf("Launch(NoPinning: %v) = %v\n%s", tc.noPin, err, out.String())
		}
		for task, cpus := range tc.want {
			if want := task + " cpus=" + cpus + " "; !strings.Contains(out.String(), want) {
				t.Errorf("Launch(NoPinning: %v): output lacks %q:\n%s", tc.noPin, want, out.String())
			}
		}
	}
	// Launch's own threads keep their CPUs.
	if got := allowedCPUs(); cpuList(got) != cpuList(all) {
		t.Errorf("after Launch this thread may use CPUs %s, before %s", cpuList(got), cpuList(all))
	}
}

// cpuList writes cpus as Linux does (Cpus_allowed_list): ranges and single CPUs, "0-3,6".
func cpuList(cpus []int) string {
	var b strings.Builder
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(cpus[i]))
		if j > i {
			b.WriteString("-" + strconv.Itoa(cpus[j]))
		}
		i = j + 1
	}
	return b.String()
}

func TestCPUList(t *testing.T) {
	for _, tt := range []struct {
		cpus []int
		want string
	}{{nil, ""}, {[]int{0}, "0"}, {[]int{0, 1, 2, 3}, "0-3"}, {[]int{0, 2, 3, 4, 7}, "0,2-4,7"}} {
		if got := cpuList(tt.cpus); got != tt.want {
			t.Errorf("cpuList(%v) = %q, want %q", tt.cpus, got, tt.want)
		}
	}
}

// TestStartOnRefusedStartsUnbound: a binding the kernel refuses (a CPU that does not exist
// here) starts the task anyway, on every CPU this process may use.
func TestStartOnRefusedStartsUnbound(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process")
	}
	var out bytes.Buffer
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=cpus")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := startOn(cmd, []int{4000}); err != nil {
		t.Fatalf("startOn(CPU 4000) = %v, want the task started unbound", err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("task: %v\n%s", err, out.String())
	}
	if want := "cpus=" + cpuList(allowedCPUs()) + " "; !strings.Contains(out.String(), want) {
		t.Errorf("task printed %q, want %q", out.String(), want)
	}
}
