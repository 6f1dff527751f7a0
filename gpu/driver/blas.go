package driver

import (
	"fmt"
	"sync"
)

type blasAPI struct {
	cublasCreate    func(h *uintptr) Result
	cublasDestroy   func(h uintptr) Result
	cublasSetStream func(h uintptr, s uintptr) Result
	cublasSgemm     func(h uintptr, ta, tb int32, m, n, k int32, alpha *float32, a uint64, lda int32, b uint64, ldb int32, beta *float32, c uint64, ldc int32) Result
}

var (
	blas     blasAPI
	blasOnce sync.Once
	blasErr  error
	blasPath string
)

func (b *blasAPI) symbols() symtab {
	return symtab{{&b.cublasCreate, "cublasCreate_v2"}, {&b.cublasDestroy, "cublasDestroy_v2"},
		{&b.cublasSetStream, "cublasSetStream_v2"}, {&b.cublasSgemm, "cublasSgemm_v2"}}
}

// LoadBLAS loads cuBLAS (libcublas.so.13, .12, .11 in that order) once.
func LoadBLAS() (string, error) {
	blasOnce.Do(func() {
		l, err := Load(withDirs(CUBLASLib, "cublas"))
		if err != nil {
			blasErr = err
			return
		}
		blasPath = l.Path
		blasErr = bind(l.Handle, l.Path, blas.symbols())
	})
	return blasPath, blasErr
}

func checkBLAS(call string, r Result) error {
	if r == 0 {
		return nil
	}
	names := map[Result]string{1: "CUBLAS_STATUS_NOT_INITIALIZED", 3: "CUBLAS_STATUS_ALLOC_FAILED", 7: "CUBLAS_STATUS_INVALID_VALUE",
		8: "CUBLAS_STATUS_ARCH_MISMATCH", 11: "CUBLAS_STATUS_MAPPING_ERROR", 13: "CUBLAS_STATUS_EXECUTION_FAILED",
		14: "CUBLAS_STATUS_INTERNAL_ERROR", 15: "CUBLAS_STATUS_NOT_SUPPORTED"}
	n, ok := names[r]
	if !ok {
		n = "CUBLAS_STATUS_UNKNOWN"
	}
	return fmt.Errorf("gpu/driver: %s failed: %s (%d)", call, n, r)
}

// BLAS is a cuBLAS handle bound to a device.
type BLAS struct {
	d *Device
	h uintptr
}

// NewBLAS creates a cuBLAS handle on the device.
func (d *Device) NewBLAS() (*BLAS, error) {
	if _, err := LoadBLAS(); err != nil {
		return nil, err
	}
	b := &BLAS{d: d}
	err := d.Do(func() error { return checkBLAS("cublasCreate_v2", blas.cublasCreate(&b.h)) })
	return b, err
}

// SetStream makes the handle's calls run on the stream.
func (b *BLAS) SetStream(s *Stream) error {
	return b.d.Do(func() error { return checkBLAS("cublasSetStream_v2", blas.cublasSetStream(b.h, s.Handle())) })
}

// Destroy frees the handle.
func (b *BLAS) Destroy() error {
	return b.d.Do(func() error { return checkBLAS("cublasDestroy_v2", blas.cublasDestroy(b.h)) })
}

// SgemmRowMajor computes c = alpha*op(a)*op(b) + beta*c on device buffers holding row-major
// matrices (op(a) m x k, op(b) k x n, c m x n with leading dimensions lda, ldb, ldc). cuBLAS
// is column-major, so it computes cᵀ = op(b)ᵀ op(a)ᵀ: the operands swap, the transposes stay.
func (b *BLAS) SgemmRowMajor(transA, transB bool, m, n, k int, alpha float32, a Ptr, lda int, bm Ptr, ldb int, beta float32, c Ptr, ldc int) error {
	op := func(t bool) int32 {
		if t {
			return 1 // CUBLAS_OP_T
		}
		return 0
	}
	return b.d.Do(func() error {
		return checkBLAS("cublasSgemm_v2", blas.cublasSgemm(b.h, op(transB), op(transA), int32(n), int32(m), int32(k),
			&alpha, uint64(bm), int32(ldb), uint64(a), int32(lda), &beta, uint64(c), int32(ldc)))
	})
}
