package cluster

import "golang.org/x/sys/unix"

// ended reports whether the child process pid has ended, without reaping it: its zombie
// waits for its exec.Cmd.Wait (waitid with WNOWAIT), or that Wait has already reaped it.
func ended(pid int) bool {
	for {
		var info unix.Siginfo // Signo stays 0 while the child runs (WNOHANG)
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
		switch err {
		case unix.EINTR:
			continue
		case unix.ECHILD: // reaped: its Wait is returning
			return true
		case nil:
			return info.Signo != 0
		default:
			return false
		}
	}
}
