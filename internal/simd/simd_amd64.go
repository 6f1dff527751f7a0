//go:build !purego

package simd

import "golang.org/x/sys/cpu"

var hasAVX512 = cpu.X86.HasAVX512F

// hasAVX2 says whether the CPU has the loops that take AVX2 only (Adam's).
var hasAVX2 = cpu.X86.HasAVX2

//go:noescape
func maxPool2x2RowAVX512(r0, r1, out *float32, code *uint8, ow, c int)

//go:noescape
func maxPool2x2GradRowAVX512(gr *float32, code *uint8, q0, q1 *float32, ow, c int)

//go:noescape
func conv3x3C1AVX512(x *float32, w int, k, bias, out *float32, npix, o, relu int)

//go:noescape
func conv3x3C1GradAVX512(x *float32, w int, gr, y *float32, npix, o, relu int, dk, db *float32)

//go:noescape
func adamAVX512(w, grad, m, v *float32, n int, alpha, b1, b2, eps float32)

//go:noescape
func adamAVX2(w, grad, m, v *float32, n int, alpha, b1, b2, eps float32)

//go:noescape
func adamSumAVX512(w, g0, g1, m, v *float32, n int, alpha, b1, b2, eps float32) int

//go:noescape
func adamSumAVX2(w, g0, g1, m, v *float32, n int, alpha, b1, b2, eps float32) int

//go:noescape
func adamSum2AVX512(w, g0, g1, m, v, w2, m2, v2 *float32, n int, alpha, b1, b2, eps float32) int

//go:noescape
func adamSum2AVX2(w, g0, g1, m, v, w2, m2, v2 *float32, n int, alpha, b1, b2, eps float32) int

//go:noescape
func packTrans32AVX512(b *float32, ldb, kc int, dst *float32)

//go:noescape
func convReLUPoolAVX512(x *float32, w int, k, bias, out *float32, code *uint8, pw, o int)

//go:noescape
func convReLUPoolGradAVX512(x *float32, w int, gr, y *float32, code *uint8, pw, o int, dk, db *float32)

//go:noescape
func addAVX512(dst, src *float32, n int)
