//go:build !amd64 || purego

package simd

const hasAVX512, hasAVX2 = false, false

func maxPool2x2RowAVX512(r0, r1, out *float32, code *uint8, ow, c int) {
	panic("simd: no AVX-512 loops in this build")
}

func maxPool2x2GradRowAVX512(gr *float32, code *uint8, q0, q1 *float32, ow, c int) {
	panic("simd: no AVX-512 loops in this build")
}

func conv3x3C1AVX512(x *float32, w int, k, bias, out *float32, npix, o, relu int) {
	panic("simd: no AVX-512 loops in this build")
}

func conv3x3C1GradAVX512(x *float32, w int, gr, y *float32, npix, o, relu int, dk, db *float32) {
	panic("simd: no AVX-512 loops in this build")
}

func adamAVX512(w, grad, m, v *float32, n int, alpha, b1, b2, eps float32) {
	panic("simd: no AVX-512 loops in this build")
}

func adamAVX2(w, grad, m, v *float32, n int, alpha, b1, b2, eps float32) {
	panic("simd: no AVX2 loops in this build")
}

func adamSumAVX512(w, g0, g1, m, v *float32, n int, alpha, b1, b2, eps float32) int {
	panic("simd: no AVX-512 loops in this build")
}

func adamSumAVX2(w, g0, g1, m, v *float32, n int, alpha, b1, b2, eps float32) int {
	panic("simd: no AVX2 loops in this build")
}

func adamSum2AVX512(w, g0, g1, m, v, w2, m2, v2 *float32, n int, alpha, b1, b2, eps float32) int {
	panic("simd: no AVX-512 loops in this build")
}

func adamSum2AVX2(w, g0, g1, m, v, w2, m2, v2 *float32, n int, alpha, b1, b2, eps float32) int {
	panic("simd: no AVX2 loops in this build")
}

func packTrans32AVX512(b *float32, ldb, kc int, dst *float32) {
	panic("simd: no AVX-512 loops in this build")
}

func convReLUPoolAVX512(x *float32, w int, k, bias, out *float32, code *uint8, pw, o int) {
	panic("simd: no AVX-512 loops in this build")
}

func convReLUPoolGradAVX512(x *float32, w int, gr, y *float32, code *uint8, pw, o int, dk, db *float32) {
	panic("simd: no AVX-512 loops in this build")
}

func addAVX512(dst, src *float32, n int) {
	panic("simd: no AVX-512 loops in this build")
}
