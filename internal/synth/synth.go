// Package synth makes small deterministic datasets for tests: learnable problems whose
// examples and labels depend only on the arguments, so that runs on different devices,
// workers or processes see the same data.
package synth

import "godist/distlib/tensor"

// Images returns n one-channel side x side images with pixels in [-0.5, 0.5) from a linear
// congruential generator started at seed, and 3-class labels from a fixed linear function of
// the pixels: s = sum over pixels j of x_j * (j%mod - mod/2), class 0 when s < -cut, 1 when
// s < cut, else 2. Shapes: [n, side, side, 1] and [n].
func Images(n, side int, seed uint64, mod int, cut float32) (*tensor.Tensor, *tensor.Tensor) {
	px := side * side
	xs := make([]float32, n*px)
	ys := make([]float32, n)
	state := seed
	for i := range xs {
		state = state*6364136223846793005 + 1442695040888963407
		xs[i] = float32(state>>40)/float32(1<<24) - 0.5
	}
	for i := range n {
		var s float32
		for j := range px {
			s += xs[i*px+j] * float32(j%mod-mod/2)
		}
		switch {
		case s < -cut:
			ys[i] = 0
		case s < cut:
			ys[i] = 1
		default:
			ys[i] = 2
		}
	}
	return tensor.MustNew([]int{n, side, side, 1}, xs), tensor.MustNew([]int{n}, ys)
}
