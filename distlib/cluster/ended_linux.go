package cluster

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// ended reports whether the child process pid has ended or is ending, without reaping it:
// its zombie waits for its exec.Cmd.Wait (waitid with WNOWAIT), that Wait has already
// reaped it, or it is exiting (a peer sees its sockets close before it can be waited
// for: the kernel closes them in the middle of its exit, which a loaded machine can
// pause there).
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
			return info.Signo != 0 || exiting(pid)
		default:
			return false
		}
	}
}

// pfExiting is the kernel's PF_EXITING flag (include/linux/sched.h), set when a thread
// starts to exit.
const pfExiting = 0x4

// exiting reports whether process pid's main thread is exiting or has exited (a zombie
// that cannot be waited for until its other threads have exited), from /proc/pid/stat:
// "pid (comm) state ppid pgrp session tty_nr tpgid flags ...". A child with no such file
// has been reaped since (by its Wait).
func exiting(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return errors.Is(err, fs.ErrNotExist)
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 7 {
		return false
	}
	if s := f[0][0]; s == 'Z' || s == 'X' {
		return true
	}
	flags, err := strconv.ParseUint(string(f[6]), 10, 64)
	return err == nil && flags&pfExiting != 0
}
