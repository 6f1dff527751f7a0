package tensor

import (
	"fmt"

	"godist/internal/memlimit"
)

// ErrOutOfMemory reports a tensor larger than the memory this process may use (the cgroup
// limit, GOMEMLIMIT, physical memory). The op panics with an *OpError unwrapping to it
// instead of letting the Go runtime end the process (a notebook kernel) with its fatal
// "out of memory"; the session survives.
var ErrOutOfMemory = memlimit.ErrTooLarge

// bigFloats is the element count from which an allocation is checked against the memory
// this process may use; smaller ones cost nothing more.
const bigFloats = memlimit.Threshold / 4

// floats returns n zeroed float32s for a tensor of shape made by op, or panics with an
// *OpError naming the shape, its size and the limit when they do not fit (it wraps the
// *memlimit.Error, so the kernel reports a MemoryError, and unwraps to ErrOutOfMemory).
func floats(op string, shape []int, n int) []float32 {
	if n >= bigFloats || n < 0 {
		checkAlloc(op, shape, n)
	}
	return make([]float32, n)
}

// checkAlloc panics with ErrOutOfMemory when n float32s (a tensor of shape) do not fit.
func checkAlloc(op string, shape []int, n int) {
	if err := memlimit.CheckElems(allocWhat(op, shape), n, 4); err != nil {
		if op == "" {
			op = "output"
		}
		panic(&OpError{Op: op, Msg: err.Error(), Err: err})
	}
}

// elements returns the number of elements of shape, or an error for a negative dimension
// or a count that overflows an int (a shape no memory holds).
func elements(op string, shape []int) (int, error) {
	n := 1
	for i, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("%w: dimension %d of shape %v is negative", ErrShape, i, shape)
		}
		if d != 0 && n > maxInt/d {
			e := &memlimit.Error{What: allocWhat(op, shape), Bytes: ^uint64(0), Limit: memlimit.Current()}
			return 0, &OpError{Op: op, Msg: e.Error(), Err: e}
		}
		n *= d
	}
	return n, nil
}

const maxInt = int(^uint(0) >> 1)

// allocWhat names an allocation for the error: "tensor.Zeros of shape [2 3] (float32)".
func allocWhat(op string, shape []int) string {
	if op == "" {
		return fmt.Sprintf("an op's output of shape %v (float32)", shape)
	}
	return fmt.Sprintf("tensor.%s of shape %v (float32)", op, shape)
}
