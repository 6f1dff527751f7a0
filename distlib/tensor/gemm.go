package tensor

import (
	"math/bits"
	"runtime"
	"sync"

	"godist/distlib/device"
	"godist/internal/simd"
)

// Matrix multiply kernels. sgemm is the entry point: C = alpha*op(A)*op(B) + beta*C on
// row-major float32 matrices, op(A) m x k, op(B) k x n. The Go kernel (sgemmGo) is cache
// blocked (kc-row panels of B, mc x kc blocks of A, both packed so the inner loops read
// memory sequentially) and register tiled: a micro-kernel keeps an mr x nr block of C in
// registers. On amd64 CPUs with AVX-512 the micro-kernel is 12 x 32 in assembly
// (gemm_avx512_amd64.s, edge tiles by masked loads and stores), with AVX2 and FMA 6 x 16
// (gemm_amd64.s), chosen at start-up by CPU feature detection; not with the purego or
// openblas tags, since a cgo package cannot hold Go assembly. Elsewhere it is a 4 x 4
// kernel in Go. Transposed operands are read
// through the packing, never materialized. The openblas build tag replaces sgemmImpl by
// OpenBLAS's cblas_sgemm.

const (
	gemmKC = 256
	gemmMC = 96 // a multiple of every micro-kernel's mr (4, 6, 12)
)

// microKernel accumulates alpha * (packed A strip, mr x kc) x (packed B strip, kc x nr)
// into the rows x cols corner of c (rows <= mr, cols <= nr).
type microKernel struct {
	mr, nr int
	fn     func(kc int, ap, bp []float32, alpha float32, c []float32, ldc, rows, cols int)
	// store, when set, is fn writing c = alpha*A*B without reading c (the first k-panel
	// of a beta-0 product then needs no clearing pass over c).
	store func(kc int, ap, bp []float32, alpha float32, c []float32, ldc, rows, cols int)
	// inPlace, when set, is the kernel reading its operands through strides in elements,
	// A(i, p) = a[i*ars+p*aps] and B(p, j) = b[p*bs+j] (all mr rows and nr columns are
	// read), overwrite as store: sgemmBlocked then reads full strips of A and of a
	// row-major B where they lie instead of packing them.
	inPlace func(kc int, a []float32, ars, aps int, b []float32, bs int, alpha float32, c []float32, ldc, rows, cols int, overwrite bool)
	// fence, when set, orders the kernel's streaming stores before the caller's later
	// stores (a kernel that writes some tiles with streaming stores: streamKernel).
	fence func()
}

var goKernel = microKernel{mr: 4, nr: 4, fn: kernel4x4}

// cpuKernels names the micro-kernels this CPU can run (the pure-Go one and, on amd64, the
// assembly ones it supports), for the tests that check each against the reference.
var cpuKernels = map[string]microKernel{"pure-go": goKernel}

// activeKernel is the micro-kernel sgemmGo uses; init in gemm_amd64.go picks the
// assembly one when the CPU supports it.
var activeKernel = goKernel

// sgemmImpl is the kernel in use; set by the openblas build to cblas_sgemm.
var sgemmImpl = sgemmGo

// streamKernel is activeKernel writing the tiles of a beta-0 product with streaming
// stores where it can (init in gemm_amd64.go sets it with AVX-512); the zero value (no
// fn) where there is none.
var streamKernel microKernel

// sgemm is C = alpha*op(A)*op(B) + beta*C with the kernel in use (sgemmImpl), in up to
// threads goroutines (the device's share of cores).
func sgemm(threads int, transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	sgemmRows(threads, sgemmImpl, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// sgemmStreamed is sgemm with beta 0 for a product handed over rather than read back at
// once (a gradient computed into an all-reduce's bucket, read by the optimizer after the
// rest of the backward pass and by the other workers): with a kernel that has streaming
// stores (AVX-512), its full aligned tiles go to memory without their old contents first
// being read into the caches, which a buffer untouched since an earlier step costs. The
// values are sgemm's to the bit. Where there is no such kernel (no AVX-512, the purego or
// the openblas build), it is sgemm.
func sgemmStreamed(threads int, transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	sk := streamKernel
	if sk.fn == nil {
		sgemm(threads, transA, transB, m, n, k, 1, a, lda, b, ldb, 0, c, ldc)
		return
	}
	sgemmRows(threads, func(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
		sgemmBlocked(sk, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		sk.fence() // each goroutine's own stores
	}, transA, transB, m, n, k, 1, a, lda, b, ldb, 0, c, ldc)
}

// sgemmRows runs impl on the whole product, or on row blocks of C in up to threads
// goroutines when the product is large enough to pay for them, within the inter-op limit.
func sgemmRows(threads int, impl func(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int), transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	defer device.AcquireOpSlot()() // the inter-op limit
	if threads > 1 && m >= 16*threads && m*n*k >= 1<<18 {
		parallelRows(threads, m, func(r0, r1 int) {
			var aa []float32
			if transA {
				aa = a[r0:]
			} else {
				aa = a[r0*lda:]
			}
			impl(transA, transB, r1-r0, n, k, alpha, aa, lda, b, ldb, beta, c[r0*ldc:], ldc)
		})
		return
	}
	impl(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// parallelRows splits [0, m) into up to threads contiguous ranges run in goroutines.
func parallelRows(threads, m int, fn func(r0, r1 int)) {
	threads = min(threads, runtime.GOMAXPROCS(0))
	if threads <= 1 {
		fn(0, m)
		return
	}
	chunk := (m + threads - 1) / threads
	chunk = (chunk + 7) / 8 * 8
	var wg sync.WaitGroup
	for r0 := 0; r0 < m; r0 += chunk {
		r1 := min(r0+chunk, m)
		if r1 == m && r0 == 0 {
			fn(r0, r1)
			break
		}
		wg.Add(1)
		go func(r0, r1 int) {
			defer wg.Done()
			fn(r0, r1)
		}(r0, r1)
	}
	wg.Wait()
}

// bufPool recycles scratch buffers (packed panels, im2col patches, gradients consumed
// inside one backward step) in power-of-two size classes, so that a small request never
// takes a large buffer and a large one never throws a small one away.
type bufPool struct{ classes [48]sync.Pool }

var packPool bufPool

func sizeClass(n int) int { return bits.Len(uint(max(n, 1) - 1)) }

// Get returns a buffer of length n (not zeroed) to give back with Put.
func (p *bufPool) Get(n int) *[]float32 {
	c := sizeClass(n)
	if v, ok := p.classes[c].Get().(*[]float32); ok {
		*v = (*v)[:n]
		return v
	}
	s := make([]float32, n, 1<<c)
	return &s
}

// Put returns a buffer from Get.
func (p *bufPool) Put(b *[]float32) {
	c := sizeClass(cap(*b))
	if 1<<c != cap(*b) {
		return // not one of ours
	}
	p.classes[c].Put(b)
}

func getBuf(n int) *[]float32 { return packPool.Get(n) }

// sgemmGo is the blocked kernel with the active micro-kernel.
func sgemmGo(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	sgemmBlocked(activeKernel, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// sgemmPureGo is the blocked kernel with the Go micro-kernel (for tests on any CPU).
func sgemmPureGo(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	sgemmBlocked(goKernel, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

func sgemmBlocked(mk microKernel, transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	overwrite := beta == 0 && (mk.store != nil || mk.inPlace != nil) && k > 0 && alpha != 0
	if beta != 1 && !overwrite {
		for i := 0; i < m; i++ {
			row := c[i*ldc : i*ldc+n]
			if beta == 0 {
				clear(row)
			} else {
				for j := range row {
					row[j] *= beta
				}
			}
		}
	}
	if k == 0 || alpha == 0 {
		return
	}
	// The loops are BLIS's: for each kc-deep panel, each mc-row block of A (kept in the
	// L2 cache), each nr-column strip of B (kept in L1), each mr-row strip of A. A kernel
	// with strides reads full strips in place: A always (row-major or transposed), B when
	// row-major; only edge strips are packed (zero padded). A transposed B is gathered
	// into packed strips: one strip at a time, right before its use, when A is a single
	// block (the input gradient of a dense layer: each packed strip is used while still in
	// L1), else the whole panel once.
	mr, nr := mk.mr, mk.nr
	nStrips := (n + nr - 1) / nr
	direct := mk.inPlace != nil
	directA := direct && !strideAliases(lda)
	directB := direct && !transB && !strideAliases(ldb)
	oneBlock := m <= gemmMC
	panelB := !directB && !oneBlock // the whole packed panel, packed once per kc panel
	bpLen := nr * gemmKC
	if panelB {
		bpLen = nStrips * nr * gemmKC
	}
	bpBuf := getBuf(bpLen)
	apBuf := getBuf(gemmMC * gemmKC)
	defer packPool.Put(bpBuf)
	defer packPool.Put(apBuf)
	bp, ap := *bpBuf, *apBuf
	for p0 := 0; p0 < k; p0 += gemmKC {
		kc := min(gemmKC, k-p0)
		first := overwrite && p0 == 0
		fn := mk.fn
		if first && mk.store != nil {
			fn = mk.store
		}
		if panelB {
			packB(nr, transB, b, ldb, p0, kc, n, bp)
		}
		for i0 := 0; i0 < m; i0 += gemmMC {
			mc := min(gemmMC, m-i0)
			edge := mc / mr * mr // where the strip of fewer than mr rows starts
			var ears, eaps int   // its strides in ap[edge*kc:]
			switch {
			case !directA:
				packA(mr, transA, a, lda, i0, mc, p0, kc, ap)
			case edge < mc:
				ears, eaps = copyEdgeA(mr, transA, a, lda, i0+edge, mc-edge, p0, kc, ap[edge*kc:])
			}
			for js := 0; js < nStrips; js++ {
				j0 := js * nr
				cols := min(nr, n-j0)
				var bS []float32
				bs := nr
				switch {
				case directB && cols == nr:
					bS, bs = b[p0*ldb+j0:], ldb
				case panelB:
					bS = bp[js*nr*kc:]
				default:
					packBStrip(nr, transB, b, ldb, p0, kc, n, js, bp)
					bS = bp
				}
				for is := 0; is < mc; is += mr {
					rows := min(mr, mc-is)
					cS := c[(i0+is)*ldc+j0:]
					if !direct {
						fn(kc, ap[is*kc:(is+mr)*kc], bS[:nr*kc], alpha, cS, ldc, rows, cols)
						continue
					}
					aS, ars, aps := ap[is*kc:], 1, mr
					switch {
					case directA && rows < mr:
						ars, aps = ears, eaps
					case directA && transA:
						aS, ars, aps = a[p0*lda+i0+is:], 1, lda
					case directA:
						aS, ars, aps = a[(i0+is)*lda+p0:], lda, 1
					}
					mk.inPlace(kc, aS, ars, aps, bS, bs, alpha, cS, ldc, rows, cols, first)
				}
			}
		}
	}
}

// copyEdgeA copies rows i0..i0+rows (rows < mr), columns p0..p0+kc, of op(A) into dst for
// a kernel with strides, and returns the strides to read it with: whole rows of a
// row-major A (kc values each, ars kc), or each column's rows of a transposed A (aps mr).
// The rows past rows are left as they are: the kernel computes them but never stores them.
func copyEdgeA(mr int, trans bool, a []float32, lda, i0, rows, p0, kc int, dst []float32) (ars, aps int) {
	if trans {
		for p := 0; p < kc; p++ {
			off := (p0+p)*lda + i0
			copy(dst[p*mr:p*mr+rows], a[off:off+rows])
		}
		return 1, mr
	}
	for i := 0; i < rows; i++ {
		off := (i0+i)*lda + p0
		copy(dst[i*kc:(i+1)*kc], a[off:off+kc])
	}
	return kc, 1
}

// strideAliases reports whether rows ld floats apart fall into the same few sets of the
// L1 cache (ld*4 bytes a multiple of 2 KiB): a kernel reading 12 rows of A, or kc rows of
// B, in place would then evict its own lines, so such operands are packed.
func strideAliases(ld int) bool { return ld%512 == 0 }

// packB packs rows p0..p0+kc of op(B) into strips of nr columns: strip s holds kc groups
// of nr values, zero padded past n.
func packB(nr int, trans bool, b []float32, ldb, p0, kc, n int, bp []float32) {
	nStrips := (n + nr - 1) / nr
	for s := 0; s < nStrips; s++ {
		packBStrip(nr, trans, b, ldb, p0, kc, n, s, bp[s*nr*kc:(s+1)*nr*kc])
	}
}

// packBStrip packs strip s of packB (columns s*nr.. of rows p0..p0+kc of op(B)) into dst.
func packBStrip(nr int, trans bool, b []float32, ldb, p0, kc, n, s int, dst []float32) {
	dst = dst[:nr*kc]
	j0 := s * nr
	cols := min(nr, n-j0)
	if !trans {
		if cols == 32 && nr == 32 {
			// Fixed-size copies inline (no memmove call per 128 bytes).
			for p := 0; p < kc; p++ {
				row := (p0+p)*ldb + j0
				*(*[32]float32)(dst[p*32 : p*32+32]) = *(*[32]float32)(b[row : row+32])
			}
			return
		}
		for p := 0; p < kc; p++ {
			row := (p0 + p) * ldb
			d := dst[p*nr : p*nr+nr]
			copy(d, b[row+j0:row+j0+cols])
			clear(d[cols:])
		}
		return
	}
	// op(B)(p, j) = b[j*ldb + p]
	if cols == 32 && nr == 32 && simd.PackTrans32(b[j0*ldb+p0:], ldb, kc, dst) {
		return
	}
	if cols == nr {
		for p := 0; p < kc; p++ {
			d := dst[p*nr : p*nr+nr]
			off := j0*ldb + p0 + p
			for jj := range d {
				d[jj] = b[off+jj*ldb]
			}
		}
		return
	}
	for jj := 0; jj < nr; jj++ {
		if jj >= cols {
			for p := 0; p < kc; p++ {
				dst[p*nr+jj] = 0
			}
			continue
		}
		src := b[(j0+jj)*ldb+p0 : (j0+jj)*ldb+p0+kc]
		for p, v := range src {
			dst[p*nr+jj] = v
		}
	}
}

// packA packs rows i0..i0+mc, columns p0..p0+kc of op(A) into strips of mr rows: strip s
// holds kc groups of mr values, zero padded past mc.
func packA(mr int, trans bool, a []float32, lda, i0, mc, p0, kc int, ap []float32) {
	for s := 0; s*mr < mc; s++ {
		dst := ap[s*mr*kc : (s+1)*mr*kc]
		r0 := s * mr
		rows := min(mr, mc-r0)
		if trans {
			// op(A)(i, p) = a[p*lda + i]
			if rows == 12 && mr == 12 {
				for p := 0; p < kc; p++ {
					off := (p0+p)*lda + i0 + r0
					*(*[12]float32)(dst[p*12 : p*12+12]) = *(*[12]float32)(a[off : off+12])
				}
				continue
			}
			for p := 0; p < kc; p++ {
				off := (p0+p)*lda + i0 + r0
				d := dst[p*mr : p*mr+mr]
				copy(d, a[off:off+rows])
				clear(d[rows:])
			}
			continue
		}
		if rows == 6 && mr == 6 {
			// Six read streams, sequential writes.
			base := (i0+r0)*lda + p0
			r0s := a[base : base+kc]
			r1s := a[base+lda : base+lda+kc]
			r2s := a[base+2*lda : base+2*lda+kc]
			r3s := a[base+3*lda : base+3*lda+kc]
			r4s := a[base+4*lda : base+4*lda+kc]
			r5s := a[base+5*lda : base+5*lda+kc]
			for p := range r0s {
				d := dst[p*6 : p*6+6 : p*6+6]
				d[0], d[1], d[2], d[3], d[4], d[5] = r0s[p], r1s[p], r2s[p], r3s[p], r4s[p], r5s[p]
			}
			continue
		}
		if rows == 12 && mr == 12 {
			// Twelve read streams, sequential writes (the AVX-512 kernel's strips).
			base := (i0+r0)*lda + p0
			r0s := a[base : base+kc]
			r1s := a[base+lda : base+lda+kc][:len(r0s)]
			r2s := a[base+2*lda : base+2*lda+kc][:len(r0s)]
			r3s := a[base+3*lda : base+3*lda+kc][:len(r0s)]
			r4s := a[base+4*lda : base+4*lda+kc][:len(r0s)]
			r5s := a[base+5*lda : base+5*lda+kc][:len(r0s)]
			r6s := a[base+6*lda : base+6*lda+kc][:len(r0s)]
			r7s := a[base+7*lda : base+7*lda+kc][:len(r0s)]
			r8s := a[base+8*lda : base+8*lda+kc][:len(r0s)]
			r9s := a[base+9*lda : base+9*lda+kc][:len(r0s)]
			r10s := a[base+10*lda : base+10*lda+kc][:len(r0s)]
			r11s := a[base+11*lda : base+11*lda+kc][:len(r0s)]
			for p := range r0s {
				d := dst[p*12 : p*12+12 : p*12+12]
				d[0], d[1], d[2], d[3], d[4], d[5] = r0s[p], r1s[p], r2s[p], r3s[p], r4s[p], r5s[p]
				d[6], d[7], d[8], d[9], d[10], d[11] = r6s[p], r7s[p], r8s[p], r9s[p], r10s[p], r11s[p]
			}
			continue
		}
		for ii := 0; ii < mr; ii++ {
			if ii >= rows {
				for p := 0; p < kc; p++ {
					dst[p*mr+ii] = 0
				}
				continue
			}
			src := a[(i0+r0+ii)*lda+p0 : (i0+r0+ii)*lda+p0+kc]
			for p, v := range src {
				dst[p*mr+ii] = v
			}
		}
	}
}

// kernel4x4 accumulates alpha * (packed A strip) x (packed B strip) into the mr x nr
// corner of c.
func kernel4x4(kc int, ap, bp []float32, alpha float32, c []float32, ldc, mr, nr int) {
	var c00, c01, c02, c03 float32
	var c10, c11, c12, c13 float32
	var c20, c21, c22, c23 float32
	var c30, c31, c32, c33 float32
	ap = ap[:kc*4]
	bp = bp[:kc*4]
	for p := 0; p < len(ap); p += 4 {
		av := ap[p : p+4 : p+4]
		bv := bp[p : p+4 : p+4]
		a0, a1, a2, a3 := av[0], av[1], av[2], av[3]
		b0, b1, b2, b3 := bv[0], bv[1], bv[2], bv[3]
		c00 += a0 * b0
		c01 += a0 * b1
		c02 += a0 * b2
		c03 += a0 * b3
		c10 += a1 * b0
		c11 += a1 * b1
		c12 += a1 * b2
		c13 += a1 * b3
		c20 += a2 * b0
		c21 += a2 * b1
		c22 += a2 * b2
		c23 += a2 * b3
		c30 += a3 * b0
		c31 += a3 * b1
		c32 += a3 * b2
		c33 += a3 * b3
	}
	acc := [4][4]float32{
		{c00, c01, c02, c03},
		{c10, c11, c12, c13},
		{c20, c21, c22, c23},
		{c30, c31, c32, c33},
	}
	for i := 0; i < mr; i++ {
		row := c[i*ldc : i*ldc+nr]
		for j := range row {
			row[j] += alpha * acc[i][j]
		}
	}
}

// sgemmNaive is the reference the kernels are tested against (float64 accumulation).
func sgemmNaive(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s float64
			for p := 0; p < k; p++ {
				var av, bv float32
				if transA {
					av = a[p*lda+i]
				} else {
					av = a[i*lda+p]
				}
				if transB {
					bv = b[j*ldb+p]
				} else {
					bv = b[p*ldb+j]
				}
				s += float64(av) * float64(bv)
			}
			old := float32(0)
			if beta != 0 {
				old = beta * c[i*ldc+j]
			}
			c[i*ldc+j] = alpha*float32(s) + old
		}
	}
}

// kernelName names the matrix multiply in use, for benchmarks and reports.
var kernelName = "pure-Go"

// KernelName names the matrix-multiply kernel in use: "go-avx512" or "go-avx2" (assembly
// micro-kernels chosen by CPU feature detection), "pure-Go", or "openblas" (the openblas
// build tag).
func KernelName() string { return kernelName }
