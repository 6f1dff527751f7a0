// Package simd holds the vector loops the tensor package uses in every build. The tensor
// package's OpenBLAS build uses cgo, and a cgo package cannot hold Go assembly: loops
// that both builds need live here. Each function reports whether it ran (false: no AVX-512
// on this CPU, another architecture, or a shape it has no loop for); the caller then runs
// its Go loop.
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
