// Package goid returns the calling goroutine's id, as runtime.Stack's header
// "goroutine 123 [running]:" names it, without runtime.Stack's cost.
//
// runtime.Stack is the only exported way to learn it, and it is slow: it unwinds the
// goroutine's stack under the runtime's global print lock. Device scopes look the id up on
// every op while a scope is open (distlib/device), and a parameter-server strategy's Run
// looks up the scheduled function its goroutine runs (distlib/distribute), so in-process
// replicas would take that lock in turns (the benchmarks here; bench/RESULTS.md, goid).
// ARCHITECTURE.md, "Goroutine-local scopes", says why these need a goroutine-local at all.
// Get instead reads the id from the runtime's goroutine structure, which the assembly getg
// finds as the runtime does. The id's offset in that structure depends on the Go release,
// so it is not written here: at start-up it is found by reading several goroutines'
// structures against their ids from runtime.Stack, and used only when exactly one offset
// matches them all. Otherwise (another layout, an architecture without getg) Get parses
// runtime.Stack.
package goid

import (
	"runtime"
	"slices"
	"sync"
	"unsafe"
)

// offset is the byte offset of the id in the runtime's goroutine structure; -1: unknown.
var offset = -1

// scanBytes bounds the search: the id lies in the first fields of the structure, which is
// larger than this in every Go release since 1.5.
const scanBytes = 256

func init() { offset = findOffset() }

// Get returns the calling goroutine's id.
func Get() uint64 {
	if offset >= 0 {
		return *(*uint64)(unsafe.Add(getg(), offset))
	}
	return Slow()
}

// Fast reports whether Get reads the id directly rather than parsing runtime.Stack.
func Fast() bool { return offset >= 0 }

// Slow returns the calling goroutine's id parsed from runtime.Stack's header.
func Slow() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	const prefix = "goroutine "
	if len(b) < len(prefix) {
		return 0
	}
	var id uint64
	for _, c := range b[len(prefix):] {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + uint64(c-'0')
	}
	return id
}

// findOffset returns the one offset (a multiple of 8 under scanBytes) where the goroutine
// structures of this goroutine and of probes new ones hold their ids, or -1.
func findOffset() int {
	if !haveGetg {
		return -1
	}
	candidates := matches(nil)
	const probes = 8
	var wg sync.WaitGroup
	for range probes {
		wg.Add(1)
		// One at a time: each probe narrows the candidates the previous ones left.
		go func() {
			defer wg.Done()
			candidates = matches(candidates)
		}()
		wg.Wait()
	}
	if len(candidates) != 1 {
		return -1
	}
	return candidates[0]
}

// matches returns the offsets of in (all offsets when in is nil) where the calling
// goroutine's structure holds its id.
func matches(in []int) []int {
	g, id := getg(), Slow()
	if g == nil || id == 0 {
		return []int{}
	}
	var out []int
	for off := 0; off < scanBytes; off += 8 {
		if in != nil && !slices.Contains(in, off) {
			continue
		}
		if *(*uint64)(unsafe.Add(g, off)) == id {
			out = append(out, off)
		}
	}
	if out == nil {
		out = []int{}
	}
	return out
}
