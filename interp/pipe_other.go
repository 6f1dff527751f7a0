//go:build !linux

package interp

import "os"

// growPipe leaves the pipe's buffer as the system made it (Linux alone can resize it).
func growPipe(*os.File) {}
