package goid

import (
	"runtime"
	"sync"
	"testing"
)

// The ways a context-free call (device.Current on every op, strategy.Run inside a scheduled
// function) can learn which goroutine calls it, side by side:
//
//   - getg: Get's path, the id read from the runtime's goroutine structure.
//   - stack: Slow, the public fallback, parsing runtime.Stack's "goroutine N [running]:"
//     header. runtime.Stack unwinds the stack and writes under the runtime's global print
//     lock, so its cost grows with the stack's depth and replicas calling it at once wait
//     for each other (the parallel and deep cases).
//
// A third public mechanism, pprof labels (runtime/pprof.Do, SetGoroutineLabels), attaches
// values to a goroutine, but Go exposes no way to read the current goroutine's labels back:
// pprof.Label reads them from a context.Context, which is exactly what TensorFlow's API does
// not pass. So it cannot serve and is not measured.
//
// Run: go test -run x -bench . ./internal/goid (figures in bench/RESULTS.md, goid).

var sink uint64

func benchWays(b *testing.B, run func(b *testing.B, get func() uint64)) {
	if !Fast() {
		b.Logf("Get falls back to runtime.Stack on %s/%s: both cases measure the fallback", runtime.GOOS, runtime.GOARCH)
	}
	b.Run("getg", func(b *testing.B) { run(b, Get) })
	b.Run("stack", func(b *testing.B) { run(b, Slow) })
}

// BenchmarkID: one goroutine asks for its id, from a shallow stack.
func BenchmarkID(b *testing.B) {
	benchWays(b, func(b *testing.B, get func() uint64) {
		for b.Loop() {
			sink += get()
		}
	})
}

// BenchmarkIDParallel: GOMAXPROCS goroutines ask at once, as in-process replicas do on
// every op.
func BenchmarkIDParallel(b *testing.B) {
	benchWays(b, func(b *testing.B, get func() uint64) {
		var mu sync.Mutex
		b.RunParallel(func(pb *testing.PB) {
			var s uint64
			for pb.Next() {
				s += get()
			}
			mu.Lock()
			sink += s
			mu.Unlock()
		})
	})
}

// BenchmarkIDDeep: the id asked for 32 frames down, about as deep as an op called from a
// layer inside a Keras training step inside a replica function.
func BenchmarkIDDeep(b *testing.B) {
	benchWays(b, func(b *testing.B, get func() uint64) {
		for b.Loop() {
			sink += deep(32, get)
		}
	})
}

//go:noinline
func deep(n int, get func() uint64) uint64 {
	if n == 0 {
		return get()
	}
	return deep(n-1, get) + 1
}
