package main

import (
	"time"
	"unsafe"

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

// allowed is the CPU set the process started with.
var allowed = func() (set unix.CPUSet) {
	if unix.SchedGetaffinity(0, &set) != nil {
		set.Zero()
	}
	return set
}()

// pinThread binds the calling OS thread (lock the goroutine to it first) to the i-th CPU the
// process may run on, and returns restore, which gives the thread that set back (call it
// before unlocking); ok is false where there is no such CPU or binding is refused.
func pinThread(i int) (restore func(), ok bool) {
	for c := 0; c < 8*int(unsafe.Sizeof(allowed)); c++ {
		if !allowed.IsSet(c) {
			continue
		}
		if i > 0 {
			i--
			continue
		}
		var set unix.CPUSet
		set.Set(c)
		if unix.SchedSetaffinity(0, &set) != nil {
			return func() {}, false
		}
		return func() { _ = unix.SchedSetaffinity(0, &allowed) }, true
	}
	return func() {}, false
}
