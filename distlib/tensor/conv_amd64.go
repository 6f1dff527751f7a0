//go:build !purego && !openblas

package tensor

//go:noescape
func addRowsReluAVX512(dst, bias *float32, rows, o int)

//go:noescape
func reluAVX512(dst, src *float32, n int)

//go:noescape
func reluGradAVX512(dst, grad, y *float32, n int)

//go:noescape
func sumRowsAVX512(grad, dst *float32, rows, o int)

func init() {
	if hasAVX512 {
		convPasses = avx512Passes
	}
}

// avx512Passes are the chunk passes in AVX-512 assembly: rows whose length is a multiple
// of 16 (and the first multiple of 16 of a flat slice) go through the vector loops, the
// rest through the Go ones. relu, reluGrad and sumRows give the Go passes' results bit
// for bit (sums row by row, in order); addRowsRelu adds the bias after the multiply, as
// the Go fallback in FusedConv2D does.
var avx512Passes = chunkPasses{
	name: "avx512",
	addRowsRelu: func(dst, bias []float32) bool {
		o := len(bias)
		if o == 0 || o%16 != 0 || len(dst) == 0 {
			return false
		}
		rows := len(dst) / o
		_ = dst[rows*o-1]
		addRowsReluAVX512(&dst[0], &bias[0], rows, o)
		return true
	},
	relu: func(dst, src []float32) {
		n := len(src) &^ 15
		if n > 0 {
			_ = dst[n-1]
			reluAVX512(&dst[0], &src[0], n)
		}
		reluTo(dst[n:], src[n:])
	},
	reluGrad: func(dst, g, y []float32) {
		n := len(y) &^ 15
		if n > 0 {
			_, _ = dst[n-1], g[n-1]
			reluGradAVX512(&dst[0], &g[0], &y[0], n)
		}
		reluGrad(dst[n:], g[n:], y[n:])
	},
	sumRows: func(g, dst []float32) {
		o := len(dst)
		if o == 0 || o%16 != 0 || len(g) < o {
			sumRows(g, o, dst)
			return
		}
		sumRowsAVX512(&g[0], &dst[0], len(g)/o, o)
	},
}
