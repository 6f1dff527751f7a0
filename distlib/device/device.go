// Package device describes the machine's physical devices and the logical devices that ops
// run on, in the manner of TensorFlow's tf.config: listing devices, splitting a CPU into
// several logical devices, visibility, memory settings, device scopes with soft placement,
// and placement logging.
//
// Logical CPU devices. A process starts with one physical CPU, "/physical_device:CPU:0",
// and one logical CPU, "/job:localhost/replica:0/task:0/device:CPU:0".
// SetLogicalDeviceConfiguration splits the physical CPU into N logical devices named
// device:CPU:0 ... device:CPU:N-1. An op placed on a logical CPU device runs in the calling
// goroutine; the parallelism of a multi-device strategy comes from running one goroutine per
// replica. Each logical CPU device gets an equal share of the cores: kernels on it use at most
// Threads(device) = max(1, NumCPU/N) goroutines.
//
// Initialization. As in TensorFlow, devices are initialized the first time they are named:
// by ListLogicalDevices, by resolving a device name (With, Resolve, a strategy picking its
// devices) or by Initialize. Ops on the default device (CPU:0, which always exists) do not
// initialize them, so a notebook may compute before it configures devices. After that
// SetLogicalDeviceConfiguration and SetVisibleDevices fail with ErrInitialized ("virtual
// devices cannot be modified after being initialized"), except when the new setting equals
// the current one (so that re-running a notebook cell is harmless). Reset returns the
// package to its start state for tests and notebooks that want to reconfigure.
//
// GPUs. A GPU backend (package gpu) calls RegisterProvider from its init; the device layer
// calls the provider's Probe the first time physical devices are consulted (after each
// Reset), and the GPUs it found are registered like Register does. A program without the
// backend imported, or a machine without a GPU, has only CPUs.
package device

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Device types.
const (
	CPU = "CPU"
	GPU = "GPU"
)

// Errors callers can test with errors.Is.
var (
	// ErrInitialized reports a configuration change after the devices were initialized.
	ErrInitialized = errors.New("device: virtual devices cannot be modified after being initialized")
	// ErrNotFound reports a device name that names no available device.
	ErrNotFound = errors.New("device: no such device")
	// ErrUnsupported reports a setting the device type does not support.
	ErrUnsupported = errors.New("device: unsupported setting")
	// ErrInvalid reports a malformed device name or argument.
	ErrInvalid = errors.New("device: invalid argument")
)

// PhysicalDevice is a device of the machine, like tf.config.PhysicalDevice.
type PhysicalDevice struct {
	Name       string // "/physical_device:CPU:0"
	DeviceType string // "CPU" or "GPU"
}

// String returns the form TensorFlow prints.
func (d PhysicalDevice) String() string {
	return fmt.Sprintf("PhysicalDevice(name='%s', device_type='%s')", d.Name, d.DeviceType)
}

// LogicalDevice is a device ops are placed on, like tf.config.LogicalDevice.
type LogicalDevice struct {
	Name       string // "/job:localhost/replica:0/task:0/device:CPU:0"
	DeviceType string
}

// String returns the form TensorFlow prints.
func (d LogicalDevice) String() string {
	return fmt.Sprintf("LogicalDevice(name='%s', device_type='%s')", d.Name, d.DeviceType)
}

// LogicalDeviceConfiguration configures one logical device carved out of a physical device.
// MemoryLimit is in MiB and only allowed on GPUs; use 0 (or leave it out) on a CPU.
type LogicalDeviceConfiguration struct {
	MemoryLimit int
}

// Kernels is what a backend offers to run ops on its devices. The tensor package asks the
// backend of a tensor's device for kernels; a backend without one (Kernels returns nil) has
// its ops run by the CPU kernels.
type Kernels interface {
	// Sgemm computes c = alpha*op(a)*op(b) + beta*c for row-major float32 matrices, with
	// op(a) m x k and op(b) k x n, on the backend's device with the given ordinal.
	Sgemm(ordinal int, transA, transB bool, m, n, k int, alpha float32, a []float32, lda int,
		b []float32, ldb int, beta float32, c []float32, ldc int) error
}

// Backend is an accelerator backend (such as CUDA) that provides devices of one type.
type Backend interface {
	// Name names the backend, such as "cuda".
	Name() string
	// DeviceType is the type of its devices, such as "GPU".
	DeviceType() string
	// NumDevices is the number of physical devices it found.
	NumDevices() int
	// Kernels returns the backend's kernels, or nil when ops run on the CPU kernels.
	Kernels() Kernels
}

// DeviceError is the error of a device specification that cannot be satisfied.
type DeviceError struct {
	Spec      string   // the name as given
	Available []string // the logical devices that exist
	Reason    string
}

// Error formats the error the way TensorFlow words it, with what to do.
func (e *DeviceError) Error() string {
	return fmt.Sprintf("device: could not satisfy device specification '%s': %s; available devices: [%s]; "+
		"use one of them, or turn soft placement on with device.SetSoftDevicePlacement(true)",
		e.Spec, e.Reason, strings.Join(e.Available, ", "))
}

// Unwrap makes errors.Is(err, ErrNotFound) hold.
func (e *DeviceError) Unwrap() error { return ErrNotFound }

// LocalPrefix is the prefix of every logical device name in this process.
const LocalPrefix = "/job:localhost/replica:0/task:0/device:"

type physical struct {
	dev       PhysicalDevice
	backend   Backend
	ordinal   int
	visible   bool
	growth    bool
	logical   []LogicalDeviceConfiguration // nil: one logical device
	logicalOf []string                     // its logical device names once initialized
}

type registry struct {
	mu          sync.Mutex
	phys        []*physical
	initialized bool
	logical     []LogicalDevice
	backends    map[string]Backend // by device type
	probed      bool               // the providers were asked since the last Reset
	cpuThreads  int
}

var (
	reg           = newRegistry()
	softPlacement atomic.Bool
	logPlacement  atomic.Bool
	logOut        atomic.Pointer[io.Writer]
	numCPU        = runtime.NumCPU()
)

func init() { softPlacement.Store(true) }

func newRegistry() *registry {
	r := &registry{backends: map[string]Backend{}}
	r.phys = []*physical{{dev: PhysicalDevice{Name: "/physical_device:CPU:0", DeviceType: CPU}, visible: true}}
	return r
}

// Reset returns the package to its start state: one physical CPU, no GPU backends, devices
// not initialized, soft placement on, placement logging off and device scopes cleared. It is
// meant for tests and for notebooks that want to reconfigure devices; tensors made before
// keep their device names.
func Reset() {
	reg.mu.Lock()
	reg.phys = newRegistry().phys
	reg.backends = map[string]Backend{}
	reg.initialized = false
	reg.probed = false
	reg.logical = nil
	reg.mu.Unlock()
	softPlacement.Store(true)
	logPlacement.Store(false)
	logOut.Store(nil)
	scopes.reset()
	resetThreading()
}

// ResetForTesting is Reset; the name says what it is for.
func ResetForTesting() { Reset() }

// Register adds a backend's physical devices ("/physical_device:GPU:0", ...). It must be
// called before the devices are initialized (normally from the backend package's init).
func Register(b Backend) error {
	if b == nil {
		return fmt.Errorf("%w: Register of a nil backend", ErrInvalid)
	}
	typ := strings.ToUpper(b.DeviceType())
	if typ == "" || typ == CPU {
		return fmt.Errorf("%w: backend %q has device type %q; backends provide accelerators such as GPU", ErrInvalid, b.Name(), b.DeviceType())
	}
	reg.mu.Lock()
	defer reg.mu.Unlock()
	reg.probeLocked()
	return reg.registerLocked(b, typ)
}

func (r *registry) registerLocked(b Backend, typ string) error {
	reg := r
	if reg.initialized {
		return fmt.Errorf("register backend %q: %w; call device.Reset first", b.Name(), ErrInitialized)
	}
	if _, dup := reg.backends[typ]; dup {
		return fmt.Errorf("%w: a backend for %s devices is already registered", ErrInvalid, typ)
	}
	reg.backends[typ] = b
	for i := 0; i < b.NumDevices(); i++ {
		reg.phys = append(reg.phys, &physical{
			dev:     PhysicalDevice{Name: fmt.Sprintf("/physical_device:%s:%d", typ, i), DeviceType: typ},
			backend: b, ordinal: i, visible: true,
		})
	}
	return nil
}

// Provider is a backend that may or may not find devices on a machine, such as package
// gpu's CUDA backend.
type Provider interface {
	// Name names the provider, such as "cuda".
	Name() string
	// Probe looks for devices once; it returns nil when there are none.
	Probe() Backend
	// Status says in one line what the provider found, or what it looked for.
	Status() string
}

var (
	providersMu sync.Mutex
	providers   []Provider
)

// RegisterProvider registers a backend provider, which stays registered across Reset. The
// device layer calls its Probe at most once after each Reset, the first time physical
// devices are consulted (listing, configuring, initializing, placing), with its own lock
// held: Probe must not call this package. A nil Backend, or one with no devices, registers
// nothing.
func RegisterProvider(p Provider) {
	providersMu.Lock()
	providers = append(providers, p)
	providersMu.Unlock()
}

// ProviderStatus returns each registered provider's status line ("gpu: no GPU: ...",
// "gpu: 2 GPU(s): ..."), in registration order; it is empty when no backend is built in.
func ProviderStatus() []string {
	providersMu.Lock()
	ps := append([]Provider(nil), providers...)
	providersMu.Unlock()
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Status()
	}
	return out
}

// probeLocked asks the providers for their backends once.
func (r *registry) probeLocked() {
	if r.probed {
		return
	}
	r.probed = true
	providersMu.Lock()
	ps := append([]Provider(nil), providers...)
	providersMu.Unlock()
	for _, p := range ps {
		b := p.Probe()
		if b == nil || b.NumDevices() == 0 {
			continue
		}
		if err := r.registerLocked(b, strings.ToUpper(b.DeviceType())); err != nil {
			fmt.Fprintf(logWriter(), "device: backend provider %s: %v\n", p.Name(), err)
		}
	}
}

// LogicalPlacement says where a logical device lives and how it is configured.
type LogicalPlacement struct {
	Logical      string         // the canonical logical name
	Physical     PhysicalDevice // the physical device it is carved from
	Backend      Backend        // nil for CPUs
	Ordinal      int            // the physical device's ordinal among its type
	Index        int            // its index among the physical device's logical devices
	Count        int            // how many logical devices the physical device has
	MemoryLimit  int            // MiB; 0 when none was configured
	MemoryGrowth bool
}

// PlacementOf returns the LogicalPlacement of a logical device ("/GPU:1", a full name, ...),
// initializing the devices. A backend uses it to find a logical GPU's memory limit.
func PlacementOf(spec string) (LogicalPlacement, error) {
	typ, idx, err := Canonical(spec)
	if err != nil {
		return LogicalPlacement{}, err
	}
	if idx < 0 {
		typ, idx = CPU, 0
	}
	name := fmt.Sprintf("%s%s:%d", LocalPrefix, typ, idx)
	reg.mu.Lock()
	defer reg.mu.Unlock()
	reg.initLocked()
	for _, p := range reg.phys {
		for i, l := range p.logicalOf {
			if l != name {
				continue
			}
			pl := LogicalPlacement{Logical: name, Physical: p.dev, Backend: p.backend, Ordinal: p.ordinal, Index: i,
				Count: len(p.logicalOf), MemoryGrowth: p.growth}
			if i < len(p.logical) {
				pl.MemoryLimit = p.logical[i].MemoryLimit
			}
			return pl, nil
		}
	}
	avail := make([]string, len(reg.logical))
	for i, d := range reg.logical {
		avail[i] = d.Name
	}
	return LogicalPlacement{}, &DeviceError{Spec: spec, Available: avail, Reason: "no such logical device"}
}

// BackendFor returns the backend of a logical device's type and its ordinal among that
// type's physical devices, or nil for CPU devices.
func BackendFor(logicalName string) (Backend, int) {
	typ, idx, ok := parseLocal(logicalName)
	if !ok || typ == CPU {
		return nil, 0
	}
	reg.mu.Lock()
	defer reg.mu.Unlock()
	reg.probeLocked()
	b := reg.backends[typ]
	if b == nil {
		return nil, 0
	}
	// Logical devices of one type are numbered over its visible physical devices in order.
	n := 0
	for _, p := range reg.phys {
		if p.dev.DeviceType != typ || !p.visible {
			continue
		}
		cnt := len(p.logical)
		if cnt == 0 {
			cnt = 1
		}
		if idx < n+cnt {
			return b, p.ordinal
		}
		n += cnt
	}
	return b, 0
}

// ListPhysicalDevices returns the physical devices of the given type ("CPU", "GPU"), or all
// of them when kind is "".
func ListPhysicalDevices(kind string) []PhysicalDevice {
	kind = strings.ToUpper(kind)
	reg.mu.Lock()
	defer reg.mu.Unlock()
	reg.probeLocked()
	var out []PhysicalDevice
	for _, p := range reg.phys {
		if kind == "" || p.dev.DeviceType == kind {
			out = append(out, p.dev)
		}
	}
	return out
}

func (r *registry) find(pd PhysicalDevice) (*physical, error) {
	r.probeLocked()
	for _, p := range r.phys {
		if p.dev.Name == pd.Name {
			return p, nil
		}
	}
	names := make([]string, len(r.phys))
	for i, p := range r.phys {
		names[i] = p.dev.Name
	}
	return nil, fmt.Errorf("%w: physical device %q is not one of [%s]; take one from device.ListPhysicalDevices", ErrNotFound, pd.Name, strings.Join(names, ", "))
}

// SetLogicalDeviceConfiguration splits a physical device into len(configs) logical devices,
// like tf.config.set_logical_device_configuration. On a CPU every MemoryLimit must be 0.
// It fails with ErrInitialized once devices are in use, unless the configuration is the
// current one.
func SetLogicalDeviceConfiguration(pd PhysicalDevice, configs []LogicalDeviceConfiguration) error {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	p, err := reg.find(pd)
	if err != nil {
		return err
	}
	if len(configs) == 0 {
		return fmt.Errorf("%w: SetLogicalDeviceConfiguration of %s needs at least one LogicalDeviceConfiguration", ErrInvalid, pd.Name)
	}
	for i, c := range configs {
		if c.MemoryLimit < 0 {
			return fmt.Errorf("%w: configuration %d of %s has a negative MemoryLimit %d", ErrInvalid, i, pd.Name, c.MemoryLimit)
		}
		if p.dev.DeviceType == CPU && c.MemoryLimit != 0 {
			return fmt.Errorf("%w: setting a memory limit on CPU virtual devices is not supported "+
				"(configuration %d of %s has MemoryLimit %d); use LogicalDeviceConfiguration{} for CPUs, memory limits are for GPUs",
				ErrUnsupported, i, pd.Name, c.MemoryLimit)
		}
	}
	if reg.initialized {
		if equalConfigs(p.logical, configs) {
			return nil
		}
		return fmt.Errorf("set logical devices of %s: %w (devices were initialized by a device listing, scope or op); "+
			"configure devices first thing, or call device.Reset() to start over", pd.Name, ErrInitialized)
	}
	p.logical = append([]LogicalDeviceConfiguration(nil), configs...)
	return nil
}

func equalConfigs(a, b []LogicalDeviceConfiguration) bool {
	if len(a) == 0 && len(b) == 1 && b[0].MemoryLimit == 0 {
		return true
	}
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// GetLogicalDeviceConfiguration returns the logical configuration of a physical device, nil
// when it has the default single logical device.
func GetLogicalDeviceConfiguration(pd PhysicalDevice) ([]LogicalDeviceConfiguration, error) {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	p, err := reg.find(pd)
	if err != nil {
		return nil, err
	}
	return append([]LogicalDeviceConfiguration(nil), p.logical...), nil
}

// SetVisibleDevices makes only the given physical devices of a type visible (like
// tf.config.set_visible_devices); kind "" means the types of the given devices. The CPU
// cannot be hidden. It fails with ErrInitialized once devices are in use, unless nothing
// changes.
func SetVisibleDevices(devices []PhysicalDevice, kind string) error {
	kind = strings.ToUpper(kind)
	reg.mu.Lock()
	defer reg.mu.Unlock()
	want := map[string]bool{}
	for _, d := range devices {
		p, err := reg.find(d)
		if err != nil {
			return err
		}
		if kind != "" && p.dev.DeviceType != kind {
			return fmt.Errorf("%w: SetVisibleDevices of type %s was given %s", ErrInvalid, kind, d.Name)
		}
		want[d.Name] = true
	}
	types := map[string]bool{}
	if kind != "" {
		types[kind] = true
	} else {
		for _, d := range devices {
			types[d.DeviceType] = true
		}
	}
	if types[CPU] && !want["/physical_device:CPU:0"] {
		return fmt.Errorf("%w: the CPU cannot be hidden: SetVisibleDevices must keep /physical_device:CPU:0", ErrUnsupported)
	}
	changed := false
	for _, p := range reg.phys {
		if types[p.dev.DeviceType] && p.visible != want[p.dev.Name] {
			changed = true
		}
	}
	if !changed {
		return nil
	}
	if reg.initialized {
		return fmt.Errorf("set visible devices: %w; call it before anything uses a device, or call device.Reset() to start over", ErrInitialized)
	}
	for _, p := range reg.phys {
		if types[p.dev.DeviceType] {
			p.visible = want[p.dev.Name]
		}
	}
	return nil
}

// GetVisibleDevices returns the visible physical devices of a type ("" for all).
func GetVisibleDevices(kind string) []PhysicalDevice {
	kind = strings.ToUpper(kind)
	reg.mu.Lock()
	defer reg.mu.Unlock()
	reg.probeLocked()
	var out []PhysicalDevice
	for _, p := range reg.phys {
		if p.visible && (kind == "" || p.dev.DeviceType == kind) {
			out = append(out, p.dev)
		}
	}
	return out
}

// SetMemoryGrowth turns on or off memory growth of a GPU (tf.config.experimental.set_memory_growth).
// A CPU has no device memory to grow, so it is refused with ErrUnsupported.
func SetMemoryGrowth(pd PhysicalDevice, enable bool) error {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	p, err := reg.find(pd)
	if err != nil {
		return err
	}
	if p.dev.DeviceType == CPU {
		return fmt.Errorf("%w: memory growth is only supported on GPUs; %s is a CPU "+
			"(apply it to the devices of device.ListPhysicalDevices(\"GPU\"), which is empty without a GPU backend)",
			ErrUnsupported, pd.Name)
	}
	if reg.initialized && p.growth != enable {
		return fmt.Errorf("set memory growth of %s: %w; call device.Reset() to start over", pd.Name, ErrInitialized)
	}
	p.growth = enable
	return nil
}

// GetMemoryGrowth reports whether memory growth is on for a GPU.
func GetMemoryGrowth(pd PhysicalDevice) (bool, error) {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	p, err := reg.find(pd)
	if err != nil {
		return false, err
	}
	if p.dev.DeviceType == CPU {
		return false, fmt.Errorf("%w: memory growth is only supported on GPUs; %s is a CPU", ErrUnsupported, pd.Name)
	}
	return p.growth, nil
}

// initLocked builds the logical devices from the configuration, once.
func (r *registry) initLocked() {
	if r.initialized {
		return
	}
	r.probeLocked()
	r.initialized = true
	r.logical = nil
	count := map[string]int{}
	for _, p := range r.phys {
		p.logicalOf = nil
		if !p.visible {
			continue
		}
		n := len(p.logical)
		if n == 0 {
			n = 1
		}
		for i := 0; i < n; i++ {
			name := fmt.Sprintf("%s%s:%d", LocalPrefix, p.dev.DeviceType, count[p.dev.DeviceType])
			count[p.dev.DeviceType]++
			r.logical = append(r.logical, LogicalDevice{Name: name, DeviceType: p.dev.DeviceType})
			p.logicalOf = append(p.logicalOf, name)
		}
	}
	r.cpuThreads = numCPU / max(1, count[CPU])
	if r.cpuThreads < 1 {
		r.cpuThreads = 1
	}
}

// Initialize initializes the devices now; later configuration changes fail. Listing logical
// devices, a device scope and the first op do it implicitly.
func Initialize() {
	reg.mu.Lock()
	reg.initLocked()
	reg.mu.Unlock()
}

// IsInitialized reports whether the logical devices have been created.
func IsInitialized() bool {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	return reg.initialized
}

// ListLogicalDevices returns the logical devices of a type ("" for all), initializing the
// devices.
func ListLogicalDevices(kind string) []LogicalDevice {
	kind = strings.ToUpper(kind)
	reg.mu.Lock()
	defer reg.mu.Unlock()
	reg.initLocked()
	var out []LogicalDevice
	for _, d := range reg.logical {
		if kind == "" || d.DeviceType == kind {
			out = append(out, d)
		}
	}
	return out
}

// Default returns the full name of the default device, the first logical CPU.
func Default() string { return LocalPrefix + "CPU:0" }

// Threads returns how many goroutines a kernel on the named logical device may use: for a
// CPU device, its share of the cores (NumCPU divided by the number of logical CPUs, at
// least 1), at most SetIntraOpParallelismThreads' setting when there is one.
func Threads(name string) int {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	if reg.initialized {
		return capIntraOp(reg.cpuThreads)
	}
	n := 0
	for _, p := range reg.phys {
		if p.dev.DeviceType == CPU && p.visible {
			n += max(1, len(p.logical))
		}
	}
	return capIntraOp(max(1, numCPU/max(1, n)))
}

// parseLocal splits a canonical local name into type and index.
func parseLocal(name string) (string, int, bool) {
	if !strings.HasPrefix(name, LocalPrefix) {
		return "", 0, false
	}
	rest := name[len(LocalPrefix):]
	i := strings.LastIndexByte(rest, ':')
	if i <= 0 {
		return "", 0, false
	}
	n, err := strconv.Atoi(rest[i+1:])
	if err != nil || n < 0 {
		return "", 0, false
	}
	return rest[:i], n, true
}

// Canonical parses a device specification ("/CPU:0", "CPU:1", "cpu:1", "/device:CPU:1",
// "/job:localhost/replica:0/task:0/device:CPU:1", "/physical_device:CPU:0" or "") into
// the device type and index. An empty specification gives ("", -1).
func Canonical(spec string) (kind string, index int, err error) {
	s := strings.TrimSpace(spec)
	if s == "" {
		return "", -1, nil
	}
	// Drop the job/replica/task parts.
	parts := strings.Split(strings.TrimPrefix(s, "/"), "/")
	last := parts[len(parts)-1]
	for _, p := range parts[:len(parts)-1] {
		k, v, ok := strings.Cut(p, ":")
		if !ok {
			return "", 0, fmt.Errorf("%w: device specification %q: part %q is not key:value", ErrInvalid, spec, p)
		}
		switch k {
		case "job":
			if v != "localhost" && v != "" {
				return "", 0, fmt.Errorf("%w: device specification %q names job %q; only local devices (job:localhost) run ops in this process", ErrNotFound, spec, v)
			}
		case "replica", "task":
			if v != "0" {
				return "", 0, fmt.Errorf("%w: device specification %q names %s %s; only %s 0 is local", ErrNotFound, spec, k, v, k)
			}
		default:
			return "", 0, fmt.Errorf("%w: device specification %q: unknown part %q", ErrInvalid, spec, p)
		}
	}
	last = strings.TrimPrefix(last, "device:")
	last = strings.TrimPrefix(last, "physical_device:")
	typ, idx, ok := strings.Cut(last, ":")
	typ = strings.ToUpper(typ)
	if typ == "" {
		return "", 0, fmt.Errorf("%w: device specification %q has no device type; write e.g. \"/CPU:0\"", ErrInvalid, spec)
	}
	if !ok || idx == "*" {
		return typ, 0, nil
	}
	n, err := strconv.Atoi(idx)
	if err != nil || n < 0 {
		return "", 0, fmt.Errorf("%w: device specification %q has index %q; want a number such as \"/CPU:0\"", ErrInvalid, spec, idx)
	}
	return typ, n, nil
}

// Resolve returns the full logical name of a device specification, initializing the
// devices. A specification naming no device fails with a *DeviceError when soft placement
// is off; with soft placement on it falls back to a device of the same type (index 0) or to
// the default CPU, and the fallback is logged to the placement log output.
func Resolve(spec string) (string, error) {
	typ, idx, err := Canonical(spec)
	if err != nil {
		return "", err
	}
	if idx < 0 {
		return Default(), nil
	}
	reg.mu.Lock()
	reg.initLocked()
	want := fmt.Sprintf("%s%s:%d", LocalPrefix, typ, idx)
	var names []string
	found, sameType := false, ""
	for _, d := range reg.logical {
		names = append(names, d.Name)
		if d.Name == want {
			found = true
		}
		if d.DeviceType == typ && sameType == "" {
			sameType = d.Name
		}
	}
	reg.mu.Unlock()
	if found {
		return want, nil
	}
	reason := fmt.Sprintf("no %s device with index %d", typ, idx)
	if sameType == "" {
		reason = fmt.Sprintf("no %s devices are available in this process", typ)
	}
	if !softPlacement.Load() {
		return "", &DeviceError{Spec: spec, Available: names, Reason: reason}
	}
	fallback := sameType
	if fallback == "" {
		fallback = Default()
	}
	fmt.Fprintf(stderrOut(), "device: %s (%s); soft placement puts it on %s\n", spec, reason, fallback)
	return fallback, nil
}

// MustResolve is Resolve that panics with the error.
func MustResolve(spec string) string {
	n, err := Resolve(spec)
	if err != nil {
		panic(err)
	}
	return n
}

// SetSoftDevicePlacement turns soft placement on (the default, as in TensorFlow's eager mode)
// or off. With it off, a scope naming a missing device fails.
func SetSoftDevicePlacement(on bool) { softPlacement.Store(on) }

// SoftDevicePlacement reports whether soft placement is on.
func SoftDevicePlacement() bool { return softPlacement.Load() }

// SetLogDevicePlacement turns placement logging on or off (tf.debugging.set_log_device_placement):
// when on, every op execution prints one line such as
// "Executing op MatMul in device /job:localhost/replica:0/task:0/device:CPU:0".
func SetLogDevicePlacement(on bool) { logPlacement.Store(on) }

// LogDevicePlacement reports whether placement logging is on.
func LogDevicePlacement() bool { return logPlacement.Load() }

// SetLogOutput sends placement log lines to w instead of os.Stdout (nil restores os.Stdout).
func SetLogOutput(w io.Writer) {
	if w == nil {
		logOut.Store(nil)
		return
	}
	logOut.Store(&w)
}

func logWriter() io.Writer {
	if p := logOut.Load(); p != nil {
		return *p
	}
	return os.Stdout // read at each call: the notebook may swap os.Stdout per cell
}

func stderrOut() io.Writer {
	if p := logOut.Load(); p != nil {
		return *p
	}
	return os.Stderr
}

// LogOp prints the placement line of an op execution when placement logging is on.
func LogOp(op, deviceName string) {
	if !logPlacement.Load() {
		return
	}
	if deviceName == "" {
		deviceName = Default()
	}
	fmt.Fprintf(logWriter(), "Executing op %s in device %s\n", op, deviceName)
}
