package tensor

import (
	"math"
	"math/rand"
	"testing"
)

// TestMaxPool2x2MatchesGeneral: the 2x2 stride-2 path gives the general path's outputs and
// gradients (first of equal values wins, an odd last row or column gets no gradient), on
// random inputs with many ties.
func TestMaxPool2x2MatchesGeneral(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for _, shape := range [][4]int{{1, 2, 2, 1}, {2, 4, 6, 3}, {3, 5, 7, 16}, {2, 26, 26, 32}, {1, 3, 2, 17}} {
		n, h, w, c := shape[0], shape[1], shape[2], shape[3]
		x := make([]float32, n*h*w*c)
		for i := range x {
			x[i] = float32(rng.Intn(5)) // ties are common
		}
		g := windowGeom("MaxPool", []int{n, h, w, c}, 2, 2, 2, "valid")
		want := make([]float32, n*g.oh*g.ow*c)
		arg := make([]int32, len(want))
		maxPoolRaw(x, g, want, arg)
		got := make([]float32, len(want))
		code := make([]uint8, len(want))
		maxPool2x2(x, g, got, code)
		gr := make([]float32, len(want))
		for i := range gr {
			gr[i] = rng.Float32() + 0.5
		}
		wantGX := make([]float32, len(x))
		for i, a := range arg {
			wantGX[a] += gr[i]
		}
		gotGX := make([]float32, len(x))
		maxPool2x2Grad(gr, code, g, gotGX)
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("shape %v: out[%d] = %v, want %v", shape, i, got[i], want[i])
			}
		}
		for i := range wantGX {
			if gotGX[i] != wantGX[i] {
				t.Fatalf("shape %v: gx[%d] = %v, want %v", shape, i, gotGX[i], wantGX[i])
			}
		}
	}
}

// TestMaxPool2x2NaN: a NaN in a window is the window's maximum, in every path (the vector
// loop for 16 or 32 channels, the Go loop for 3), as the general path's max gives.
func TestMaxPool2x2NaN(t *testing.T) {
	nan := float32(math.NaN())
	for _, c := range []int{3, 16, 32} {
		for pos := 0; pos < 4; pos++ {
			x := make([]float32, 2*2*c)
			for i := range x {
				x[i] = float32(i % 7)
			}
			x[pos*c+1] = nan
			g := windowGeom("MaxPool", []int{1, 2, 2, c}, 2, 2, 2, "valid")
			out := make([]float32, c)
			code := make([]uint8, c)
			maxPool2x2(x, g, out, code)
			if !math.IsNaN(float64(out[1])) {
				t.Errorf("c %d, NaN at window position %d: out = %v, want NaN", c, pos, out[1])
			}
			if math.IsNaN(float64(out[0])) {
				t.Errorf("c %d: channel 0 (no NaN) = NaN", c)
			}
		}
	}
}

// poolBench is the peer CNN's max pool input: a batch of 64 of 26x26x32.
func poolBench() (x []float32, g convGeom, out []float32) {
	const n, h, w, c = 64, 26, 26, 32
	x = make([]float32, n*h*w*c)
	for i := range x {
		x[i] = rand.Float32()
	}
	g = windowGeom("MaxPool", []int{n, h, w, c}, 2, 2, 2, "valid")
	return x, g, make([]float32, n*g.oh*g.ow*c)
}

// BenchmarkMaxPool: the general path (scatter into a new gradient) against the 2x2 path,
// forward and backward, and the 2x2 path's parts.
func BenchmarkMaxPool(b *testing.B) {
	x, g, out := poolBench()
	code := make([]uint8, len(out))
	gx := make([]float32, len(x))
	b.Run("general", func(b *testing.B) {
		arg := make([]int32, len(out))
		for b.Loop() {
			maxPoolRaw(x, g, out, arg)
			gx := make([]float32, len(x))
			for i, a := range arg {
				gx[a] += out[i]
			}
		}
	})
	b.Run("2x2", func(b *testing.B) {
		for b.Loop() {
			maxPool2x2(x, g, out, code)
			gx := make([]float32, len(x))
			maxPool2x2Grad(out, code, g, gx)
		}
	})
	b.Run("2x2-fwd", func(b *testing.B) {
		for b.Loop() {
			maxPool2x2(x, g, out, code)
		}
	})
	b.Run("2x2-bwd", func(b *testing.B) {
		for b.Loop() {
			maxPool2x2Grad(out, code, g, gx)
		}
	})
}
