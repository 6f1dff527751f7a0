package driver

import (
	"context"
	"math"
	"testing"
	"time"
	"unsafe"
)

// openGPU opens GPU 0 or skips the test, saying what was looked for.
func openGPU(t *testing.T) *Device {
	t.Helper()
	if err := Init(); err != nil {
		t.Skipf("no usable CUDA driver on this machine (this test runs on a GPU machine): %v", err)
	}
	n, err := DeviceCount()
	if err != nil || n == 0 {
		t.Skipf("no CUDA device (count %d, %v)", n, err)
	}
	d, err := Open(0)
	if err != nil {
		t.Fatalf("Open(0): %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func TestGPUDeviceMemory(t *testing.T) {
	d := openGPU(t)
	t.Logf("GPU 0: %s, %d MiB, sm_%d%d, driver %d (%s)", d.Name, d.TotalMemory>>20, d.Major, d.Minor, DriverVersion(), DriverPath())
	if d.Name == "" || d.TotalMemory == 0 || d.Major == 0 {
		t.Fatalf("device info incomplete: %+v", d.Info)
	}
	if _, err := Open(1 << 20); err == nil {
		t.Fatal("Open of a huge ordinal succeeded")
	}
	const n = 1 << 20
	p, err := d.MemAlloc(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	defer d.MemFree(p)
	q, err := d.MemAlloc(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	defer d.MemFree(q)
	src := make([]float32, n)
	for i := range src {
		src[i] = float32(i) * 0.5
	}
	if err := d.CopyHtoD(p, src); err != nil {
		t.Fatal(err)
	}
	if err := d.CopyDtoD(q, p, 4*n); err != nil {
		t.Fatal(err)
	}
	dst := make([]float32, n)
	if err := d.CopyDtoH(dst, q); err != nil {
		t.Fatal(err)
	}
	for i := range dst {
		if dst[i] != src[i] {
			t.Fatalf("round trip [%d] = %v, want %v", i, dst[i], src[i])
		}
	}
	if err := d.MemsetD32(q, math.Float32bits(3), n); err != nil {
		t.Fatal(err)
	}
	s, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	if err := s.CopyDtoHAsync(dst, q); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.Synchronize(ctx); err != nil {
		t.Fatal(err)
	}
	if dst[0] != 3 || dst[n-1] != 3 {
		t.Fatalf("memset: got %v %v, want 3", dst[0], dst[n-1])
	}
	free, total, err := d.MemInfo()
	if err != nil || free == 0 || total < free {
		t.Fatalf("MemInfo = %d, %d, %v", free, total, err)
	}
	if _, err := d.MemAlloc(1 << 50); err == nil {
		t.Fatal("allocating a petabyte succeeded")
	} else if e, ok := err.(*Error); !ok || e.Name != "CUDA_ERROR_OUT_OF_MEMORY" {
		t.Fatalf("petabyte allocation: %v, want CUDA_ERROR_OUT_OF_MEMORY", err)
	}
}

func TestGPUSgemm(t *testing.T) {
	d := openGPU(t)
	b, err := d.NewBLAS()
	if err != nil {
		t.Fatalf("cuBLAS: %v", err)
	}
	defer b.Destroy()
	tests := []struct {
		name           string
		transA, transB bool
	}{{"NN", false, false}, {"TN", true, false}, {"NT", false, true}, {"TT", true, true}}
	const m, n, k = 3, 5, 4
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := make([]float32, m*k)
			bb := make([]float32, k*n)
			for i := range a {
				a[i] = float32(i%7) - 2
			}
			for i := range bb {
				bb[i] = float32(i%5) * 0.5
			}
			lda, ldb := k, n
			if tc.transA {
				lda = m
			}
			if tc.transB {
				ldb = k
			}
			at := func(i, j int) float32 { // op(a)[i][j]
				if tc.transA {
					return a[j*lda+i]
				}
				return a[i*lda+j]
			}
			bt := func(i, j int) float32 {
				if tc.transB {
					return bb[j*ldb+i]
				}
				return bb[i*ldb+j]
			}
			pa, _ := d.MemAlloc(uint64(4 * len(a)))
			pb, _ := d.MemAlloc(uint64(4 * len(bb)))
			pc, _ := d.MemAlloc(4 * m * n)
			defer d.MemFree(pa)
			defer d.MemFree(pb)
			defer d.MemFree(pc)
			c := make([]float32, m*n)
			for i := range c {
				c[i] = 1
			}
			must := func(err error) {
				if err != nil {
					t.Fatal(err)
				}
			}
			must(d.CopyHtoD(pa, a))
			must(d.CopyHtoD(pb, bb))
			must(d.CopyHtoD(pc, c))
			must(b.SgemmRowMajor(tc.transA, tc.transB, m, n, k, 2, pa, lda, pb, ldb, 0.5, pc, n))
			must(d.CopyDtoH(c, pc))
			for i := 0; i < m; i++ {
				for j := 0; j < n; j++ {
					var want float32 = 0.5
					for l := 0; l < k; l++ {
						want += 2 * at(i, l) * bt(l, j)
					}
					if math.Abs(float64(c[i*n+j]-want)) > 1e-4 {
						t.Fatalf("c[%d][%d] = %v, want %v", i, j, c[i*n+j], want)
					}
				}
			}
		})
	}
}

// TestGPULaunch loads a hand-written PTX kernel and launches it with a parameter.
func TestGPULaunch(t *testing.T) {
	d := openGPU(t)
	const ptx = `.version 7.8
.target sm_80
.address_size 64
.visible .entry fill(.param .u64 p, .param .f32 v, .param .u32 n)
{
	.reg .b32 %r<5>; .reg .f32 %f<2>; .reg .b64 %rd<4>; .reg .pred %p<2>;
	ld.param.u64 %rd1, [p]; ld.param.f32 %f1, [v]; ld.param.u32 %r1, [n];
	mov.u32 %r2, %ctaid.x; mov.u32 %r3, %ntid.x; mov.u32 %r4, %tid.x;
	mad.lo.s32 %r2, %r2, %r3, %r4;
	setp.ge.u32 %p1, %r2, %r1; @%p1 bra DONE;
	cvta.to.global.u64 %rd2, %rd1; mul.wide.u32 %rd3, %r2, 4; add.s64 %rd2, %rd2, %rd3;
	st.global.f32 [%rd2], %f1;
DONE:
	ret;
}
`
	m, err := d.LoadModule([]byte(ptx))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Unload()
	f, err := m.Function("fill")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Function("nope"); err == nil {
		t.Fatal("Function of a missing kernel succeeded")
	}
	const n = 1000
	p, err := d.MemAlloc(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	defer d.MemFree(p)
	ptr, v, cnt := uint64(p), float32(7.5), uint32(n)
	if err := f.Launch([3]uint32{(n + 255) / 256, 1, 1}, [3]uint32{256, 1, 1}, 0, nil,
		unsafe.Pointer(&ptr), unsafe.Pointer(&v), unsafe.Pointer(&cnt)); err != nil {
		t.Fatal(err)
	}
	if err := d.Synchronize(); err != nil {
		t.Fatal(err)
	}
	out := make([]float32, n)
	if err := d.CopyDtoH(out, p); err != nil {
		t.Fatal(err)
	}
	for i, x := range out {
		if x != 7.5 {
			t.Fatalf("out[%d] = %v, want 7.5", i, x)
		}
	}
}

func TestGPUNCCLAllReduce(t *testing.T) {
	d := openGPU(t)
	if _, err := LoadNCCL(); err != nil {
		t.Skipf("no NCCL: %v", err)
	}
	comms, err := NCCLInitAll([]*Device{d})
	if err != nil {
		t.Fatal(err)
	}
	defer comms[0].Destroy()
	const n = 1024
	p, _ := d.MemAlloc(4 * n)
	defer d.MemFree(p)
	src := make([]float32, n)
	for i := range src {
		src[i] = float32(i)
	}
	if err := d.CopyHtoD(p, src); err != nil {
		t.Fatal(err)
	}
	s, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	if err := NCCLGroup(func() error { return comms[0].AllReduceSum(p, p, n, s) }); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(context.Background()); err != nil {
		t.Fatal(err)
	}
	out := make([]float32, n)
	if err := d.CopyDtoH(out, p); err != nil {
		t.Fatal(err)
	}
	for i := range out {
		if out[i] != src[i] {
			t.Fatalf("one-rank all-reduce [%d] = %v, want %v", i, out[i], src[i])
		}
	}
	id, err := NCCLUniqueID()
	if err != nil {
		t.Fatal(err)
	}
	c, err := NCCLInitRank(d, 1, 0, id)
	if err != nil {
		t.Fatalf("NCCLInitRank: %v", err)
	}
	c.Destroy()
}
