package gpu

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"godist/distlib/device"
	"godist/gpu/driver"
)

// Who imports gpu. Importing the package registers a device.RegisterProvider probe; nothing
// is loaded until the program first lists, configures or uses devices. cmd/godist imports it
// (the kernel and its workers, so notebook cells see GPUs); distlib itself does not, so
// distlib's tests and CPU-only programs never touch NVIDIA libraries. A Go program using
// distlib outside the kernel imports it for effect: import _ "godist/gpu".
func init() {
	device.RegisterProvider(provider{})
}

// provider is the CUDA backend's device.Provider.
type provider struct{}

func (provider) Name() string          { return "cuda" }
func (provider) Probe() device.Backend { return probe() }
func (provider) Status() string        { return Status() }

type state struct {
	once    sync.Once
	err     error // why there is no GPU
	devs    []*driver.Device
	backend *backend
}

var st state

// discover opens every GPU once. A driver that exists but fails is reported in one INFO line
// on stderr; a machine without a driver gets no message (Status says what was looked for).
func discover() {
	st.once.Do(func() {
		n, err := driver.DeviceCount()
		if err != nil {
			st.err = err
			if driver.DriverLoaded() {
				fmt.Fprintf(os.Stderr, "gpu: INFO: CUDA driver %s found but not usable, running on CPUs: %v\n", driver.DriverPath(), err)
			}
			return
		}
		for i := 0; i < n; i++ {
			d, err := driver.Open(i)
			if err != nil {
				st.err = fmt.Errorf("gpu: GPU %d: %w", i, err)
				fmt.Fprintf(os.Stderr, "gpu: INFO: GPU %d of %d cannot be opened, using GPUs 0..%d: %v\n", i, n, i-1, err)
				break
			}
			st.devs = append(st.devs, d)
		}
		if len(st.devs) == 0 && st.err == nil {
			st.err = fmt.Errorf("gpu: the CUDA driver %s (version %d) reports no GPU", driver.DriverPath(), driver.DriverVersion())
		}
		st.backend = &backend{pools: map[string]*Pool{}, blas: map[int]*driver.BLAS{}}
	})
}

func probe() device.Backend {
	discover()
	if len(st.devs) == 0 {
		return nil
	}
	return st.backend
}

// ErrNoGPU reports that no GPU can be used; the error wrapping it says what was looked for.
var ErrNoGPU = errors.New("gpu: no GPU available")

// Available reports whether at least one GPU was found.
func Available() bool { discover(); return len(st.devs) > 0 }

// Err returns nil when GPUs were found, else an error wrapping ErrNoGPU that says why: the
// places the CUDA driver was looked for, or what the driver answered.
func Err() error {
	discover()
	if len(st.devs) > 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrNoGPU, st.err)
}

// Devices returns the properties of the GPUs found, by ordinal.
func Devices() []driver.Info {
	discover()
	out := make([]driver.Info, len(st.devs))
	for i, d := range st.devs {
		out[i] = d.Info
	}
	return out
}

// Status says in one line what the backend found: the GPUs with their memory and compute
// capability and the driver, or why there is none: in a few words when no driver file exists
// anywhere (a machine without NVIDIA's driver; Err lists every place looked), else the loader's error.
func Status() string {
	discover()
	if len(st.devs) == 0 {
		var le *driver.LoadError
		if errors.As(st.err, &le) && errors.Is(st.err, driver.ErrNotFound) {
			// No driver file anywhere (a machine without NVIDIA's driver): say so in a few
			// words; Err lists every place looked.
			return fmt.Sprintf("gpu: no GPU: no NVIDIA driver here (%s is neither on the dynamic loader's path nor in %d usual directories); set %s to its file if it is elsewhere",
				le.Lib.Names[0], len(le.Lib.Dirs), le.Lib.Env)
		}
		return "gpu: no GPU: " + strings.TrimPrefix(st.err.Error(), "gpu/driver: ")
	}
	parts := make([]string, len(st.devs))
	for i, d := range st.devs {
		parts[i] = fmt.Sprintf("GPU:%d %s (%.1f GiB, compute capability %d.%d)", i, d.Name, float64(d.TotalMemory)/(1<<30), d.Major, d.Minor)
	}
	return fmt.Sprintf("gpu: %d GPU(s): %s; CUDA driver %d.%d (%s)", len(st.devs), strings.Join(parts, ", "),
		driver.DriverVersion()/1000, driver.DriverVersion()%1000/10, driver.DriverPath())
}

// backend is the device.Backend of the CUDA GPUs.
type backend struct {
	mu    sync.Mutex
	pools map[string]*Pool     // by logical device name
	blas  map[int]*driver.BLAS // by ordinal
}

func (b *backend) Name() string            { return "cuda" }
func (b *backend) DeviceType() string      { return device.GPU }
func (b *backend) NumDevices() int         { return len(st.devs) }
func (b *backend) Kernels() device.Kernels { return kernels{b} }

// devBacking allocates on a GPU.
type devBacking struct{ d *driver.Device }

func (m devBacking) alloc(n uint64) (Addr, error) { p, err := m.d.MemAlloc(n); return Addr(p), err }
func (m devBacking) free(a Addr) error            { return m.d.MemFree(driver.Ptr(a)) }

// reserveFraction is the share of a GPU's free memory a logical GPU without a MemoryLimit
// reserves when memory growth is off (TensorFlow takes nearly all of it too).
const reserveFraction = 0.9

// PoolFor returns the memory pool of a logical GPU ("/GPU:0", ...), made at first use: its
// limit is the logical device's MemoryLimit, or else the GPU's memory (with growth) or 90% of
// its free memory at that moment (without growth, reserved at the first allocation).
func PoolFor(logical string) (*Pool, error) {
	discover()
	pl, err := device.PlacementOf(logical)
	if err != nil {
		return nil, err
	}
	if pl.Physical.DeviceType != device.GPU || pl.Backend != device.Backend(st.backend) || st.backend == nil {
		return nil, fmt.Errorf("gpu: %s is not a GPU of the CUDA backend; name one of device.ListLogicalDevices(\"GPU\")", logical)
	}
	b := st.backend
	b.mu.Lock()
	defer b.mu.Unlock()
	if p := b.pools[pl.Logical]; p != nil {
		return p, nil
	}
	d := st.devs[pl.Ordinal]
	limit := uint64(pl.MemoryLimit) << 20
	if limit == 0 {
		if pl.MemoryGrowth {
			limit = d.TotalMemory
		} else {
			free, _, err := d.MemInfo()
			if err != nil {
				return nil, err
			}
			limit = uint64(float64(free)*reserveFraction) / uint64(max(1, pl.Count)) &^ (largeRound - 1)
		}
	}
	p := newPool(pl.Logical+" ("+d.Name+")", devBacking{d}, limit, pl.MemoryGrowth)
	b.pools[pl.Logical] = p
	return p, nil
}

// kernels runs device.Kernels on the GPUs.
type kernels struct{ b *backend }

func (k kernels) handle(ord int) (*driver.BLAS, error) {
	k.b.mu.Lock()
	defer k.b.mu.Unlock()
	if h := k.b.blas[ord]; h != nil {
		return h, nil
	}
	h, err := st.devs[ord].NewBLAS()
	if err != nil {
		return nil, err
	}
	k.b.blas[ord] = h
	return h, nil
}

// firstLogical names the first logical device of a physical GPU: device.Kernels passes
// only the physical ordinal, so matmul's buffers come from that logical GPU's pool.
func firstLogical(ord int) string {
	for _, l := range device.ListLogicalDevices(device.GPU) {
		if pl, err := device.PlacementOf(l.Name); err == nil && pl.Ordinal == ord {
			return l.Name
		}
	}
	return fmt.Sprintf("/GPU:%d", ord)
}

// Sgemm copies a, b and c to the GPU, runs cuBLAS sgemm and copies c back.
func (k kernels) Sgemm(ord int, transA, transB bool, m, n, kk int, alpha float32, a []float32, lda int,
	b []float32, ldb int, beta float32, c []float32, ldc int) error {
	if ord < 0 || ord >= len(st.devs) {
		return fmt.Errorf("gpu: Sgemm on GPU ordinal %d, but %d GPU(s) exist", ord, len(st.devs))
	}
	if m == 0 || n == 0 {
		return nil
	}
	rowsA, rowsB := m, kk
	if transA {
		rowsA = kk
	}
	if transB {
		rowsB = n
	}
	na, nb, nc := (rowsA-1)*lda+colsOf(transA, m, kk), (rowsB-1)*ldb+colsOf(transB, kk, n), (m-1)*ldc+n
	if kk == 0 {
		na, nb = 0, 0
	}
	if len(a) < na || len(b) < nb || len(c) < nc {
		return fmt.Errorf("gpu: Sgemm operands too short: a %d (need %d), b %d (need %d), c %d (need %d)", len(a), na, len(b), nb, len(c), nc)
	}
	d := st.devs[ord]
	h, err := k.handle(ord)
	if err != nil {
		return err
	}
	pool, err := PoolFor(firstLogical(ord))
	if err != nil {
		return err
	}
	bufs := [3]Addr{}
	sizes := [3]int{max(na, 1), max(nb, 1), nc}
	for i := range bufs {
		if bufs[i], err = pool.Alloc(uint64(4 * sizes[i])); err != nil {
			for _, x := range bufs[:i] {
				pool.Free(x)
			}
			return err
		}
	}
	defer func() {
		for _, x := range bufs {
			pool.Free(x)
		}
	}()
	pa, pb, pc := driver.Ptr(bufs[0]), driver.Ptr(bufs[1]), driver.Ptr(bufs[2])
	if err := d.CopyHtoD(pa, a[:na]); err != nil {
		return err
	}
	if err := d.CopyHtoD(pb, b[:nb]); err != nil {
		return err
	}
	if beta != 0 {
		if err := d.CopyHtoD(pc, c[:nc]); err != nil {
			return err
		}
	}
	if err := h.SgemmRowMajor(transA, transB, m, n, kk, alpha, pa, max(lda, 1), pb, max(ldb, 1), beta, pc, max(ldc, 1)); err != nil {
		return err
	}
	return d.CopyDtoH(c[:nc], pc)
}

// colsOf is the number of stored columns of an operand: op(x) is rows x cols, stored
// transposed when trans.
func colsOf(trans bool, rows, cols int) int {
	if trans {
		return rows
	}
	return cols
}
