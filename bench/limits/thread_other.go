//go:build !linux

package main

import "time"

var start = time.Now()

// threadCPU falls back to wall time where there is no per-thread CPU clock.
func threadCPU() time.Duration { return time.Since(start) }

const cpuClock = "wall time"

// pinThread cannot bind threads here: the cache figure is measured unbound.
func pinThread(int) (restore func(), ok bool) { return func() {}, false }
