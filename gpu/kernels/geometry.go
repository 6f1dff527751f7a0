package kernels

import (
	"fmt"
	"math"
)

// Geometry is a launch configuration: grid and block dimensions and the dynamic shared
// memory in bytes, as cuLaunchKernel takes them.
type Geometry struct {
	Grid, Block [3]uint32
	Shared      uint32
}

// Empty reports a geometry with no work (zero elements or rows): launch nothing.
func (g Geometry) Empty() bool { return g.Grid[0] == 0 }

// Threads returns the total number of threads the geometry launches.
func (g Geometry) Threads() int64 {
	return int64(g.Grid[0]) * int64(g.Grid[1]) * int64(g.Grid[2]) *
		int64(g.Block[0]) * int64(g.Block[1]) * int64(g.Block[2])
}

const (
	// LinearBlock is the block size of ShapeLinear kernels.
	LinearBlock = 256
	// MaxLinearGrid caps the blocks of ShapeLinear kernels; their grid-stride loops cover
	// the rest (about 8 resident blocks per SM on 132 SMs, many times over).
	MaxLinearGrid = 1 << 16
	// RowBlockMax is the largest block of ShapeRowBlocks kernels.
	RowBlockMax = 1024
)

func checkCount(what string, n int) error {
	if n < 0 || n > math.MaxInt32 {
		return fmt.Errorf("gpu/kernels: %s %d is outside [0, %d]; split the work", what, n, math.MaxInt32)
	}
	return nil
}

// Linear returns the geometry of a ShapeLinear kernel over n elements: blocks of
// LinearBlock threads, at most MaxLinearGrid blocks.
func Linear(n int) (Geometry, error) {
	if err := checkCount("element count", n); err != nil {
		return Geometry{}, err
	}
	blocks := min((n+LinearBlock-1)/LinearBlock, MaxLinearGrid)
	return Geometry{Grid: [3]uint32{uint32(blocks), 1, 1}, Block: [3]uint32{LinearBlock, 1, 1}}, nil
}

// RowBlocks returns the geometry of a ShapeRowBlocks kernel over a [rows, cols] matrix:
// one block per row of the smallest power of two >= cols threads, between 32 and
// RowBlockMax, with one float of shared memory per thread. It is Empty only for 0 rows.
func RowBlocks(rows, cols int) (Geometry, error) {
	if err := checkCount("row count", rows); err != nil {
		return Geometry{}, err
	}
	if err := checkCount("column count", cols); err != nil {
		return Geometry{}, err
	}
	// cols == 0 still launches: the kernels then write each row's empty result (a sum
	// of 0), rather than leaving the output unwritten.
	t := 32
	for t < cols && t < RowBlockMax {
		t *= 2
	}
	return Geometry{Grid: [3]uint32{uint32(rows), 1, 1}, Block: [3]uint32{uint32(t), 1, 1}, Shared: uint32(4 * t)}, nil
}

// ColumnTiles returns the geometry of a ShapeColumnTiles kernel over cols columns: blocks
// of 32x8 threads, one per 32 columns.
func ColumnTiles(cols int) (Geometry, error) {
	if err := checkCount("column count", cols); err != nil {
		return Geometry{}, err
	}
	return Tiles2D(cols, 1, 32, 8)
}

// Tiles2D returns a 2-D geometry covering an nx by ny index space with bx by by blocks
// (one thread per index; bx*by at most 1024).
func Tiles2D(nx, ny, bx, by int) (Geometry, error) {
	if err := checkCount("x extent", nx); err != nil {
		return Geometry{}, err
	}
	if err := checkCount("y extent", ny); err != nil {
		return Geometry{}, err
	}
	if bx < 1 || by < 1 || bx*by > 1024 {
		return Geometry{}, fmt.Errorf("gpu/kernels: block %dx%d must have 1 to 1024 threads", bx, by)
	}
	gy := (ny + by - 1) / by
	if gy > 65535 {
		return Geometry{}, fmt.Errorf("gpu/kernels: y extent %d needs %d blocks, over CUDA's 65535; use a larger block or put the long axis on x", ny, gy)
	}
	gx := (nx + bx - 1) / bx
	if nx == 0 || ny == 0 {
		return Geometry{}, nil
	}
	return Geometry{Grid: [3]uint32{uint32(gx), uint32(gy), 1}, Block: [3]uint32{uint32(bx), uint32(by), 1}}, nil
}

// Window returns the output size and the top/left padding of a kh x kw window sliding
// with stride over an h x w image, by TensorFlow's rules (distlib/tensor's windowGeom):
// "valid" uses only full windows; "same" gives ceil(in/stride) outputs and pads evenly,
// the extra on the bottom/right. These are the oh, ow, padTop, padLeft arguments of the
// conv and pool kernels.
func Window(h, w, kh, kw, stride int, padding string) (oh, ow, padTop, padLeft int, err error) {
	if h < 1 || w < 1 || kh < 1 || kw < 1 || stride < 1 {
		return 0, 0, 0, 0, fmt.Errorf("gpu/kernels: image %dx%d, window %dx%d and stride %d must all be >= 1", h, w, kh, kw, stride)
	}
	switch padding {
	case "valid", "VALID":
		if h < kh || w < kw {
			return 0, 0, 0, 0, fmt.Errorf("gpu/kernels: window %dx%d is larger than the input %dx%d with \"valid\" padding", kh, kw, h, w)
		}
		return (h-kh)/stride + 1, (w-kw)/stride + 1, 0, 0, nil
	case "same", "SAME":
		oh, ow = (h+stride-1)/stride, (w+stride-1)/stride
		ph := max((oh-1)*stride+kh-h, 0)
		pw := max((ow-1)*stride+kw-w, 0)
		return oh, ow, ph / 2, pw / 2, nil
	}
	return 0, 0, 0, 0, fmt.Errorf("gpu/kernels: padding %q is not \"valid\" or \"same\"", padding)
}
