//go:build !purego && !openblas

package tensor

import (
	"fmt"
	"math"
	"testing"
)

// TestAVX512PassesMatchGo checks FusedConv2D's AVX-512 element-wise passes against the Go
// ones bit for bit (relu, reluGrad, sumRows) or within rounding (addRowsRelu) on lengths
// around the vector width, with zeros of both signs, NaN and infinities among the values.
func TestAVX512PassesMatchGo(t *testing.T) {
	if !hasAVX512 {
		t.Skip("CPU without AVX-512F: the Go passes are the ones in use")
	}
	special := []float32{0, float32(math.Copysign(0, -1)), float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), -1e-30, 1e-30}
	values := func(n int, seed uint64) []float32 {
		v := RandomNormal([]int{n}, 0, 1, seed).data
		for i := 0; i < n; i += 5 {
			v[i] = special[(i/5)%len(special)]
		}
		return v
	}
	same := func(a, b []float32) int {
		for i := range a {
			if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
				return i
			}
		}
		return -1
	}
	for _, n := range []int{1, 7, 16, 17, 63, 64, 65, 255, 1024} {
		t.Run(fmt.Sprintf("flat/n=%d", n), func(t *testing.T) {
			src, g := values(n, 1), values(n, 2)
			want, got := make([]float32, n), make([]float32, n)
			goPasses.relu(want, src)
			avx512Passes.relu(got, src)
			if i := same(got, want); i >= 0 {
				t.Fatalf("relu[%d] of %v = %v, want %v", i, src[i], got[i], want[i])
			}
			y := append([]float32(nil), want...) // a ReLU output, as in FusedConv2D
			goPasses.reluGrad(want, g, y)
			avx512Passes.reluGrad(got, g, y)
			if i := same(got, want); i >= 0 {
				t.Fatalf("reluGrad[%d] (g %v, y %v) = %v, want %v", i, g[i], y[i], got[i], want[i])
			}
		})
	}
	for _, o := range []int{5, 16, 32, 48, 64} {
		for _, rows := range []int{1, 3, 97} {
			t.Run(fmt.Sprintf("rows/o=%d/rows=%d", o, rows), func(t *testing.T) {
				g := RandomNormal([]int{rows * o}, 0, 1, 3).data
				want := RandomNormal([]int{o}, 0, 1, 4).data
				got := append([]float32(nil), want...)
				goPasses.sumRows(g, want)
				avx512Passes.sumRows(g, got)
				if i := same(got, want); i >= 0 {
					t.Fatalf("sumRows[%d] = %v, want %v", i, got[i], want[i])
				}
				bias := RandomNormal([]int{o}, 0, 1, 5).data
				x := values(rows*o, 6)
				ref := append([]float32(nil), x...)
				for r := 0; r < len(ref); r += o {
					addTo(ref[r:r+o], bias)
				}
				reluTo(ref, ref)
				dst := append([]float32(nil), x...)
				if !avx512Passes.addRowsRelu(dst, bias) {
					if o%16 == 0 {
						t.Fatalf("addRowsRelu declined rows of %d", o)
					}
					return
				}
				if i := same(dst, ref); i >= 0 {
					t.Fatalf("addRowsRelu[%d] of %v + %v = %v, want %v", i, x[i], bias[i%o], dst[i], ref[i])
				}
			})
		}
	}
}
