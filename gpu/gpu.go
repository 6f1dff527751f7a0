// Package gpu is godist's CUDA backend: it discovers NVIDIA GPUs, registers them into
// distlib/device as /physical_device:GPU:0, ... (logical devices /device:GPU:N), pools their
// memory and runs matmul on them through cuBLAS; the other ops of a GPU-placed computation
// run on the CPU kernels. Its driver layer (gpu/driver) loads the NVIDIA libraries at run
// time and binds NCCL's all-reduce, which no strategy uses yet (nothing calls
// distribute.RegisterNccl). The CUDA kernels of gpu/kernels are checked on a GPU but not yet
// called by the ops.
//
// One binary, no build tag. Every build contains the backend: the libraries (libcuda.so.1,
// libcublas.so.13/.12/.11, libnccl.so.2) are opened with dlopen when the program first asks
// for devices, so the same binary runs on a CPU-only machine (no GPUs listed, no message) and
// uses the GPUs of a machine that has a driver. Status says in one line what was looked for.
//
// Why a runtime loader and not gorgonia.org/cu: cu's init calls cuInit and os.Exit(1)s on a
// machine without a GPU, so a binary importing it cannot even report "no GPU"; its blas
// package links cuBLAS 11 by versioned symbols, while the test machine has driver 580 /
// CUDA 13 with cuBLAS 13 and NCCL (cu13) from Python wheels and no CUDA 11 libraries; and it
// needs cuda.h and libcuda at build time.
//
// Why github.com/ebitengine/purego and not cgo with dlopen: purego works with
// CGO_ENABLED=0, so the binary stays free of cgo (no C toolchain to build it, static
// cross-compilation, fast builds, yaegi symbol generation unchanged) and of any NVIDIA file at
// build time, and the bindings are plain Go function variables checked by purego at
// registration. Its limits (at most 15 arguments a call; cuBLAS's sgemm takes 14) are checked
// by a unit test of every binding's signature.
package gpu
