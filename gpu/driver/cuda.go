package driver

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Result is a CUresult, cublasStatus_t or ncclResult_t.
type Result int32

// CUDA device attributes used here (CUdevice_attribute).
const (
	attrComputeCapabilityMajor = 75
	attrComputeCapabilityMinor = 76
	attrMultiprocessorCount    = 16
)

// api holds the driver API entry points, bound by purego.
type api struct {
	cuInit                    func(flags uint32) Result
	cuDriverGetVersion        func(v *int32) Result
	cuDeviceGetCount          func(n *int32) Result
	cuDeviceGet               func(d *int32, ordinal int32) Result
	cuDeviceGetName           func(name *byte, n int32, d int32) Result
	cuDeviceTotalMem          func(b *uint64, d int32) Result
	cuDeviceGetAttribute      func(v *int32, attr int32, d int32) Result
	cuDevicePrimaryCtxRetain  func(ctx *uintptr, d int32) Result
	cuDevicePrimaryCtxRelease func(d int32) Result
	cuCtxSetCurrent           func(ctx uintptr) Result
	cuCtxSynchronize          func() Result
	cuMemAlloc                func(p *uint64, size uint64) Result
	cuMemFree                 func(p uint64) Result
	cuMemGetInfo              func(free, total *uint64) Result
	cuMemcpyHtoD              func(dst uint64, src unsafe.Pointer, n uint64) Result
	cuMemcpyDtoH              func(dst unsafe.Pointer, src uint64, n uint64) Result
	cuMemcpyDtoD              func(dst, src uint64, n uint64) Result
	cuMemcpyHtoDAsync         func(dst uint64, src unsafe.Pointer, n uint64, s uintptr) Result
	cuMemcpyDtoHAsync         func(dst unsafe.Pointer, src uint64, n uint64, s uintptr) Result
	cuMemcpyDtoDAsync         func(dst, src uint64, n uint64, s uintptr) Result
	cuMemsetD32               func(dst uint64, v uint32, n uint64) Result
	cuStreamCreate            func(s *uintptr, flags uint32) Result
	cuStreamSynchronize       func(s uintptr) Result
	cuStreamDestroy           func(s uintptr) Result
	cuModuleLoadData          func(m *uintptr, image unsafe.Pointer) Result
	cuModuleUnload            func(m uintptr) Result
	cuModuleGetFunction       func(f *uintptr, m uintptr, name *byte) Result
	cuLaunchKernel            func(f uintptr, gx, gy, gz, bx, by, bz, shared uint32, s uintptr, params unsafe.Pointer, extra unsafe.Pointer) Result
	cuGetErrorName            func(r Result, s **byte) Result
	cuGetErrorString          func(r Result, s **byte) Result
}

// symtab lists function variables and the library symbols they bind to.
type symtab []struct {
	fn   any
	name string
}

// symbols maps each entry point to its exported name (the _v2 names are the 64-bit ABI).
func (a *api) symbols() symtab {
	return []struct {
		fn   any
		name string
	}{
		{&a.cuInit, "cuInit"}, {&a.cuDriverGetVersion, "cuDriverGetVersion"},
		{&a.cuDeviceGetCount, "cuDeviceGetCount"}, {&a.cuDeviceGet, "cuDeviceGet"},
		{&a.cuDeviceGetName, "cuDeviceGetName"}, {&a.cuDeviceTotalMem, "cuDeviceTotalMem_v2"},
		{&a.cuDeviceGetAttribute, "cuDeviceGetAttribute"},
		{&a.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"}, {&a.cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"},
		{&a.cuCtxSetCurrent, "cuCtxSetCurrent"}, {&a.cuCtxSynchronize, "cuCtxSynchronize"},
		{&a.cuMemAlloc, "cuMemAlloc_v2"}, {&a.cuMemFree, "cuMemFree_v2"}, {&a.cuMemGetInfo, "cuMemGetInfo_v2"},
		{&a.cuMemcpyHtoD, "cuMemcpyHtoD_v2"}, {&a.cuMemcpyDtoH, "cuMemcpyDtoH_v2"}, {&a.cuMemcpyDtoD, "cuMemcpyDtoD_v2"},
		{&a.cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"}, {&a.cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2"},
		{&a.cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2"}, {&a.cuMemsetD32, "cuMemsetD32_v2"},
		{&a.cuStreamCreate, "cuStreamCreate"}, {&a.cuStreamSynchronize, "cuStreamSynchronize"},
		{&a.cuStreamDestroy, "cuStreamDestroy_v2"},
		{&a.cuModuleLoadData, "cuModuleLoadData"}, {&a.cuModuleUnload, "cuModuleUnload"},
		{&a.cuModuleGetFunction, "cuModuleGetFunction"}, {&a.cuLaunchKernel, "cuLaunchKernel"},
		{&a.cuGetErrorName, "cuGetErrorName"}, {&a.cuGetErrorString, "cuGetErrorString"},
	}
}

// bind registers every symbol of a table from a library; it reports the first missing one
// instead of panicking as purego.RegisterLibFunc does.
func bind(handle uintptr, path string, table symtab) error {
	for _, s := range table {
		sym, err := purego.Dlsym(handle, s.name)
		if err != nil || sym == 0 {
			return fmt.Errorf("gpu/driver: %s has no symbol %s (too old a version?): %v", path, s.name, err)
		}
		purego.RegisterFunc(s.fn, sym)
	}
	return nil
}

var (
	cu       api
	cuOnce   sync.Once
	cuErr    error
	cuPath   string
	cuVer    int
	cuLoaded bool
)

// Init loads the CUDA driver library and calls cuInit once; later calls return the first
// call's result. Its error says what was looked for (Load's list) or what cuInit answered.
func Init() error {
	cuOnce.Do(func() {
		l, err := Load(withDirs(CUDALib, ""))
		if err != nil {
			cuErr = err
			return
		}
		cuPath = l.Path
		if err := bind(l.Handle, l.Path, cu.symbols()); err != nil {
			cuErr = err
			return
		}
		cuLoaded = true
		if err := check("cuInit", cu.cuInit(0)); err != nil {
			cuErr = fmt.Errorf("%w (driver library %s)", err, cuPath)
			return
		}
		var v int32
		if err := check("cuDriverGetVersion", cu.cuDriverGetVersion(&v)); err != nil {
			cuErr = err
			return
		}
		cuVer = int(v)
	})
	return cuErr
}

// DriverLoaded reports whether a CUDA driver library was found and bound (Init may still
// have failed, for instance with no device).
func DriverLoaded() bool { _ = Init(); return cuLoaded }

// DriverPath is the file of the loaded CUDA driver library.
func DriverPath() string { _ = Init(); return cuPath }

// DriverVersion is cuDriverGetVersion's answer, such as 13000 for CUDA 13.0.
func DriverVersion() int { _ = Init(); return cuVer }

// Error is a failed CUDA driver call.
type Error struct {
	Call string
	Code Result
	Name string // cuGetErrorName, such as CUDA_ERROR_OUT_OF_MEMORY
	Desc string // cuGetErrorString
}

// Error names the call, the CUDA error name and its description.
func (e *Error) Error() string {
	return fmt.Sprintf("gpu/driver: %s failed: %s (%d): %s", e.Call, e.Name, e.Code, e.Desc)
}

// CUDA error codes callers test for.
const (
	ErrorOutOfMemory Result = 2
	ErrorNoDevice    Result = 100
)

func check(call string, r Result) error {
	if r == 0 {
		return nil
	}
	e := &Error{Call: call, Code: r, Name: "CUDA_ERROR_UNKNOWN_CODE", Desc: "no description"}
	var s *byte
	if cu.cuGetErrorName != nil && cu.cuGetErrorName(r, &s) == 0 && s != nil {
		e.Name = goString(s)
	}
	s = nil
	if cu.cuGetErrorString != nil && cu.cuGetErrorString(r, &s) == 0 && s != nil {
		e.Desc = goString(s)
	}
	return e
}

// goString copies a NUL-terminated C string.
func goString(p *byte) string {
	if p == nil {
		return ""
	}
	var b []byte
	for q := unsafe.Pointer(p); *(*byte)(q) != 0; q = unsafe.Add(q, 1) {
		b = append(b, *(*byte)(q))
	}
	return string(b)
}

func cString(s string) *byte {
	b := append([]byte(s), 0)
	return &b[0]
}

// DeviceCount returns the number of CUDA devices; 0 with the Init error when there is no
// usable driver.
func DeviceCount() (int, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	var n int32
	if err := check("cuDeviceGetCount", cu.cuDeviceGetCount(&n)); err != nil {
		return 0, err
	}
	return int(n), nil
}

// Info describes a physical GPU.
type Info struct {
	Ordinal         int
	Name            string
	TotalMemory     uint64 // bytes
	Major, Minor    int    // compute capability
	Multiprocessors int
}

// Device is a GPU with its primary context retained. Its methods make the context current on
// a locked OS thread for the duration of each call, as CUDA's per-thread current context
// requires, so any goroutine may call them.
type Device struct {
	Info
	dev int32
	ctx uintptr
	mu  sync.Mutex
	rel bool
}

// Open retains the primary context of GPU ordinal and reads its properties.
func Open(ordinal int) (*Device, error) {
	n, err := DeviceCount()
	if err != nil {
		return nil, err
	}
	if ordinal < 0 || ordinal >= n {
		return nil, fmt.Errorf("gpu/driver: GPU ordinal %d out of range: this machine has %d GPU(s); use 0..%d", ordinal, n, n-1)
	}
	d := &Device{Info: Info{Ordinal: ordinal}}
	if err := check("cuDeviceGet", cu.cuDeviceGet(&d.dev, int32(ordinal))); err != nil {
		return nil, err
	}
	var name [256]byte
	if err := check("cuDeviceGetName", cu.cuDeviceGetName(&name[0], int32(len(name)), d.dev)); err != nil {
		return nil, err
	}
	d.Name = goString(&name[0])
	if err := check("cuDeviceTotalMem_v2", cu.cuDeviceTotalMem(&d.TotalMemory, d.dev)); err != nil {
		return nil, err
	}
	var v int32
	for _, a := range []struct {
		attr int32
		dst  *int
	}{{attrComputeCapabilityMajor, &d.Major}, {attrComputeCapabilityMinor, &d.Minor}, {attrMultiprocessorCount, &d.Multiprocessors}} {
		if err := check("cuDeviceGetAttribute", cu.cuDeviceGetAttribute(&v, a.attr, d.dev)); err != nil {
			return nil, err
		}
		*a.dst = int(v)
	}
	if err := check("cuDevicePrimaryCtxRetain", cu.cuDevicePrimaryCtxRetain(&d.ctx, d.dev)); err != nil {
		return nil, err
	}
	return d, nil
}

// Close releases the primary context.
func (d *Device) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.rel {
		return nil
	}
	d.rel = true
	return check("cuDevicePrimaryCtxRelease", cu.cuDevicePrimaryCtxRelease(d.dev))
}

// Do runs f on a locked OS thread with the device's context current.
func (d *Device) Do(f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := check("cuCtxSetCurrent", cu.cuCtxSetCurrent(d.ctx)); err != nil {
		return err
	}
	return f()
}

// MemInfo returns the free and total device memory in bytes.
func (d *Device) MemInfo() (free, total uint64, err error) {
	err = d.Do(func() error { return check("cuMemGetInfo_v2", cu.cuMemGetInfo(&free, &total)) })
	return
}

// Ptr is a device address (CUdeviceptr).
type Ptr uint64

// MemAlloc allocates bytes of device memory.
func (d *Device) MemAlloc(bytes uint64) (Ptr, error) {
	var p uint64
	err := d.Do(func() error { return check("cuMemAlloc_v2", cu.cuMemAlloc(&p, bytes)) })
	return Ptr(p), err
}

// MemFree frees memory from MemAlloc.
func (d *Device) MemFree(p Ptr) error {
	return d.Do(func() error { return check("cuMemFree_v2", cu.cuMemFree(uint64(p))) })
}

// CopyHtoD copies host float32s to device memory, synchronously.
func (d *Device) CopyHtoD(dst Ptr, src []float32) error {
	if len(src) == 0 {
		return nil
	}
	return d.Do(func() error {
		return check("cuMemcpyHtoD_v2", cu.cuMemcpyHtoD(uint64(dst), unsafe.Pointer(&src[0]), uint64(4*len(src))))
	})
}

// CopyDtoH copies device memory to host float32s, synchronously.
func (d *Device) CopyDtoH(dst []float32, src Ptr) error {
	if len(dst) == 0 {
		return nil
	}
	return d.Do(func() error {
		return check("cuMemcpyDtoH_v2", cu.cuMemcpyDtoH(unsafe.Pointer(&dst[0]), uint64(src), uint64(4*len(dst))))
	})
}

// CopyDtoD copies bytes between device buffers.
func (d *Device) CopyDtoD(dst, src Ptr, bytes uint64) error {
	return d.Do(func() error { return check("cuMemcpyDtoD_v2", cu.cuMemcpyDtoD(uint64(dst), uint64(src), bytes)) })
}

// MemsetD32 sets n 32-bit words at dst to v.
func (d *Device) MemsetD32(dst Ptr, v uint32, n uint64) error {
	return d.Do(func() error { return check("cuMemsetD32_v2", cu.cuMemsetD32(uint64(dst), v, n)) })
}

// Synchronize waits for all work on the device's context.
func (d *Device) Synchronize() error {
	return d.Do(func() error { return check("cuCtxSynchronize", cu.cuCtxSynchronize()) })
}

// Stream is a CUDA stream of a device.
type Stream struct {
	d *Device
	s uintptr
}

// NewStream creates a stream.
func (d *Device) NewStream() (*Stream, error) {
	st := &Stream{d: d}
	err := d.Do(func() error { return check("cuStreamCreate", cu.cuStreamCreate(&st.s, 0)) })
	return st, err
}

// Handle is the CUstream, for cuBLAS and NCCL calls.
func (s *Stream) Handle() uintptr {
	if s == nil {
		return 0
	}
	return s.s
}

// Synchronize waits for the stream's work; it returns ctx's error if ctx ends first (the
// wait itself goes on in the background until the stream drains).
func (s *Stream) Synchronize(ctx context.Context) error {
	done := make(chan error, 1)
	go func() {
		done <- s.d.Do(func() error { return check("cuStreamSynchronize", cu.cuStreamSynchronize(s.s)) })
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("gpu/driver: stream synchronize: %w", context.Cause(ctx))
	}
}

// Destroy destroys the stream.
func (s *Stream) Destroy() error {
	return s.d.Do(func() error { return check("cuStreamDestroy_v2", cu.cuStreamDestroy(s.s)) })
}

// CopyHtoDAsync queues a copy of host float32s to the device on the stream; src must stay
// unchanged (and reachable) until the stream is synchronized.
func (s *Stream) CopyHtoDAsync(dst Ptr, src []float32) error {
	if len(src) == 0 {
		return nil
	}
	return s.d.Do(func() error {
		return check("cuMemcpyHtoDAsync_v2", cu.cuMemcpyHtoDAsync(uint64(dst), unsafe.Pointer(&src[0]), uint64(4*len(src)), s.s))
	})
}

// CopyDtoHAsync queues a copy from the device into host float32s on the stream.
func (s *Stream) CopyDtoHAsync(dst []float32, src Ptr) error {
	if len(dst) == 0 {
		return nil
	}
	return s.d.Do(func() error {
		return check("cuMemcpyDtoHAsync_v2", cu.cuMemcpyDtoHAsync(unsafe.Pointer(&dst[0]), uint64(src), uint64(4*len(dst)), s.s))
	})
}

// CopyDtoDAsync queues a device-to-device copy on the stream.
func (s *Stream) CopyDtoDAsync(dst, src Ptr, bytes uint64) error {
	return s.d.Do(func() error {
		return check("cuMemcpyDtoDAsync_v2", cu.cuMemcpyDtoDAsync(uint64(dst), uint64(src), bytes, s.s))
	})
}

// Module is a loaded PTX or cubin module.
type Module struct {
	d *Device
	m uintptr
}

// LoadModule loads a PTX (NUL-terminated text) or cubin/fatbin image into the device's context.
func (d *Device) LoadModule(ptx []byte) (*Module, error) {
	if len(ptx) == 0 {
		return nil, fmt.Errorf("gpu/driver: LoadModule of an empty image; pass the PTX bytes (gpu/kernels.PTX)")
	}
	img := ptx
	if img[len(img)-1] != 0 && img[0] != 0x7f {
		img = append(append([]byte{}, ptx...), 0)
	}
	m := &Module{d: d}
	err := d.Do(func() error { return check("cuModuleLoadData", cu.cuModuleLoadData(&m.m, unsafe.Pointer(&img[0]))) })
	runtime.KeepAlive(img)
	return m, err
}

// Unload unloads the module.
func (m *Module) Unload() error {
	return m.d.Do(func() error { return check("cuModuleUnload", cu.cuModuleUnload(m.m)) })
}

// Function is a kernel of a module.
type Function struct {
	d    *Device
	f    uintptr
	Name string
}

// Function looks a kernel up by its (extern "C") name.
func (m *Module) Function(name string) (*Function, error) {
	f := &Function{d: m.d, Name: name}
	err := m.d.Do(func() error {
		return check("cuModuleGetFunction("+name+")", cu.cuModuleGetFunction(&f.f, m.m, cString(name)))
	})
	return f, err
}

// Launch queues the kernel on the stream (nil: the default stream) with the grid and block
// dimensions. Each of args points at one kernel parameter's value (cuLaunchKernel's
// kernelParams); the values are read before Launch returns.
func (f *Function) Launch(grid, block [3]uint32, sharedMem uint32, stream *Stream, args ...unsafe.Pointer) error {
	var pin runtime.Pinner
	defer pin.Unpin()
	var params unsafe.Pointer
	if len(args) > 0 {
		for _, a := range args {
			if a == nil {
				return fmt.Errorf("gpu/driver: launch %s: a nil kernel argument pointer; pass a pointer to each parameter's value", f.Name)
			}
			pin.Pin(a)
		}
		pin.Pin(&args[0])
		params = unsafe.Pointer(&args[0])
	}
	return f.d.Do(func() error {
		return check("cuLaunchKernel("+f.Name+")", cu.cuLaunchKernel(f.f, grid[0], grid[1], grid[2], block[0], block[1], block[2],
			sharedMem, stream.Handle(), params, nil))
	})
}
