//go:build unix

package main

import (
	"context"
	"errors"
	"os"
	"strconv"
	"syscall"
	"time"
)

// parentPoll is how often the kernel checks that the process that started it lives.
const parentPoll = time.Second

// watchParent calls gone once, with the reason, when the kernel's parent process has
// exited: its parent changed (the kernel was re-parented to init or a subreaper), or
// the front end named in JPY_PARENT_PID (jupyter_client sets it) no longer exists. It
// returns when ctx is done. Like ipykernel's parent poller, it keeps a kernel whose
// front end was killed from running for ever.
func watchParent(ctx context.Context, interval time.Duration, gone func(reason string)) {
	ppid := os.Getppid()
	jpy, _ := strconv.Atoi(os.Getenv("JPY_PARENT_PID"))
	if jpy <= 1 {
		jpy = 0
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if p := os.Getppid(); p != ppid {
			gone("parent process " + strconv.Itoa(ppid) + " exited")
			return
		}
		if jpy != 0 && errors.Is(syscall.Kill(jpy, 0), syscall.ESRCH) {
			gone("front end process " + strconv.Itoa(jpy) + " (JPY_PARENT_PID) exited")
			return
		}
	}
}
