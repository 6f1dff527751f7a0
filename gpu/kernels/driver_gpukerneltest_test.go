//go:build gpukerneltest

package kernels_test

// A minimal CUDA driver API binding for the GPU kernel tests, loaded at run time with
// purego so the test binary builds without NVIDIA files and skips without a driver. It
// stands in only until gpu's own driver layer (branch gpuload: LoadModule, Function,
// Launch, device memory) is merged; then testDevice should be built on that instead and
// this file deleted.

import (
	"fmt"
	"runtime"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"

	"godist/gpu/kernels"
)

type cuDriver struct {
	cuInit                    func(flags uint32) int32
	cuDeviceGet               func(dev *int32, ordinal int32) int32
	cuDeviceGetAttribute      func(v *int32, attr int32, dev int32) int32
	cuDevicePrimaryCtxRetain  func(ctx *uintptr, dev int32) int32
	cuDevicePrimaryCtxRelease func(dev int32) int32
	cuCtxSetCurrent           func(ctx uintptr) int32
	cuModuleUnload            func(mod uintptr) int32
	cuModuleLoadData          func(mod *uintptr, image unsafe.Pointer) int32
	cuModuleGetFunction       func(fn *uintptr, mod uintptr, name *byte) int32
	cuMemAlloc                func(p *uintptr, size uint64) int32
	cuMemFree                 func(p uintptr) int32
	cuMemcpyHtoD              func(dst uintptr, src unsafe.Pointer, size uint64) int32
	cuMemcpyDtoH              func(dst unsafe.Pointer, src uintptr, size uint64) int32
	cuLaunchKernel            func(fn uintptr, gx, gy, gz, bx, by, bz, shared uint32, stream uintptr, params unsafe.Pointer, extra unsafe.Pointer) int32
	cuCtxSynchronize          func() int32
	cuGetErrorName            func(code int32, s **byte) int32
}

// cudaDevice is a testDevice on GPU 0 with the kernels module loaded.
type cudaDevice struct {
	d     cuDriver
	dev   int32
	ctx   uintptr
	mod   uintptr
	funcs map[string]uintptr
	bufs  []uintptr
}

func (c *cudaDevice) check(what string, code int32) error {
	if code == 0 {
		return nil
	}
	var s *byte
	name := "unknown"
	if c.d.cuGetErrorName != nil && c.d.cuGetErrorName(code, &s) == 0 && s != nil {
		var b []byte
		for p := unsafe.Pointer(s); *(*byte)(p) != 0; p = unsafe.Add(p, 1) {
			b = append(b, *(*byte)(p))
		}
		name = string(b)
	}
	return fmt.Errorf("%s: CUDA error %d (%s)", what, code, name)
}

// enter locks the calling goroutine to its thread and makes the context current there
// (subtests run on goroutines of their own); call the returned function when done.
func (c *cudaDevice) enter() func() {
	runtime.LockOSThread()
	c.d.cuCtxSetCurrent(c.ctx)
	return runtime.UnlockOSThread
}

// openTestDevice loads libcuda.so.1, retains GPU 0's primary context and loads the
// embedded PTX for its compute capability; it skips the test when there is no driver or
// no GPU.
func openTestDevice(t *testing.T) testDevice {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	lib, err := purego.Dlopen("libcuda.so.1", purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		t.Skipf("no NVIDIA driver: %v", err)
	}
	c := &cudaDevice{funcs: map[string]uintptr{}}
	for name, fp := range map[string]any{
		"cuInit": &c.d.cuInit, "cuDeviceGet": &c.d.cuDeviceGet, "cuDeviceGetAttribute": &c.d.cuDeviceGetAttribute,
		"cuDevicePrimaryCtxRetain": &c.d.cuDevicePrimaryCtxRetain, "cuCtxSetCurrent": &c.d.cuCtxSetCurrent,
		"cuDevicePrimaryCtxRelease_v2": &c.d.cuDevicePrimaryCtxRelease, "cuModuleUnload": &c.d.cuModuleUnload,
		"cuModuleLoadData": &c.d.cuModuleLoadData, "cuModuleGetFunction": &c.d.cuModuleGetFunction,
		"cuMemAlloc_v2": &c.d.cuMemAlloc, "cuMemFree_v2": &c.d.cuMemFree, "cuMemcpyHtoD_v2": &c.d.cuMemcpyHtoD,
		"cuMemcpyDtoH_v2": &c.d.cuMemcpyDtoH, "cuLaunchKernel": &c.d.cuLaunchKernel,
		"cuCtxSynchronize": &c.d.cuCtxSynchronize, "cuGetErrorName": &c.d.cuGetErrorName,
	} {
		purego.RegisterLibFunc(fp, lib, name)
	}
	if code := c.d.cuInit(0); code != 0 {
		t.Skipf("no usable GPU: %v", c.check("cuInit", code))
	}
	var dev int32
	if code := c.d.cuDeviceGet(&dev, 0); code != 0 {
		t.Skipf("no GPU 0: %v", c.check("cuDeviceGet", code))
	}
	var major, minor int32
	must(t, c.check("cuDeviceGetAttribute", c.d.cuDeviceGetAttribute(&major, 75, dev)))
	must(t, c.check("cuDeviceGetAttribute", c.d.cuDeviceGetAttribute(&minor, 76, dev)))
	c.dev = dev
	must(t, c.check("cuDevicePrimaryCtxRetain", c.d.cuDevicePrimaryCtxRetain(&c.ctx, dev)))
	must(t, c.check("cuCtxSetCurrent", c.d.cuCtxSetCurrent(c.ctx)))
	ptx, err := kernels.PTX(int(major), int(minor))
	if err != nil {
		t.Skip(err)
	}
	must(t, c.check("cuModuleLoadData", c.d.cuModuleLoadData(&c.mod, unsafe.Pointer(&ptx[0]))))
	runtime.KeepAlive(ptx)
	t.Logf("GPU 0: compute capability %d.%d", major, minor)
	t.Cleanup(func() {
		defer c.enter()()
		for _, b := range c.bufs {
			c.d.cuMemFree(b)
		}
		c.d.cuModuleUnload(c.mod)
		c.d.cuDevicePrimaryCtxRelease(c.dev)
	})
	return c
}

func (c *cudaDevice) Alloc(bytes int) (kernels.DevicePtr, error) {
	defer c.enter()()
	var p uintptr
	if err := c.check(fmt.Sprintf("cuMemAlloc(%d)", bytes), c.d.cuMemAlloc(&p, uint64(max(bytes, 4)))); err != nil {
		return 0, err
	}
	c.bufs = append(c.bufs, p)
	return kernels.DevicePtr(p), nil
}

func (c *cudaDevice) CopyIn(dst kernels.DevicePtr, src unsafe.Pointer, bytes int) error {
	defer c.enter()()
	if bytes == 0 {
		return nil
	}
	return c.check("cuMemcpyHtoD", c.d.cuMemcpyHtoD(uintptr(dst), src, uint64(bytes)))
}

func (c *cudaDevice) CopyOut(dst unsafe.Pointer, src kernels.DevicePtr, bytes int) error {
	defer c.enter()()
	if bytes == 0 {
		return nil
	}
	return c.check("cuMemcpyDtoH", c.d.cuMemcpyDtoH(dst, uintptr(src), uint64(bytes)))
}

func (c *cudaDevice) Launch(k *kernels.Kernel, g kernels.Geometry, args []unsafe.Pointer) error {
	defer c.enter()()
	fn, ok := c.funcs[k.Name]
	if !ok {
		name := append([]byte(k.Name), 0)
		if err := c.check("cuModuleGetFunction "+k.Name, c.d.cuModuleGetFunction(&fn, c.mod, &name[0])); err != nil {
			return err
		}
		c.funcs[k.Name] = fn
	}
	err := c.check("cuLaunchKernel "+k.Name, c.d.cuLaunchKernel(fn, g.Grid[0], g.Grid[1], g.Grid[2],
		g.Block[0], g.Block[1], g.Block[2], g.Shared, 0, unsafe.Pointer(&args[0]), nil))
	runtime.KeepAlive(args)
	if err != nil {
		return err
	}
	return c.check("cuCtxSynchronize after "+k.Name, c.d.cuCtxSynchronize())
}
