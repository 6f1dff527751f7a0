package tensor

import (
	"fmt"
	"math"
	"testing"
)

// TestMicroKernelsAgainstNaive runs the blocked multiply with every micro-kernel this CPU
// supports (pure-Go always; AVX2 and AVX-512 on amd64 CPUs that have them) against the
// float64 reference, on sizes around the tile and block edges, both transposes, alpha and
// beta, and a C with a leading dimension wider than n whose extra columns must stay as
// they were.
func TestMicroKernelsAgainstNaive(t *testing.T) {
	t.Logf("micro-kernels on this CPU: %d (active %s)", len(cpuKernels), kernelName)
	cases := []struct{ m, n, k int }{
		{1, 1, 1}, {7, 7, 7}, {16, 16, 16}, {17, 17, 17}, {12, 32, 1}, {13, 33, 9},
		{63, 64, 65}, {64, 63, 255}, {65, 17, 256}, {255, 7, 257}, {97, 100, 300},
		{1, 255, 64}, {255, 1, 63}, {43, 32, 9}, {64, 64, 513}, {24, 40, 512}, {100, 512, 70},
	}
	for name, mk := range cpuKernels {
		for _, tc := range cases {
			for _, ta := range []bool{false, true} {
				for _, tb := range []bool{false, true} {
					for _, ab := range [][2]float32{{1, 0}, {1.5, 1}, {-0.5, 0.25}} {
						t.Run(fmt.Sprintf("%s/%dx%dx%d/ta=%v,tb=%v,alpha=%v,beta=%v", name, tc.m, tc.n, tc.k, ta, tb, ab[0], ab[1]), func(t *testing.T) {
							checkKernel(t, mk, ta, tb, tc.m, tc.n, tc.k, ab[0], ab[1])
						})
					}
				}
			}
		}
	}
}

func checkKernel(t *testing.T, mk microKernel, ta, tb bool, m, n, k int, alpha, beta float32) {
	t.Helper()
	a := RandomNormal([]int{m * k}, 0, 1, uint64(m*7+k)).data
	b := RandomNormal([]int{k * n}, 0, 1, uint64(n*5+k)).data
	lda, ldb := k, n
	if ta {
		lda = m
	}
	if tb {
		ldb = k
	}
	ldc := n + 3 // columns n..n+2 of each row are outside C
	c0 := RandomNormal([]int{m * ldc}, 0, 1, 9).data
	want := append([]float32(nil), c0...)
	got := append([]float32(nil), c0...)
	sgemmNaive(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, want, ldc)
	sgemmBlocked(mk, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, got, ldc)
	tol := 1e-5 * math.Sqrt(float64(k))
	for i := 0; i < m; i++ {
		for j := 0; j < ldc; j++ {
			g, w := got[i*ldc+j], want[i*ldc+j]
			if j >= n {
				if g != c0[i*ldc+j] {
					t.Fatalf("C[%d][%d] (outside the %dx%d result) = %v, was %v", i, j, m, n, g, c0[i*ldc+j])
				}
				continue
			}
			if math.Abs(float64(g-w)) > tol*(1+math.Abs(float64(w))) {
				t.Fatalf("C[%d][%d] = %v, want %v", i, j, g, w)
			}
		}
	}
}

// BenchmarkDenseGEMMs times the peer CNN's dense layer (batch 64, 5408 inputs, 64 outputs):
// the forward product, the input gradient (B transposed) and the kernel gradient (A
// transposed), one thread, with the active micro-kernel, reading operands in place where
// it can ("in-place") and packing every operand ("packed").
func BenchmarkDenseGEMMs(b *testing.B) {
	const n, in, out = 64, 5408, 64
	x := RandomNormal([]int{n * in}, 0, 1, 1).data
	w := RandomNormal([]int{in * out}, 0, 1, 2).data
	g := RandomNormal([]int{n * out}, 0, 1, 3).data
	y := make([]float32, n*out)
	gx := make([]float32, n*in)
	gw := make([]float32, in*out)
	packed := activeKernel
	packed.inPlace = nil
	for _, mode := range []struct {
		name string
		mk   microKernel
	}{{"in-place", activeKernel}, {"packed", packed}} {
		mk := mode.mk
		for _, bc := range []struct {
			name string
			run  func()
		}{
			{"forward", func() { sgemmBlocked(mk, false, false, n, out, in, 1, x, in, w, out, 0, y, out) }},
			{"input-grad", func() { sgemmBlocked(mk, false, true, n, in, out, 1, g, out, w, out, 0, gx, in) }},
			{"kernel-grad", func() { sgemmBlocked(mk, true, false, in, out, n, 1, x, in, g, out, 0, gw, out) }},
		} {
			b.Run(mode.name+"/"+bc.name, func(b *testing.B) {
				for b.Loop() {
					bc.run()
				}
				b.ReportMetric(float64(2*n*in*out)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
