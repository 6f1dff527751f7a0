package tensor

import (
	"errors"
	"strings"
	"testing"

	"godist/internal/memlimit"
)

// TestTooLargeAllocationsFailRecoverably: constructors and ops asked for more memory than
// the process may use panic with an *OpError unwrapping to ErrOutOfMemory that names the
// shape, its size and the limit, instead of the runtime's fatal "out of memory"; shapes
// whose element count overflows an int fail the same way.
func TestTooLargeAllocationsFailRecoverably(t *testing.T) {
	cases := []struct {
		name string
		fn   func()
		want []string
	}{
		{"Zeros", func() { Zeros(100000, 100000, 100) }, []string{"tensor: Zeros: out of memory", "shape [100000 100000 100]", "3.64 TiB", "available of"}},
		{"Ones", func() { Ones(1<<20, 1<<20) }, []string{"tensor: Fill: out of memory", "4.00 TiB"}},
		{"RandomNormal", func() { RandomNormal([]int{1 << 40}, 0, 1, 1) }, []string{"tensor: RandomNormal: out of memory"}},
		{"overflow", func() { Zeros(1<<40, 1<<40) }, []string{"tensor: Zeros: out of memory", "more bytes than an int holds"}},
		{"MatMul output", func() {
			a := Zeros(1<<20, 1)
			MatMul(a, a, false, true) // [2^20 2^20]: 4 TiB
		}, []string{"tensor: output: out of memory", "shape [1048576 1048576]"}},
		{"broadcast", func() { Add(Reshape(Zeros(1<<20), 1<<20, 1), Reshape(Zeros(1<<20), 1, 1<<20)) }, []string{"out of memory", "[1048576 1048576]"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				err, _ := recover().(error)
				var oe *OpError
				var me *memlimit.Error
				if !errors.Is(err, ErrOutOfMemory) || !errors.As(err, &oe) || !errors.As(err, &me) {
					t.Fatalf("panic %v, want an *OpError wrapping a *memlimit.Error (ErrOutOfMemory)", err)
				}
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
			}()
			tc.fn()
		})
	}
	// Ordinary sizes still work, checked or not.
	if got := Zeros(1<<24 + 1).Size(); got != 1<<24+1 {
		t.Fatalf("Zeros of 64 MiB: %d elements", got)
	}
}
