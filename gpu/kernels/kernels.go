// Package kernels holds godist's CUDA kernels: the CUDA C source (kernels.cu), its PTX for
// sm_80 and sm_90 (compiled by `go generate ./gpu/kernels` with Debian's CUDA 11.8 kit,
// committed and embedded here, so neither CI nor users need any NVIDIA package), the table
// of kernel names and parameter layouts (checked against the PTX by a unit test), argument
// packing for cuLaunchKernel, and launch-geometry helpers.
//
// The package does not load or launch anything: gpu's driver layer loads PTX (LoadModule),
// looks kernels up by Kernel.Name and launches them with the []unsafe.Pointer that
// Kernel.Args builds, on the Geometry that Linear, RowBlocks or ColumnTiles computes.
//
// PTX ISA 7.8 (what nvcc 11.8 emits) is JIT-compiled by any driver from CUDA 11.8 on,
// including CUDA 12 and 13 drivers, for the GPU it runs on (an H100 is sm_90).
//
// Rebuild: bash gpu/kernels/kit.sh (fetches the kit, about a minute), go generate
// ./gpu/kernels, bash gpu/kernels/check.sh (ptxas for sm_80 and sm_90: registers, spills).
package kernels

import (
	_ "embed"
	"fmt"
)

//go:generate bash gen.sh

//go:embed kernels_sm80.ptx
var ptxSM80 []byte

//go:embed kernels_sm90.ptx
var ptxSM90 []byte

// PTX returns the embedded PTX module for a GPU of compute capability major.minor: the
// sm_90 build for 9.0 and above, the sm_80 build for 8.x. The bytes end with a NUL, as
// cuModuleLoadData requires of PTX text, and are a fresh copy the caller may keep.
// GPUs below 8.0 get an error naming the capability.
func PTX(major, minor int) ([]byte, error) {
	var src []byte
	switch {
	case major < 0 || minor < 0:
		return nil, fmt.Errorf("gpu/kernels: compute capability %d.%d is not valid", major, minor)
	case major >= 9:
		src = ptxSM90
	case major == 8:
		src = ptxSM80
	default:
		return nil, fmt.Errorf("gpu/kernels: compute capability %d.%d is below 8.0; the embedded PTX targets sm_80 and sm_90 (Ampere, Hopper and newer): run on such a GPU or use the CPU", major, minor)
	}
	out := make([]byte, len(src)+1)
	copy(out, src)
	return out, nil
}
