//go:build !linux

package cluster

// ended is unknown here: Launch names the first task whose Wait returned.
func ended(int) bool { return false }
