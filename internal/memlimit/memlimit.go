// Package memlimit says how much memory this process may still use, so that code making a
// large allocation on a user's behalf (a tensor, a dataset buffer, a make in a cell) can
// refuse it with an error instead of letting the Go runtime end the process with its fatal
// "out of memory".
//
// The limit is the smallest of the process's cgroup memory limit (v2 memory.max or v1
// memory.limit_in_bytes), GOMEMLIMIT (debug.SetMemoryLimit), and physical memory; what is
// available is that limit less what already counts against it (the cgroup's usage without
// its reclaimable file cache, the Go runtime's mapped memory, MemAvailable plus free swap).
// Only allocations past what is available are refused: a request the kernel could meet by
// dropping cache passes.
package memlimit

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
)

// Threshold is the allocation size from which Check reads the limits: smaller requests
// pass without reading a file (they cannot be what ends a session).
const Threshold = 64 << 20

// ErrTooLarge is what every *Error unwraps to.
var ErrTooLarge = errors.New("memlimit: allocation larger than the memory this process may use")

// Limit is the binding limit on this process's memory and what counts against it now.
type Limit struct {
	Bytes     uint64 // the limit
	Available uint64 // Bytes less what is in use now
	Source    string // "cgroup memory.max", "GOMEMLIMIT" or "physical memory"
}

// String says "22.1 GiB available of 23.5 GiB (physical memory)".
func (l Limit) String() string {
	return fmt.Sprintf("%s available of %s (%s)", Bytes(l.Available), Bytes(l.Bytes), l.Source)
}

// Error reports an allocation that does not fit in the memory this process may use.
type Error struct {
	What  string // what was to be allocated, e.g. "tensor.Zeros([100000 100000 100])"
	Bytes uint64 // its size (math.MaxUint64 when the size overflows)
	Limit Limit
}

// Error names the allocation, its size and the limit.
func (e *Error) Error() string {
	size := Bytes(e.Bytes)
	if e.Bytes == math.MaxUint64 {
		size = "more bytes than an int holds"
	}
	return fmt.Sprintf("out of memory: %s needs %s, more than this process may use: %s "+
		"(make it smaller: fewer elements, a smaller batch or buffer)", e.What, size, e.Limit)
}

// Unwrap returns ErrTooLarge.
func (e *Error) Unwrap() error { return ErrTooLarge }

// Bytes writes n as a binary size: "512 B", "1.50 KiB", "7.28 TiB".
func Bytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	f, i := float64(n), 0
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	for f >= unit && i < len(units)-1 {
		f /= unit
		i++
	}
	return fmt.Sprintf("%.2f %s", f, units[i])
}

// Check returns an *Error when an allocation of n bytes, described by what, would not fit
// in the memory this process may still use; nil otherwise. Requests under Threshold pass
// without reading anything.
func Check(what string, n uint64) error {
	if n < Threshold {
		return nil
	}
	l := Current()
	if n > l.Available {
		return &Error{What: what, Bytes: n, Limit: l}
	}
	return nil
}

// CheckElems is Check for count elements of size bytes each, counting an overflowing
// product (or a negative count) as too large.
func CheckElems(what string, count, size int) error {
	if count < 0 || size < 0 {
		return &Error{What: what, Bytes: math.MaxUint64, Limit: Current()}
	}
	if size != 0 && uint64(count) > math.MaxUint64/uint64(size) {
		return &Error{What: what, Bytes: math.MaxUint64, Limit: Current()}
	}
	return Check(what, uint64(count)*uint64(size))
}

// fsRoot is where /proc and /sys are read from (tests point it at a fake tree).
var fsRoot = "/"

// goLimit and goMapped read the Go runtime's limit and mapped memory (tests replace them).
var (
	goLimit  = func() int64 { return debug.SetMemoryLimit(-1) }
	goMapped = runtimeMapped
)

// Current returns the binding limit: the one with the least available memory.
func Current() Limit {
	var best Limit
	found := false
	consider := func(l Limit) {
		if !found || l.Available < best.Available {
			best, found = l, true
		}
	}
	if l, ok := physical(); ok {
		consider(l)
	}
	if l, ok := cgroup(); ok {
		consider(l)
	}
	if lim := goLimit(); lim > 0 && lim < math.MaxInt64 {
		used := goMapped()
		consider(Limit{Bytes: uint64(lim), Available: sub(uint64(lim), used), Source: "GOMEMLIMIT"})
	}
	if !found {
		return Limit{Bytes: math.MaxUint64, Available: math.MaxUint64, Source: "no limit found"}
	}
	return best
}

func sub(a, b uint64) uint64 {
	if b >= a {
		return 0
	}
	return a - b
}

// physical reads MemTotal, MemAvailable and SwapFree from /proc/meminfo.
func physical() (Limit, bool) {
	b, err := os.ReadFile(filepath.Join(fsRoot, "proc/meminfo"))
	if err != nil {
		return Limit{}, false
	}
	vals := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		v, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			continue
		}
		if len(f) > 2 && f[2] == "kB" {
			v *= 1024
		}
		vals[strings.TrimSuffix(f[0], ":")] = v
	}
	total, ok := vals["MemTotal"]
	if !ok || total == 0 {
		return Limit{}, false
	}
	avail, ok := vals["MemAvailable"]
	if !ok {
		avail = vals["MemFree"] + vals["Cached"]
	}
	return Limit{Bytes: total + vals["SwapTotal"], Available: avail + vals["SwapFree"], Source: "physical memory"}, true
}

// cgroup reads the memory limit of this process's cgroup: v2's memory.max, else v1's
// memory.limit_in_bytes, in the process's own cgroup directory where it is visible, else at
// the mount's root (a cgroup namespace shows the process's cgroup there).
func cgroup() (Limit, bool) {
	for _, dir := range cgroupDirs() {
		if l, ok := cgroupV2(dir); ok {
			return l, true
		}
		if l, ok := cgroupV1(dir); ok {
			return l, true
		}
	}
	return Limit{}, false
}

// cgroupDirs lists the directories that may hold this process's memory controller files.
func cgroupDirs() []string {
	base := filepath.Join(fsRoot, "sys/fs/cgroup")
	var dirs []string
	if b, err := os.ReadFile(filepath.Join(fsRoot, "proc/self/cgroup")); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			parts := strings.SplitN(line, ":", 3)
			if len(parts) != 3 || parts[2] == "/" || parts[2] == "" {
				continue
			}
			switch {
			case parts[0] == "0" && parts[1] == "":
				dirs = append(dirs, filepath.Join(base, parts[2]))
			case hasController(parts[1], "memory"):
				dirs = append(dirs, filepath.Join(base, "memory", parts[2]))
			}
		}
	}
	return append(dirs, base, filepath.Join(base, "memory"))
}

func hasController(list, name string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

func readUint(path string) (uint64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	return v, err == nil
}

// statValue returns key's value in a memory.stat file.
func statValue(path, key string) uint64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == key {
			v, _ := strconv.ParseUint(f[1], 10, 64)
			return v
		}
	}
	return 0
}

// unlimitedV1 is the smallest value cgroup v1 reports for "no limit" (the largest page
// multiple below 2^63; anything above the machine's memory is no limit either).
const unlimitedV1 = 1 << 62

func cgroupV2(dir string) (Limit, bool) {
	b, err := os.ReadFile(filepath.Join(dir, "memory.max"))
	if err != nil {
		return Limit{}, false
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return Limit{}, false
	}
	lim, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return Limit{}, false
	}
	used, _ := readUint(filepath.Join(dir, "memory.current"))
	stat := filepath.Join(dir, "memory.stat")
	used = sub(used, reclaimable(statValue(stat, "file"), statValue(stat, "shmem"), statValue(stat, "inactive_file")))
	return Limit{Bytes: lim, Available: sub(lim, used), Source: "cgroup memory.max"}, true
}

func cgroupV1(dir string) (Limit, bool) {
	lim, ok := readUint(filepath.Join(dir, "memory.limit_in_bytes"))
	if !ok || lim >= unlimitedV1 {
		return Limit{}, false
	}
	used, _ := readUint(filepath.Join(dir, "memory.usage_in_bytes"))
	stat := filepath.Join(dir, "memory.stat")
	used = sub(used, reclaimable(statValue(stat, "total_cache"), statValue(stat, "total_shmem"), statValue(stat, "total_inactive_file")))
	return Limit{Bytes: lim, Available: sub(lim, used), Source: "cgroup memory.limit_in_bytes"}, true
}

// reclaimable is the page cache the kernel can give back under pressure: the file cache
// without shared memory (tmpfs, /dev/shm, which stays), or at least the inactive files
// when the stat file does not break the cache down.
func reclaimable(cache, shmem, inactiveFile uint64) uint64 {
	return max(sub(cache, shmem), inactiveFile)
}

// runtimeMapped is the memory the Go runtime holds from the OS (what GOMEMLIMIT limits).
func runtimeMapped() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 || s[1].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return sub(s[0].Value.Uint64(), s[1].Value.Uint64())
}
