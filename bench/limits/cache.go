package main

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync/atomic"
)

// The cache a core keeps: a dependent chain of loads (each load's value is the index of the
// next) visits the 64-byte lines of a buffer in a random cyclic order, which no prefetcher
// can follow, so each load costs the latency of wherever the line lies. While the buffer
// fits the caches a core gets, that is a cache's latency; once it does not, it is the
// memory's, tens of times more. On a VM the last-level cache is shared with other tenants' cores, so the
// size it holds for us is measured here, not taken from the CPU's datasheet, and it moves
// with the other tenants' load (bench/RESULTS.md, the summaries' "cache a core keeps").

const lineWords = 8 // int64s in a 64-byte line

// newChain returns a buffer of mib MiB whose lines form one random cycle: line i's first
// word holds the index (in words) of the next line.
func newChain(mib int, seed uint64) []int64 {
	lines := mib << 20 / 64
	next := make([]int64, lines*lineWords)
	perm := rand.New(rand.NewPCG(seed, 1)).Perm(lines)
	for i, l := range perm {
		next[l*lineWords] = int64(perm[(i+1)%len(perm)] * lineWords)
	}
	return next
}

// chase follows the chain for loads loads from p and returns where it stopped.
func chase(next []int64, p int64, loads int) int64 {
	for range loads {
		p = next[p]
	}
	return p
}

var chaseSink atomic.Int64

// chaseNS returns the nanoseconds of the calling thread's CPU time per load on the chain,
// the best of reps runs of loads loads each after one pass to bring the buffer in.
func chaseNS(next []int64, loads, reps int) float64 {
	p := chase(next, 0, len(next)/lineWords)
	best := 0.0
	for r := range reps {
		t := threadCPU()
		p = chase(next, p, loads)
		ns := float64((threadCPU() - t).Nanoseconds()) / float64(loads)
		if r == 0 || ns < best {
			best = ns
		}
	}
	chaseSink.Store(p)
	return best
}

// cacheSizes are the working sets measured, MiB.
var cacheSizes = []int{1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 32, 64}

// cacheLatencies measures the load latency (ns) at each of cacheSizes on the first CPU the
// process may use ("CPU 0"), alone or, with busy, while the second ("CPU 1") chases a chain
// of the same size of its own (as two workers on two cores share the last-level cache). ok
// is false where threads cannot be bound to those CPUs (then both run unbound, and busy
// only says that another thread chases meanwhile). Every thread bound here gets the
// process's CPUs back before it is unlocked.
func cacheLatencies(busy bool, reps int) (ns []float64, ok bool) {
	if busy && runtime.GOMAXPROCS(0) < 2 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2)) // the two chains run at once
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	restore, ok := pinThread(0)
	defer restore()
	for _, mib := range cacheSizes {
		next := newChain(mib, uint64(mib))
		loads := 1 << 20
		var stop atomic.Bool
		done := make(chan bool)
		if busy {
			other := newChain(mib, uint64(mib)+1000)
			go func() {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				restore, pinned := pinThread(1)
				defer restore()
				p := int64(0)
				for !stop.Load() {
					p = chase(other, p, 1<<16)
				}
				chaseSink.Store(p)
				done <- pinned
			}()
		}
		ns = append(ns, chaseNS(next, loads, reps))
		if busy {
			stop.Store(true)
			ok = <-done && ok
		}
	}
	return ns, ok
}

// heldMiB is the largest working set whose loads cost less than a quarter of the memory's latency
// (the latency at the largest size): the cache a core keeps for it.
func heldMiB(ns []float64) int {
	mem := ns[len(ns)-1]
	held := 0
	for i, v := range ns {
		if v < mem/4 {
			held = cacheSizes[i]
		} else {
			break
		}
	}
	return held
}

func fmtLatencies(ns []float64) string {
	parts := make([]string, len(ns))
	for i, v := range ns {
		parts[i] = fmt.Sprintf("%d MiB %.0f", cacheSizes[i], v)
	}
	return strings.Join(parts, ", ")
}
