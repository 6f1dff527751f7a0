//go:build gpukerneltest

// The GPU kernel tests: on a GPU, every kernel runs on random inputs and is compared with
// the CPU implementation it reproduces (distlib/tensor, distlib/optim), forward and
// gradients. Without a driver or a GPU they skip, saying why. Build and run:
//
//	go test -c -tags gpukerneltest -o gpukern.test ./gpu/kernels
//	./gpukern.test -test.v -test.run TestGPU
package kernels_test

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
	"unsafe"

	"godist/distlib/optim"
	"godist/distlib/tensor"
	"godist/gpu/kernels"
)

// testDevice is what the tests need of a GPU: device memory, copies, and a synchronous
// launch of a table kernel with Kernel.Args's parameters.
type testDevice interface {
	Alloc(bytes int) (kernels.DevicePtr, error)
	CopyIn(dst kernels.DevicePtr, src unsafe.Pointer, bytes int) error
	CopyOut(dst unsafe.Pointer, src kernels.DevicePtr, bytes int) error
	Launch(k *kernels.Kernel, g kernels.Geometry, args []unsafe.Pointer) error
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func up(t *testing.T, d testDevice, x []float32) kernels.DevicePtr {
	t.Helper()
	p, err := d.Alloc(4 * len(x))
	must(t, err)
	if len(x) > 0 {
		must(t, d.CopyIn(p, unsafe.Pointer(&x[0]), 4*len(x)))
	}
	return p
}

func upInts(t *testing.T, d testDevice, x []int32) kernels.DevicePtr {
	t.Helper()
	p, err := d.Alloc(4 * len(x))
	must(t, err)
	must(t, d.CopyIn(p, unsafe.Pointer(&x[0]), 4*len(x)))
	return p
}

func alloc(t *testing.T, d testDevice, n int) kernels.DevicePtr {
	t.Helper()
	p, err := d.Alloc(4 * n)
	must(t, err)
	return p
}

func down(t *testing.T, d testDevice, p kernels.DevicePtr, n int) []float32 {
	t.Helper()
	out := make([]float32, n)
	must(t, d.CopyOut(unsafe.Pointer(&out[0]), p, 4*n))
	return out
}

func downInts(t *testing.T, d testDevice, p kernels.DevicePtr, n int) []int32 {
	t.Helper()
	out := make([]int32, n)
	must(t, d.CopyOut(unsafe.Pointer(&out[0]), p, 4*n))
	return out
}

// launch runs k with the geometry its Shape calls for: n elements (ShapeLinear), rows x
// cols (ShapeRowBlocks), or cols columns (ShapeColumnTiles).
func launch(t *testing.T, d testDevice, k *kernels.Kernel, n, rows, cols int, vals ...any) {
	t.Helper()
	var g kernels.Geometry
	var err error
	switch k.Shape {
	case kernels.ShapeLinear:
		g, err = kernels.Linear(n)
	case kernels.ShapeRowBlocks:
		g, err = kernels.RowBlocks(rows, cols)
	case kernels.ShapeColumnTiles:
		g, err = kernels.ColumnTiles(cols)
	}
	must(t, err)
	args, err := k.Args(vals...)
	must(t, err)
	must(t, d.Launch(k, g, args))
}

// near fails when got and want differ by more than atol + rtol*|want| anywhere, and logs
// the largest difference.
func near(t *testing.T, what string, got, want []float32, rtol, atol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	worst, at := 0.0, -1
	for i := range got {
		g, w := float64(got[i]), float64(want[i])
		diff := math.Abs(g - w)
		if math.IsNaN(g) != math.IsNaN(w) || diff > atol+rtol*math.Abs(w) {
			t.Fatalf("%s: element %d is %v, CPU %v (tolerance %g + %g*|cpu|)", what, i, got[i], want[i], atol, rtol)
		}
		if diff > worst {
			worst, at = diff, i
		}
	}
	t.Logf("%s: %d values, max |gpu-cpu| %.3g (at %d)", what, len(got), worst, at)
}

func random(shape []int, seed uint64) *tensor.Tensor {
	return tensor.RandomUniform(shape, -1, 1, seed)
}

// gradOf returns d sum(f(x)*g) / d x for each of xs: the gradient with upstream g.
func gradOf(f func(xs ...*tensor.Tensor) *tensor.Tensor, g *tensor.Tensor, xs ...*tensor.Tensor) (*tensor.Tensor, []*tensor.Tensor) {
	tape := tensor.NewGradientTape()
	srcs := make([]any, len(xs))
	for i, x := range xs {
		tape.Watch(x)
		srcs[i] = x
	}
	y := f(xs...)
	return y, tape.Gradient(tensor.ReduceSum(tensor.Mul(y, g)), srcs...)
}

func TestGPUElementwise(t *testing.T) {
	d := openTestDevice(t)
	n := 1<<24 + 3 // more than kernels.MaxLinearGrid blocks: the grid-stride loops run
	a, b := random([]int{n}, 1), random([]int{n}, 2)
	pa, pb, pz := up(t, d, a.Data()), up(t, d, b.Data()), alloc(t, d, n)
	for _, tc := range []struct {
		k   *kernels.Kernel
		cpu *tensor.Tensor
	}{
		{kernels.Add, tensor.Add(a, b)},
		{kernels.Sub, tensor.Sub(a, b)},
		{kernels.Mul, tensor.Mul(a, b)},
	} {
		launch(t, d, tc.k, n, 0, 0, pa, pb, pz, n)
		near(t, tc.k.Name, down(t, d, pz, n), tc.cpu.Data(), 0, 0)
	}
	launch(t, d, kernels.Scale, n, 0, 0, pa, float32(-0.37), pz, n)
	near(t, "scale_f32", down(t, d, pz, n), tensor.Scale(a, -0.37).Data(), 0, 0)

	y := append([]float32(nil), b.Data()...)
	py := up(t, d, y)
	launch(t, d, kernels.Axpy, n, 0, 0, float32(0.25), pa, py, n)
	for i := range y {
		y[i] += 0.25 * a.Data()[i]
	}
	near(t, "axpy_f32", down(t, d, py, n), y, 0, 0)

	launch(t, d, kernels.Fill, n, 0, 0, pz, float32(1.5), n)
	near(t, "fill_f32", down(t, d, pz, n), tensor.Fill(1.5, n).Data(), 0, 0)

	ints := make([]int32, 1000)
	want := make([]float32, len(ints))
	for i := range ints {
		ints[i] = int32(i*7919%2001) - 1000
		want[i] = float32(ints[i])
	}
	pi, pf := upInts(t, d, ints), alloc(t, d, len(ints))
	launch(t, d, kernels.CastI32F32, len(ints), 0, 0, pi, pf, len(ints))
	near(t, "cast_i32_f32", down(t, d, pf, len(ints)), want, 0, 0)
	fl := []float32{0, 1.9, -1.9, 2.5, -7, 1e6}
	pf2, pi2 := up(t, d, fl), alloc(t, d, len(fl))
	launch(t, d, kernels.CastF32I32, len(fl), 0, 0, pf2, pi2, len(fl))
	gotI := downInts(t, d, pi2, len(fl))
	for i, v := range fl {
		if gotI[i] != int32(v) {
			t.Errorf("cast_f32_i32(%v) = %d, want %d", v, gotI[i], int32(v))
		}
	}
}

func TestGPUReLUAndBias(t *testing.T) {
	d := openTestDevice(t)
	rows, cols := 4099, 130
	n := rows * cols
	x, b, g := random([]int{rows, cols}, 3), random([]int{cols}, 4), random([]int{rows, cols}, 5)
	px, pb, pg, py, pdx := up(t, d, x.Data()), up(t, d, b.Data()), up(t, d, g.Data()), alloc(t, d, n), alloc(t, d, n)

	yr, gr := gradOf(func(xs ...*tensor.Tensor) *tensor.Tensor { return tensor.ReLU(xs[0]) }, g, x)
	launch(t, d, kernels.ReLU, n, 0, 0, px, py, n)
	near(t, "relu_f32", down(t, d, py, n), yr.Data(), 0, 0)
	launch(t, d, kernels.ReLUGrad, n, 0, 0, pg, py, pdx, n)
	near(t, "relu_grad_f32", down(t, d, pdx, n), gr[0].Data(), 0, 0)

	yb, gb := gradOf(func(xs ...*tensor.Tensor) *tensor.Tensor { return tensor.BiasAdd(xs[0], xs[1]) }, g, x, b)
	launch(t, d, kernels.BiasAdd, n, 0, 0, px, pb, py, rows, cols)
	near(t, "bias_add_f32", down(t, d, py, n), yb.Data(), 0, 0)
	pdb := alloc(t, d, cols)
	launch(t, d, kernels.BiasGrad, 0, rows, cols, pg, pdb, rows, cols)
	near(t, "bias_grad_f32", down(t, d, pdb, cols), gb[1].Data(), 1e-4, 1e-4)

	launch(t, d, kernels.BiasReLU, n, 0, 0, px, pb, py, rows, cols)
	near(t, "bias_relu_f32", down(t, d, py, n), tensor.ReLU(tensor.BiasAdd(x, b)).Data(), 0, 0)
}

func TestGPURowReductions(t *testing.T) {
	d := openTestDevice(t)
	for _, sh := range [][2]int{{300, 1500}, {5, 10}, {7, 3000}, {1, 1}} {
		rows, cols := sh[0], sh[1]
		x := random([]int{rows, cols}, uint64(rows*cols))
		px, po := up(t, d, x.Data()), alloc(t, d, rows)
		launch(t, d, kernels.RowSum, 0, rows, cols, px, po, rows, cols)
		near(t, "row_sum_f32", down(t, d, po, rows), tensor.ReduceSum(x, 1).Data(), 1e-5, 1e-4)
		launch(t, d, kernels.RowMax, 0, rows, cols, px, po, rows, cols)
		near(t, "row_max_f32", down(t, d, po, rows), tensor.ReduceMax(x, 1).Data(), 0, 0)
	}
}

func TestGPUSoftmaxCrossEntropy(t *testing.T) {
	d := openTestDevice(t)
	for _, sh := range [][2]int{{513, 10}, {7, 3000}} {
		rows, cols := sh[0], sh[1]
		logits := tensor.Scale(random([]int{rows, cols}, 7), 5)
		labels := make([]float32, rows)
		r := rand.New(rand.NewPCG(1, uint64(cols)))
		for i := range labels {
			labels[i] = float32(r.IntN(cols))
		}
		lab := tensor.MustNew([]int{rows}, labels)
		g := random([]int{rows}, 8)
		loss, grads := gradOf(func(xs ...*tensor.Tensor) *tensor.Tensor {
			return tensor.SparseSoftmaxCrossEntropyWithLogits(xs[0], lab)
		}, g, logits)
		pl, plab, plogp, ploss, pbad := up(t, d, logits.Data()), up(t, d, labels), alloc(t, d, rows*cols), alloc(t, d, rows), upInts(t, d, []int32{0})
		launch(t, d, kernels.SoftmaxXent, 0, rows, cols, pl, plab, plogp, ploss, pbad, rows, cols)
		if bad := downInts(t, d, pbad, 1)[0]; bad != 0 {
			t.Fatalf("softmax_xent_f32 reported a bad label in row %d", bad-1)
		}
		near(t, "softmax_xent_f32 loss", down(t, d, ploss, rows), loss.Data(), 1e-5, 1e-5)
		pg, pdl := up(t, d, g.Data()), alloc(t, d, rows*cols)
		launch(t, d, kernels.SoftmaxXentGrad, rows*cols, 0, 0, pg, plogp, plab, pdl, rows, cols)
		near(t, "softmax_xent_grad_f32", down(t, d, pdl, rows*cols), grads[0].Data(), 1e-5, 1e-6)

		// A label that is not a class index is reported, not silently used.
		labels[rows/2] = float32(cols) // out of range
		plab = up(t, d, labels)
		pbad = upInts(t, d, []int32{0})
		launch(t, d, kernels.SoftmaxXent, 0, rows, cols, pl, plab, plogp, ploss, pbad, rows, cols)
		if bad := downInts(t, d, pbad, 1)[0]; bad != int32(rows/2+1) {
			t.Errorf("bad label in row %d: flag %d, want %d", rows/2, bad, rows/2+1)
		}
	}
}

func TestGPUConv2D(t *testing.T) {
	d := openTestDevice(t)
	for _, tc := range []struct {
		n, h, w, c, k, o, stride int
		padding                  string
	}{
		{4, 13, 11, 3, 3, 8, 1, "valid"},
		{4, 13, 11, 3, 3, 8, 1, "same"},
		{2, 13, 11, 5, 4, 6, 2, "same"},
		{3, 28, 28, 1, 5, 32, 1, "same"},
		{2, 9, 9, 16, 3, 4, 2, "valid"},
	} {
		oh, ow, pt, pl, err := kernels.Window(tc.h, tc.w, tc.k, tc.k, tc.stride, tc.padding)
		must(t, err)
		x := random([]int{tc.n, tc.h, tc.w, tc.c}, 9)
		k := random([]int{tc.k, tc.k, tc.c, tc.o}, 10)
		g := random([]int{tc.n, oh, ow, tc.o}, 11)
		y, grads := gradOf(func(xs ...*tensor.Tensor) *tensor.Tensor {
			return tensor.Conv2D(xs[0], xs[1], tc.stride, tc.padding)
		}, g, x, k)
		if s := y.Shape(); s[1] != oh || s[2] != ow {
			t.Fatalf("kernels.Window gives %dx%d, tensor.Conv2D %v", oh, ow, s)
		}
		px, pk := up(t, d, x.Data()), up(t, d, k.Data())
		ny := tc.n * oh * ow * tc.o
		py := alloc(t, d, ny)
		launch(t, d, kernels.Conv2DDirect, ny, 0, 0, px, pk, py, tc.n, tc.h, tc.w, tc.c, tc.k, tc.k, tc.o, tc.stride, pt, pl, oh, ow)
		near(t, "conv2d_direct_f32 "+tc.padding, down(t, d, py, ny), y.Data(), 1e-4, 1e-4)

		// im2col, then the matrix multiply (cuBLAS's part) on the CPU.
		rows, kc := tc.n*oh*ow, tc.k*tc.k*tc.c
		pcols := alloc(t, d, rows*kc)
		launch(t, d, kernels.Im2Col, rows*kc, 0, 0, px, pcols, tc.n, tc.h, tc.w, tc.c, tc.k, tc.k, tc.stride, pt, pl, oh, ow)
		cols := tensor.MustNew([]int{rows, kc}, down(t, d, pcols, rows*kc))
		k2 := tensor.Reshape(k, kc, tc.o)
		near(t, "im2col_f32 x kernel", tensor.MatMul(cols, k2, false, false).Data(), y.Data(), 1e-4, 1e-4)
		near(t, "conv filter gradient from im2col", tensor.MatMul(cols, tensor.Reshape(g, rows, tc.o), true, false).Data(), grads[1].Data(), 1e-4, 1e-4)

		// The input gradient: dcols = dY x K^T (cuBLAS's part) on the CPU, col2im on the GPU.
		dcols := tensor.MatMul(tensor.Reshape(g, rows, tc.o), k2, false, true)
		pdc, pdx := up(t, d, dcols.Data()), alloc(t, d, x.Size())
		launch(t, d, kernels.Col2Im, x.Size(), 0, 0, pdc, pdx, tc.n, tc.h, tc.w, tc.c, tc.k, tc.k, tc.stride, pt, pl, oh, ow)
		near(t, "col2im_f32 (conv input gradient)", down(t, d, pdx, x.Size()), grads[0].Data(), 1e-4, 1e-4)
	}
}

func TestGPUMaxPool(t *testing.T) {
	d := openTestDevice(t)
	for _, tc := range []struct {
		n, h, w, c, size, stride int
		padding                  string
	}{
		{3, 10, 12, 5, 2, 2, "valid"},
		{3, 9, 10, 5, 2, 2, "same"},
		{2, 9, 9, 4, 3, 2, "same"},      // overlapping windows: the gradient's atomics
		{64, 28, 28, 32, 2, 2, "valid"}, // the course CNN's pool
	} {
		oh, ow, pt, pl, err := kernels.Window(tc.h, tc.w, tc.size, tc.size, tc.stride, tc.padding)
		must(t, err)
		x := random([]int{tc.n, tc.h, tc.w, tc.c}, 12)
		g := random([]int{tc.n, oh, ow, tc.c}, 13)
		y, grads := gradOf(func(xs ...*tensor.Tensor) *tensor.Tensor {
			return tensor.MaxPool2D(xs[0], tc.size, tc.stride, tc.padding)
		}, g, x)
		nout := y.Size()
		px, py, parg := up(t, d, x.Data()), alloc(t, d, nout), alloc(t, d, nout)
		launch(t, d, kernels.MaxPool, nout, 0, 0, px, py, parg, tc.n, tc.h, tc.w, tc.c, tc.size, tc.stride, pt, pl, oh, ow)
		near(t, "maxpool_f32 "+tc.padding, down(t, d, py, nout), y.Data(), 0, 0)
		pg, pdx := up(t, d, g.Data()), alloc(t, d, x.Size())
		launch(t, d, kernels.Fill, x.Size(), 0, 0, pdx, float32(0), x.Size())
		launch(t, d, kernels.MaxPoolGrad, nout, 0, 0, pg, parg, pdx, nout)
		near(t, "maxpool_grad_f32 "+tc.padding, down(t, d, pdx, x.Size()), grads[0].Data(), 1e-6, 1e-6)
	}
}

func TestGPUOptimizers(t *testing.T) {
	d := openTestDevice(t)
	const n, steps = 100003, 5
	for _, tc := range []struct {
		name string
		spec optim.Spec
	}{
		{"sgd", optim.NewSGD(0.1, 0, false)},
		{"momentum", optim.NewSGD(0.05, 0.9, false)},
		{"nesterov", optim.NewSGD(0.05, 0.9, true)},
		{"adam", optim.NewAdam(0.001, 0.9, 0.999, 1e-7)},
		{"adam big eps", optim.NewAdam(0.01, 0.8, 0.99, 1e-3)},
		{"rmsprop", optim.NewRMSprop(0.001, 0.9, 0, 1e-7)},
		{"rmsprop momentum", optim.NewRMSprop(0.001, 0.9, 0.5, 1e-7)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			must(t, tc.spec.Validate())
			w := append([]float32(nil), random([]int{n}, 14).Data()...)
			slots := make([][]float32, 2)
			for i := range slots {
				slots[i] = make([]float32, n)
			}
			pw, ps0, ps1, pg := up(t, d, w), up(t, d, slots[0]), up(t, d, slots[1]), alloc(t, d, n)
			s := tc.spec
			for step := int64(1); step <= steps; step++ {
				g := random([]int{n}, uint64(100+step)).Data()
				must(t, d.CopyIn(pg, unsafe.Pointer(&g[0]), 4*n))
				s.Apply(w, g, slots, step)
				switch {
				case s.Kind == optim.SGD && s.Momentum == 0:
					launch(t, d, kernels.SGD, n, 0, 0, pw, pg, float32(s.LearningRate), n)
				case s.Kind == optim.SGD:
					launch(t, d, kernels.SGDMomentum, n, 0, 0, pw, pg, ps0, float32(s.LearningRate), float32(s.Momentum), s.Nesterov, n)
				case s.Kind == optim.Adam:
					alpha, err := kernels.AdamAlpha(s.LearningRate, s.Beta1, s.Beta2, step)
					must(t, err)
					launch(t, d, kernels.Adam, n, 0, 0, pw, pg, ps0, ps1, alpha, float32(1-s.Beta1), float32(1-s.Beta2), float32(s.Epsilon), n)
				case s.Kind == optim.RMSprop:
					mom := ps1
					if s.Momentum == 0 {
						mom = 0
					}
					launch(t, d, kernels.RMSprop, n, 0, 0, pw, pg, ps0, mom, float32(s.LearningRate), float32(s.Rho), float32(s.Epsilon), float32(s.Momentum), n)
				}
			}
			// -fmad=false and IEEE sqrt and division: the same float32 arithmetic as Go's.
			near(t, tc.name+" weights", down(t, d, pw, n), w, 1e-6, 1e-7)
			if s.Slots() > 0 {
				near(t, tc.name+" slot 0", down(t, d, ps0, n), slots[0], 1e-6, 1e-7)
			}
			if s.Slots() > 1 {
				near(t, tc.name+" slot 1", down(t, d, ps1, n), slots[1], 1e-6, 1e-7)
			}
		})
	}
}

// NaN and infinities go where the CPU sends them (Go's max propagates NaN; fmaxf would not).
func TestGPUNaN(t *testing.T) {
	d := openTestDevice(t)
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	x := tensor.MustNew([]int{4, 4}, []float32{
		1, nan, 3, -2,
		-inf, -inf, -inf, -inf,
		nan, 5, -1, 0,
		0.5, -0.5, inf, 2,
	})
	px, po, py := up(t, d, x.Data()), alloc(t, d, 4), alloc(t, d, 16)
	launch(t, d, kernels.RowMax, 0, 4, 4, px, po, 4, 4)
	near(t, "row_max_f32 with NaN and -Inf", down(t, d, po, 4), tensor.ReduceMax(x, 1).Data(), 0, 0)
	launch(t, d, kernels.ReLU, 16, 0, 0, px, py, 16)
	near(t, "relu_f32 with NaN", down(t, d, py, 16), tensor.ReLU(x).Data(), 0, 0)

	x4 := tensor.Reshape(x, 1, 4, 4, 1)
	g := random([]int{1, 2, 2, 1}, 20)
	y, grads := gradOf(func(xs ...*tensor.Tensor) *tensor.Tensor { return tensor.MaxPool2D(xs[0], 2, 2, "valid") }, g, x4)
	px4, pp, parg, pg, pdx := up(t, d, x4.Data()), alloc(t, d, 4), alloc(t, d, 4), up(t, d, g.Data()), alloc(t, d, 16)
	launch(t, d, kernels.MaxPool, 4, 0, 0, px4, pp, parg, 1, 4, 4, 1, 2, 2, 0, 0, 2, 2)
	near(t, "maxpool_f32 with NaN", down(t, d, pp, 4), y.Data(), 0, 0)
	launch(t, d, kernels.Fill, 16, 0, 0, pdx, float32(0), 16)
	launch(t, d, kernels.MaxPoolGrad, 4, 0, 0, pg, parg, pdx, 4)
	near(t, "maxpool_grad_f32 with NaN", down(t, d, pdx, 16), grads[0].Data(), 0, 0)
}

// TestGPUAdamBandwidth logs the fused Adam update's effective memory bandwidth (it reads
// w, g, m, v and writes w, m, v: 28 bytes per element) for bench/RESULTS.md; the issue's
// goal is >= 80% of the GPU's peak (H100 SXM: 3.35 TB/s, PCIe: 2.0 TB/s). It asserts only
// that the result is still Spec.Apply's.
func TestGPUAdamBandwidth(t *testing.T) {
	d := openTestDevice(t)
	const n, reps = 64 << 20, 20
	w := random([]int{n}, 30).Data()
	g := random([]int{n}, 31).Data()
	pw, pg, pm, pv := up(t, d, w), up(t, d, g), up(t, d, make([]float32, n)), up(t, d, make([]float32, n))
	s := optim.NewAdam(0.001, 0.9, 0.999, 1e-7)
	slots := [][]float32{make([]float32, n), make([]float32, n)}
	geo, err := kernels.Linear(n)
	must(t, err)
	var elapsed time.Duration
	for step := int64(1); step <= reps; step++ {
		alpha, err := kernels.AdamAlpha(s.LearningRate, s.Beta1, s.Beta2, step)
		must(t, err)
		args, err := kernels.Adam.Args(pw, pg, pm, pv, alpha, float32(1-s.Beta1), float32(1-s.Beta2), float32(s.Epsilon), n)
		must(t, err)
		start := time.Now()
		must(t, d.Launch(kernels.Adam, geo, args)) // synchronous
		if step > 1 {                              // the first launch JIT-compiles and warms up
			elapsed += time.Since(start)
		}
		s.Apply(w, g, slots, step)
	}
	per := elapsed / (reps - 1)
	t.Logf("adam_f32 on %d floats: %v per step, %.0f GB/s effective (28 bytes per element, launch and sync included)",
		n, per, 28*float64(n)/per.Seconds()/1e9)
	near(t, "adam_f32 after the timed steps", down(t, d, pw, n), w, 1e-6, 1e-7)
}
