package tensor

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestGreaterLessCastAddN: tf.greater, tf.less, tf.cast and tf.add_n as TF computes them.
func TestGreaterLessCastAddN(t *testing.T) {
	pred := MustNew([]int{4, 1}, []float32{0.2, 0.5, 0.51, 0.9})
	if got := Greater(pred, Scalar(0.5)).Data(); !slices.Equal(got, []float32{0, 0, 1, 1}) {
		t.Errorf("Greater(pred, 0.5) = %v, want [0 0 1 1]", got)
	}
	if got := Less(pred, Scalar(0.5)).Data(); !slices.Equal(got, []float32{1, 0, 0, 0}) {
		t.Errorf("Less(pred, 0.5) = %v, want [1 0 0 0]", got)
	}
	x := MustNew([]int{5}, []float32{-2.7, -0.5, 0, 1.5, 2.9})
	for dtype, want := range map[string][]float32{
		"int64":      {-2, 0, 0, 1, 2}, // truncation toward zero, as tf.cast
		"tf.int32":   {-2, 0, 0, 1, 2},
		"bool":       {1, 1, 0, 1, 1},
		"float32":    {-2.7, -0.5, 0, 1.5, 2.9},
		"tf.float64": {-2.7, -0.5, 0, 1.5, 2.9},
	} {
		if got := Cast(x, dtype).Data(); !slices.Equal(got, want) {
			t.Errorf("Cast(x, %q) = %v, want %v", dtype, got, want)
		}
	}
	func() {
		defer func() {
			err, _ := recover().(error)
			if !errors.Is(err, ErrArgument) || !strings.Contains(err.Error(), `"string"`) {
				t.Errorf("Cast to \"string\": %v, want ErrArgument naming it", err)
			}
		}()
		Cast(x, "string")
	}()
	a, b := MustNew([]int{2}, []float32{1, 2}), MustNew([]int{2}, []float32{10, 20})
	if got := AddN(a, b, a).Data(); !slices.Equal(got, []float32{12, 24}) {
		t.Errorf("AddN = %v, want [12 24]", got)
	}
	v := NewVariable("v", MustNew([]int{2}, []float32{1, 1}), true)
	tape := NewGradientTape()
	g := tape.Gradient(ReduceSum(AddN(v.Value(), Scale(v.Value(), 2))), v)
	if !slices.Equal(g[0].Data(), []float32{3, 3}) {
		t.Errorf("gradient through AddN = %v, want [3 3]", g[0].Data())
	}
	func() {
		defer func() {
			if err, _ := recover().(error); !errors.Is(err, ErrShape) {
				t.Errorf("AddN of shapes [2] and [3]: %v, want ErrShape", err)
			}
		}()
		AddN(a, MustNew([]int{3}, []float32{1, 2, 3}))
	}()
}
