package cluster

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// pfExiting is the kernel's PF_EXITING flag (include/linux/sched.h), set when a thread
// starts to exit.
const pfExiting = 0x4

// ended reports whether the child process pid has ended or is ending, without reaping it,
// from /proc/pid/stat ("pid (comm) state ppid pgrp session tty_nr tpgid flags ..."): its
// main thread is exiting (a peer sees the process's sockets close in the middle of its
// exit, which a loaded machine can pause there) or a zombie (state Z, whether or not its
// other threads have exited yet), or it has no such file: its Wait has reaped it.
func ended(pid int) bool {
	return statEnded(os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"))
}

// statEnded is ended's reading of what reading /proc/pid/stat gave. A process reaped between
// the file's open and its read (its Wait runs beside the launcher's check) reads as ESRCH,
// not as a missing file: it has ended all the same (a CI run named a peer's exit as a
// job's cause because of that).
func statEnded(b []byte, err error) bool {
	if err != nil {
		return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH)
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

// exitKnown tells that waitExited returns when the process ends: its time is the task's.
const exitKnown = true

// waitExited returns once the child process pid has ended (or was reaped already), without
// reaping it: a task's end is timed by its process, not by its Wait, which returns only
// when the task's output is closed (a child of the task may hold it open a while longer).
func waitExited(pid int) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			return
		}
	}
}
