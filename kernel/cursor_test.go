package kernel

import "testing"

func TestOffsets(t *testing.T) {
	tests := []struct {
		s          string
		bytes, cps int
	}{
		{"abc", 2, 2}, {"é:=x", 2, 1}, {"é:=x", 5, 4}, {"日本", 6, 2}, {"", 0, 0},
	}
	for _, tt := range tests {
		if got := codePoints(tt.s, tt.bytes); got != tt.cps {
			t.Errorf("codePoints(%q, %d) = %d, want %d", tt.s, tt.bytes, got, tt.cps)
		}
		if got := byteOffset(tt.s, tt.cps); got != tt.bytes {
			t.Errorf("byteOffset(%q, %d) = %d, want %d", tt.s, tt.cps, got, tt.bytes)
		}
	}
	// Out of range: clamped.
	if got := byteOffset("é", 5); got != 2 {
		t.Errorf("byteOffset past the end = %d, want 2", got)
	}
	if got := codePoints("é", 9); got != 1 {
		t.Errorf("codePoints past the end = %d, want 1", got)
	}
}
