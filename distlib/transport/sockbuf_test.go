package transport

import "testing"

// TestFixBuffers: the data connections set their socket buffers only where the system
// lets the whole size through; under a smaller cap the kernel's autotuning is kept.
func TestFixBuffers(t *testing.T) {
	for _, tc := range []struct {
		max  int
		want bool
	}{
		{-1, true},                  // cap unknown (not Linux): set, as before
		{212992, false},             // Debian's default cap: keep autotuning
		{dataBufferSize - 1, false}, // just under
		{dataBufferSize, true},
		{64 << 20, true},
	} {
		if got := fixBuffers(tc.max); got != tc.want {
			t.Errorf("fixBuffers(%d) = %v, want %v", tc.max, got, tc.want)
		}
	}
	if m := socketBufferMax("rmem_max"); m == 0 || m < -1 {
		t.Errorf("socketBufferMax(rmem_max) = %d, want -1 or the cap", m)
	}
}
