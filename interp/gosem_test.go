package interp

import (
	"testing"
)

// TestIndexOutOfRange covers an index panic worded by reflect ("reflect: slice index out
// of range"): it must read like Go's runtime error and name the cell line.
func TestIndexOutOfRange(t *testing.T) {
	checkLeaks(t)
	s := newSession(t, Options{})
	mustRun(t, s, "s := []int{1, 2, 3}\narr := [2]string{\"a\", \"b\"}\nstr := \"hey\"\ni := 7")
	tests := []struct{ code, value, frame string }{
		{"x := 1\ns[5]", "runtime error: index out of range [5] with length 3", "  in the cell, line 2:1"},
		{"y := s[i]", "runtime error: index out of range [7] with length 3", "  in the cell, line 1:1"},
		{"arr[i-9]", "runtime error: index out of range [-2]", ""},
		{"\n\ns[i] = 4", "runtime error: index out of range [7] with length 3", "  in the cell, line 3:1"},
		{"func() byte { return str[i] }()", "runtime error: index out of range [7] with length 3", ""},
		{"func() int { return s[-i+4] }()", "runtime error: index out of range [-3]", ""},
	}
	for _, tt := range tests {
		_, _, err := run(t, s, tt.code)
		if err == nil {
			t.Errorf("Execute(%q) = nil error, want %q", tt.code, tt.value)
			continue
		}
		ee := evalError(t, err)
		if ee.Name != "panic" || ee.Value != tt.value {
			t.Errorf("Execute(%q) error = %s: %s, want panic: %s", tt.code, ee.Name, ee.Value, tt.value)
		}
		if tt.frame != "" && (len(ee.Traceback) < 2 || ee.Traceback[1] != tt.frame) {
			t.Errorf("Execute(%q) traceback = %q, want %q", tt.code, ee.Traceback, tt.frame)
		}
	}
}
