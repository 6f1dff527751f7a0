package transport

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"unsafe"
)

func TestArena(t *testing.T) {
	type step struct {
		alloc   int    // floats to allocate (when free < 0)
		free    int    // index of an earlier allocation to free, or -1
		wantOff int    // expected offset of the allocation
		wantErr string // substring of the error, "" for none
	}
	a := func(n, off int) step { return step{alloc: n, free: -1, wantOff: off} }
	f := func(i int) step { return step{free: i} }
	fail := func(n int, msg string) step { return step{alloc: n, free: -1, wantErr: msg} }
	cases := []struct {
		name      string
		bytes     int
		steps     []step
		wantSpans int
	}{
		{"aligned offsets", 4096, []step{a(1, 0), a(17, 16), a(16, 48), a(5, 64)}, 1},
		{"whole region", 256, []step{a(64, 0), fail(1, "no room for 1 float32s (4 bytes) in a region of 256 bytes")}, 0},
		{"too big", 256, []step{fail(65, "no room for 65 float32s (260 bytes) in a region of 256 bytes")}, 1},
		{"negative", 256, []step{fail(-1, "negative size")}, 1},
		{"first fit reuses a hole", 4096, []step{a(16, 0), a(16, 16), a(16, 32), f(1), a(8, 16)}, 1},
		{"coalesce with next and previous", 256, []step{a(16, 0), a(16, 16), a(16, 32), a(16, 48),
			f(0), f(2), f(1), a(48, 0)}, 0},
		{"coalesce with the tail", 256, []step{a(16, 0), a(16, 16), f(1), f(0), a(64, 0)}, 0},
		{"hole too small is skipped", 4096, []step{a(16, 0), a(16, 16), a(16, 32), f(1), a(17, 48)}, 2},
		{"double free ignored", 256, []step{a(16, 0), a(16, 16), f(0), f(0), a(16, 0), a(32, 32)}, 0},
		{"odd region size rounds down", 100, []step{a(16, 0), fail(16, "region of 64 bytes")}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ar := newHeapArena(c.bytes)
			var got [][]float32
			for i, s := range c.steps {
				if s.free >= 0 {
					ar.Free(got[s.free])
					got = append(got, nil)
					continue
				}
				b, err := ar.Alloc(s.alloc)
				got = append(got, b)
				if s.wantErr != "" {
					if err == nil || !strings.Contains(err.Error(), s.wantErr) {
						t.Fatalf("step %d: Alloc(%d) error %v, want one containing %q", i, s.alloc, err, s.wantErr)
					}
					continue
				}
				if err != nil {
					t.Fatalf("step %d: Alloc(%d): %v", i, s.alloc, err)
				}
				if len(b) != s.alloc || cap(b) != s.alloc {
					t.Fatalf("step %d: len %d cap %d, want %d", i, len(b), cap(b), s.alloc)
				}
				off, ok := ar.Offset(b)
				if !ok || off != s.wantOff {
					t.Fatalf("step %d: Offset = %d, %v; want %d", i, off, ok, s.wantOff)
				}
				if uintptr(unsafe.Pointer(&b[0]))%64 != 0 {
					t.Fatalf("step %d: allocation not 64-byte aligned", i)
				}
				for j := range b {
					if b[j] != 0 {
						t.Fatalf("step %d: element %d is %v, want zeroed", i, j, b[j])
					}
					b[j] = float32(i + 1) // dirty it, so that a reuse must zero again
				}
			}
			if _, spans := ar.inUse(); spans != c.wantSpans {
				t.Errorf("free list has %d spans, want %d", spans, c.wantSpans)
			}
		})
	}
}

func TestArenaZeroAndForeign(t *testing.T) {
	ar := newHeapArena(1024)
	b, err := ar.Alloc(0)
	if err != nil || b == nil || len(b) != 0 {
		t.Fatalf("Alloc(0) = %v (nil %v), %v; want an empty non-nil slice", b, b == nil, err)
	}
	x, _ := ar.Alloc(32)
	for _, c := range []struct {
		name string
		b    []float32
		ok   bool
		off  int
	}{
		{"allocation", x, true, 0},
		{"inner slice", x[3:10], true, 3},
		{"empty", x[:0], false, 0},
		{"heap slice", make([]float32, 8), false, 0},
		{"past the region", ar.mem[250:256], true, 250},
	} {
		off, ok := ar.Offset(c.b)
		if ok != c.ok || off != c.off {
			t.Errorf("%s: Offset = %d, %v; want %d, %v", c.name, off, ok, c.off, c.ok)
		}
	}
	// Freeing a slice that Alloc did not return changes nothing.
	ar.Free(make([]float32, 32))
	ar.Free(x[1:])
	ar.Free(x[:16])
	if allocs, _ := ar.inUse(); allocs != 1 {
		t.Fatalf("%d allocations live after foreign frees, want 1", allocs)
	}
	ar.Free(x)
	if allocs, spans := ar.inUse(); allocs != 0 || spans != 1 {
		t.Fatalf("after Free: %d allocations, %d spans; want 0, 1", allocs, spans)
	}
}

func TestArenaCommitHook(t *testing.T) {
	var calls [][2]int
	limit := 64 // floats that may be committed
	mem := newHeapArena(1024).mem
	ar, err := newArena(mem, func(off, n int) error {
		if off+n > limit {
			return errors.New("no space left on device")
		}
		calls = append(calls, [2]int{off, n})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	a1, err := ar.Alloc(20) // commits [0, 32)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ar.Alloc(40); err == nil || !strings.Contains(err.Error(), "no room for 40 float32s (160 bytes) in a region of 1024 bytes") ||
		!strings.Contains(err.Error(), "no space left on device") {
		t.Fatalf("Alloc past the commit limit: %v", err)
	}
	a2, err := ar.Alloc(32) // still fits: [32, 64)
	if err != nil {
		t.Fatalf("Alloc after a failed commit: %v", err)
	}
	ar.Free(a1)
	if _, err := ar.Alloc(16); err != nil { // below the high-water mark: no commit
		t.Fatal(err)
	}
	want := [][2]int{{0, 32}, {32, 32}}
	if len(calls) != len(want) || calls[0] != want[0] || calls[1] != want[1] {
		t.Fatalf("commit calls %v, want %v", calls, want)
	}
	_ = a2
}

func TestArenaConcurrent(t *testing.T) {
	ar := newHeapArena(1 << 20)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				b, err := ar.Alloc(1 + (i*7+w)%100)
				if err != nil {
					t.Error(err)
					return
				}
				for j := range b {
					if b[j] != 0 {
						t.Error("allocation not zeroed: another goroutine holds it")
						return
					}
					b[j] = float32(w + 1)
				}
				ar.Free(b)
			}
		}()
	}
	wg.Wait()
	if allocs, spans := ar.inUse(); allocs != 0 || spans != 1 {
		t.Fatalf("after all frees: %d allocations, %d spans; want 0, 1", allocs, spans)
	}
}

// TestArenaSignal: the signal word is one cache line of the region, the same at every loan,
// lent to one borrower at a time; a region without room for it lends none.
func TestArenaSignal(t *testing.T) {
	a := newHeapArena(4096)
	off, release, ok := a.Signal()
	if !ok || off < 0 || off%arenaAlign != 0 || off+arenaAlign > a.size() {
		t.Fatalf("Signal() = %d, %v, want a cache-line aligned offset inside the region", off, ok)
	}
	if _, _, ok := a.Signal(); ok {
		t.Fatal("a second Signal while the word is lent succeeded")
	}
	if b, err := a.Alloc(16); err != nil {
		t.Fatal(err)
	} else if o, _ := a.Offset(b); o == off {
		t.Fatalf("Alloc returned the lent signal word at %d", o)
	}
	release()
	again, release2, ok := a.Signal()
	if !ok || again != off {
		t.Fatalf("Signal after release = %d, %v, want %d, true", again, ok, off)
	}
	release2()
	if _, _, ok := newHeapArena(0).Signal(); ok {
		t.Fatal("an empty region lent a signal word")
	}
}
