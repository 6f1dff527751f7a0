package simd

import (
	"math"
	"math/rand"
	"slices"
	"testing"
)

func close32(a, b float32) bool {
	return math.Abs(float64(a-b)) <= 1e-5*(1+math.Abs(float64(b)))
}

// TestConv3x3C1 checks the direct convolution and its gradients against plain loops on
// random data, for 16, 32 and 64 filters, with and without the ReLU.
func TestConv3x3C1(t *testing.T) {
	if !hasAVX512 {
		t.Skip("simd: this CPU has no AVX-512 (the callers use their Go loops)")
	}
	rng := rand.New(rand.NewSource(3))
	const h, w = 5, 9
	x := make([]float32, h*w)
	for i := range x {
		x[i] = rng.Float32()*2 - 1
	}
	for _, o := range []int{16, 32, 64} {
		for _, relu := range []bool{false, true} {
			k := make([]float32, 9*o)
			bias := make([]float32, o)
			for i := range k {
				k[i] = rng.Float32()*2 - 1
			}
			for i := range bias {
				bias[i] = rng.Float32() - 0.5
			}
			npix := w - 2
			for oy := 0; oy < h-2; oy++ {
				out := make([]float32, npix*o)
				if !Conv3x3C1(x[oy*w:], w, k, bias, out, npix, o, relu) {
					t.Fatal("Conv3x3C1 declined")
				}
				gr := make([]float32, npix*o)
				for i := range gr {
					gr[i] = rng.Float32()*2 - 1
				}
				dk, db := make([]float32, 9*o), make([]float32, o)
				if !Conv3x3C1Grad(x[oy*w:], w, gr, out, npix, o, relu, dk, db) {
					t.Fatal("Conv3x3C1Grad declined")
				}
				wantK, wantB := make([]float32, 9*o), make([]float32, o)
				for p := 0; p < npix; p++ {
					for f := 0; f < o; f++ {
						s := bias[f]
						for t9 := 0; t9 < 9; t9++ {
							s += x[(oy+t9/3)*w+p+t9%3] * k[t9*o+f]
						}
						if relu && s < 0 {
							s = 0
						}
						if got := out[p*o+f]; !close32(got, s) {
							t.Fatalf("o %d relu %v: out[%d,%d] = %v, want %v", o, relu, p, f, got, s)
						}
						g := gr[p*o+f]
						if relu && out[p*o+f] <= 0 {
							g = 0
						}
						wantB[f] += g
						for t9 := 0; t9 < 9; t9++ {
							wantK[t9*o+f] += x[(oy+t9/3)*w+p+t9%3] * g
						}
					}
				}
				for i := range wantK {
					if !close32(dk[i], wantK[i]) {
						t.Fatalf("o %d relu %v: dk[%d] = %v, want %v", o, relu, i, dk[i], wantK[i])
					}
				}
				for i := range wantB {
					if !close32(db[i], wantB[i]) {
						t.Fatalf("o %d relu %v: db[%d] = %v, want %v", o, relu, i, db[i], wantB[i])
					}
				}
			}
		}
	}
}

// TestDeclines: shapes without a vector loop are declined, not computed wrong.
func TestDeclines(t *testing.T) {
	x := make([]float32, 100)
	if Conv3x3C1(x, 10, make([]float32, 9*8), make([]float32, 8), make([]float32, 8*8), 8, 8, false) {
		t.Error("Conv3x3C1 with 8 filters ran; want declined")
	}
	if MaxPool2x2Row(x, x, make([]float32, 12), make([]uint8, 12), 1, 12) {
		t.Error("MaxPool2x2Row with 12 channels ran; want declined")
	}
}

func TestPackTrans32(t *testing.T) {
	if !hasAVX512 {
		t.Skip("simd: this CPU has no AVX-512")
	}
	for _, tc := range []struct{ ldb, kc int }{{64, 64}, {70, 33}, {5408, 64}, {40, 1}, {16, 16}, {17, 17}, {512, 48}, {33, 15}} {
		b := make([]float32, 32*tc.ldb)
		for i := range b {
			b[i] = float32(i)
		}
		dst := make([]float32, 32*tc.kc)
		if !PackTrans32(b, tc.ldb, tc.kc, dst) {
			t.Fatal("declined")
		}
		for p := 0; p < tc.kc; p++ {
			for j := 0; j < 32; j++ {
				if got, want := dst[p*32+j], b[j*tc.ldb+p]; got != want {
					t.Fatalf("ldb %d kc %d: dst[%d*32+%d] = %v, want %v", tc.ldb, tc.kc, p, j, got, want)
				}
			}
		}
	}
}

// TestConvReLUPool checks the fused convolution, ReLU and 2x2 max pool, and its gradients,
// against plain loops (the pooled values bit for bit: the same sums as Conv3x3C1).
func TestConvReLUPool(t *testing.T) {
	if !hasAVX512 {
		t.Skip("simd: this CPU has no AVX-512")
	}
	rng := rand.New(rand.NewSource(5))
	for _, sz := range [][2]int{{6, 6}, {8, 11}, {28, 28}} {
		h, w := sz[0], sz[1]
		x := make([]float32, h*w)
		for i := range x {
			x[i] = rng.Float32()*2 - 1
		}
		ph, pw := (h-2)/2, (w-2)/2
		for _, o := range []int{16, 32} {
			k, bias := make([]float32, 9*o), make([]float32, o)
			for i := range k {
				k[i] = rng.Float32()*2 - 1
			}
			for i := range bias {
				bias[i] = rng.Float32() - 0.5
			}
			// The kernel's fused multiply-adds: the product is exact in float64, the sum
			// rounded once (to float64, then float32: the same here but in rare ties).
			conv := func(y, xx, f int) float32 {
				s := bias[f]
				for t9 := 0; t9 < 9; t9++ {
					s = float32(float64(x[(y+t9/3)*w+xx+t9%3])*float64(k[t9*o+f]) + float64(s))
				}
				return s
			}
			dk, db := make([]float32, 9*o), make([]float32, o)
			wantK, wantB := make([]float32, 9*o), make([]float32, o)
			for py := 0; py < ph; py++ {
				out, code := make([]float32, pw*o), make([]uint8, pw*o)
				if !ConvReLUPool(x[2*py*w:], w, k, bias, out, code, pw, o) {
					t.Fatal("declined")
				}
				gr := make([]float32, pw*o)
				for i := range gr {
					gr[i] = rng.Float32()*2 - 1
				}
				if !ConvReLUPoolGrad(x[2*py*w:], w, gr, out, code, pw, o, dk, db) {
					t.Fatal("grad declined")
				}
				for px := 0; px < pw; px++ {
					for f := 0; f < o; f++ {
						best, pos := conv(2*py, 2*px, f), 0
						for p := 1; p < 4; p++ {
							if v := conv(2*py+p/2, 2*px+p%2, f); v > best {
								best, pos = v, p
							}
						}
						want := max(best, 0)
						got := out[px*o+f]
						if got != want {
							t.Fatalf("%dx%d o %d: out[%d,%d,%d] = %v, want %v", h, w, o, py, px, f, got, want)
						}
						if want > 0 && int(code[px*o+f]) != pos {
							t.Fatalf("code[%d,%d,%d] = %d, want %d", py, px, f, code[px*o+f], pos)
						}
						if want > 0 {
							g := gr[px*o+f]
							wantB[f] += g
							for t9 := 0; t9 < 9; t9++ {
								wantK[t9*o+f] += x[(2*py+pos/2+t9/3)*w+2*px+pos%2+t9%3] * g
							}
						}
					}
				}
			}
			for i := range wantK {
				if !close32(dk[i], wantK[i]) {
					t.Fatalf("%dx%d o %d: dk[%d] = %v, want %v", h, w, o, i, dk[i], wantK[i])
				}
			}
			for i := range wantB {
				if !close32(db[i], wantB[i]) {
					t.Fatalf("%dx%d o %d: db[%d] = %v, want %v", h, w, o, i, db[i], wantB[i])
				}
			}
		}
	}
}

func TestAdd(t *testing.T) {
	if !hasAVX512 {
		t.Skip("simd: this CPU has no AVX-512")
	}
	rng := rand.New(rand.NewSource(1))
	for _, n := range []int{0, 63, 64, 65, 200, 4096 + 17} {
		dst, src := make([]float32, n), make([]float32, n+3)
		for i := range dst {
			dst[i] = rng.Float32()*2 - 1
		}
		for i := range src {
			src[i] = rng.Float32()*2 - 1
		}
		want := make([]float32, n)
		for i := range want {
			want[i] = dst[i] + src[i]
		}
		done := Add(dst, src)
		if done != n&^63 {
			t.Fatalf("n %d: did %d, want %d", n, done, n&^63)
		}
		for i := range done {
			if dst[i] != want[i] {
				t.Fatalf("n %d: [%d] = %v, want %v", n, i, dst[i], want[i])
			}
		}
	}
}

// BenchmarkPackTrans32 packs the strips of the peer CNN's dense kernel transposed (5408 rows
// of 64 values: the input gradient's B), 169 strips of 32 rows.
func BenchmarkPackTrans32(b *testing.B) {
	if !hasAVX512 {
		b.Skip("simd: this CPU has no AVX-512")
	}
	const rows, ldb = 5408, 64
	src := make([]float32, rows*ldb)
	dst := make([]float32, 32*ldb)
	for b.Loop() {
		for j0 := 0; j0+32 <= rows; j0 += 32 {
			PackTrans32(src[j0*ldb:], ldb, ldb, dst)
		}
	}
	b.ReportMetric(float64(rows*ldb*4)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
}

// TestAddTo covers the vector part (multiples of 64) and the Go loops after it.
func TestAddTo(t *testing.T) {
	for _, n := range []int{0, 1, 7, 8, 9, 16, 33, 64, 65, 200} {
		dst, src := make([]float32, n), make([]float32, n+3)
		for i := range src {
			src[i] = float32(i) + 0.5
		}
		for i := range dst {
			dst[i] = float32(2 * i)
		}
		AddTo(dst, src)
		for i, v := range dst {
			if want := float32(3*i) + 0.5; v != want {
				t.Errorf("AddTo(n=%d)[%d] = %v, want %v", n, i, v, want)
			}
		}
	}
}

func BenchmarkAddTo(b *testing.B) {
	dst, src := make([]float32, 1<<18), make([]float32, 1<<18)
	b.SetBytes(4 << 18)
	for b.Loop() {
		AddTo(dst, src)
	}
}

// TestAdamAVX2IsAVX512: the AVX2 Adam loop gives the AVX-512 loop's values bit for bit
// (optim's tests hold the AVX-512 loop to the Go loop), moments near and below the smallest
// normal included, over several steps.
func TestAdamAVX2IsAVX512(t *testing.T) {
	if !hasAVX512 || !hasAVX2 {
		t.Skip("simd: needs both AVX-512 and AVX2 to compare them")
	}
	rng := rand.New(rand.NewSource(5))
	const n = 1024
	small := func() float32 { return float32(math.Ldexp(rng.Float64(), -126+rng.Intn(12)-8)) }
	w1, m1, v1 := make([]float32, n), make([]float32, n), make([]float32, n)
	for i := range w1 {
		w1[i] = rng.Float32()*2 - 1
		if i%2 == 1 {
			m1[i], v1[i] = small(), small()
		}
	}
	w2, m2, v2 := append([]float32(nil), w1...), append([]float32(nil), m1...), append([]float32(nil), v1...)
	for step := 0; step < 40; step++ {
		g := make([]float32, n)
		for i := range g {
			switch i % 4 {
			case 1:
			case 3:
				g[i] = small() * 1e18
			default:
				g[i] = rng.Float32()*2 - 1
			}
		}
		adamAVX512(&w1[0], &g[0], &m1[0], &v1[0], n, 1e-3, 0.1, 0.001, 1e-7)
		adamAVX2(&w2[0], &g[0], &m2[0], &v2[0], n, 1e-3, 0.1, 0.001, 1e-7)
	}
	for i := range w1 {
		if math.Float32bits(w1[i]) != math.Float32bits(w2[i]) || math.Float32bits(m1[i]) != math.Float32bits(m2[i]) || math.Float32bits(v1[i]) != math.Float32bits(v2[i]) {
			t.Fatalf("element %d: AVX2 w %v m %v v %v, AVX-512 %v %v %v", i, w2[i], m2[i], v2[i], w1[i], m1[i], v1[i])
		}
	}
}

// TestAdamSumIsAdamOnTheSum: AdamSum's loops give the Adam loop's values on the two terms
// summed exactly beforehand (as AddTo sums them), bit for bit, moments near the smallest
// normal included; each stops at the first block where a term is subnormal (its sum with
// the other can be normal, which the loop's denormals-are-zero would lose) and the test, as
// optim's caller does, updates that block from the exact sum and goes on.
func TestAdamSumIsAdamOnTheSum(t *testing.T) {
	type loops struct {
		name  string
		ok    bool
		width int
		adam  func(w, grad, m, v *float32, n int, alpha, b1, b2, eps float32)
		sum   func(w, g0, g1, m, v *float32, n int, alpha, b1, b2, eps float32) int
	}
	for _, l := range []loops{{"avx512", hasAVX512, 16, adamAVX512, adamSumAVX512}, {"avx2", hasAVX2, 8, adamAVX2, adamSumAVX2}} {
		t.Run(l.name, func(t *testing.T) {
			if !l.ok {
				t.Skip("simd: the CPU lacks these loops")
			}
			rng := rand.New(rand.NewSource(7))
			const n = 1024
			small := func() float32 {
				return float32(math.Ldexp(rng.Float64(), -126+rng.Intn(12)-8)) * float32(1-2*rng.Intn(2))
			}
			sub := func() float32 { return float32(math.Ldexp(0.5+rng.Float64()/2, -126)) }
			w1, m1, v1 := make([]float32, n), make([]float32, n), make([]float32, n)
			for i := range w1 {
				w1[i] = rng.Float32()*2 - 1
				if i%2 == 1 {
					// First moments a little above the smallest normal: the share of a
					// normal sum of two subnormal terms in them is not flushed.
					m1[i], v1[i] = small()*64, small()
				}
			}
			w2, m2, v2 := slices.Clone(w1), slices.Clone(m1), slices.Clone(v1)
			stops := 0
			for step := 0; step < 40; step++ {
				g0, g1, sum := make([]float32, n), make([]float32, n), make([]float32, n)
				for i := range g0 {
					switch rng.Intn(8) {
					case 0: // two subnormals of one sign: their sum is normal
						g0[i], g1[i] = sub(), sub()
					case 1:
						g0[i] = small()
					case 2:
						g1[i] = small() * 1e18
					case 3:
					default:
						g0[i], g1[i] = rng.Float32()*2-1, rng.Float32()*2-1
					}
					sum[i] = g0[i] + g1[i]
				}
				l.adam(&w1[0], &sum[0], &m1[0], &v1[0], n, 1e-3, 0.1, 0.001, 1e-7)
				for i := 0; i < n; {
					done := l.sum(&w2[i], &g0[i], &g1[i], &m2[i], &v2[i], n-i, 1e-3, 0.1, 0.001, 1e-7)
					if done%l.width != 0 || i+done > n {
						t.Fatalf("step %d: %d elements from %d of %d", step, done, i, n)
					}
					i += done
					if i == n {
						break
					}
					subnormal := func(f float32) bool { return f != 0 && math.Abs(float64(f)) < 0x1p-126 }
					if !slices.ContainsFunc(g0[i:i+l.width], subnormal) && !slices.ContainsFunc(g1[i:i+l.width], subnormal) {
						t.Fatalf("step %d: the loop stopped at %d, a block without a subnormal term", step, i)
					}
					stops++
					l.adam(&w2[i], &sum[i], &m2[i], &v2[i], l.width, 1e-3, 0.1, 0.001, 1e-7)
					i += l.width
				}
				// Every step: a later step's large gradient hides a moment's earlier
				// difference in its last bits.
				for i := range w1 {
					if math.Float32bits(w1[i]) != math.Float32bits(w2[i]) || math.Float32bits(m1[i]) != math.Float32bits(m2[i]) || math.Float32bits(v1[i]) != math.Float32bits(v2[i]) {
						t.Fatalf("step %d, element %d (terms %v %v): AdamSum w %v m %v v %v, Adam on the sum %v %v %v", step, i, g0[i], g1[i], w2[i], m2[i], v2[i], w1[i], m1[i], v1[i])
					}
				}
			}
			if stops == 0 {
				t.Fatal("no block had a subnormal term: the test tests nothing")
			}
		})
	}
}

// TestAdamSum2IsAdamSum: AdamSum2's loops update w, m, v as AdamSum's do, bit for bit,
// stop at the same block (a subnormal term), and leave the same values in the second copy,
// whatever it held (they do not read it).
func TestAdamSum2IsAdamSum(t *testing.T) {
	type loops struct {
		name string
		ok   bool
		sum  func(w, g0, g1, m, v *float32, n int, alpha, b1, b2, eps float32) int
		sum2 func(w, g0, g1, m, v, w2, m2, v2 *float32, n int, alpha, b1, b2, eps float32) int
	}
	for _, l := range []loops{{"avx512", hasAVX512, adamSumAVX512, adamSum2AVX512}, {"avx2", hasAVX2, adamSumAVX2, adamSum2AVX2}} {
		t.Run(l.name, func(t *testing.T) {
			if !l.ok {
				t.Skip("simd: the CPU lacks these loops")
			}
			rng := rand.New(rand.NewSource(9))
			const n = 1024
			random := func(scale float32) []float32 {
				x := make([]float32, n)
				for i := range x {
					x[i] = (rng.Float32()*2 - 1) * scale
				}
				return x
			}
			for step := 0; step < 10; step++ {
				w, m, v := random(1), random(0.1), random(0.01)
				for i := range v {
					v[i] *= v[i]
				}
				g0, g1 := random(1), random(1)
				if step%2 == 1 { // a subnormal term: both loops stop before its block
					g1[rng.Intn(n)] = float32(math.Ldexp(0.75, -126))
				}
				wa, ma, va := slices.Clone(w), slices.Clone(m), slices.Clone(v)
				w2, m2, v2 := random(5), random(5), random(5) // garbage: not read
				doneA := l.sum(&wa[0], &g0[0], &g1[0], &ma[0], &va[0], n, 1e-3, 0.1, 0.001, 1e-7)
				done := l.sum2(&w[0], &g0[0], &g1[0], &m[0], &v[0], &w2[0], &m2[0], &v2[0], n, 1e-3, 0.1, 0.001, 1e-7)
				if done != doneA {
					t.Fatalf("step %d: AdamSum2 updated %d elements, AdamSum %d", step, done, doneA)
				}
				for i := range done {
					for _, c := range [][3]float32{{w[i], wa[i], w2[i]}, {m[i], ma[i], m2[i]}, {v[i], va[i], v2[i]}} {
						if math.Float32bits(c[0]) != math.Float32bits(c[1]) || math.Float32bits(c[2]) != math.Float32bits(c[1]) {
							t.Fatalf("step %d, element %d: AdamSum2 %v, its second copy %v; AdamSum %v", step, i, c[0], c[2], c[1])
						}
					}
				}
			}
		})
	}
}

// BenchmarkAdam runs Adam's loops over the peer CNN's largest variable (5408x64), and
// AdamSum's.
func BenchmarkAdam(b *testing.B) {
	const n = 5408 * 64
	w, g, m, v := make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)
	for i := range g {
		g[i] = 1e-3
	}
	for _, l := range []struct {
		name string
		ok   bool
		f    func(w, grad, m, v *float32, n int, alpha, b1, b2, eps float32)
	}{{"avx512", hasAVX512, adamAVX512}, {"avx2", hasAVX2, adamAVX2}} {
		b.Run(l.name, func(b *testing.B) {
			if !l.ok {
				b.Skip("not on this CPU")
			}
			for b.Loop() {
				l.f(&w[0], &g[0], &m[0], &v[0], n, 1e-3, 0.1, 0.001, 1e-7)
			}
		})
	}
	// The same with the gradient as two terms summed in the loop (two workers' gradients).
	g1 := slices.Clone(g)
	for _, l := range []struct {
		name string
		ok   bool
		f    func(w, g0, g1, m, v *float32, n int, alpha, b1, b2, eps float32) int
	}{{"sum-avx512", hasAVX512, adamSumAVX512}, {"sum-avx2", hasAVX2, adamSumAVX2}} {
		b.Run(l.name, func(b *testing.B) {
			if !l.ok {
				b.Skip("not on this CPU")
			}
			for b.Loop() {
				if l.f(&w[0], &g[0], &g1[0], &m[0], &v[0], n, 1e-3, 0.1, 0.001, 1e-7) != n {
					b.Fatal("the loop stopped early")
				}
			}
		})
	}
}
