package tensor

import (
	"fmt"
	"math"
	"testing"
)

// TestFusedConv2DChunks checks FusedConv2D where it works in several cache-sized chunks
// and, with two threads, in ranges of images run apart: the forward pass against the
// direct definition, and every gradient against the same layer built from the separate
// ops (Conv2D, BiasAdd, ReLU), whose gradients the finite-difference checks cover.
func TestFusedConv2DChunks(t *testing.T) {
	defer func(c int) { kernelThreadsCap = c }(kernelThreadsCap)
	tests := []struct {
		x, k    []int
		stride  int
		padding string
		relu    bool
		bias    bool
		// constX: the input is a constant (the images), so no input gradient: a 3x3
		// one-channel convolution then takes the direct backward pass.
		constX bool
	}{
		{[]int{3, 30, 30, 1}, []int{3, 3, 1, 32}, 1, "valid", true, true, false},  // 2352 rows, chunk 1536
		{[]int{5, 20, 20, 4}, []int{3, 3, 4, 8}, 1, "same", true, true, false},    // 2000 rows, chunk 1440
		{[]int{3, 41, 39, 2}, []int{2, 2, 2, 5}, 2, "same", false, false, false},  // 1260 rows, chunk 3840
		{[]int{1, 64, 70, 1}, []int{3, 3, 1, 16}, 1, "valid", true, false, false}, // one image, 4216 rows
		{[]int{3, 30, 30, 1}, []int{3, 3, 1, 32}, 1, "valid", true, true, true},
		{[]int{5, 26, 28, 1}, []int{3, 3, 1, 64}, 1, "valid", false, false, true},
		{[]int{2, 9, 7, 1}, []int{3, 3, 1, 16}, 1, "valid", true, true, true},
	}
	for _, tc := range tests {
		for _, threads := range []int{1, 2} {
			t.Run(fmt.Sprintf("x%v/k%v/%s/threads=%d", tc.x, tc.k, tc.padding, threads), func(t *testing.T) {
				kernelThreadsCap = threads
				x, k := rnd(1, tc.x...), rnd(2, tc.k...)
				var b *Tensor
				if tc.bias {
					b = rnd(3, tc.k[3])
				}
				grads := func(fused bool) ([]*Tensor, *Tensor) {
					vx, vk := NewVariable("x", x, true), NewVariable("k", k, true)
					vars := []*Variable{vx, vk}
					xv := vx.Value()
					if tc.constX {
						vars, xv = vars[1:], x
					}
					var vb *Variable
					if b != nil {
						vb = NewVariable("b", b, true)
						vars = append(vars, vb)
					}
					tape := NewGradientTape()
					var y *Tensor
					if fused {
						var bv *Tensor
						if vb != nil {
							bv = vb.Value()
						}
						y = FusedConv2D(xv, vk.Value(), bv, tc.stride, tc.padding, tc.relu)
					} else {
						y = Conv2D(xv, vk.Value(), tc.stride, tc.padding)
						if vb != nil {
							y = BiasAdd(y, vb.Value())
						}
						if tc.relu {
							y = ReLU(y)
						}
					}
					return tape.Gradient(lossOf(y), vars), y
				}
				got, y := grads(true)
				want, yRef := grads(false)
				direct := naiveConv(x, k, tc.stride, tc.padding)
				for i := range direct {
					if b != nil {
						direct[i] += b.data[i%tc.k[3]]
					}
					if tc.relu {
						direct[i] = max(direct[i], 0)
					}
				}
				if i, ok := near(y.data, direct, 1e-4); !ok {
					t.Fatalf("FusedConv2D[%d] = %v, direct definition %v", i, y.data[i], direct[i])
				}
				if i, ok := near(yRef.data, direct, 1e-4); !ok {
					t.Fatalf("Conv2D+BiasAdd+Relu[%d] = %v, direct definition %v", i, yRef.data[i], direct[i])
				}
				names := []string{"input", "kernel", "bias"}
				if tc.constX {
					names = names[1:]
				}
				for j, name := range names[:len(got)] {
					if i, ok := near(got[j].data, want[j].data, 1e-3); !ok {
						t.Errorf("%s gradient[%d] = %v, separate ops give %v", name, i, got[j].data[i], want[j].data[i])
					}
				}
			})
		}
	}
}

// TestConvReLUMaxPool2D: the fused op gives the two ops' pooled values bit for bit and their
// kernel and bias gradients (within rounding), on the fused path (one channel, 3x3, 16 or
// 32 filters, odd and even sizes) and on the fallbacks (a tracked input, 2 channels).
func TestConvReLUMaxPool2D(t *testing.T) {
	for _, tc := range []struct {
		x, k         []int
		bias, trackX bool
	}{
		{[]int{3, 28, 28, 1}, []int{3, 3, 1, 32}, true, false},
		{[]int{2, 9, 12, 1}, []int{3, 3, 1, 16}, false, false},
		{[]int{2, 8, 8, 1}, []int{3, 3, 1, 32}, true, true},
		{[]int{2, 8, 8, 2}, []int{3, 3, 2, 16}, true, false},
	} {
		t.Run(fmt.Sprintf("x%v/k%v/bias=%v/trackX=%v", tc.x, tc.k, tc.bias, tc.trackX), func(t *testing.T) {
			x, k := rnd(1, tc.x...), rnd(2, tc.k...)
			var b *Tensor
			if tc.bias {
				b = rnd(3, tc.k[3])
			}
			run := func(fused bool) ([]*Tensor, *Tensor) {
				vk := NewVariable("k", k, true)
				vars := []*Variable{vk}
				var bv *Tensor
				if b != nil {
					vb := NewVariable("b", b, true)
					vars = append(vars, vb)
				}
				tape := NewGradientTape()
				xv := x
				if tc.trackX {
					vx := NewVariable("x", x, true)
					xv = vx.Value()
				}
				if len(vars) == 2 {
					bv = vars[1].Value()
				}
				var y *Tensor
				if fused {
					y = ConvReLUMaxPool2D(xv, vk.Value(), bv)
				} else {
					y = MaxPool2D(FusedConv2D(xv, vk.Value(), bv, 1, "valid", true), 2, 2, "valid")
				}
				return tape.Gradient(lossOf(y), vars), y
			}
			got, y := run(true)
			want, yRef := run(false)
			if !sameShape(y.Shape(), yRef.Shape()) {
				t.Fatalf("shape %v, want %v", y.Shape(), yRef.Shape())
			}
			for i := range yRef.data {
				if y.data[i] != yRef.data[i] {
					t.Fatalf("out[%d] = %v, the two ops give %v", i, y.data[i], yRef.data[i])
				}
			}
			for j, name := range []string{"kernel", "bias"}[:len(got)] {
				if i, ok := near(got[j].data, want[j].data, 1e-3); !ok {
					t.Errorf("%s gradient[%d] = %v, the two ops give %v", name, i, got[j].data[i], want[j].data[i])
				}
			}
		})
	}
}

// TestConvReLUMaxPool2DReusing: with a Reuse, the op gives the values and gradients it
// gives with fresh storage, bit for bit, though the storage holds NaNs from before and is
// larger than needed (a smaller last batch), and the second call writes where the first
// did: on the fused path (an input that needs no gradient) and on the two ops (a tracked
// input, as a second convolution layer's is; and every path on a CPU without AVX-512).
func TestConvReLUMaxPool2DReusing(t *testing.T) {
	k, b := rnd(2, 3, 3, 1, 32), rnd(3, 32)
	nan := float32(math.NaN())
	poisoned := func() *Reuse {
		big := 5 * 8 * 8 * 32 * 2
		r := &Reuse{u8: make([]uint8, big)}
		for s := range r.f32 {
			r.f32[s] = make([]float32, big)
			for i := range r.f32[s] {
				r.f32[s][i] = nan
			}
		}
		for i := range r.u8 {
			r.u8[i] = 0xff
		}
		return r
	}
	for _, trackX := range []bool{false, true} {
		step := func(r *Reuse, x *Tensor) (*Tensor, []*Tensor) {
			vk, vb := NewVariable("k", k, true), NewVariable("b", b, true)
			vars := []*Variable{vk, vb}
			tape := NewGradientTape()
			if trackX {
				vx := NewVariable("x", x, true)
				x = vx.Value()
				vars = append(vars, vx)
			}
			y := ConvReLUMaxPool2DReusing(r, x, vk.Value(), vb.Value())
			return y, tape.Gradient(lossOf(y), vars)
		}
		r := poisoned()
		var first *Tensor
		for i, n := range []int{5, 3} { // a batch of 5 images of 10x10, then a smaller one
			x := rnd(uint64(10+i), n, 10, 10, 1)
			y, g := step(r, x)
			yRef, gRef := step(nil, x)
			if !sameShape(y.Shape(), yRef.Shape()) {
				t.Fatalf("trackX=%v batch %d: shape %v, want %v", trackX, n, y.Shape(), yRef.Shape())
			}
			for j := range yRef.data {
				if y.data[j] != yRef.data[j] {
					t.Fatalf("trackX=%v batch %d: out[%d] = %v, with fresh storage %v", trackX, n, j, y.data[j], yRef.data[j])
				}
			}
			for j := range g {
				for e := range gRef[j].data {
					if g[j].data[e] != gRef[j].data[e] {
						t.Fatalf("trackX=%v batch %d: gradient %d [%d] = %v, with fresh storage %v", trackX, n, j, e, g[j].data[e], gRef[j].data[e])
					}
				}
			}
			if first == nil {
				first = y
			} else if &first.data[0] != &y.data[0] {
				t.Errorf("trackX=%v: the second call did not write where the first did", trackX)
			}
		}
	}
}
