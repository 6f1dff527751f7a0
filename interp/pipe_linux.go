package interp

import (
	"os"

	"golang.org/x/sys/unix"
)

// capturePipeSize is the buffer of the pipes that capture fds 1 and 2: large enough that
// the runtime's report of a fatal error (all goroutines' stacks), written while no
// goroutine can drain the pipe, fits and the process exits instead of blocking for ever.
const capturePipeSize = 1 << 20

// growPipe enlarges the pipe's buffer to capturePipeSize where the system allows it.
func growPipe(r *os.File) {
	rc, err := r.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		_, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, capturePipeSize)
	})
}

// redirectFD makes newfd a copy of oldfd (dup3: Linux has no dup2 on arm64).
func redirectFD(oldfd, newfd int) error { return unix.Dup3(oldfd, newfd, 0) }
