package main

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// threadCPU is the CPU time the calling OS thread has used (lock the goroutine to its
// thread around a measurement): on a shared machine, the time the core actually ran us.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

const cpuClock = "thread CPU time"

// pinThread binds the calling OS thread (lock the goroutine to it first) to CPU cpu; false
// where the CPU is not there or binding is refused.
func pinThread(cpu int) bool {
	var set unix.CPUSet
	set.Set(cpu)
	return unix.SchedSetaffinity(0, &set) == nil
}

// unpinThread lets the calling OS thread run on every CPU again.
func unpinThread() {
	var set unix.CPUSet
	for c := range runtime.NumCPU() {
		set.Set(c)
	}
	_ = unix.SchedSetaffinity(0, &set)
}
