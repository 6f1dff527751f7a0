package memlimit

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeRoot writes files under a temporary root and points the package at it.
func fakeRoot(t *testing.T, files map[string]string) {
	t.Helper()
	root := t.TempDir()
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	oldRoot, oldLimit, oldMapped := fsRoot, goLimit, goMapped
	fsRoot = root
	goLimit = func() int64 { return math.MaxInt64 }
	goMapped = func() uint64 { return 0 }
	t.Cleanup(func() { fsRoot, goLimit, goMapped = oldRoot, oldLimit, oldMapped })
}

const meminfo = "MemTotal:       16000000 kB\nMemFree:         1000000 kB\nMemAvailable:    8000000 kB\nSwapTotal:             0 kB\nSwapFree:              0 kB\n"

func TestPhysical(t *testing.T) {
	fakeRoot(t, map[string]string{"proc/meminfo": meminfo})
	l := Current()
	if l.Source != "physical memory" || l.Bytes != 16000000*1024 || l.Available != 8000000*1024 {
		t.Fatalf("Current() = %+v, want physical memory 16000000 kB with 8000000 kB available", l)
	}
}

func TestCgroupV2BindsBelowPhysical(t *testing.T) {
	fakeRoot(t, map[string]string{
		"proc/meminfo":                     meminfo,
		"proc/self/cgroup":                 "0::/job\n",
		"sys/fs/cgroup/job/memory.max":     "1073741824\n",
		"sys/fs/cgroup/job/memory.current": "536870912\n",
		"sys/fs/cgroup/job/memory.stat":    "anon 1\nfile 301989888\nshmem 33554432\ninactive_file 100\n",
	})
	l := Current()
	if l.Source != "cgroup memory.max" || l.Bytes != 1<<30 || l.Available != 1<<30-(512<<20-256<<20) {
		t.Fatalf("Current() = %+v, want the cgroup's 1 GiB with 768 MiB available", l)
	}
}

func TestCgroupV2Unlimited(t *testing.T) {
	fakeRoot(t, map[string]string{
		"proc/meminfo":               meminfo,
		"sys/fs/cgroup/memory.max":   "max\n",
		"sys/fs/cgroup/memory.stat":  "",
		"sys/fs/cgroup/cgroup.procs": "1\n",
	})
	if l := Current(); l.Source != "physical memory" {
		t.Fatalf("Current() with memory.max = max: %+v, want physical memory", l)
	}
}

func TestCgroupV1AtMountRoot(t *testing.T) {
	fakeRoot(t, map[string]string{
		"proc/meminfo":     meminfo,
		"proc/self/cgroup": "4:memory:/not/visible\n",
		"sys/fs/cgroup/memory/memory.limit_in_bytes":  "2147483648\n",
		"sys/fs/cgroup/memory/memory.usage_in_bytes":  "1073741824\n",
		"sys/fs/cgroup/memory/memory.stat":            "total_inactive_file 0\n",
		"sys/fs/cgroup/memory/memory.max_usage_bytes": "0\n",
	})
	l := Current()
	if l.Source != "cgroup memory.limit_in_bytes" || l.Bytes != 2<<30 || l.Available != 1<<30 {
		t.Fatalf("Current() = %+v, want the v1 cgroup's 2 GiB with 1 GiB available", l)
	}
	fakeRoot(t, map[string]string{
		"proc/meminfo": meminfo,
		"sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
	})
	if l := Current(); l.Source != "physical memory" {
		t.Fatalf("Current() with v1's unlimited value: %+v, want physical memory", l)
	}
}

func TestGOMEMLIMIT(t *testing.T) {
	fakeRoot(t, map[string]string{"proc/meminfo": meminfo})
	goLimit = func() int64 { return 100 << 20 }
	goMapped = func() uint64 { return 30 << 20 }
	l := Current()
	if l.Source != "GOMEMLIMIT" || l.Bytes != 100<<20 || l.Available != 70<<20 {
		t.Fatalf("Current() = %+v, want GOMEMLIMIT's 100 MiB with 70 MiB available", l)
	}
}

func TestCheck(t *testing.T) {
	fakeRoot(t, map[string]string{"proc/meminfo": meminfo})
	if err := Check("small", Threshold-1); err != nil {
		t.Fatalf("Check under the threshold = %v", err)
	}
	if err := Check("fits", 1<<30); err != nil {
		t.Fatalf("Check of 1 GiB with 7.6 GiB available = %v", err)
	}
	err := Check("tensor.Zeros([100000 100000 100])", 4e12)
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Check of 4 TB = %v, want *Error unwrapping to ErrTooLarge", err)
	}
	for _, want := range []string{"tensor.Zeros([100000 100000 100])", "3.64 TiB", "7.63 GiB available of 15.26 GiB (physical memory)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	if err := CheckElems("overflow", math.MaxInt, 8); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "more bytes than an int holds") {
		t.Errorf("CheckElems overflowing = %v", err)
	}
	if err := CheckElems("negative", -1, 4); !errors.Is(err, ErrTooLarge) {
		t.Errorf("CheckElems of a negative count = %v", err)
	}
}

// TestCurrentOnThisMachine: the real files give a limit with some memory available.
func TestCurrentOnThisMachine(t *testing.T) {
	l := Current()
	if l.Bytes == 0 || l.Available == 0 || l.Available > l.Bytes {
		t.Fatalf("Current() = %+v", l)
	}
	t.Log(l)
}

func TestBytes(t *testing.T) {
	for n, want := range map[uint64]string{0: "0 B", 1023: "1023 B", 1536: "1.50 KiB", 8e12: "7.28 TiB"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}
