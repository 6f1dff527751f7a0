//go:build !purego && !openblas

package tensor

import (
	"fmt"
	"math"
	"testing"
	"unsafe"
)

// alignedFloats returns n zeroed float32s starting on a 64-byte boundary.
func alignedFloats(n int) []float32 {
	s := make([]float32, n+16)
	off := int((64 - uintptr(unsafe.Pointer(&s[0]))%64) % 64 / 4)
	return s[off : off+n]
}

// TestStreamingKernelTiles runs the AVX-512 micro-kernel's streaming stores (bit 63 of
// load) on aligned tiles of every row count and checks them, to the bit, against the
// same tile written with ordinary stores, with C's old contents (NaNs) never read.
func TestStreamingKernelTiles(t *testing.T) {
	if !hasAVX512 {
		t.Skip("no AVX-512 on this CPU")
	}
	const kc, ldc = 37, 48 // ldc: 3 lines a row; the tile's columns are the first 32
	a := RandomNormal([]int{12 * kc}, 0, 1, 1).data
	b := RandomNormal([]int{kc * 32}, 0, 1, 2).data
	for rows := 1; rows <= 12; rows++ {
		for _, alpha := range []float32{1, -0.75} {
			t.Run(fmt.Sprintf("rows=%d,alpha=%v", rows, alpha), func(t *testing.T) {
				want, got := alignedFloats(12*ldc), alignedFloats(12*ldc)
				for i := range got {
					want[i], got[i] = float32(math.NaN()), float32(math.NaN())
				}
				if !streamsTile(got, ldc, 32) {
					t.Fatal("streamsTile is false for an aligned tile of 32 columns: the streaming stores are not tested")
				}
				kernelAVX512InPlace(kc, a, 1, 12, b, 32, alpha, want, ldc, rows, 32, true)
				kernelAVX512Stream(kc, a, 1, 12, b, 32, alpha, got, ldc, rows, 32, true)
				sfence()
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("C[%d][%d] = %v, want %v (ordinary stores)", i/ldc, i%ldc, got[i], want[i])
					}
				}
			})
		}
	}
}

// TestSgemmStreamedMatchesSgemm checks sgemmStreamed against sgemm to the bit, on aligned
// and unaligned outputs (the latter take the ordinary stores), edge tiles, both
// transposes, and row blocks in goroutines; and that it writes only C's n columns.
func TestSgemmStreamedMatchesSgemm(t *testing.T) {
	cases := []struct {
		m, n, k, ldc, threads int
		shift                 int // C starts this many floats past a 64-byte boundary
	}{
		{5408, 64, 64, 64, 1, 0}, // the peer CNN's dense kernel gradient
		{5408, 64, 64, 64, 2, 0},
		{100, 96, 70, 96, 1, 0},
		{37, 40, 300, 48, 1, 0}, // an edge strip of 8 columns, kc panels past the first
		{64, 64, 64, 64, 1, 3},  // unaligned
		{13, 32, 1, 80, 1, 0},
	}
	for _, tc := range cases {
		for _, ta := range []bool{false, true} {
			for _, tb := range []bool{false, true} {
				t.Run(fmt.Sprintf("%dx%dx%d/ldc=%d/threads=%d/shift=%d/ta=%v,tb=%v", tc.m, tc.n, tc.k, tc.ldc, tc.threads, tc.shift, ta, tb), func(t *testing.T) {
					a := RandomNormal([]int{tc.m * tc.k}, 0, 1, 3).data
					b := RandomNormal([]int{tc.k * tc.n}, 0, 1, 4).data
					lda, ldb := tc.k, tc.n
					if ta {
						lda = tc.m
					}
					if tb {
						ldb = tc.k
					}
					size := tc.m * tc.ldc
					want := alignedFloats(size + tc.shift)[tc.shift:]
					got := alignedFloats(size + tc.shift)[tc.shift:]
					for i := range got {
						want[i], got[i] = 7, 7
					}
					sgemm(tc.threads, ta, tb, tc.m, tc.n, tc.k, 1, a, lda, b, ldb, 0, want, tc.ldc)
					sgemmStreamed(tc.threads, ta, tb, tc.m, tc.n, tc.k, a, lda, b, ldb, got, tc.ldc)
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("C[%d][%d] = %v, want %v (sgemm's)", i/tc.ldc, i%tc.ldc, got[i], want[i])
						}
					}
				})
			}
		}
	}
}
