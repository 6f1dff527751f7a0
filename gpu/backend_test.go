package gpu

import (
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"godist/distlib/device"
	"godist/distlib/tensor"
	"godist/gpu/driver"
)

// TestNoGPUIsQuiet runs where there is no CUDA driver: no GPU is listed, nothing is printed,
// and Status and Err say what was looked for.
func TestNoGPUIsQuiet(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stderr
	os.Stderr = w
	device.Reset()
	gpus := device.ListPhysicalDevices("GPU")
	logical := device.ListLogicalDevices("")
	os.Stderr = old
	w.Close()
	printed, _ := io.ReadAll(r)
	device.Reset()
	if Available() {
		t.Skipf("this machine has a GPU (%s); the no-GPU behaviour is tested on machines without one", Status())
	}
	if len(gpus) != 0 {
		t.Errorf("ListPhysicalDevices(GPU) = %v without a GPU", gpus)
	}
	if len(logical) != 1 || logical[0].DeviceType != device.CPU {
		t.Errorf("logical devices = %v, want CPU:0 only", logical)
	}
	if driver.DriverLoaded() {
		// A driver that exists but fails prints one INFO line.
		if lines := strings.Split(strings.TrimSpace(string(printed)), "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], "gpu: INFO:") {
			t.Errorf("stderr = %q, want one INFO line", printed)
		}
	} else if len(printed) != 0 {
		t.Errorf("no driver at all, yet stderr = %q; want silence", printed)
	}
	if !errors.Is(Err(), ErrNoGPU) {
		t.Errorf("Err() = %v, want ErrNoGPU", Err())
	}
	if s := Status(); !strings.HasPrefix(s, "gpu: no GPU: ") || !strings.Contains(s, "libcuda.so.1") || strings.Contains(s, "\n") {
		t.Errorf("Status() = %q, want one line naming libcuda.so.1", s)
	}
	if _, err := PoolFor("/GPU:0"); err == nil {
		t.Errorf("PoolFor(/GPU:0) without a GPU succeeded")
	}
	if len(Devices()) != 0 {
		t.Errorf("Devices() = %v", Devices())
	}
}

func needGPU(t *testing.T) {
	t.Helper()
	if !Available() {
		t.Skipf("no GPU on this machine (this test runs on a GPU machine): %s", Status())
	}
}

func TestGPUDiscoveryAndLogicalGPUs(t *testing.T) {
	needGPU(t)
	device.Reset()
	defer device.Reset()
	t.Log(Status())
	gpus := device.ListPhysicalDevices("GPU")
	if len(gpus) != len(Devices()) || gpus[0].Name != "/physical_device:GPU:0" {
		t.Fatalf("physical GPUs = %v, Devices() = %v", gpus, Devices())
	}
	if err := device.SetLogicalDeviceConfiguration(gpus[0], []device.LogicalDeviceConfiguration{{MemoryLimit: 1024}, {MemoryLimit: 512}}); err != nil {
		t.Fatal(err)
	}
	ls := device.ListLogicalDevices("GPU")
	if len(ls) != len(gpus)+1 || ls[1].Name != device.LocalPrefix+"GPU:1" {
		t.Fatalf("logical GPUs = %v", ls)
	}
	p1, err := PoolFor("/GPU:1")
	if err != nil {
		t.Fatal(err)
	}
	if s := p1.Stats(); s.Limit != 512<<20 || s.Growth {
		t.Fatalf("pool of /GPU:1 = %+v, want a 512 MiB limit without growth", s)
	}
	a, err := p1.Alloc(256 << 20)
	if err != nil {
		t.Fatal(err)
	}
	_, err = p1.Alloc(300 << 20)
	var oom *OOMError
	if !errors.As(err, &oom) || !strings.Contains(err.Error(), "GPU:1") {
		t.Fatalf("over the limit: %v, want an OOMError naming GPU:1", err)
	}
	if err := p1.Free(a); err != nil {
		t.Fatal(err)
	}
}

func TestGPUMatMulMatchesCPU(t *testing.T) {
	needGPU(t)
	device.Reset()
	defer device.Reset()
	rng := rand.New(rand.NewPCG(1, 2))
	randT := func(r, c int) *tensor.Tensor {
		d := make([]float32, r*c)
		for i := range d {
			d[i] = rng.Float32()*2 - 1
		}
		return tensor.MustNew([]int{r, c}, d)
	}
	tests := []struct {
		m, k, n        int
		transA, transB bool
	}{{64, 32, 48, false, false}, {33, 65, 17, true, false}, {7, 5, 129, false, true}, {128, 256, 64, true, true}}
	for _, tc := range tests {
		ra, ca := tc.m, tc.k
		if tc.transA {
			ra, ca = ca, ra
		}
		rb, cb := tc.k, tc.n
		if tc.transB {
			rb, cb = cb, rb
		}
		a, b := randT(ra, ca), randT(rb, cb)
		want := tensor.MatMul(a, b, tc.transA, tc.transB)
		var got *tensor.Tensor
		device.With("/GPU:0", func() { got = tensor.MatMul(a, b, tc.transA, tc.transB) })
		if !strings.Contains(got.Device(), "GPU:0") {
			t.Fatalf("MatMul under /GPU:0 placed on %s", got.Device())
		}
		for i, w := range want.Data() {
			if math.Abs(float64(got.Data()[i]-w)) > 1e-4*float64(tc.k) {
				t.Fatalf("%+v: [%d] GPU %v, CPU %v", tc, i, got.Data()[i], w)
			}
		}
	}
}
