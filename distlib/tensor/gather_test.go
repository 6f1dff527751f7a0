package tensor

import (
	"strings"
	"testing"
)

func TestGather(t *testing.T) {
	params := MustNew([]int{3, 2}, []float32{1, 2, 3, 4, 5, 6})
	v := NewVariable("table", params, true)
	idx := MustNew([]int{2, 2}, []float32{2, 0, 2, 2})
	tape := NewGradientTape()
	out := Gather(v.Value(), idx)
	if got, want := out.Shape(), []int{2, 2, 2}; !sameShape(got, want) {
		t.Fatalf("shape %v, want %v", got, want)
	}
	wantData := []float32{5, 6, 1, 2, 5, 6, 5, 6}
	for i, w := range wantData {
		if out.Data()[i] != w {
			t.Fatalf("Gather = %v, want %v", out.Data(), wantData)
		}
	}
	// d sum(out * c) / d params: row k gets the sum of c over the outputs that picked it.
	c := MustNew([]int{2, 2, 2}, []float32{1, 2, 3, 4, 5, 6, 7, 8})
	g := tape.Gradient(ReduceSum(Mul(out, c)), v)[0]
	wantG := []float32{3, 4, 0, 0, 1 + 5 + 7, 2 + 6 + 8}
	for i, w := range wantG {
		if g.Data()[i] != w {
			t.Fatalf("gradient = %v, want %v", g.Data(), wantG)
		}
	}
	for _, bad := range []float32{3, -1, 0.5} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(r.(error).Error(), "not an integer in [0, 3)") {
					t.Errorf("Gather with index %v: panic %v, want one naming the range", bad, r)
				}
			}()
			Gather(params, MustNew([]int{1}, []float32{bad}))
		}()
	}
}
