// Package testdata holds the data the tests share: it finds the MNIST IDX files of
// ../shared/data/mnist beside the repository (or GODIST_DATA_DIR), and makes small
// deterministic problems whose examples depend only on the arguments, so that runs on
// different devices, workers or processes see the same data.
package testdata

import (
	"os"
	"path/filepath"

	"godist/distlib/tensor"
)

// MNISTDir returns the directory of the MNIST IDX files: GODIST_DATA_DIR when set, else
// ../shared/data/mnist beside the module root found from the working directory. It returns ""
// when neither exists; tests then skip with a reason.
func MNISTDir() string {
	if d := os.Getenv("GODIST_DATA_DIR"); d != "" {
		return d
	}
	root := ModuleRoot()
	if root == "" {
		return ""
	}
	d := filepath.Join(root, "..", "shared", "data", "mnist")
	if _, err := os.Stat(d); err != nil {
		return ""
	}
	return d
}

// ModuleRoot returns the nearest directory at or above the working directory that holds a
// go.mod file, or "" when there is none.
func ModuleRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

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
