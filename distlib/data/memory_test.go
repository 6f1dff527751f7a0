package data

import (
	"errors"
	"strings"
	"testing"

	"godist/distlib/tensor"
)

// TestBuffersLargerThanMemoryFail: Shuffle, Cache, Prefetch and Batch buffers that would
// hold more than the memory this process may use panic with an error wrapping
// ErrOutOfMemory that names the buffer and the limit, where the Go runtime would end the
// process; the same pipelines with sensible sizes run.
func TestBuffersLargerThanMemoryFail(t *testing.T) {
	mb := FromTensors(tensor.Zeros(1 << 18)) // 1 MiB elements
	drain := func(d *Dataset, n int) {
		it := d.Iterator()
		defer it.Close()
		for i := 0; i < n; i++ {
			if _, ok := it.Next(); !ok {
				return
			}
		}
	}
	cases := []struct {
		name string
		fn   func()
		want string
	}{
		{"Shuffle", func() { drain(mb.Repeat(-1).Shuffle(1<<40, 1), 1) }, "data: Shuffle: out of memory: Dataset.Shuffle's buffer of 1099511627776 elements of 1.00 MiB each"},
		{"Cache", func() { drain(mb.Repeat(1<<30).Cache(), 1) }, "data: Cache: out of memory: Dataset.Cache's cache of 1073741824 elements"},
		{"Prefetch", func() { mb.Prefetch(1 << 50) }, "data: Prefetch: out of memory: Dataset.Prefetch's buffer of 1125899906842624 elements"},
		{"Prefetch elements", func() { drain(FromTensors(tensor.Zeros(1<<24)).Repeat(-1).Prefetch(1<<16), 2) }, "data: Prefetch: out of memory: Dataset.Prefetch's buffer of 65537 elements of 64.00 MiB each"},
		{"Collect", func() { mb.Repeat(1 << 30).Collect() }, "data: Collect: out of memory: Dataset.Collect's result of 1073741824 elements of 1.00 MiB each"},
		{"Batch", func() { mb.Batch(1<<60, false) }, "data: Batch: out of memory: Dataset.Batch's batch of 1152921504606846976 elements"},
		{"Batch storage", func() { drain(FromTensors(tensor.Zeros(1<<24)).Repeat(-1).Batch(1<<16, false), 1) }, "data: Batch: out of memory: Dataset.Batch's batch component of 1099511627776 float32s"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				err, _ := recover().(error)
				if !errors.Is(err, ErrOutOfMemory) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "available of") {
					t.Fatalf("panic %v, want ErrOutOfMemory containing %q and the limit", err, tc.want)
				}
			}()
			tc.fn()
		})
	}
	// Sensible sizes run.
	drain(mb.Repeat(100).Cache().Shuffle(50, 1).Prefetch(4).Batch(8, false), 20)
}
