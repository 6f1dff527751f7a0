// Package driver binds the parts of the CUDA driver API, cuBLAS and NCCL that godist uses,
// loading libcuda.so.1, libcublas.so.{13,12,11} and libnccl.so.2 at run time with
// github.com/ebitengine/purego. Building it needs no NVIDIA header or library and no cgo;
// on a machine without a driver every entry point returns an error that names each place
// the library was looked for (Load, LoadError).
//
// Search order for each library: the file named by its environment variable
// (GODIST_CUDA_LIB, GODIST_CUBLAS_LIB, GODIST_NCCL_LIB; when set, only that file), the
// dynamic loader's default path (ld.so.cache, LD_LIBRARY_PATH), then SystemDirs and the
// library directories of NVIDIA's Python wheels (WheelDirs: site-packages/nvidia/*/lib).
//
// Threads. CUDA's current context is per OS thread, so every Device method makes the
// device's primary context current on a locked OS thread for the length of the call (Do);
// callers may use a Device from any goroutine.
//
// The kernels of gpu/kernels are loaded with (*Device).LoadModule, looked up with
// (*Module).Function and started with (*Function).Launch.
package driver
