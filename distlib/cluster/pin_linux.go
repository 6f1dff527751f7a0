package cluster

import (
	"os/exec"
	"runtime"

	"golang.org/x/sys/unix"
)

// allowedCPUs returns the CPUs this thread may run on, in increasing order; nil if unknown.
func allowedCPUs() []int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil
	}
	var cpus []int
	for c := 0; len(cpus) < set.Count(); c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus
}

// startOn starts cmd bound to cpus (all the CPUs it may use, and its threads after it).
// A process inherits the CPU mask of the thread that forks it, so the fork runs on a
// thread of its own whose mask is narrowed first. That thread is never unlocked: it ends
// with its goroutine and takes the narrowed mask with it, so no other goroutine runs there.
// Binding from outside after the start instead would race with the threads the program
// starts meanwhile, which keep the old mask.
func startOn(cmd *exec.Cmd, cpus []int) error {
	if len(cpus) == 0 {
		return cmd.Start()
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		var set unix.CPUSet
		for _, c := range cpus {
			set.Set(c)
		}
		// Binding is an optimization: where it is refused (a seccomp profile, CPUs taken
		// away meanwhile), the task starts unbound, on this thread's unchanged mask.
		_ = unix.SchedSetaffinity(0, &set)
		errc <- cmd.Start()
	}()
	return <-errc
}
