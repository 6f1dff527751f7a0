//go:build !purego && !openblas

package tensor

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// kern6x16 is the AVX2/FMA micro-kernel of gemm_amd64.s.
//
//go:noescape
func kern6x16(kc int, a, b, c *float32, ldc int, alpha float32)

// kern12x32 is the AVX-512 micro-kernel of gemm_avx512_amd64.s: rows <= 12 rows and the
// columns set in mask (bit j: column j, j < 32) of the 12 x 32 tile, A(i, p) at
// a[i*ars+p*aps] and B(p, j) at b[p*bs+j].
//
//go:noescape
func kern12x32(kc int, a *float32, ars, aps int, b *float32, bs int, c *float32, ldc int, alpha float32, rows int, mask, load uint64)

// sfence orders the streaming stores of kern12x32 before later stores.
//
//go:noescape
func sfence()

var (
	avx2Kernel   = microKernel{mr: 6, nr: 16, fn: kernelAVX2}
	avx512Kernel = microKernel{mr: 12, nr: 32, fn: kernelAVX512, store: kernelAVX512Store, inPlace: kernelAVX512InPlace}
	// avx512Stream is avx512Kernel writing the tiles of a beta-0 product with streaming
	// stores where it can (kernelAVX512Stream); sgemmStreamed uses it.
	avx512Stream = microKernel{mr: 12, nr: 32, fn: kernelAVX512, store: kernelAVX512Store, inPlace: kernelAVX512Stream, fence: sfence}
	hasAVX2      = cpu.X86.HasAVX2 && cpu.X86.HasFMA
	hasAVX512    = cpu.X86.HasAVX512F
)

func init() {
	if hasAVX2 {
		cpuKernels["avx2"] = avx2Kernel
	}
	if hasAVX512 {
		cpuKernels["avx512"] = avx512Kernel
		cpuKernels["avx512-stream"] = avx512Stream
	}
	switch {
	case hasAVX512:
		activeKernel = avx512Kernel
		streamKernel = avx512Stream
		kernelName = "go-avx512"
	case hasAVX2:
		activeKernel = avx2Kernel
		kernelName = "go-avx2"
	}
}

// kernelAVX2 runs the assembly micro-kernel; edge tiles go through a full 6 x 16 scratch
// tile that is then added into c.
func kernelAVX2(kc int, ap, bp []float32, alpha float32, c []float32, ldc, rows, cols int) {
	if kc == 0 {
		return
	}
	_ = ap[6*kc-1]
	_ = bp[16*kc-1]
	if rows == 6 && cols == 16 {
		_ = c[5*ldc+15]
		kern6x16(kc, &ap[0], &bp[0], &c[0], ldc, alpha)
		return
	}
	var tile [6 * 16]float32
	kern6x16(kc, &ap[0], &bp[0], &tile[0], 16, alpha)
	for i := 0; i < rows; i++ {
		row := c[i*ldc : i*ldc+cols]
		t := tile[i*16 : i*16+cols]
		for j := range row {
			row[j] += t[j]
		}
	}
}

// kernelAVX512InPlace runs the AVX-512 micro-kernel on a rows x cols corner of c, with
// A(i, p) = a[i*ars+p*aps] for all 12 rows and B(p, j) = b[p*bs+j] for all 32 columns
// (edge tiles of c use masked loads and stores, so no scratch tile is needed; the operands
// of an edge tile are padded by the caller). overwrite writes c = alpha*A*B without
// reading c.
func kernelAVX512InPlace(kc int, a []float32, ars, aps int, b []float32, bs int, alpha float32, c []float32, ldc, rows, cols int, overwrite bool) {
	if kc == 0 || rows <= 0 || cols <= 0 {
		return
	}
	_ = a[11*ars+(kc-1)*aps] // every element the kernel reads lies in a and b
	_ = b[(kc-1)*bs+31]
	_ = c[(rows-1)*ldc+cols-1] // every element the masked stores write lies in c
	mask := uint64(1)<<min(cols, 32) - 1
	load := mask
	if overwrite {
		load = 0
	}
	kern12x32(kc, &a[0], ars, aps, &b[0], bs, &c[0], ldc, alpha, min(rows, 12), mask, load)
}

// kernelAVX512Stream is kernelAVX512InPlace writing a tile of all 32 columns whose rows
// start 64-byte aligned (C and ldc aligned) with streaming stores when it overwrites C;
// other tiles, and tiles that add into C, go through kernelAVX512InPlace.
func kernelAVX512Stream(kc int, a []float32, ars, aps int, b []float32, bs int, alpha float32, c []float32, ldc, rows, cols int, overwrite bool) {
	if !overwrite || kc == 0 || rows <= 0 || !streamsTile(c, ldc, cols) {
		kernelAVX512InPlace(kc, a, ars, aps, b, bs, alpha, c, ldc, rows, cols, overwrite)
		return
	}
	_ = a[11*ars+(kc-1)*aps]
	_ = b[(kc-1)*bs+31]
	_ = c[(rows-1)*ldc+31]
	kern12x32(kc, &a[0], ars, aps, &b[0], bs, &c[0], ldc, alpha, min(rows, 12), 1<<32-1, 1<<63)
}

// kernelAVX512 runs the AVX-512 micro-kernel on packed strips.
func kernelAVX512(kc int, ap, bp []float32, alpha float32, c []float32, ldc, rows, cols int) {
	kernelAVX512InPlace(kc, ap, 1, 12, bp, 32, alpha, c, ldc, rows, cols, false)
}

// kernelAVX512Store is kernelAVX512 writing C = alpha*A*B without reading C.
func kernelAVX512Store(kc int, ap, bp []float32, alpha float32, c []float32, ldc, rows, cols int) {
	kernelAVX512InPlace(kc, ap, 1, 12, bp, 32, alpha, c, ldc, rows, cols, true)
}

// streamsTile reports whether kernelAVX512Stream writes a tile of cols columns at c (rows
// ldc apart) with streaming stores when it overwrites it: all 32 columns, every row
// 64-byte aligned.
func streamsTile(c []float32, ldc, cols int) bool {
	return cols == 32 && ldc%16 == 0 && len(c) > 0 && uintptr(unsafe.Pointer(&c[0]))%64 == 0
}
