package tensor

import (
	"math"
	"os"
	"strconv"

	"godist/distlib/device"
)

// kernelThreadsEnv names the environment variable that caps the goroutines one CPU kernel
// may use (a positive integer; unset or invalid: no cap beyond device.Threads). A worker of
// MultiWorkerMirroredStrategy sharing a host with others sets it to 1, so that its
// kernels use one compute thread while GOMAXPROCS leaves a P to its all-reduce goroutines.
const kernelThreadsEnv = "GODIST_KERNEL_THREADS"

// kernelThreadsCap is kernelThreadsEnv's value, read once (0: no cap).
var kernelThreadsCap = func() int {
	n, err := strconv.Atoi(os.Getenv(kernelThreadsEnv))
	if err != nil || n < 1 {
		return 0
	}
	return n
}()

// threadsFor returns how many goroutines a kernel on dev may use: device.Threads(dev),
// at most kernelThreadsEnv's value when it is set.
func threadsFor(dev string) int {
	t := device.Threads(dev)
	if kernelThreadsCap > 0 {
		t = min(t, kernelThreadsCap)
	}
	return t
}

// gemmOn runs sgemm on dev: through the device backend's kernels when it has them, else on
// the CPU kernels.
func gemmOn(dev string, transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if be, ord := device.BackendFor(dev); be != nil {
		if ks := be.Kernels(); ks != nil {
			if err := ks.Sgemm(ord, transA, transB, m, n, k, 1, a, lda, b, ldb, beta, c, ldc); err != nil {
				panic(&OpError{Op: "MatMul", Msg: "backend " + be.Name() + ": " + err.Error(), Err: ErrArgument})
			}
			return
		}
	}
	sgemm(threadsFor(dev), transA, transB, m, n, k, 1, a, lda, b, ldb, beta, c, ldc)
}

// gemmStreamedOn is gemmOn with beta 0 for a product handed over rather than read back at
// once (sgemmStreamed); a device backend's kernels take it as gemmOn does.
func gemmStreamedOn(dev string, transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	if be, _ := device.BackendFor(dev); be != nil && be.Kernels() != nil {
		gemmOn(dev, transA, transB, m, n, k, a, lda, b, ldb, 0, c, ldc)
		return
	}
	sgemmStreamed(threadsFor(dev), transA, transB, m, n, k, a, lda, b, ldb, c, ldc)
}

// MatMul returns op(a) x op(b) for matrices, where op transposes when transA / transB is
// set (without copying the operand).
func MatMul(a, b *Tensor, transA, transB bool) *Tensor {
	if a == nil || b == nil {
		panic(argErr("MatMul", "an input is nil"))
	}
	if len(a.shape) != 2 || len(b.shape) != 2 {
		panic(shapeErr("MatMul", "needs matrices, got shapes %v and %v", a.shape, b.shape))
	}
	m, ka := a.shape[0], a.shape[1]
	if transA {
		m, ka = ka, m
	}
	kb, n := b.shape[0], b.shape[1]
	if transB {
		kb, n = n, kb
	}
	if ka != kb {
		panic(shapeErr("MatMul", "inner dimensions differ: op(a) is %dx%d, op(b) is %dx%d (shapes %v and %v, transA=%v transB=%v)", m, ka, kb, n, a.shape, b.shape, transA, transB))
	}
	dev := place("MatMul", a)
	out := newOn(dev, []int{m, n})
	gemmOn(dev, transA, transB, m, n, ka, a.data, a.shape[1], b.data, b.shape[1], 0, out.data, n)
	return record(out, func(g *Tensor, need []bool, _ gradDest) []*Tensor {
		var ga, gb *Tensor
		if need[0] {
			ga = newOn(g.device, a.Shape())
			if !transA { // dA = dC op(B)^T : m x k
				gemmOn(g.device, false, !transB, m, ka, n, g.data, n, b.data, b.shape[1], 0, ga.data, ka)
			} else { // dA = op(B) dC^T : k x m
				gemmOn(g.device, transB, true, ka, m, n, b.data, b.shape[1], g.data, n, 0, ga.data, m)
			}
		}
		if need[1] {
			gb = newOn(g.device, b.Shape())
			if !transB { // dB = op(A)^T dC : k x n
				gemmOn(g.device, !transA, false, ka, n, m, a.data, a.shape[1], g.data, n, 0, gb.data, n)
			} else { // dB = dC^T op(A) : n x k
				gemmOn(g.device, true, transA, n, ka, m, g.data, n, a.data, a.shape[1], 0, gb.data, ka)
			}
		}
		return []*Tensor{ga, gb}
	}, a, b)
}

// BiasAdd adds the vector b to the last axis of x.
func BiasAdd(x, b *Tensor) *Tensor {
	if x == nil || b == nil {
		panic(argErr("BiasAdd", "an input is nil"))
	}
	if len(b.shape) != 1 || len(x.shape) == 0 || x.shape[len(x.shape)-1] != b.shape[0] {
		panic(shapeErr("BiasAdd", "bias of shape %v does not match the last axis of x with shape %v", b.shape, x.shape))
	}
	dev := place("BiasAdd", x)
	out := newOn(dev, x.Shape())
	c := b.shape[0]
	for o := 0; o < len(x.data); o += c {
		src, dst := x.data[o:o+c], out.data[o:o+c]
		for j, bv := range b.data {
			dst[j] = src[j] + bv
		}
	}
	return record(out, func(g *Tensor, need []bool, _ gradDest) []*Tensor {
		var gb *Tensor
		if need[1] {
			gb = newOn(g.device, []int{c})
			sumRows(g.data, c, gb.data)
		}
		return []*Tensor{g, gb}
	}, x, b)
}

// sumRows adds every row of the row-major [*, c] matrix g into dst.
func sumRows(g []float32, c int, dst []float32) {
	for o := 0; o < len(g); o += c {
		row := g[o : o+c]
		for j, v := range row {
			dst[j] += v
		}
	}
}

// Dense returns act(x W + b) in one op with a fused bias and (when relu is set) ReLU: the
// layer computation of a dense layer. x is [N, in], w is [in, out], b is [out] or nil.
func Dense(x, w, b *Tensor, relu bool) *Tensor {
	if x == nil || w == nil {
		panic(argErr("Dense", "an input is nil"))
	}
	if len(x.shape) != 2 || len(w.shape) != 2 || x.shape[1] != w.shape[0] {
		panic(shapeErr("Dense", "x of shape %v and kernel of shape %v do not multiply", x.shape, w.shape))
	}
	n, in, outN := x.shape[0], x.shape[1], w.shape[1]
	if b != nil && (len(b.shape) != 1 || b.shape[0] != outN) {
		panic(shapeErr("Dense", "bias of shape %v does not match %d outputs", b.shape, outN))
	}
	dev := place("MatMul", x)
	if b != nil {
		device.LogOp("BiasAdd", dev)
	}
	if relu {
		device.LogOp("Relu", dev)
	}
	out := newOn(dev, []int{n, outN})
	if b != nil {
		for r := 0; r < n; r++ {
			copy(out.data[r*outN:(r+1)*outN], b.data)
		}
		gemmOn(dev, false, false, n, outN, in, x.data, in, w.data, outN, 1, out.data, outN)
	} else {
		gemmOn(dev, false, false, n, outN, in, x.data, in, w.data, outN, 0, out.data, outN)
	}
	if relu {
		reluTo(out.data, out.data)
	}
	ins := []*Tensor{x, w, b}
	if b == nil {
		ins = ins[:2]
	}
	return record(out, func(g *Tensor, need []bool, into gradDest) []*Tensor {
		gz := g
		if relu {
			// gz is consumed here and never escapes: its storage comes from the pool.
			gzBuf := getBuf(len(g.data))
			defer packPool.Put(gzBuf)
			gz = &Tensor{shape: g.shape, data: *gzBuf, device: g.device}
			reluGrad(gz.data, g.data, out.data)
		}
		res := make([]*Tensor, len(ins))
		if need[0] {
			gx := newGradOn(g.device, x.Shape()) // beta 0: written in full
			gemmOn(g.device, false, true, n, in, outN, gz.data, outN, w.data, outN, 0, gx.data, in)
			res[0] = gx
		}
		if need[1] {
			gw := gradInto(into, 1, g.device, w.Shape())
			if into.stream && into.buf(1) != nil {
				gemmStreamedOn(g.device, true, false, in, outN, n, x.data, in, gz.data, outN, gw.data, outN)
			} else {
				gemmOn(g.device, true, false, in, outN, n, x.data, in, gz.data, outN, 0, gw.data, outN)
			}
			res[1] = gw
		}
		if b != nil && need[2] {
			gb := gradInto(into, 2, g.device, []int{outN})
			clear(gb.data) // sumRows adds into it
			sumRows(gz.data, outN, gb.data)
			res[2] = gb
		}
		return res
	}, ins...)
}

// softmaxGeom returns outer, axis length and inner strides for a softmax along axis.
func softmaxGeom(op string, t *Tensor, axis int) (outer, n, inner int) {
	if len(t.shape) == 0 {
		panic(shapeErr(op, "needs a tensor of rank >= 1"))
	}
	ax := normAxis(op, axis, len(t.shape))
	outer, inner = 1, 1
	for _, d := range t.shape[:ax] {
		outer *= d
	}
	for _, d := range t.shape[ax+1:] {
		inner *= d
	}
	return outer, t.shape[ax], inner
}

// softmaxRaw writes softmax (or log-softmax) of src along the middle axis into dst.
func softmaxRaw(src, dst []float32, outer, n, inner int, logOut bool) {
	for o := 0; o < outer; o++ {
		for in := 0; in < inner; in++ {
			base := o*n*inner + in
			m := float32(math.Inf(-1))
			for i := 0; i < n; i++ {
				m = max(m, src[base+i*inner])
			}
			var s float64
			for i := 0; i < n; i++ {
				s += math.Exp(float64(src[base+i*inner] - m))
			}
			if logOut {
				ls := float32(math.Log(s))
				for i := 0; i < n; i++ {
					dst[base+i*inner] = src[base+i*inner] - m - ls
				}
			} else {
				inv := 1 / s
				for i := 0; i < n; i++ {
					dst[base+i*inner] = float32(math.Exp(float64(src[base+i*inner]-m)) * inv)
				}
			}
		}
	}
}

// Softmax returns exp(t) / sum(exp(t)) along axis (-1 for the last).
func Softmax(t *Tensor, axis int) *Tensor {
	outer, n, inner := softmaxGeom("Softmax", t, axis)
	dev := place("Softmax", t)
	out := newOn(dev, t.Shape())
	softmaxRaw(t.data, out.data, outer, n, inner, false)
	return record(out, func(g *Tensor, _ []bool, _ gradDest) []*Tensor {
		gi := newOn(g.device, t.Shape())
		for o := 0; o < outer; o++ {
			for in := 0; in < inner; in++ {
				base := o*n*inner + in
				var dot float64
				for i := 0; i < n; i++ {
					dot += float64(g.data[base+i*inner] * out.data[base+i*inner])
				}
				for i := 0; i < n; i++ {
					y := out.data[base+i*inner]
					gi.data[base+i*inner] = y * (g.data[base+i*inner] - float32(dot))
				}
			}
		}
		return []*Tensor{gi}
	}, t)
}

// LogSoftmax returns log(Softmax(t, axis)), computed stably.
func LogSoftmax(t *Tensor, axis int) *Tensor {
	outer, n, inner := softmaxGeom("LogSoftmax", t, axis)
	dev := place("LogSoftmax", t)
	out := newOn(dev, t.Shape())
	softmaxRaw(t.data, out.data, outer, n, inner, true)
	return record(out, func(g *Tensor, _ []bool, _ gradDest) []*Tensor {
		gi := newOn(g.device, t.Shape())
		for o := 0; o < outer; o++ {
			for in := 0; in < inner; in++ {
				base := o*n*inner + in
				var s float64
				for i := 0; i < n; i++ {
					s += float64(g.data[base+i*inner])
				}
				for i := 0; i < n; i++ {
					p := float32(math.Exp(float64(out.data[base+i*inner])))
					gi.data[base+i*inner] = g.data[base+i*inner] - p*float32(s)
				}
			}
		}
		return []*Tensor{gi}
	}, t)
}

// SparseSoftmaxCrossEntropyWithLogits returns the per-example loss -log softmax(logits)[label]
// for logits [N, C] and integer class labels [N] (stored as float32). Labels get no gradient;
// a label outside [0, C) panics with an *OpError naming it.
func SparseSoftmaxCrossEntropyWithLogits(logits, labels *Tensor) *Tensor {
	const op = "SparseSoftmaxCrossEntropyWithLogits"
	if logits == nil || labels == nil {
		panic(argErr(op, "an input is nil"))
	}
	if len(logits.shape) != 2 {
		panic(shapeErr(op, "logits must be [batch, classes], got shape %v", logits.shape))
	}
	nb, c := logits.shape[0], logits.shape[1]
	if labels.Size() != nb || (len(labels.shape) != 1 && !(len(labels.shape) == 2 && labels.shape[1] == 1)) {
		panic(shapeErr(op, "labels must be [batch] = [%d], got shape %v", nb, labels.shape))
	}
	cls := make([]int, nb)
	for i, v := range labels.data {
		l := int(v)
		if float32(l) != v || l < 0 || l >= c {
			panic(argErr(op, "label %v of example %d is not a class index in [0, %d)", v, i, c))
		}
		cls[i] = l
	}
	dev := place(op, logits)
	out := newOn(dev, []int{nb})
	prob := make([]float32, len(logits.data))
	softmaxRaw(logits.data, prob, nb, c, 1, true) // log-probabilities
	for i := 0; i < nb; i++ {
		out.data[i] = -prob[i*c+cls[i]]
	}
	return record(out, func(g *Tensor, need []bool, _ gradDest) []*Tensor {
		gl := newOn(g.device, logits.Shape())
		for i := 0; i < nb; i++ {
			gi := g.data[i]
			row := gl.data[i*c : (i+1)*c]
			lp := prob[i*c : (i+1)*c]
			for j := range row {
				row[j] = gi * float32(math.Exp(float64(lp[j])))
			}
			row[cls[i]] -= gi
		}
		return []*Tensor{gl, nil}
	}, logits, labels)
}

// SigmoidCrossEntropyWithLogits returns the elementwise binary cross-entropy of labels in
// [0, 1] against logits: max(x, 0) - x*z + log(1 + exp(-|x|)). Labels get no gradient.
func SigmoidCrossEntropyWithLogits(labels, logits *Tensor) *Tensor {
	const op = "SigmoidCrossEntropyWithLogits"
	if logits == nil || labels == nil {
		panic(argErr(op, "an input is nil"))
	}
	if !sameShape(labels.shape, logits.shape) {
		panic(shapeErr(op, "labels of shape %v and logits of shape %v differ", labels.shape, logits.shape))
	}
	dev := place(op, logits)
	out := newOn(dev, logits.Shape())
	for i, x := range logits.data {
		z := labels.data[i]
		out.data[i] = max(x, 0) - x*z + float32(math.Log1p(math.Exp(-math.Abs(float64(x)))))
	}
	return record(out, func(g *Tensor, _ []bool, _ gradDest) []*Tensor {
		gl := newOn(g.device, logits.Shape())
		for i, x := range logits.data {
			gl.data[i] = g.data[i] * (sigmoid(x) - labels.data[i])
		}
		return []*Tensor{nil, gl}
	}, labels, logits)
}

// Dropout zeroes each element of x with probability rate and scales the others by
// 1/(1-rate), with a mask drawn from seed (the same seed gives the same mask). A rate of 0
// returns x's values unchanged; rate must be in [0, 1).
func Dropout(x *Tensor, rate float32, seed uint64) *Tensor {
	if x == nil {
		panic(argErr("Dropout", "input is nil"))
	}
	if rate < 0 || rate >= 1 || rate != rate {
		panic(argErr("Dropout", "rate %v is not in [0, 1)", rate))
	}
	dev := place("Dropout", x)
	out := newOn(dev, x.Shape())
	mask := make([]float32, len(x.data))
	scale := 1 / (1 - rate)
	r := rng{s: seed}
	for i, v := range x.data {
		if rate == 0 || float32(r.float()) >= rate {
			mask[i] = scale
			out.data[i] = v * scale
		}
	}
	return record(out, func(g *Tensor, _ []bool, _ gradDest) []*Tensor {
		gi := newOn(g.device, x.Shape())
		for i, m := range mask {
			gi.data[i] = g.data[i] * m
		}
		return []*Tensor{gi}
	}, x)
}

// OneHot returns [N..., depth] with 1 at each integer index of indices (stored as float32)
// and 0 elsewhere; an index outside [0, depth) gives a row of zeros, as in TensorFlow.
func OneHot(indices *Tensor, depth int) *Tensor {
	if indices == nil {
		panic(argErr("OneHot", "indices are nil"))
	}
	if depth < 1 {
		panic(argErr("OneHot", "depth %d must be >= 1", depth))
	}
	dev := place("OneHot", indices)
	out := newOn(dev, append(indices.Shape(), depth))
	for i, v := range indices.data {
		k := int(v)
		if float32(k) == v && k >= 0 && k < depth {
			out.data[i*depth+k] = 1
		}
	}
	return out
}

// Gather returns the rows of params picked by indices (integer values stored as float32),
// like tf.gather(params, indices) on axis 0: the result has shape indices.Shape() followed
// by params.Shape()[1:]. Its gradient with respect to params adds each output row's
// gradient into the row it came from (an embedding's update touches only the rows used).
// An index that is not an integer in [0, rows) panics with an error naming it.
func Gather(params, indices *Tensor) *Tensor {
	if params == nil || indices == nil {
		panic(argErr("Gather", "params and indices must not be nil"))
	}
	if params.Rank() < 1 {
		panic(argErr("Gather", "params must have at least one axis, got a scalar"))
	}
	rows := params.shape[0]
	row := 1
	for _, d := range params.shape[1:] {
		row *= d
	}
	idx := make([]int, len(indices.data))
	for i, v := range indices.data {
		k := int(v)
		if float32(k) != v || k < 0 || k >= rows {
			panic(argErr("Gather", "index %v (element %d of the indices) is not an integer in [0, %d): params has %d rows", v, i, rows, rows))
		}
		idx[i] = k
	}
	dev := place("Gather", params)
	out := newOn(dev, append(indices.Shape(), params.shape[1:]...))
	for i, k := range idx {
		copy(out.data[i*row:(i+1)*row], params.data[k*row:(k+1)*row])
	}
	return record(out, func(g *Tensor, need []bool, _ gradDest) []*Tensor {
		if !need[0] {
			return []*Tensor{nil, nil}
		}
		gp := newOn(dev, params.Shape())
		for i, k := range idx {
			dst, src := gp.data[k*row:(k+1)*row], g.data[i*row:(i+1)*row]
			for j := range dst {
				dst[j] += src[j]
			}
		}
		return []*Tensor{gp, nil}
	}, params, indices)
}
