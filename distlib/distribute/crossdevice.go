package distribute

import (
	"fmt"
	"runtime"
	"strings"
	"sync"

	"godist/distlib/device"
	"godist/distlib/tensor"
	"godist/internal/simd"
)

// CrossDeviceOps reduces tensors across the replicas' devices, like
// tf.distribute.CrossDeviceOps. MirroredStrategy takes one with WithCrossDeviceOps.
type CrossDeviceOps interface {
	// Name returns the TensorFlow class name, such as "ReductionToOneDevice".
	Name() string
	// String returns the name with the settings, such as "NcclAllReduce(num_packs=1)".
	String() string
	// BatchAllReduce reduces perReplica[r][i] over r for every i and returns, for every
	// replica r, the reduced tensors placed on devices[r].
	BatchAllReduce(op ReduceOp, perReplica [][]*tensor.Tensor, devices []string) ([][]*tensor.Tensor, error)
}

// ReductionToOneDevice reduces every tensor on one device and then copies the result to
// every replica's device, like tf.distribute.ReductionToOneDevice. It is what
// MirroredStrategy uses on CPUs, and the fastest reduction in one process.
type ReductionToOneDevice struct {
	reduceTo string
	once     sync.Once
}

// NewReductionToOneDevice returns a ReductionToOneDevice that reduces on reduceToDevice, or
// on the first replica's device when none is given.
func NewReductionToOneDevice(reduceToDevice ...string) *ReductionToOneDevice {
	if len(reduceToDevice) > 1 {
		panic(&DeviceError{Device: strings.Join(reduceToDevice, ","), Reason: "NewReductionToOneDevice takes at most one device"})
	}
	r := &ReductionToOneDevice{}
	if len(reduceToDevice) == 1 && reduceToDevice[0] != "" {
		full, err := resolveDevice(reduceToDevice[0])
		if err != nil {
			panic(err)
		}
		r.reduceTo = full
	}
	return r
}

// Name returns "ReductionToOneDevice".
func (r *ReductionToOneDevice) Name() string { return "ReductionToOneDevice" }

// String returns "ReductionToOneDevice(reduce_to_device=...)" (the first replica's device
// when none was given).
func (r *ReductionToOneDevice) String() string {
	to := r.reduceTo
	if to == "" {
		to = "the first replica's device"
	}
	return fmt.Sprintf("ReductionToOneDevice(reduce_to_device=%s)", to)
}

// BatchAllReduce sums on one device and broadcasts the result to every device.
func (r *ReductionToOneDevice) BatchAllReduce(op ReduceOp, perReplica [][]*tensor.Tensor, devices []string) ([][]*tensor.Tensor, error) {
	if err := checkAllReduceArgs(op, perReplica, devices); err != nil {
		return nil, err
	}
	r.logOnce(devices)
	return reduceBroadcast(op, perReplica, devices), nil
}

// target returns the device the sums are made on: reduce_to_device, else the first
// replica's.
func (r *ReductionToOneDevice) target(devices []string) string {
	if r.reduceTo != "" {
		return r.reduceTo
	}
	return devices[0]
}

// logOnce says, at the first reduction, where it is made, as TensorFlow does.
func (r *ReductionToOneDevice) logOnce(devices []string) {
	r.once.Do(func() {
		logf("INFO", "Reduce to %s then broadcast to (%s).", r.target(devices), quoteList(devices))
	})
}

// sumTerms is BatchAllReduce(ReduceSum, ...) for a caller that sums as it reads (keras'
// optimizer: optim.Spec.ApplyTerms): where every device and the reduction's device lie in
// host memory, it returns, for each tensor, the replicas' values in replica order, the
// terms whose sum in order is what BatchAllReduce gives every replica (reduceBroadcast adds
// them in the same order), read where they lie and never written. ok is false elsewhere.
// The reduction is the same, so it logs as BatchAllReduce does.
func (r *ReductionToOneDevice) sumTerms(perReplica [][]*tensor.Tensor, devices []string) (terms [][][]float32, ok bool, err error) {
	if err := checkAllReduceArgs(ReduceSum, perReplica, devices); err != nil {
		return nil, false, err
	}
	if !sharesMemory(r.target(devices)) {
		return nil, false, nil
	}
	for _, d := range devices {
		if !sharesMemory(d) {
			return nil, false, nil
		}
	}
	r.logOnce(devices)
	terms = make([][][]float32, len(perReplica[0]))
	for i := range terms {
		terms[i] = make([][]float32, len(perReplica))
		for k, ts := range perReplica {
			terms[i][k] = ts[i].Data()
		}
	}
	return terms, true, nil
}

// HierarchicalCopyAllReduce reduces within two groups of devices, then between the groups'
// leaders, then copies back down, like tf.distribute.HierarchicalCopyAllReduce (designed for
// the DGX-1 topology of two groups of GPUs).
type HierarchicalCopyAllReduce struct {
	numPacks int
}

// NewHierarchicalCopyAllReduce returns a HierarchicalCopyAllReduce; numPacks (default 1)
// is accepted for TensorFlow compatibility: tensors are reduced one by one in any case.
func NewHierarchicalCopyAllReduce(numPacks ...int) *HierarchicalCopyAllReduce {
	h := &HierarchicalCopyAllReduce{numPacks: 1}
	if len(numPacks) > 1 || (len(numPacks) == 1 && numPacks[0] < 1) {
		panic(fmt.Errorf("%w: NewHierarchicalCopyAllReduce numPacks %v: give one number >= 1", ErrReplicas, numPacks))
	}
	if len(numPacks) == 1 {
		h.numPacks = numPacks[0]
	}
	return h
}

// Name returns "HierarchicalCopyAllReduce".
func (h *HierarchicalCopyAllReduce) Name() string { return "HierarchicalCopyAllReduce" }

// String returns "HierarchicalCopyAllReduce(num_packs=N)".
func (h *HierarchicalCopyAllReduce) String() string {
	return fmt.Sprintf("HierarchicalCopyAllReduce(num_packs=%d)", h.numPacks)
}

// BatchAllReduce reduces in two groups, combines the group sums and broadcasts.
func (h *HierarchicalCopyAllReduce) BatchAllReduce(op ReduceOp, perReplica [][]*tensor.Tensor, devices []string) ([][]*tensor.Tensor, error) {
	if err := checkAllReduceArgs(op, perReplica, devices); err != nil {
		return nil, err
	}
	n := len(devices)
	if n < 4 {
		// Two groups of one device each are just a reduction: skip the hierarchy.
		return reduceBroadcast(op, perReplica, devices), nil
	}
	half := n / 2
	groups := [2][][]*tensor.Tensor{perReplica[:half], perReplica[half:]}
	var sums [2][][]float32
	var wg sync.WaitGroup
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			sums[g] = sumLists(groups[g])
		}(g)
	}
	wg.Wait()
	m := len(perReplica[0])
	out := make([][]*tensor.Tensor, n)
	for r := range out {
		out[r] = make([]*tensor.Tensor, m)
	}
	scale := float32(1)
	if op.isMean() {
		scale = 1 / float32(n)
	}
	for i := 0; i < m; i++ {
		a, b := sums[0][i], sums[1][i]
		for k := range a {
			a[k] = (a[k] + b[k]) * scale
		}
		shape := perReplica[0][i].Shape()
		for r, dev := range devices {
			buf := a
			if r > 0 && !(sharesMemory(dev) && sharesMemory(devices[0])) {
				buf = append([]float32(nil), a...)
			}
			out[r][i] = newOn(dev, shape, buf)
		}
	}
	return out, nil
}

// NcclFunc is a GPU all-reduce a GPU backend registers with RegisterNccl. It reduces
// perReplica across GPU devices and returns the result on each.
type NcclFunc func(op ReduceOp, perReplica [][]*tensor.Tensor, devices []string) ([][]*tensor.Tensor, error)

var (
	ncclMu sync.RWMutex
	ncclFn NcclFunc
)

// RegisterNccl installs the NCCL all-reduce of a GPU backend; nil removes it. The gpu
// package binds NCCL but registers no all-reduce yet, so strategies fall back as
// TensorFlow does without NCCL.
func RegisterNccl(fn NcclFunc) {
	ncclMu.Lock()
	ncclFn = fn
	ncclMu.Unlock()
}

func nccl() NcclFunc {
	ncclMu.RLock()
	defer ncclMu.RUnlock()
	return ncclFn
}

// NcclAllReduce reduces with NVIDIA's NCCL on GPUs, like tf.distribute.NcclAllReduce. When
// NCCL cannot serve the devices (CPU devices, several logical devices on one GPU, or no
// NCCL backend in this build) it falls back as TensorFlow does, to ReductionToOneDevice for
// CPUs and HierarchicalCopyAllReduce otherwise, and logs once why.
type NcclAllReduce struct {
	numPacks int
	once     sync.Once
	hier     *HierarchicalCopyAllReduce
	one      *ReductionToOneDevice
}

// NewNcclAllReduce returns an NcclAllReduce; numPacks (default 1) is accepted for
// TensorFlow compatibility.
func NewNcclAllReduce(numPacks ...int) *NcclAllReduce {
	if len(numPacks) > 1 || (len(numPacks) == 1 && numPacks[0] < 1) {
		panic(fmt.Errorf("%w: NewNcclAllReduce numPacks %v: give one number >= 1", ErrReplicas, numPacks))
	}
	n := &NcclAllReduce{numPacks: 1, hier: NewHierarchicalCopyAllReduce(), one: &ReductionToOneDevice{}}
	n.one.once.Do(func() {}) // the fallback line says it all; no second INFO line
	if len(numPacks) == 1 {
		n.numPacks = numPacks[0]
	}
	return n
}

// Name returns "NcclAllReduce".
func (n *NcclAllReduce) Name() string { return "NcclAllReduce" }

// String returns "NcclAllReduce(num_packs=N)".
func (n *NcclAllReduce) String() string {
	return fmt.Sprintf("NcclAllReduce(num_packs=%d)", n.numPacks)
}

// BatchAllReduce runs NCCL when it can serve the devices, and otherwise falls back.
func (n *NcclAllReduce) BatchAllReduce(op ReduceOp, perReplica [][]*tensor.Tensor, devices []string) ([][]*tensor.Tensor, error) {
	if err := checkAllReduceArgs(op, perReplica, devices); err != nil {
		return nil, err
	}
	fn := nccl()
	why, fallback := ncclUnusable(devices, fn != nil)
	if why == "" {
		return fn(op, perReplica, devices)
	}
	var ops CrossDeviceOps = n.hier
	if fallback == "ReductionToOneDevice" {
		ops = n.one
	}
	n.once.Do(func() {
		logf("WARNING", "NcclAllReduce cannot serve devices (%s): %s; falling back to %s.",
			quoteList(devices), why, ops.Name())
	})
	return ops.BatchAllReduce(op, perReplica, devices)
}

// ncclUnusable says why NCCL cannot reduce across devices ("" when it can) and which
// reduction TensorFlow falls back to.
func ncclUnusable(devices []string, haveNccl bool) (why, fallback string) {
	var cpus []string
	for _, d := range devices {
		if deviceType(d) != device.GPU {
			cpus = append(cpus, d)
		}
	}
	if len(cpus) > 0 {
		return fmt.Sprintf("NCCL runs only on GPUs and %d of them are not GPUs (%s)", len(cpus), strings.Join(cpus, ", ")),
			"ReductionToOneDevice"
	}
	if !haveNccl {
		return "no NCCL all-reduce is registered (the GPU backend does not register one yet)", "HierarchicalCopyAllReduce"
	}
	if phys := len(device.ListPhysicalDevices(device.GPU)); phys > 0 && len(device.ListLogicalDevices(device.GPU)) > phys {
		return fmt.Sprintf("they include logical devices that share a physical GPU (%d logical GPUs on %d physical); "+
			"NCCL needs one device per GPU", len(device.ListLogicalDevices(device.GPU)), phys), "HierarchicalCopyAllReduce"
	}
	return "", ""
}

// selectCrossDeviceOps is TensorFlow's default choice for MirroredStrategy: NCCL when
// every device is a GPU and NCCL is available, ReductionToOneDevice otherwise (logged).
func selectCrossDeviceOps(devices []string) CrossDeviceOps {
	why, _ := ncclUnusable(devices, nccl() != nil)
	if why == "" {
		return NewNcclAllReduce()
	}
	if len(devices) > 1 && hasGPU(devices) {
		// On CPUs alone ReductionToOneDevice is the only choice, as in TensorFlow: nothing
		// to say beyond the strategy's one line. With GPUs, say why NCCL is not used.
		logf("INFO", "Not using NcclAllReduce for devices (%s): %s; using ReductionToOneDevice.", quoteList(devices), why)
	}
	r := &ReductionToOneDevice{}
	return r
}

// hasGPU reports whether any of devices is a GPU.
func hasGPU(devices []string) bool {
	for _, d := range devices {
		if deviceType(d) == device.GPU {
			return true
		}
	}
	return false
}

func checkAllReduceArgs(op ReduceOp, perReplica [][]*tensor.Tensor, devices []string) error {
	if err := op.check(); err != nil {
		return err
	}
	if len(perReplica) != len(devices) {
		return fmt.Errorf("%w: all-reduce of %d replicas' tensors over %d devices", ErrReplicas, len(perReplica), len(devices))
	}
	return checkPerReplica(perReplica)
}

// parallelMin is the number of elements from which a reduction is split across goroutines.
const parallelMin = 1 << 15

// reduceBroadcast sums tensor i of every replica into one buffer and gives each replica its
// own copy on its device. Large tensors are reduced in parallel chunks.
func reduceBroadcast(op ReduceOp, perReplica [][]*tensor.Tensor, devices []string) [][]*tensor.Tensor {
	n, m := len(perReplica), len(perReplica[0])
	out := make([][]*tensor.Tensor, n)
	for r := range out {
		out[r] = make([]*tensor.Tensor, m)
	}
	scale := float32(1)
	if op.isMean() {
		scale = 1 / float32(n)
	}
	for i := 0; i < m; i++ {
		size := perReplica[0][i].Size()
		// Replicas in host memory share the result (tensors are immutable); others get
		// their own copy.
		bufs := make([][]float32, n)
		shared := make([]bool, n)
		bufs[0] = make([]float32, size)
		for r := 1; r < n; r++ {
			if sharesMemory(devices[r]) && sharesMemory(devices[0]) {
				bufs[r], shared[r] = bufs[0], true
			} else {
				bufs[r] = make([]float32, size)
			}
		}
		srcs := make([][]float32, n)
		for r := range srcs {
			srcs[r] = perReplica[r][i].Data()
		}
		parallelChunks(size, func(lo, hi int) {
			dst := bufs[0][lo:hi]
			copy(dst, srcs[0][lo:hi])
			for r := 1; r < n; r++ {
				simd.AddTo(dst, srcs[r][lo:hi])
			}
			if scale != 1 {
				for k := range dst {
					dst[k] *= scale
				}
			}
			for r := 1; r < n; r++ {
				if !shared[r] {
					copy(bufs[r][lo:hi], dst)
				}
			}
		})
		shape := perReplica[0][i].Shape()
		for r, dev := range devices {
			out[r][i] = newOn(dev, shape, bufs[r])
		}
	}
	return out
}

// parallelChunks calls fn over [0, size) split into one chunk per CPU when size is large.
func parallelChunks(size int, fn func(lo, hi int)) {
	workers := runtime.GOMAXPROCS(0)
	if size < parallelMin || workers < 2 {
		fn(0, size)
		return
	}
	chunk := (size + workers - 1) / workers
	var wg sync.WaitGroup
	for lo := 0; lo < size; lo += chunk {
		hi := min(lo+chunk, size)
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			fn(lo, hi)
		}(lo, hi)
	}
	wg.Wait()
}

// sumLists returns, for every tensor index i, the element-wise sum over the replicas.
func sumLists(perReplica [][]*tensor.Tensor) [][]float32 {
	m := len(perReplica[0])
	out := make([][]float32, m)
	for i := 0; i < m; i++ {
		acc := append([]float32(nil), perReplica[0][i].Data()...)
		for r := 1; r < len(perReplica); r++ {
			simd.AddTo(acc, perReplica[r][i].Data())
		}
		out[i] = acc
	}
	return out
}

// sumTensors sums same-shaped tensors element-wise onto the first device.
func sumTensors(ts []*tensor.Tensor, devices []string) (*tensor.Tensor, error) {
	lists := make([][]*tensor.Tensor, len(ts))
	for r, t := range ts {
		if t == nil {
			return nil, fmt.Errorf("%w: replica %d's value is nil", ErrReplicas, r)
		}
		lists[r] = []*tensor.Tensor{t}
	}
	if err := checkPerReplica(lists); err != nil {
		return nil, err
	}
	return newOn(devices[0], ts[0].Shape(), sumLists(lists)[0]), nil
}

// scaleData returns t times s as a new tensor on t's device (no gradient).
func scaleData(t *tensor.Tensor, s float32) *tensor.Tensor {
	src := t.Data()
	buf := make([]float32, len(src))
	for k, v := range src {
		buf[k] = v * s
	}
	return newOn(t.Device(), t.Shape(), buf)
}

// copyTo returns a copy of t's values on dev (no gradient).
func copyTo(t *tensor.Tensor, dev string) *tensor.Tensor {
	return newOn(dev, t.Shape(), append([]float32(nil), t.Data()...))
}
