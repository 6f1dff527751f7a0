package device

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// Thread settings, tf.config.threading's counterparts. Kernels on a CPU run in the
// calling goroutine and split a large matrix multiply (MatMul, Dense, Conv2D and their
// gradients) into up to Threads(device) goroutines: the intra-op setting caps that number.
// Independent ops run at the same time when several goroutines compute (one per replica
// of a strategy, or a user's): the inter-op setting caps how many of those matrix kernels
// run at once, the others waiting for a free slot.

var (
	intraOp atomic.Int64 // 0: the device's share of the cores
	interOp struct {
		mu    sync.Mutex
		n     int           // 0: no limit
		slots chan struct{} // capacity n; nil when n == 0
		busy  int           // kernels holding a slot now
		peak  int           // the most held at once since the last setting
	}
)

// SetIntraOpParallelismThreads caps the goroutines one kernel may use at n (0: the
// default, each logical CPU device's share of the cores, see Threads), like
// tf.config.threading.set_intra_op_parallelism_threads. It takes effect at the next
// kernel and returns an error for a negative n.
func SetIntraOpParallelismThreads(n int) error {
	if n < 0 {
		return fmt.Errorf("%w: SetIntraOpParallelismThreads(%d): use a positive number of threads, or 0 for the default", ErrInvalid, n)
	}
	intraOp.Store(int64(n))
	return nil
}

// GetIntraOpParallelismThreads returns the intra-op setting (0: the default), like
// tf.config.threading.get_intra_op_parallelism_threads.
func GetIntraOpParallelismThreads() int { return int(intraOp.Load()) }

// SetInterOpParallelismThreads lets at most n matrix kernels (the multiplies of MatMul,
// Dense and Conv2D, forward and backward) run at the same time in the process (0: no
// limit, the default), like tf.config.threading.set_inter_op_parallelism_threads: with
// n = 1 the replicas of a MirroredStrategy on logical CPUs take turns for them. Kernels
// already running keep their slot; it returns an error for a negative n.
func SetInterOpParallelismThreads(n int) error {
	if n < 0 {
		return fmt.Errorf("%w: SetInterOpParallelismThreads(%d): use a positive number of threads, or 0 for the default", ErrInvalid, n)
	}
	interOp.mu.Lock()
	defer interOp.mu.Unlock()
	interOp.n, interOp.peak = n, 0
	interOp.slots = nil
	if n > 0 {
		interOp.slots = make(chan struct{}, n)
	}
	return nil
}

// GetInterOpParallelismThreads returns the inter-op setting (0: no limit), like
// tf.config.threading.get_inter_op_parallelism_threads.
func GetInterOpParallelismThreads() int {
	interOp.mu.Lock()
	defer interOp.mu.Unlock()
	return interOp.n
}

// AcquireOpSlot waits for one of the inter-op slots (at once when there is no limit) and
// returns the func that gives it back. Kernels call it around their computation; a kernel
// holding a slot must not wait for another.
func AcquireOpSlot() (release func()) {
	interOp.mu.Lock()
	slots := interOp.slots
	interOp.mu.Unlock()
	if slots == nil {
		return func() {}
	}
	slots <- struct{}{}
	interOp.mu.Lock()
	if interOp.slots == slots {
		interOp.busy++
		interOp.peak = max(interOp.peak, interOp.busy)
	}
	interOp.mu.Unlock()
	return func() {
		interOp.mu.Lock()
		if interOp.slots == slots {
			interOp.busy--
		}
		interOp.mu.Unlock()
		<-slots
	}
}

// PeakConcurrentOps returns the most kernels that held an inter-op slot at the same time
// since the last SetInterOpParallelismThreads (0 without a limit): what the setting
// allowed in practice.
func PeakConcurrentOps() int {
	interOp.mu.Lock()
	defer interOp.mu.Unlock()
	return interOp.peak
}

// resetThreading restores the default thread settings.
func resetThreading() {
	intraOp.Store(0)
	_ = SetInterOpParallelismThreads(0)
}

// capIntraOp applies the intra-op setting to a device's thread count.
func capIntraOp(threads int) int {
	if n := int(intraOp.Load()); n > 0 && n < threads {
		return n
	}
	return threads
}
