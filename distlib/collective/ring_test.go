package collective

import "testing"

func TestPipelineChunk(t *testing.T) {
	tests := []struct{ ce, seg, want int }{
		{1 << 18, 1 << 23, 1 << 18},          // large segment: the configured chunk
		{1 << 18, 1 << 20, 1 << 18},          // exactly four chunks
		{1 << 18, 1 << 17, 1 << 15},          // 512 KiB segment: four 128 KiB chunks
		{1 << 18, 3 << 15, minPipelineElems}, // never below the minimum
		{1 << 18, 1000, 1 << 18},             // tiny segment: one chunk
		{8, 1 << 20, 8},                      // a small configured chunk is kept
	}
	for _, tc := range tests {
		if got := pipelineChunk(tc.ce, tc.seg); got != tc.want {
			t.Errorf("pipelineChunk(%d, %d) = %d, want %d", tc.ce, tc.seg, got, tc.want)
		}
	}
}
