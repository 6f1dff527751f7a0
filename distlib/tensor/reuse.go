package tensor

// Reuse is storage that one op's output keeps from one call to the next, for a training
// loop that knows the output is no longer used when the op runs again: Keras' Fit gives
// each layer of each replica its own, and the output of a training step's layer is dead
// once the step is over (the tape that held it is gone, and the layers that read it keep
// nothing). Ops that take a Reuse write their outputs in full into its storage, which is
// not zeroed and not collected: a convolution layer's pooled output is then neither
// allocated, nor cleared, nor collected, and is often still in the cache (bench/RESULTS.md,
// keras, "the pooled output's storage kept from step to step"). An op made of two (the convolution and the pool,
// where they are not fused) keeps the inner output too. A nil *Reuse gives fresh storage
// each call.
//
// An output made with a Reuse is overwritten by the next call with the same Reuse: never
// give one to an op whose output may outlive that call. A Reuse is for one goroutine at a
// time.
type Reuse struct {
	f32 [2][]float32 // reuseOut: the op's output; reuseInner: an output inside the op
	u8  []uint8
}

// The float32 storages of a Reuse.
const (
	reuseOut = iota
	reuseInner
)

// floats returns n float32s of r's storage slot (grown if needed), not zeroed; fresh
// zeroed storage when r is nil.
func (r *Reuse) floats(slot, n int) []float32 {
	if n >= bigFloats {
		checkAlloc("", []int{n}, n)
	}
	if r == nil {
		return make([]float32, n)
	}
	return kept(&r.f32[slot], n)
}

// bytes is floats for bytes.
func (r *Reuse) bytes(n int) []uint8 {
	if r == nil {
		return make([]uint8, n)
	}
	return kept(&r.u8, n)
}

// kept returns the first n elements of *buf, made anew when it holds fewer.
func kept[T any](buf *[]T, n int) []T {
	if cap(*buf) < n {
		*buf = make([]T, n)
	}
	return (*buf)[:n]
}
