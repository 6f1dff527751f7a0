package interp

import (
	"context"
	"strings"
	"testing"
	"time"
)

// interruptCell runs code until it has run for a moment, then cancels it and checks it
// ended as Interrupted.
func interruptCell(t *testing.T, s *Session, code string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err := s.Execute(ctx, code, &recorder{})
	if ee := evalError(t, err); ee.Name != "Interrupted" {
		t.Fatalf("Execute(%q) error = %v, want Interrupted", code, ee)
	}
}

// TestFuncValuesAfterInterrupt: function values made before an interrupt still compute
// (yaegi v0.16.1 returned zero values from them; see third_party/yaegi/README.godist.md).
func TestFuncValuesAfterInterrupt(t *testing.T) {
	checkLeaks(t)
	s := newSession(t, Options{})
	mustRun(t, s, "import \"time\"\n"+
		"f := func(x int) int { return x + 1 }\n"+
		"var g = func(x int) int { return x * 2 }\n"+
		"m := map[string]func(float64) float64{\"half\": func(v float64) float64 { return v / 2 }}\n"+
		"ch := make(chan int, 1)\n"+
		"echo := func(v int) int { ch <- v; r := <-ch; return r }")
	interruptCell(t, s, "time.Sleep(time.Hour)")
	tests := []struct{ code, want string }{
		{"f(1)", "2"},
		{"g(3)", "6"},
		{`m["half"](3)`, "1.5"},
		{"echo(7)", "7"},
	}
	for _, tt := range tests {
		if got, _ := mustRun(t, s, tt.code); got != tt.want {
			t.Errorf("after an interrupt, %s = %q, want %q", tt.code, got, tt.want)
		}
	}
	// A closure still stops when its own run is interrupted.
	mustRun(t, s, "spin := func() int { n := 0; for { n++ } }")
	interruptCell(t, s, "spin()")
	if got, _ := mustRun(t, s, "f(41)"); got != "42" {
		t.Errorf("after two interrupts, f(41) = %q, want 42", got)
	}
}

// TestUnboundedRecursion: unbounded recursion of an interpreted function is a cell error,
// not Go's fatal stack overflow, and the session goes on; deep finite recursion still works.
func TestUnboundedRecursion(t *testing.T) {
	checkLeaks(t)
	s := newSession(t, Options{})
	mustRun(t, s, "func rec(n int) int { return rec(n+1) + 1 }\n"+
		"func depth(n int) int { if n == 0 { return 0 }; return depth(n-1) + 1 }")
	mustRun(t, s, "var recv func(int) int\nrecv = func(n int) int { return recv(n+1) + 1 }")
	for _, code := range []string{"rec(0)", "recv(0)"} {
		// Recursing to the interpreter's depth bound takes seconds; on a loaded machine many
		// more than run's 20 s, which would end the cell as interrupted instead.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		_, err := s.Execute(ctx, code, &recorder{})
		cancel()
		ee := evalError(t, err)
		if !strings.Contains(ee.Value, "stack overflow") {
			t.Errorf("%s: error %q, want a stack overflow", code, ee.Value)
		}
		if n := len(ee.Traceback); n > 40 {
			t.Errorf("%s: traceback of %d lines, want it cut to at most 40", code, n)
		}
	}
	if got, _ := mustRun(t, s, "depth(20000)"); got != "20000" {
		t.Errorf("depth(20000) = %q, want 20000", got)
	}
}
