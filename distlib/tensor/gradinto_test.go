package tensor

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"unsafe"
)

// TestGradientInto checks that GradientInto and GradientIntoStreaming give Gradient's
// values to the bit, on the caller's buffers: written directly by Dense for a variable
// read once (with streaming stores, on a CPU with AVX-512, for GradientIntoStreaming: w's
// gradient is 64 x 64, its buffer 64-byte aligned), summed and copied in for a variable
// read twice or a source no op writes directly, untouched for a source the target does
// not depend on.
func TestGradientInto(t *testing.T) {
	const units = 64
	x := RandomNormal([]int{8, units}, 0, 1, 1)
	mk := func() (w, b, w2, unused *Variable, in *Tensor) {
		w = NewVariable("w", RandomNormal([]int{units, units}, 0, 0.3, 2), true)
		b = NewVariable("b", RandomNormal([]int{units}, 0, 0.3, 3), true)
		w2 = NewVariable("w2", RandomNormal([]int{units, 4}, 0, 0.3, 4), true)
		unused = NewVariable("unused", Ones(3), true)
		in = StopGradient(x)
		return
	}
	cases := []struct {
		name string
		// loss builds the loss; tie reads w twice (its gradient is a sum of two parts).
		tie    bool
		stream bool // GradientIntoStreaming
	}{
		{"each variable read once", false, false}, {"a variable read twice", true, false},
		{"streaming/each variable read once", false, true}, {"streaming/a variable read twice", true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			loss := func(w, b, w2 *Variable, in *Tensor) *Tensor {
				h := Dense(in, w.Value(), b.Value(), true)
				if tc.tie {
					h = Dense(h, w.Value(), nil, true)
				}
				return lossOf(Dense(h, w2.Value(), nil, false))
			}
			w, b, w2, unused, in := mk()
			tape := NewGradientTape()
			tape.Watch(in)
			want := tape.Gradient(loss(w, b, w2, in), w, b, w2, unused, in)

			w, b, w2, unused, in = mk()
			tape = NewGradientTape()
			tape.Watch(in)
			wBuf := make([]float32, units*units+16)
			wBuf = wBuf[int((64-uintptr(unsafe.Pointer(&wBuf[0]))%64)%64/4):][:units*units]
			bufs := [][]float32{wBuf, make([]float32, units), nil, []float32{7, 7, 7}, make([]float32, 8*units)}
			for i := range bufs[0] {
				bufs[0][i] = 1e9 // stale values must not leak into the result
			}
			into := tape.GradientInto
			if tc.stream {
				into = tape.GradientIntoStreaming
			}
			got := into(loss(w, b, w2, in), bufs, w, b, w2, unused, in)
			for i := range want {
				if (want[i] == nil) != (got[i] == nil) {
					t.Fatalf("gradient %d: nil %v, want nil %v", i, got[i] == nil, want[i] == nil)
				}
				if want[i] == nil {
					continue
				}
				if !slices.Equal(got[i].Data(), want[i].Data()) {
					t.Errorf("gradient %d differs from Gradient's", i)
				}
				if bufs[i] != nil && !sameStart(got[i].Data(), bufs[i]) {
					t.Errorf("gradient %d does not use the buffer given for it", i)
				}
			}
			if !slices.Equal(bufs[3], []float32{7, 7, 7}) {
				t.Errorf("the unconnected source's buffer changed: %v", bufs[3])
			}
		})
	}
}

func TestGradientIntoErrors(t *testing.T) {
	v := NewVariable("v", Ones(4), true)
	for _, tc := range []struct {
		name string
		into [][]float32
	}{
		{"too few buffers", nil},
		{"wrong size", [][]float32{make([]float32, 3)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tape := NewGradientTape()
			loss := ReduceSum(Mul(v.Value(), v.Value()))
			err := catch(func() { tape.GradientInto(loss, tc.into, v) })
			if !errors.Is(err, ErrTape) || !strings.Contains(err.Error(), "GradientInto ") {
				t.Fatalf("got %v, want an error wrapping ErrTape that names GradientInto", err)
			}
			err = catch(func() { NewGradientTape().GradientIntoStreaming(loss, tc.into, v) })
			if !errors.Is(err, ErrTape) || !strings.Contains(err.Error(), "GradientIntoStreaming ") {
				t.Fatalf("got %v, want an error wrapping ErrTape that names GradientIntoStreaming", err)
			}
		})
	}
}
