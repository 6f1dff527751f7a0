// Package simd holds the vector loops the tensor package uses in every build. The tensor
// package's OpenBLAS build uses cgo, and a cgo package cannot hold Go assembly: loops
// that both builds need live here. Each function reports whether it ran (false: no AVX-512
// on this CPU, where Adam's loops also have an AVX2 form, another architecture, or a shape
// it has no loop for); the caller then runs its Go loop.
package simd

// MaxPool2x2Row pools one output row of a 2x2, stride-2 max pool over NHWC rows: r0 and r1
// are the two input rows (at least 2*ow pixels of c floats), out gets ow pixels of c
// maxima and code the winners' window positions (0 top left, 1 top right, 2 bottom left,
// 3 bottom right; the first of equal values wins; a NaN wins over numbers). c must be a
// multiple of 16.
func MaxPool2x2Row(r0, r1, out []float32, code []uint8, ow, c int) bool {
	if !hasAVX512 || c <= 0 || c%16 != 0 || ow <= 0 {
		return false
	}
	px := ow * c
	_, _, _, _ = r0[2*px-1], r1[2*px-1], out[px-1], code[px-1]
	maxPool2x2RowAVX512(&r0[0], &r1[0], &out[0], &code[0], ow, c)
	return true
}

// MaxPool2x2GradRow writes the input gradient of one output row of MaxPool2x2Row: for each
// output pixel's gradient in gr and winners in code, each of the four window positions in
// q0 (top input row) and q1 (bottom) gets the gradient where it won, else 0.
func MaxPool2x2GradRow(gr []float32, code []uint8, q0, q1 []float32, ow, c int) bool {
	if !hasAVX512 || c <= 0 || c%16 != 0 || ow <= 0 {
		return false
	}
	px := ow * c
	_, _, _, _ = gr[px-1], code[px-1], q0[2*px-1], q1[2*px-1]
	maxPool2x2GradRowAVX512(&gr[0], &code[0], &q0[0], &q1[0], ow, c)
	return true
}

// Conv3x3C1 computes npix consecutive output pixels of a 3x3, stride-1 convolution of a
// one-channel image with o filters (o a multiple of 16): x is the image from the top-left
// input pixel of the first window, w the image width, k the kernel (9 rows of o, HWIO),
// bias o values, out npix pixels of o. Each output is bias + the window's products summed
// in window order, then a ReLU (the value with its sign-extended sign bit cleared) when
// relu is set.
func Conv3x3C1(x []float32, w int, k, bias, out []float32, npix, o int, relu bool) bool {
	if !hasAVX512 || o <= 0 || o%16 != 0 || npix <= 0 || w < npix+2 {
		return false
	}
	_, _, _, _ = x[2*w+npix+1], k[9*o-1], bias[o-1], out[npix*o-1]
	conv3x3C1AVX512(&x[0], w, &k[0], &bias[0], &out[0], npix, o, b2i(relu))
	return true
}

// Conv3x3C1Grad adds the kernel and bias gradients of Conv3x3C1's npix pixels to dk (9
// rows of o) and db (o): gr is the output gradient (npix pixels of o); with relu set, y is
// the output and only positive outputs pass their gradient.
func Conv3x3C1Grad(x []float32, w int, gr, y []float32, npix, o int, relu bool, dk, db []float32) bool {
	if !hasAVX512 || o <= 0 || o%16 != 0 || npix <= 0 || w < npix+2 {
		return false
	}
	_, _, _, _ = x[2*w+npix+1], gr[npix*o-1], dk[9*o-1], db[o-1]
	yp := &gr[0]
	if relu {
		_ = y[npix*o-1]
		yp = &y[0]
	}
	conv3x3C1GradAVX512(&x[0], w, &gr[0], yp, npix, o, b2i(relu), &dk[0], &db[0])
	return true
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Available reports whether this build and CPU have the AVX-512 loops (when it is false,
// every function here declines).
func Available() bool { return hasAVX512 }

// Adam applies Keras 3's Adam update to the first len(w) &^ 15 elements (&^ 7 on a CPU with
// AVX2 but not AVX-512) and returns how many it did (the caller's Go loop does the rest):
// m += (g-m)*b1; v += (g*g-v)*b2; w -= alpha*m/(sqrt(v)+eps), in that order and with no
// fused multiply-add, with subnormal operands and results flushed to zero (MXCSR's FTZ and
// DAZ, set for the loop and restored after it), so each element is bit for bit the Go
// loop's that flushes likewise (optim's).
func Adam(w, g, m, v []float32, alpha, b1, b2, eps float32) int {
	n := adamLength(len(w))
	if n == 0 {
		return 0
	}
	_, _, _ = g[n-1], m[n-1], v[n-1]
	if hasAVX512 {
		adamAVX512(&w[0], &g[0], &m[0], &v[0], n, alpha, b1, b2, eps)
	} else {
		adamAVX2(&w[0], &g[0], &m[0], &v[0], n, alpha, b1, b2, eps)
	}
	return n
}

// AdamSum is Adam with the gradient g0+g1, summed as it is read (the sum is never written):
// each element is bit for bit Adam's on the sum computed exactly (no flush: AddTo's), then
// flushed as Adam flushes it. It updates the first elements in blocks of Adam's vector
// width and returns how many: it stops before the first block where g0 or g1 holds a
// subnormal value (which the loop's denormals-are-zero would drop before the sum) and at the
// last whole block; the caller updates the next elements in Go and calls it again. It returns
// 0 on a CPU without the loops.
func AdamSum(w, g0, g1, m, v []float32, alpha, b1, b2, eps float32) int {
	n := adamLength(len(w))
	if n == 0 {
		return 0
	}
	_, _, _, _ = g0[n-1], g1[n-1], m[n-1], v[n-1]
	if hasAVX512 {
		return adamSumAVX512(&w[0], &g0[0], &g1[0], &m[0], &v[0], n, alpha, b1, b2, eps)
	}
	return adamSumAVX2(&w[0], &g0[0], &g1[0], &m[0], &v[0], n, alpha, b1, b2, eps)
}

// AdamSum2 is AdamSum that also stores every new w, m and v into w2, m2, v2: a second copy
// of the variable and its slots that holds the same values as w, m, v (a mirrored
// variable's other replica), updated by the same loop instead of a second one. It returns
// how many elements it updated in both, stopping where AdamSum stops.
func AdamSum2(w, g0, g1, m, v, w2, m2, v2 []float32, alpha, b1, b2, eps float32) int {
	n := adamLength(len(w))
	if n == 0 {
		return 0
	}
	_, _, _, _, _, _, _ = g0[n-1], g1[n-1], m[n-1], v[n-1], w2[n-1], m2[n-1], v2[n-1]
	if hasAVX512 {
		return adamSum2AVX512(&w[0], &g0[0], &g1[0], &m[0], &v[0], &w2[0], &m2[0], &v2[0], n, alpha, b1, b2, eps)
	}
	return adamSum2AVX2(&w[0], &g0[0], &g1[0], &m[0], &v[0], &w2[0], &m2[0], &v2[0], n, alpha, b1, b2, eps)
}

// adamLength is the part of n elements that Adam's vector loops update: whole vectors.
func adamLength(n int) int {
	if w := AdamWidth(); w > 0 {
		return n &^ (w - 1)
	}
	return 0
}

// AdamWidth is how many elements Adam's and AdamSum's vector loops update at a time, 0 on a
// CPU without them.
func AdamWidth() int {
	switch {
	case hasAVX512:
		return 16
	case hasAVX2:
		return 8
	}
	return 0
}

// PackTrans32 packs a 32-column strip of a transposed matrix for a matrix multiply: for p
// in [0, kc), dst[p*32+j] = b[j*ldb+p], j in [0, 32) (b starts at the strip's first
// element). Blocks of 16 columns are transposed in registers (16 x 16 values at a time),
// the last kc%16 columns gathered.
func PackTrans32(b []float32, ldb, kc int, dst []float32) bool {
	if !hasAVX512 || kc <= 0 || ldb <= 0 || ldb >= 1<<24 {
		return false
	}
	_, _ = b[31*ldb+kc-1], dst[32*kc-1]
	packTrans32AVX512(&b[0], ldb, kc, &dst[0])
	return true
}

// ConvReLUPool computes one output row of a 3x3, stride-1 convolution of a one-channel
// image with o filters (o a multiple of 16), its ReLU, and the 2x2 stride-2 max pool of
// that, without the convolution's output: x is the image from the top-left of the row's
// first 4x4 input patch (4 input rows of width w), out gets pw pooled pixels of o values
// and code their winners' window positions as MaxPool2x2Row gives them (on the
// convolution's values before the ReLU, which does not change the order). Each
// convolution value is bias + the window's products summed in window order, as Conv3x3C1.
func ConvReLUPool(x []float32, w int, k, bias, out []float32, code []uint8, pw, o int) bool {
	if !hasAVX512 || o <= 0 || o%16 != 0 || pw <= 0 || w < 2*pw+2 {
		return false
	}
	_, _, _, _, _ = x[3*w+2*pw+1], k[9*o-1], bias[o-1], out[pw*o-1], code[pw*o-1]
	convReLUPoolAVX512(&x[0], w, &k[0], &bias[0], &out[0], &code[0], pw, o)
	return true
}

// ConvReLUPoolGrad adds the kernel and bias gradients of one ConvReLUPool output row to dk
// (9 rows of o) and db (o): gr is the pooled output's gradient, y the pooled output (a
// gradient passes where y > 0) and code the winners; each passes to its winner's window.
func ConvReLUPoolGrad(x []float32, w int, gr, y []float32, code []uint8, pw, o int, dk, db []float32) bool {
	if !hasAVX512 || o <= 0 || o%16 != 0 || pw <= 0 || w < 2*pw+2 {
		return false
	}
	_, _, _, _, _, _ = x[3*w+2*pw+1], gr[pw*o-1], y[pw*o-1], code[pw*o-1], dk[9*o-1], db[o-1]
	convReLUPoolGradAVX512(&x[0], w, &gr[0], &y[0], &code[0], pw, o, &dk[0], &db[0])
	return true
}

// AddTo adds src into dst element-wise (len(src) >= len(dst)): AVX-512 where the CPU has it,
// then eight values per iteration with the bounds checks hoisted, which the compiler turns
// into straight-line loads and adds.
func AddTo(dst, src []float32) {
	src = src[:len(dst)]
	i := Add(dst, src)
	for ; i+8 <= len(dst); i += 8 {
		d, s := dst[i:i+8:i+8], src[i:i+8:i+8]
		d[0] += s[0]
		d[1] += s[1]
		d[2] += s[2]
		d[3] += s[3]
		d[4] += s[4]
		d[5] += s[5]
		d[6] += s[6]
		d[7] += s[7]
	}
	for ; i < len(dst); i++ {
		dst[i] += src[i]
	}
}

// Add adds src into dst element-wise for the first len(dst) &^ 63 elements (src at least as
// long) and returns how many it did (the caller's Go loop does the rest). Each element is
// one float32 addition, bit for bit the Go loop's.
func Add(dst, src []float32) int {
	n := len(dst) &^ 63
	if !hasAVX512 || n == 0 {
		return 0
	}
	_ = src[n-1]
	addAVX512(&dst[0], &src[0], n)
	return n
}
