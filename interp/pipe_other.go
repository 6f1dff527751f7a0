//go:build !linux

package interp

import (
	"os"

	"golang.org/x/sys/unix"
)

// growPipe leaves the pipe's buffer as the system made it (Linux alone can resize it).
func growPipe(*os.File) {}

// redirectFD makes newfd a copy of oldfd (dup2, which macOS and the BSDs have).
func redirectFD(oldfd, newfd int) error { return unix.Dup2(oldfd, newfd) }
