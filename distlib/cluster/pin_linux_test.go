package cluster

import (
	"bytes"
	"context"
	"os"
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
