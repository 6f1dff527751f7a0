package device

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

type fakeGPU struct{ n int }

func (f fakeGPU) Name() string       { return "fake" }
func (f fakeGPU) DeviceType() string { return "GPU" }
func (f fakeGPU) NumDevices() int    { return f.n }
func (f fakeGPU) Kernels() Kernels   { return nil }

func TestPhysicalAndLogical(t *testing.T) {
	Reset()
	defer Reset()
	cpus := ListPhysicalDevices("CPU")
	if len(cpus) != 1 || cpus[0].Name != "/physical_device:CPU:0" || cpus[0].DeviceType != "CPU" {
		t.Fatalf("ListPhysicalDevices(CPU) = %v", cpus)
	}
	if g := ListPhysicalDevices("GPU"); len(g) != 0 {
		t.Errorf("ListPhysicalDevices(GPU) = %v, want none", g)
	}
	if err := SetLogicalDeviceConfiguration(cpus[0], []LogicalDeviceConfiguration{{}, {}, {}}); err != nil {
		t.Fatal(err)
	}
	ls := ListLogicalDevices("CPU")
	want := []string{LocalPrefix + "CPU:0", LocalPrefix + "CPU:1", LocalPrefix + "CPU:2"}
	if len(ls) != 3 {
		t.Fatalf("ListLogicalDevices = %v, want %v", ls, want)
	}
	for i, d := range ls {
		if d.Name != want[i] {
			t.Errorf("logical device %d = %q, want %q", i, d.Name, want[i])
		}
	}
	if got, wantT := Threads(ls[1].Name), max(1, runtime.NumCPU()/3); got != wantT {
		t.Errorf("Threads = %d, want %d", got, wantT)
	}
	// Re-running the same configuration is harmless; a different one is refused.
	if err := SetLogicalDeviceConfiguration(cpus[0], []LogicalDeviceConfiguration{{}, {}, {}}); err != nil {
		t.Errorf("same configuration after init: %v", err)
	}
	err := SetLogicalDeviceConfiguration(cpus[0], []LogicalDeviceConfiguration{{}, {}})
	if !errors.Is(err, ErrInitialized) || !strings.Contains(err.Error(), "cannot be modified after being initialized") {
		t.Errorf("reconfiguration after init: %v, want ErrInitialized", err)
	}
	Reset()
	if err := SetLogicalDeviceConfiguration(cpus[0], []LogicalDeviceConfiguration{{}, {}}); err != nil {
		t.Errorf("reconfiguration after Reset: %v", err)
	}
	if n := len(ListLogicalDevices("")); n != 2 {
		t.Errorf("after Reset and 2 devices: %d logical devices", n)
	}
}

func TestCPUSettingsRefused(t *testing.T) {
	Reset()
	defer Reset()
	cpu := ListPhysicalDevices("CPU")[0]
	err := SetMemoryGrowth(cpu, true)
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "memory growth is only supported on GPUs; /physical_device:CPU:0 is a CPU") {
		t.Errorf("SetMemoryGrowth(CPU) = %v", err)
	}
	err = SetLogicalDeviceConfiguration(cpu, []LogicalDeviceConfiguration{{MemoryLimit: 1024}})
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "memory limit") {
		t.Errorf("memory limit on CPU = %v", err)
	}
	if err := SetLogicalDeviceConfiguration(PhysicalDevice{Name: "/physical_device:TPU:0"}, []LogicalDeviceConfiguration{{}}); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown physical device = %v, want ErrNotFound", err)
	}
	if err := SetVisibleDevices(nil, "CPU"); !errors.Is(err, ErrUnsupported) {
		t.Errorf("hiding the CPU = %v, want ErrUnsupported", err)
	}
}

func TestBackendRegistration(t *testing.T) {
	Reset()
	defer Reset()
	if err := Register(fakeGPU{n: 2}); err != nil {
		t.Fatal(err)
	}
	gpus := ListPhysicalDevices("GPU")
	if len(gpus) != 2 || gpus[1].Name != "/physical_device:GPU:1" {
		t.Fatalf("GPUs = %v", gpus)
	}
	if err := SetMemoryGrowth(gpus[0], true); err != nil {
		t.Errorf("SetMemoryGrowth(GPU) = %v", err)
	}
	if err := SetLogicalDeviceConfiguration(gpus[1], []LogicalDeviceConfiguration{{MemoryLimit: 1024}, {MemoryLimit: 1024}}); err != nil {
		t.Fatal(err)
	}
	if err := SetVisibleDevices(gpus[1:], "GPU"); err != nil {
		t.Fatal(err)
	}
	ls := ListLogicalDevices("GPU")
	if len(ls) != 2 || ls[1].Name != LocalPrefix+"GPU:1" {
		t.Fatalf("logical GPUs = %v", ls)
	}
	if b, ord := BackendFor(ls[1].Name); b == nil || ord != 1 {
		t.Errorf("BackendFor(%s) = %v, %d; want the fake backend, ordinal 1", ls[1].Name, b, ord)
	}
	if err := Register(fakeGPU{n: 1}); !errors.Is(err, ErrInitialized) {
		t.Errorf("Register after init = %v, want ErrInitialized", err)
	}
}

func TestResolveAndSoftPlacement(t *testing.T) {
	Reset()
	defer Reset()
	tests := []struct{ spec, want string }{
		{"/CPU:0", LocalPrefix + "CPU:0"},
		{"CPU:0", LocalPrefix + "CPU:0"},
		{"cpu:0", LocalPrefix + "CPU:0"},
		{"/device:CPU:0", LocalPrefix + "CPU:0"},
		{LocalPrefix + "CPU:0", LocalPrefix + "CPU:0"},
		{"", LocalPrefix + "CPU:0"},
	}
	for _, tc := range tests {
		if got, err := Resolve(tc.spec); err != nil || got != tc.want {
			t.Errorf("Resolve(%q) = %q, %v; want %q", tc.spec, got, err, tc.want)
		}
	}
	var buf bytes.Buffer
	SetLogOutput(&buf)
	got, err := Resolve("/GPU:3")
	if err != nil || got != LocalPrefix+"CPU:0" || !strings.Contains(buf.String(), "soft placement") {
		t.Errorf("soft Resolve(/GPU:3) = %q, %v, log %q", got, err, buf.String())
	}
	SetSoftDevicePlacement(false)
	_, err = Resolve("/GPU:3")
	var de *DeviceError
	if !errors.As(err, &de) || !errors.Is(err, ErrNotFound) ||
		!strings.Contains(err.Error(), "could not satisfy device specification '/GPU:3'") ||
		!strings.Contains(err.Error(), "available devices: ["+LocalPrefix+"CPU:0]") {
		t.Errorf("hard Resolve(/GPU:3) = %v", err)
	}
	if _, err := Resolve("/CPU:x"); !errors.Is(err, ErrInvalid) {
		t.Errorf("Resolve(/CPU:x) = %v, want ErrInvalid", err)
	}
	if _, err := Resolve("/job:worker/replica:0/task:1/device:CPU:0"); !errors.Is(err, ErrNotFound) {
		t.Errorf("remote device = %v, want ErrNotFound", err)
	}
	func() {
		defer func() {
			if r := recover(); r == nil {
				t.Errorf("With(/GPU:0) without soft placement did not panic")
			}
			if Current() != "" {
				t.Errorf("scope left open after a panic: %q", Current())
			}
		}()
		With("/GPU:0", func() {})
	}()
}

func TestScopesPerGoroutine(t *testing.T) {
	Reset()
	defer Reset()
	cpu := ListPhysicalDevices("CPU")[0]
	if err := SetLogicalDeviceConfiguration(cpu, []LogicalDeviceConfiguration{{}, {}}); err != nil {
		t.Fatal(err)
	}
	start := runtime.NumGoroutine()
	var wg sync.WaitGroup
	errs := make(chan string, 2)
	barrier := make(chan struct{})
	for i, name := range []string{"/CPU:0", "/CPU:1"} {
		wg.Add(1)
		go func(i int, name string) {
			defer wg.Done()
			With(name, func() {
				<-barrier // both scopes open at once
				want := LocalPrefix + "CPU:" + string(rune('0'+i))
				if got := Current(); got != want {
					errs <- "goroutine " + name + " sees " + got
				}
				With("CPU:0", func() {
					if Current() != LocalPrefix+"CPU:0" {
						errs <- "nested scope not innermost"
					}
				})
				if Current() != want {
					errs <- "nested scope not closed"
				}
			})
		}(i, name)
	}
	close(barrier)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("scoped goroutines did not finish")
	}
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if Current() != "" {
		t.Errorf("main goroutine sees scope %q", Current())
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > start && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > start {
		t.Errorf("goroutines leaked: %d before, %d after", start, n)
	}
}

func TestLogOp(t *testing.T) {
	Reset()
	defer Reset()
	var buf bytes.Buffer
	SetLogOutput(&buf)
	LogOp("MatMul", "")
	if buf.Len() != 0 {
		t.Errorf("LogOp with logging off wrote %q", buf.String())
	}
	SetLogDevicePlacement(true)
	LogOp("MatMul", "")
	if want := "Executing op MatMul in device /job:localhost/replica:0/task:0/device:CPU:0\n"; buf.String() != want {
		t.Errorf("LogOp wrote %q, want %q", buf.String(), want)
	}
}

func TestOpsDoNotInitialize(t *testing.T) {
	Reset()
	defer Reset()
	if d := Placement(""); d != Default() {
		t.Errorf("Placement(\"\") = %q", d)
	}
	_ = Threads(Default())
	if IsInitialized() {
		t.Fatal("placing an op on the default device initialized the devices")
	}
	cpu := ListPhysicalDevices("CPU")[0]
	if err := SetLogicalDeviceConfiguration(cpu, []LogicalDeviceConfiguration{{}, {}}); err != nil {
		t.Errorf("configuration after default-device ops: %v", err)
	}
	if got, want := Threads(Default()), max(1, runtime.NumCPU()/2); got != want {
		t.Errorf("Threads before init with 2 logical CPUs = %d, want %d", got, want)
	}
}

func ExampleListLogicalDevices() {
	Reset()
	defer Reset()
	cpu := ListPhysicalDevices("CPU")[0]
	if err := SetLogicalDeviceConfiguration(cpu, []LogicalDeviceConfiguration{{}, {}}); err != nil {
		panic(err)
	}
	for _, d := range ListLogicalDevices("CPU") {
		fmt.Println(d.Name)
	}
	// Output:
	// /job:localhost/replica:0/task:0/device:CPU:0
	// /job:localhost/replica:0/task:0/device:CPU:1
}

func TestProviderAndPlacementOf(t *testing.T) {
	Reset()
	defer Reset()
	saved := providers
	defer func() { providers = saved }()
	probes := 0
	RegisterProvider(fakeProvider{"fake", func() Backend { probes++; return fakeGPU{n: 2} }})
	RegisterProvider(fakeProvider{"empty", func() Backend { return nil }})
	if st := ProviderStatus(); len(st) != 2 || st[0] != "fake: status" || st[1] != "empty: status" {
		t.Fatalf("ProviderStatus() = %q", st)
	}
	if probes != 0 {
		t.Fatalf("probe ran at RegisterProvider")
	}
	gpus := ListPhysicalDevices("GPU")
	if len(gpus) != 2 || probes != 1 {
		t.Fatalf("GPUs = %v after %d probes; want 2 GPUs from one probe", gpus, probes)
	}
	if err := SetLogicalDeviceConfiguration(gpus[0], []LogicalDeviceConfiguration{{MemoryLimit: 512}, {MemoryLimit: 256}}); err != nil {
		t.Fatal(err)
	}
	if err := SetMemoryGrowth(gpus[1], true); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		spec                           string
		ordinal, index, count, limitMB int
		growth                         bool
		wantErr                        bool
	}{
		{spec: "/GPU:0", ordinal: 0, index: 0, count: 2, limitMB: 512},
		{spec: "/device:GPU:1", ordinal: 0, index: 1, count: 2, limitMB: 256},
		{spec: LocalPrefix + "GPU:2", ordinal: 1, index: 0, count: 1, growth: true},
		{spec: "/CPU:0", count: 1},
		{spec: "/GPU:3", wantErr: true},
		{spec: "/TPU:x", wantErr: true},
	}
	for _, tc := range tests {
		pl, err := PlacementOf(tc.spec)
		if tc.wantErr {
			if err == nil {
				t.Errorf("PlacementOf(%q) = %+v, want an error", tc.spec, pl)
			}
			continue
		}
		if err != nil || pl.Ordinal != tc.ordinal || pl.Index != tc.index || pl.Count != tc.count ||
			pl.MemoryLimit != tc.limitMB || pl.MemoryGrowth != tc.growth {
			t.Errorf("PlacementOf(%q) = %+v, %v; want ordinal %d index %d of %d, limit %d, growth %v",
				tc.spec, pl, err, tc.ordinal, tc.index, tc.count, tc.limitMB, tc.growth)
		}
	}
	Reset()
	if n := len(ListPhysicalDevices("GPU")); n != 2 || probes != 2 {
		t.Fatalf("after Reset: %d GPUs, %d probes; want the provider asked again", n, probes)
	}
}

type fakeProvider struct {
	name  string
	probe func() Backend
}

func (f fakeProvider) Name() string   { return f.name }
func (f fakeProvider) Probe() Backend { return f.probe() }
func (f fakeProvider) Status() string { return f.name + ": status" }
