package tensor

import (
	"math"
	"runtime"
	"strings"
	"sync"

	"godist/distlib/device"
	"godist/internal/simd"
)

// convGeom is the geometry of a 2-D window op over NHWC input.
type convGeom struct {
	n, h, w, c      int // input
	kh, kw          int // window
	stride          int
	oh, ow          int // output
	padTop, padLeft int
}

// windowGeom computes output size and padding the way TensorFlow does: "valid" uses only
// full windows; "same" gives ceil(in/stride) outputs and pads evenly, the extra on the
// bottom/right.
func windowGeom(op string, xshape []int, kh, kw, stride int, padding string) convGeom {
	if len(xshape) != 4 {
		panic(shapeErr(op, "input must be NHWC (rank 4), got shape %v", xshape))
	}
	if stride < 1 {
		panic(argErr(op, "stride %d must be >= 1", stride))
	}
	g := convGeom{n: xshape[0], h: xshape[1], w: xshape[2], c: xshape[3], kh: kh, kw: kw, stride: stride}
	switch strings.ToLower(padding) {
	case "valid":
		if g.h < kh || g.w < kw {
			panic(shapeErr(op, "window %dx%d is larger than the input %dx%d with \"valid\" padding", kh, kw, g.h, g.w))
		}
		g.oh = (g.h-kh)/stride + 1
		g.ow = (g.w-kw)/stride + 1
	case "same":
		g.oh = (g.h + stride - 1) / stride
		g.ow = (g.w + stride - 1) / stride
		ph := max((g.oh-1)*stride+kh-g.h, 0)
		pw := max((g.ow-1)*stride+kw-g.w, 0)
		g.padTop, g.padLeft = ph/2, pw/2
	default:
		panic(argErr(op, "padding %q is not \"valid\" or \"same\"", padding))
	}
	return g
}

// im2col writes the patches of x as rows [n*oh*ow, kh*kw*c] (zeros for padding).
func im2col(x []float32, g convGeom, cols []float32) {
	im2colRows(x, g, 0, g.n*g.oh*g.ow, cols)
}

// im2colRows writes the patches of output positions r0..r1 (rows of the im2col matrix,
// counted over the whole batch) into cols [r1-r0, kh*kw*c].
func im2colRows(x []float32, g convGeom, r0, r1 int, cols []float32) {
	kc := g.kh * g.kw * g.c
	per := g.oh * g.ow
	for r := r0; r < r1; r++ {
		b, pos := r/per, r%per
		oy, ox := pos/g.ow, pos%g.ow
		img := x[b*g.h*g.w*g.c : (b+1)*g.h*g.w*g.c]
		dst := cols[(r-r0)*kc : (r-r0+1)*kc]
		iy0 := oy*g.stride - g.padTop
		ix0 := ox*g.stride - g.padLeft
		p := 0
		for ky := 0; ky < g.kh; ky++ {
			iy := iy0 + ky
			if iy < 0 || iy >= g.h {
				clear(dst[p : p+g.kw*g.c])
				p += g.kw * g.c
				continue
			}
			if ix0 >= 0 && ix0+g.kw <= g.w {
				src := img[(iy*g.w+ix0)*g.c : (iy*g.w+ix0+g.kw)*g.c]
				copy(dst[p:p+len(src)], src)
				p += len(src)
				continue
			}
			for kx := 0; kx < g.kw; kx++ {
				ix := ix0 + kx
				if ix < 0 || ix >= g.w {
					clear(dst[p : p+g.c])
				} else {
					copy(dst[p:p+g.c], img[(iy*g.w+ix)*g.c:(iy*g.w+ix+1)*g.c])
				}
				p += g.c
			}
		}
	}
}

// col2im adds the rows of cols back into the image gradient dx (the adjoint of im2col).
func col2im(cols []float32, g convGeom, dx []float32) {
	col2imRows(cols, g, 0, g.n*g.oh*g.ow, dx)
}

// col2imRows adds rows r0..r1 of the im2col matrix, held in cols [r1-r0, kh*kw*c], back
// into the image gradient dx.
func col2imRows(cols []float32, g convGeom, r0, r1 int, dx []float32) {
	kc := g.kh * g.kw * g.c
	per := g.oh * g.ow
	for r := r0; r < r1; r++ {
		b, pos := r/per, r%per
		oy, ox := pos/g.ow, pos%g.ow
		img := dx[b*g.h*g.w*g.c : (b+1)*g.h*g.w*g.c]
		src := cols[(r-r0)*kc : (r-r0+1)*kc]
		iy0 := oy*g.stride - g.padTop
		ix0 := ox*g.stride - g.padLeft
		p := 0
		for ky := 0; ky < g.kh; ky++ {
			iy := iy0 + ky
			if iy < 0 || iy >= g.h {
				p += g.kw * g.c
				continue
			}
			for kx := 0; kx < g.kw; kx++ {
				ix := ix0 + kx
				if ix >= 0 && ix < g.w {
					d := img[(iy*g.w+ix)*g.c : (iy*g.w+ix+1)*g.c]
					s := src[p : p+g.c]
					for ci := range d {
						d[ci] += s[ci]
					}
				}
				p += g.c
			}
		}
	}
}

// Conv2D convolves NHWC input x [N, H, W, C] with an HWIO kernel k [KH, KW, C, O] (a
// cross-correlation, as in TensorFlow) with the given stride and padding ("valid" or
// "same"), giving [N, OH, OW, O]. It runs as im2col followed by a matrix multiply; the
// gradients reuse the same kernels.
func Conv2D(x, k *Tensor, stride int, padding string) *Tensor {
	if x == nil || k == nil {
		panic(argErr("Conv2D", "an input is nil"))
	}
	if len(k.shape) != 4 {
		panic(shapeErr("Conv2D", "kernel must be HWIO (rank 4), got shape %v", k.shape))
	}
	g := windowGeom("Conv2D", x.shape, k.shape[0], k.shape[1], stride, padding)
	if k.shape[2] != g.c {
		panic(shapeErr("Conv2D", "kernel of shape %v expects %d input channels, input of shape %v has %d", k.shape, k.shape[2], x.shape, g.c))
	}
	o := k.shape[3]
	dev := place("Conv2D", x)
	out := newOn(dev, []int{g.n, g.oh, g.ow, o})
	rows, kc := g.n*g.oh*g.ow, g.kh*g.kw*g.c
	if rows == 0 {
		return out
	}
	threads := threadsFor(dev)
	colBuf := getBuf(rows * kc)
	im2col(x.data, g, *colBuf)
	sgemm(threads, false, false, rows, o, kc, 1, *colBuf, kc, k.data, o, 0, out.data, o)
	packPool.Put(colBuf)
	return record(out, func(gr *Tensor, need []bool, _ gradDest) []*Tensor {
		var gx, gk *Tensor
		if need[1] {
			gk = newOn(gr.device, k.Shape())
			cb := getBuf(rows * kc)
			im2col(x.data, g, *cb)
			sgemm(threads, true, false, kc, o, rows, 1, *cb, kc, gr.data, o, 0, gk.data, o)
			packPool.Put(cb)
		}
		if need[0] {
			gx = newOn(gr.device, x.Shape())
			cb := getBuf(rows * kc)
			sgemm(threads, false, true, rows, kc, o, 1, gr.data, o, k.data, o, 0, *cb, kc)
			col2im(*cb, g, gx.data)
			packPool.Put(cb)
		}
		return []*Tensor{gx, gk}
	}, x, k)
}

// FusedConv2D returns Conv2D(x, k) + b, followed by a ReLU when relu is set, in one op:
// the computation of a convolution layer without the intermediate tensors. It works in
// chunks of output positions small enough to stay in the core's cache (convChunkRows):
// each chunk's output rows start as the bias, take the matrix multiply of the chunk's
// patches and the ReLU while they are in cache, so the output is written to memory once.
// The gradient works chunk by chunk the same way (ReLU mask, kernel and bias gradients,
// input gradient). b is [O] or nil.
func FusedConv2D(x, k, b *Tensor, stride int, padding string, relu bool) *Tensor {
	return fusedConv2D(nil, x, k, b, stride, padding, relu)
}

// fusedConv2D is FusedConv2D writing its output into r's intermediate storage (see Reuse;
// nil: fresh storage): every path below writes every output value.
func fusedConv2D(r *Reuse, x, k, b *Tensor, stride int, padding string, relu bool) *Tensor {
	if x == nil || k == nil {
		panic(argErr("Conv2D", "an input is nil"))
	}
	if len(k.shape) != 4 {
		panic(shapeErr("Conv2D", "kernel must be HWIO (rank 4), got shape %v", k.shape))
	}
	g := windowGeom("Conv2D", x.shape, k.shape[0], k.shape[1], stride, padding)
	if k.shape[2] != g.c {
		panic(shapeErr("Conv2D", "kernel of shape %v expects %d input channels, input of shape %v has %d", k.shape, k.shape[2], x.shape, g.c))
	}
	o := k.shape[3]
	if b != nil && (len(b.shape) != 1 || b.shape[0] != o) {
		panic(shapeErr("Conv2D", "bias of shape %v does not match %d filters", b.shape, o))
	}
	dev := place("Conv2D", x)
	if b != nil {
		device.LogOp("BiasAdd", dev)
	}
	if relu {
		device.LogOp("Relu", dev)
	}
	out := &Tensor{shape: []int{g.n, g.oh, g.ow, o}, data: r.floats(reuseInner, g.n*g.oh*g.ow*o), device: dev}
	rows, kc := g.n*g.oh*g.ow, g.kh*g.kw*g.c
	threads := threadsFor(dev)
	chunk := convChunkRows(kc, o)
	direct := directConv3x3C1(g, o)
	var bias []float32
	if direct {
		bias = make([]float32, o)
		if b != nil {
			copy(bias, b.data)
		}
	}
	if rows > 0 && o > 0 && direct {
		// A 3x3 window over one channel: 9 products per output, each filter block in
		// registers (internal/simd), instead of copying the windows out and multiplying.
		runRanges(convRanges(threads, rows, chunk), func(_, r0, r1 int) {
			forRowRuns(g, r0, r1, func(p, xoff, n int) {
				simd.Conv3x3C1(x.data[xoff:], g.w, k.data, bias, out.data[p*o:(p+n)*o], n, o, relu)
			})
		})
	} else if rows > 0 && o > 0 {
		runRanges(convRanges(threads, rows, chunk), func(_, r0, r1 int) {
			cb := getBuf(chunk * kc)
			defer packPool.Put(cb)
			for c0 := r0; c0 < r1; c0 += chunk {
				c1 := min(c0+chunk, r1)
				dst := out.data[c0*o : c1*o]
				im2colRows(x.data, g, c0, c1, *cb)
				switch {
				case b != nil && relu:
					sgemm(1, false, false, c1-c0, o, kc, 1, *cb, kc, k.data, o, 0, dst, o)
					if !convPasses.addRowsRelu(dst, b.data) {
						for r := 0; r < len(dst); r += o {
							addTo(dst[r:r+o], b.data)
						}
						convPasses.relu(dst, dst)
					}
				case b != nil:
					fillRows(dst, b.data)
					sgemm(1, false, false, c1-c0, o, kc, 1, *cb, kc, k.data, o, 1, dst, o)
				default:
					sgemm(1, false, false, c1-c0, o, kc, 1, *cb, kc, k.data, o, 0, dst, o)
					if relu {
						convPasses.relu(dst, dst)
					}
				}
			}
		})
	}
	ins := []*Tensor{x, k, b}
	if b == nil {
		ins = ins[:2]
	}
	return record(out, func(gr *Tensor, need []bool, _ gradDest) []*Tensor {
		res := make([]*Tensor, len(ins))
		needX, needK, needB := need[0], need[1], b != nil && need[2]
		if needX {
			res[0] = newOn(gr.device, x.Shape())
		}
		if needK {
			res[1] = newOn(gr.device, k.Shape())
		}
		if needB {
			res[2] = newOn(gr.device, []int{o})
		}
		if rows == 0 || o == 0 || !(needX || needK || needB) {
			return res
		}
		// Ranges of whole images, so that the input gradients of two ranges never overlap;
		// ranges after the first sum their kernel and bias gradients apart, added in order.
		per := g.oh * g.ow
		rs := convRanges(threads, g.n, 1)
		for i := range rs {
			rs[i] = [2]int{rs[i][0] * per, rs[i][1] * per}
		}
		gks, gbs := make([][]float32, len(rs)), make([][]float32, len(rs))
		for i := range rs {
			switch {
			case i == 0 && needK:
				gks[i] = res[1].data
			case needK:
				gks[i] = make([]float32, kc*o)
			}
			switch {
			case i == 0 && needB:
				gbs[i] = res[2].data
			case needB:
				gbs[i] = make([]float32, o)
			}
		}
		if direct && !needX {
			runRanges(rs, func(i, r0, r1 int) {
				dk, db := gks[i], gbs[i]
				if dk == nil {
					dk = make([]float32, kc*o)
				}
				if db == nil {
					db = make([]float32, o)
				}
				forRowRuns(g, r0, r1, func(p, xoff, n int) {
					simd.Conv3x3C1Grad(x.data[xoff:], g.w, gr.data[p*o:(p+n)*o], out.data[p*o:(p+n)*o], n, o, relu, dk, db)
				})
			})
		} else {
			runRanges(rs, func(i, r0, r1 int) {
				cb := getBuf(chunk * kc)
				defer packPool.Put(cb)
				gzBuf := getBuf(chunk * o)
				defer packPool.Put(gzBuf)
				for c0 := r0; c0 < r1; c0 += chunk {
					c1 := min(c0+chunk, r1)
					nr := c1 - c0
					gz := gr.data[c0*o : c1*o]
					if relu {
						convPasses.reluGrad((*gzBuf)[:nr*o], gz, out.data[c0*o:c1*o])
						gz = (*gzBuf)[:nr*o]
					}
					if needK {
						im2colRows(x.data, g, c0, c1, *cb)
						sgemm(1, true, false, kc, o, nr, 1, *cb, kc, gz, o, 1, gks[i], o)
					}
					if needB {
						convPasses.sumRows(gz, gbs[i])
					}
					if needX {
						sgemm(1, false, true, nr, kc, o, 1, gz, o, k.data, o, 0, *cb, kc)
						col2imRows(*cb, g, c0, c1, res[0].data)
					}
				}
			})
		}
		for i := 1; i < len(rs); i++ {
			if needK {
				addTo(res[1].data, gks[i])
			}
			if needB {
				addTo(res[2].data, gbs[i])
			}
		}
		return res
	}, ins...)
}

// directConv3x3C1 reports whether FusedConv2D of geometry g with o filters runs as a
// direct 3x3 convolution of one input channel (stride 1, valid; internal/simd).
func directConv3x3C1(g convGeom, o int) bool {
	return simd.Available() && g.kh == 3 && g.kw == 3 && g.c == 1 && g.stride == 1 &&
		g.padTop == 0 && g.padLeft == 0 && g.oh == g.h-2 && g.ow == g.w-2 && o > 0 && o%16 == 0
}

// forRowRuns calls f for each run of consecutive output positions [r0, r1) (flattened
// n*oh*ow) within one output row: p the first position, xoff the offset of its window's
// top-left input in a one-channel NHWC input, n the run's length.
func forRowRuns(g convGeom, r0, r1 int, f func(p, xoff, n int)) {
	for p := r0; p < r1; {
		img, rem := p/(g.oh*g.ow), p%(g.oh*g.ow)
		oy, ox := rem/g.ow, rem%g.ow
		n := min(r1-p, g.ow-ox)
		f(p, (img*g.h+oy)*g.w+ox, n)
		p += n
	}
}

// chunkPasses are FusedConv2D's element-wise passes over a chunk of o-long rows.
type chunkPasses struct {
	name string
	// addRowsRelu sets each row of dst to relu(row + bias) and reports whether it did (it
	// may decline a row length it has no loop for).
	addRowsRelu func(dst, bias []float32) bool
	relu        func(dst, src []float32)  // dst = relu(src), as reluTo
	reluGrad    func(dst, g, y []float32) // as reluGrad
	sumRows     func(g, dst []float32)    // dst += sum of the len(dst)-long rows of g
}

// goPasses are the passes in Go; convPasses is the set in use (conv_amd64.go picks AVX-512
// loops when the CPU has them).
var (
	goPasses = chunkPasses{
		name:        "go",
		addRowsRelu: func(dst, bias []float32) bool { return false },
		relu:        reluTo,
		reluGrad:    reluGrad,
		sumRows:     func(g, dst []float32) { sumRows(g, len(dst), dst) },
	}
	convPasses = goPasses
)

// convChunkRows is how many output positions (rows of the im2col matrix) FusedConv2D
// handles at a time: a chunk's patches and output rows take about 256 KiB, so they stay in
// the core's cache from the im2col to the ReLU. A multiple of gemmMC.
func convChunkRows(kc, o int) int {
	return max((64<<10)/(kc+o)/gemmMC*gemmMC, gemmMC)
}

// convRanges splits [0, n) into up to threads contiguous ranges whose bounds are multiples
// of align (the last ends at n).
func convRanges(threads, n, align int) [][2]int {
	units := (n + align - 1) / align
	threads = max(min(threads, runtime.GOMAXPROCS(0), units), 1)
	rs := make([][2]int, 0, threads)
	for t := 0; t < threads; t++ {
		u0, u1 := units*t/threads, units*(t+1)/threads
		if u0 < u1 {
			rs = append(rs, [2]int{u0 * align, min(u1*align, n)})
		}
	}
	return rs
}

// runRanges runs fn on each range (i its index), in goroutines when there are several, and
// returns when all have.
func runRanges(rs [][2]int, fn func(i, r0, r1 int)) {
	if len(rs) == 1 {
		fn(0, rs[0][0], rs[0][1])
		return
	}
	var wg sync.WaitGroup
	for i, r := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(i, r[0], r[1])
		}()
	}
	wg.Wait()
}

// fillRows sets every len(row)-long row of dst to row, by doubling copies.
func fillRows(dst, row []float32) {
	if len(dst) == 0 {
		return
	}
	n := copy(dst, row)
	for n < len(dst) {
		n += copy(dst[n:], dst[:n])
	}
}

// addTo adds src into dst element by element.
func addTo(dst, src []float32) {
	src = src[:len(dst)]
	for i, v := range src {
		dst[i] += v
	}
}

// MaxPool2D takes the maximum over size x size windows of NHWC input with the given stride
// and padding ("valid" or "same"; padded positions never win).
func MaxPool2D(x *Tensor, size, stride int, padding string) *Tensor {
	return maxPool2D(nil, x, size, stride, padding)
}

// maxPool2D is MaxPool2D whose common 2x2 pool writes its output and window winners into
// r's storage (see Reuse; nil: fresh storage). Other pools ignore r.
func maxPool2D(r *Reuse, x *Tensor, size, stride int, padding string) *Tensor {
	if x == nil {
		panic(argErr("MaxPool", "input is nil"))
	}
	if size < 1 {
		panic(argErr("MaxPool", "pool size %d must be >= 1", size))
	}
	g := windowGeom("MaxPool", x.shape, size, size, stride, padding)
	dev := place("MaxPool", x)
	if g.kh == 2 && g.kw == 2 && g.stride == 2 && g.padTop == 0 && g.padLeft == 0 && 2*g.oh <= g.h && 2*g.ow <= g.w {
		// The common 2x2 pool: each window's winner as a 2-bit position (a quarter of
		// the bytes of an index), and a backward pass that writes every input gradient
		// once, in order, instead of scattering into a zeroed tensor. maxPool2x2 writes
		// every output and winner.
		n := g.n * g.oh * g.ow * g.c
		out := &Tensor{shape: []int{g.n, g.oh, g.ow, g.c}, data: r.floats(reuseOut, n), device: dev}
		code := r.bytes(n)
		maxPool2x2(x.data, g, out.data, code)
		return record(out, func(gr *Tensor, _ []bool, _ gradDest) []*Tensor {
			gx := newOn(gr.device, x.Shape())
			maxPool2x2Grad(gr.data, code, g, gx.data)
			return []*Tensor{gx}
		}, x)
	}
	out := newOn(dev, []int{g.n, g.oh, g.ow, g.c})
	arg := make([]int32, len(out.data))
	maxPoolRaw(x.data, g, out.data, arg)
	return record(out, func(gr *Tensor, _ []bool, _ gradDest) []*Tensor {
		gx := newOn(gr.device, x.Shape())
		for i, a := range arg {
			gx.data[a] += gr.data[i]
		}
		return []*Tensor{gx}
	}, x)
}

// maxPool2x2 is maxPoolRaw for 2x2 windows, stride 2, no padding: code[i] is the window
// position of out[i]'s maximum, 0 top left, 1 top right, 2 bottom left, 3 bottom right;
// the first of equal values wins, as in maxPoolRaw. An odd last row or column of x is in
// no window.
func maxPool2x2(x []float32, g convGeom, out []float32, code []uint8) {
	c, rowLen := g.c, g.w*g.c
	oi := 0
	for b := 0; b < g.n; b++ {
		for oy := 0; oy < g.oh; oy++ {
			r0 := (b*g.h + 2*oy) * rowLen
			r1 := r0 + rowLen
			if simd.MaxPool2x2Row(x[r0:r1], x[r1:r1+rowLen], out[oi:oi+g.ow*c], code[oi:oi+g.ow*c], g.ow, c) {
				oi += g.ow * c
				continue
			}
			for ox := 0; ox < g.ow; ox++ {
				i0, i2 := r0+2*ox*c, r1+2*ox*c
				p0 := x[i0 : i0+c]
				p1 := x[i0+c : i0+2*c][:len(p0)]
				p2 := x[i2 : i2+c][:len(p0)]
				p3 := x[i2+c : i2+2*c][:len(p0)]
				o := out[oi : oi+c][:len(p0)]
				k := code[oi : oi+c][:len(p0)]
				// Without branches: which value wins depends on the data and mispredicts.
				for ci, m := range p0 {
					v1, v2, v3 := p1[ci], p2[ci], p3[ci]
					w := uint8(0)
					if v1 > m {
						w = 1
					}
					m = max(m, v1)
					if v2 > m {
						w = 2
					}
					m = max(m, v2)
					if v3 > m {
						w = 3
					}
					o[ci], k[ci] = max(m, v3), w
				}
				oi += c
			}
		}
	}
}

// maxPool2x2Grad writes the input gradient gx of maxPool2x2 from the output gradient gr
// and the winners' positions: every element of a window once (the gradient or 0).
// Elements in no window are left as they are (zero in a new tensor).
func maxPool2x2Grad(gr []float32, code []uint8, g convGeom, gx []float32) {
	c, rowLen := g.c, g.w*g.c
	oi := 0
	for b := 0; b < g.n; b++ {
		for oy := 0; oy < g.oh; oy++ {
			r0 := (b*g.h + 2*oy) * rowLen
			r1 := r0 + rowLen
			if simd.MaxPool2x2GradRow(gr[oi:oi+g.ow*c], code[oi:oi+g.ow*c], gx[r0:r1], gx[r1:r1+rowLen], g.ow, c) {
				oi += g.ow * c
				continue
			}
			for ox := 0; ox < g.ow; ox++ {
				i0, i2 := r0+2*ox*c, r1+2*ox*c
				d := gr[oi : oi+c]
				k := code[oi : oi+c][:len(d)]
				q0 := gx[i0 : i0+c][:len(d)]
				q1 := gx[i0+c : i0+2*c][:len(d)]
				q2 := gx[i2 : i2+c][:len(d)]
				q3 := gx[i2+c : i2+2*c][:len(d)]
				// Without branches: the gradient's bits masked by the winner's position.
				for ci, v := range d {
					bits, w := math.Float32bits(v), k[ci]
					var m0, m1, m2, m3 uint32
					if w == 0 {
						m0 = ^uint32(0)
					}
					if w == 1 {
						m1 = ^uint32(0)
					}
					if w == 2 {
						m2 = ^uint32(0)
					}
					if w == 3 {
						m3 = ^uint32(0)
					}
					q0[ci] = math.Float32frombits(bits & m0)
					q1[ci] = math.Float32frombits(bits & m1)
					q2[ci] = math.Float32frombits(bits & m2)
					q3[ci] = math.Float32frombits(bits & m3)
				}
				oi += c
			}
		}
	}
}

func maxPoolRaw(x []float32, g convGeom, out []float32, arg []int32) {
	c := g.c
	oi := 0
	for b := 0; b < g.n; b++ {
		base := b * g.h * g.w * c
		for oy := 0; oy < g.oh; oy++ {
			y0 := oy*g.stride - g.padTop
			ylo, yhi := max(y0, 0), min(y0+g.kh, g.h)
			for ox := 0; ox < g.ow; ox++ {
				x0 := ox*g.stride - g.padLeft
				xlo, xhi := max(x0, 0), min(x0+g.kw, g.w)
				o := out[oi : oi+c]
				a := arg[oi : oi+c]
				// Start from the first window position, then update without branches
				// (the comparison's outcome is data dependent and mispredicts).
				first := base + (ylo*g.w+xlo)*c
				copy(o, x[first:first+c])
				for ci := range a {
					a[ci] = int32(first + ci)
				}
				for iy := ylo; iy < yhi; iy++ {
					for ix := xlo; ix < xhi; ix++ {
						off := base + (iy*g.w+ix)*c
						if off == first {
							continue
						}
						src := x[off : off+c]
						o := o[:len(src)]
						a := a[:len(src)]
						for ci, v := range src {
							m := o[ci]
							cur := a[ci]
							if v > m {
								cur = int32(off + ci)
							}
							a[ci] = cur
							o[ci] = max(m, v)
						}
					}
				}
				oi += c
			}
		}
	}
}

// ConvReLUMaxPool2D is MaxPool2D(FusedConv2D(x, k, b, 1, "valid", true), 2, 2, "valid"):
// a convolution layer with a ReLU followed by a 2x2 max pool, as Keras' Conv2D(relu) and
// MaxPooling2D(2) give. For a 3x3 kernel over one input channel (the images of a first
// layer, which need no gradient) and a multiple of 16 filters, on a CPU with AVX-512, it
// is one op that never writes the convolution's output: each pooled value is computed from
// its window's 4 convolution values in registers, and the gradient passes to each window's
// winner only (the pooled values are the same, bit for bit; the kernel and bias gradients
// sum the same terms without the zeros). Otherwise it is the two ops.
func ConvReLUMaxPool2D(x, k, b *Tensor) *Tensor {
	return ConvReLUMaxPool2DReusing(nil, x, k, b)
}

// ConvReLUMaxPool2DReusing is ConvReLUMaxPool2D writing into r's storage, overwriting the
// previous call's (see Reuse): the fused op's output and the window winners its gradient
// needs; on the two-op path, the convolution's output, the pool's and its winners.
func ConvReLUMaxPool2DReusing(r *Reuse, x, k, b *Tensor) *Tensor {
	if x == nil || k == nil {
		panic(argErr("Conv2D", "an input is nil"))
	}
	if len(k.shape) != 4 {
		panic(shapeErr("Conv2D", "kernel must be HWIO (rank 4), got shape %v", k.shape))
	}
	g := windowGeom("Conv2D", x.shape, k.shape[0], k.shape[1], 1, "valid")
	o := k.shape[3]
	if tracked(x) || !directConv3x3C1(g, o) || g.oh < 2 || g.ow < 2 ||
		(b != nil && (len(b.shape) != 1 || b.shape[0] != o)) {
		return maxPool2D(r, fusedConv2D(r, x, k, b, 1, "valid", true), 2, 2, "valid")
	}
	dev := place("Conv2D", x)
	if b != nil {
		device.LogOp("BiasAdd", dev)
	}
	device.LogOp("Relu", dev)
	device.LogOp("MaxPool", dev)
	ph, pw := g.oh/2, g.ow/2
	n := g.n * ph * pw * o
	out := &Tensor{shape: []int{g.n, ph, pw, o}, data: r.floats(reuseOut, n), device: dev}
	code := r.bytes(n) // ConvReLUPool writes both in full
	bias := make([]float32, o)
	if b != nil {
		copy(bias, b.data)
	}
	rows, row := g.n*ph, pw*o
	// x row of pooled row r (image r/ph, pooled row r%ph): the window's top input row.
	xrow := func(r int) []float32 { return x.data[((r/ph)*g.h+2*(r%ph))*g.w:] }
	threads := threadsFor(dev)
	runRanges(convRanges(threads, rows, 1), func(_, r0, r1 int) {
		for r := r0; r < r1; r++ {
			simd.ConvReLUPool(xrow(r), g.w, k.data, bias, out.data[r*row:(r+1)*row], code[r*row:(r+1)*row], pw, o)
		}
	})
	ins := []*Tensor{x, k, b}
	if b == nil {
		ins = ins[:2]
	}
	return record(out, func(gr *Tensor, need []bool, _ gradDest) []*Tensor {
		res := make([]*Tensor, len(ins))
		needK, needB := need[1], b != nil && need[2]
		if !needK && !needB {
			return res
		}
		rs := convRanges(threads, rows, 1)
		dks, dbs := make([][]float32, len(rs)), make([][]float32, len(rs))
		runRanges(rs, func(i, r0, r1 int) {
			dk, db := make([]float32, 9*o), make([]float32, o)
			for r := r0; r < r1; r++ {
				simd.ConvReLUPoolGrad(xrow(r), g.w, gr.data[r*row:(r+1)*row], out.data[r*row:(r+1)*row], code[r*row:(r+1)*row], pw, o, dk, db)
			}
			dks[i], dbs[i] = dk, db
		})
		for i := 1; i < len(rs); i++ {
			addTo(dks[0], dks[i])
			addTo(dbs[0], dbs[i])
		}
		if needK {
			res[1] = &Tensor{shape: k.Shape(), data: dks[0], device: gr.device}
		}
		if needB {
			res[2] = &Tensor{shape: []int{o}, data: dbs[0], device: gr.device}
		}
		return res
	}, ins...)
}
