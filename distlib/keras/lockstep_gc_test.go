package keras

import (
	"runtime/debug"
	"testing"
)

// TestRaiseGCForLockstep: lockstep Fits raise the GC target to lockstepGCPercent while any
// of them runs and restore the previous one after the last; a higher target, GC off, or
// GOGC in the environment is left alone.
func TestRaiseGCForLockstep(t *testing.T) {
	t.Setenv("GOGC", "")
	orig := debug.SetGCPercent(100)
	defer debug.SetGCPercent(orig)
	gc := func() int { p := debug.SetGCPercent(-1); debug.SetGCPercent(p); return p }

	a := raiseGCForLockstep()
	b := raiseGCForLockstep() // a second in-process worker's Fit
	if got := gc(); got != lockstepGCPercent {
		t.Fatalf("during two lockstep Fits GC percent = %d, want %d", got, lockstepGCPercent)
	}
	a()
	a() // idempotent
	if got := gc(); got != lockstepGCPercent {
		t.Fatalf("with one lockstep Fit left GC percent = %d, want %d", got, lockstepGCPercent)
	}
	b()
	if got := gc(); got != 100 {
		t.Fatalf("after the Fits GC percent = %d, want the previous 100", got)
	}
	for _, keep := range []int{800, -1} {
		debug.SetGCPercent(keep)
		r := raiseGCForLockstep()
		if got := gc(); got != keep {
			t.Errorf("with GC percent %d before, during = %d; want it kept", keep, got)
		}
		r()
		if got := gc(); got != keep {
			t.Errorf("with GC percent %d before, after = %d", keep, got)
		}
	}
	debug.SetGCPercent(100)
	t.Setenv("GOGC", "150")
	r := raiseGCForLockstep()
	if got := gc(); got != 100 {
		t.Errorf("with GOGC set, GC percent = %d; want the environment's choice left alone", got)
	}
	r()
}
