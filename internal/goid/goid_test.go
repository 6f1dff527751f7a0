package goid

import (
	"runtime"
	"sync"
	"testing"
)

// TestGetMatchesStack: in every goroutine, many at once, Get returns the id runtime.Stack
// names, and on amd64 and arm64 it reads it directly.
func TestGetMatchesStack(t *testing.T) {
	if (runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64") && !Fast() {
		t.Errorf("on %s with %s, Get parses runtime.Stack: no single offset of the id was found", runtime.GOARCH, runtime.Version())
	}
	var wg sync.WaitGroup
	ids := make([]uint64, 200)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				got, want := Get(), Slow()
				if got != want {
					t.Errorf("goroutine %d: Get() = %d, runtime.Stack names %d", i, got, want)
					return
				}
				ids[i] = got
				runtime.Gosched() // let it move between threads
			}
		}()
	}
	wg.Wait()
	seen := map[uint64]bool{}
	for i, id := range ids {
		if id == 0 || seen[id] {
			t.Errorf("goroutine %d: id %d is zero or another goroutine's", i, id)
		}
		seen[id] = true
	}
}

func TestFindOffsetAgrees(t *testing.T) {
	// Found again from other goroutines, the offset is the same.
	if got := findOffset(); got != offset {
		t.Errorf("findOffset() = %d, at start-up %d", got, offset)
	}
}
