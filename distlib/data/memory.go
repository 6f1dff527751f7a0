package data

import (
	"fmt"
	"unsafe"

	"godist/distlib/tensor"
	"godist/internal/memlimit"
)

// ErrOutOfMemory reports a dataset buffer (Shuffle, Prefetch, Cache, Batch) larger than
// the memory this process may use; the pipeline panics with an error wrapping it, naming
// the buffer, its size and the limit, instead of the Go runtime ending the process.
var ErrOutOfMemory = tensor.ErrOutOfMemory

// checkBuffer panics when count more items of each bytes, described by what, do not fit in
// the memory this process may still use.
func checkBuffer(op, what string, count, each int) {
	if err := memlimit.CheckElems(what, count, each); err != nil {
		panic(fmt.Errorf("data: %s: %w", op, err))
	}
}

// elementBytes is the memory of el's tensors.
func elementBytes(el Element) int {
	n := 0
	for _, t := range el {
		if t != nil {
			n += 4 * t.Size()
		}
	}
	return max(n, 1)
}

// checkGrowth checks, when a buffer that will hold target elements reaches have elements
// (at the first and at every power of two, so that the checks cost nothing per element),
// that the remaining target-have elements like el fit.
func checkGrowth(op, buffer string, have, target int, el Element) {
	if have == 0 || have&(have-1) != 0 || target <= have {
		return
	}
	each := elementBytes(el)
	checkBuffer(op, fmt.Sprintf("Dataset.%s's %s of %d elements of %s each", op, buffer, target, memlimit.Bytes(uint64(each))), target-have, each)
}

const sizeofPrefetched = int(unsafe.Sizeof(prefetched{}))
