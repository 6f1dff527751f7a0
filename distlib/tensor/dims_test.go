package tensor

import (
	"errors"
	"slices"
	"testing"
)

// TestExpandDimsSqueeze: tf.expand_dims and tf.squeeze's shapes, and their errors.
func TestExpandDimsSqueeze(t *testing.T) {
	x := Zeros(2, 3)
	for axis, want := range map[int][]int{0: {1, 2, 3}, 1: {2, 1, 3}, 2: {2, 3, 1}, -1: {2, 3, 1}, -3: {1, 2, 3}} {
		if got := ExpandDims(x, axis).Shape(); !slices.Equal(got, want) {
			t.Errorf("ExpandDims([2 3], %d) = %v, want %v", axis, got, want)
		}
	}
	y := Zeros(1, 2, 1, 3, 1)
	if got := Squeeze(y).Shape(); !slices.Equal(got, []int{2, 3}) {
		t.Errorf("Squeeze = %v", got)
	}
	if got := Squeeze(y, -1, 0).Shape(); !slices.Equal(got, []int{2, 1, 3}) {
		t.Errorf("Squeeze(-1, 0) = %v", got)
	}
	for _, fn := range []func(){func() { ExpandDims(x, 3) }, func() { Squeeze(y, 1) }, func() { Squeeze(y, 5) }} {
		func() {
			defer func() {
				var oe *OpError
				if err, _ := recover().(error); !errors.As(err, &oe) {
					t.Errorf("panic %v, want an *OpError", err)
				}
			}()
			fn()
		}()
	}
	v := NewVariable("v", MustNew([]int{2}, []float32{1, 2}), true)
	tape := NewGradientTape()
	g := tape.Gradient(ReduceSum(Squeeze(ExpandDims(v.Value(), 0))), v)
	if !slices.Equal(g[0].Data(), []float32{1, 1}) {
		t.Errorf("gradient through ExpandDims and Squeeze = %v", g[0].Data())
	}
}
