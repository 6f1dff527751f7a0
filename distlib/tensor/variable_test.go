package tensor

import (
	"slices"
	"testing"
)

// TestUpdateDataKeepsHandedOutValues: an update writes into new memory once Value has
// handed out the current value (which keeps its values), and in place when only StepValue,
// Shape, Size, String and GradientInto have read it since it was made.
func TestUpdateDataKeepsHandedOutValues(t *testing.T) {
	addOne := func(d []float32) {
		for i := range d {
			d[i]++
		}
	}
	type read struct {
		name string
		read func(v *Variable) *Tensor
		kept bool // the update must leave the tensor read as it was
	}
	reads := []read{
		{"Value", (*Variable).Value, true},
		{"StepValue", (*Variable).StepValue, false},
	}
	for _, first := range reads {
		for _, watch := range []bool{false, true} {
			v := NewVariable("v", MustNew([]int{3}, []float32{1, 2, 3}), !watch)
			x := first.read(v)
			_, _, _ = v.Shape(), v.Size(), v.String()
			if watch { // a tape watching a non-trainable variable remakes its value over the same memory
				tp := NewGradientTape()
				tp.Watch(v)
				loss := ReduceSum(Mul(v.StepValue(), v.StepValue()))
				tp.GradientInto(loss, [][]float32{make([]float32, 3)}, v)
			}
			v.UpdateData(addOne)
			got := x.Data()
			want := []float32{2, 3, 4}
			if first.kept {
				want = []float32{1, 2, 3}
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s, watched %v: the tensor read before UpdateData holds %v, want %v", first.name, watch, got, want)
			}
			if now := v.StepValue().Data(); !slices.Equal(now, []float32{2, 3, 4}) {
				t.Errorf("%s, watched %v: value after UpdateData %v, want [2 3 4]", first.name, watch, now)
			}
			// The copy made for a kept value is fresh: read by StepValue only, the next
			// update writes into it.
			y := v.StepValue()
			v.UpdateData(addOne)
			if !slices.Equal(y.Data(), []float32{3, 4, 5}) {
				t.Errorf("%s, watched %v: the second update did not write in place: %v", first.name, watch, y.Data())
			}
		}
	}
}
