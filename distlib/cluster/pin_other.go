//go:build !linux

package cluster

import "os/exec"

// allowedCPUs is unknown here: Launch binds no task.
func allowedCPUs() []int { return nil }

// startOn starts cmd; only Linux binds tasks to CPUs.
func startOn(cmd *exec.Cmd, _ []int) error { return cmd.Start() }
