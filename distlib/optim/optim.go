// Package optim holds the optimizer update rules, written once: the same kernels update a
// replica's variables (keras.Optimizer) and a variable shard on a parameter server
// (transport's ps service), so both give the same numbers.
//
// A Spec names a rule (SGD, Adam, RMSprop) and its hyperparameters; it has a binary
// encoding the ps service carries with every update. Spec.Apply runs one step over
// []float32 slices: the weights, the gradient and the rule's slots (momenta, moving
// averages), which the caller keeps per variable.
package optim

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"godist/internal/simd"
)

// Kind is an update rule.
type Kind uint8

const (
	// SGD is gradient descent, with optional momentum and Nesterov momentum (Keras's SGD).
	SGD Kind = iota + 1
	// Adam is Keras's Adam, with its bias-corrected learning rate.
	Adam
	// RMSprop is Keras's RMSprop (not centered), with optional momentum.
	RMSprop
)

// String names the rule as Keras does ("SGD", "Adam", "RMSprop").
func (k Kind) String() string {
	switch k {
	case SGD:
		return "SGD"
	case Adam:
		return "Adam"
	case RMSprop:
		return "RMSprop"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// ErrInvalidSpec is wrapped by the errors of Validate and UnmarshalBinary.
var ErrInvalidSpec = errors.New("optim: invalid optimizer spec")

// Spec is an update rule with its hyperparameters. Only the fields of its Kind may be set:
//
//	SGD:     LearningRate, Momentum, Nesterov
//	Adam:    LearningRate, Beta1, Beta2, Epsilon
//	RMSprop: LearningRate, Rho, Momentum, Epsilon
type Spec struct {
	Kind         Kind
	LearningRate float64 // >= 0
	Momentum     float64 // SGD, RMSprop: in [0, 1)
	Nesterov     bool    // SGD
	Beta1, Beta2 float64 // Adam: in [0, 1)
	Epsilon      float64 // Adam, RMSprop: > 0
	Rho          float64 // RMSprop: in [0, 1)
}

// NewSGD returns Keras's SGD rule: lr, momentum (0: none) and Nesterov.
func NewSGD(lr, momentum float64, nesterov bool) Spec {
	return Spec{Kind: SGD, LearningRate: lr, Momentum: momentum, Nesterov: nesterov}
}

// NewAdam returns Keras's Adam rule with the given hyperparameters (Keras's defaults:
// beta1 0.9, beta2 0.999, epsilon 1e-7).
func NewAdam(lr, beta1, beta2, epsilon float64) Spec {
	return Spec{Kind: Adam, LearningRate: lr, Beta1: beta1, Beta2: beta2, Epsilon: epsilon}
}

// NewRMSprop returns Keras's RMSprop rule (Keras's defaults: rho 0.9, momentum 0,
// epsilon 1e-7).
func NewRMSprop(lr, rho, momentum, epsilon float64) Spec {
	return Spec{Kind: RMSprop, LearningRate: lr, Rho: rho, Momentum: momentum, Epsilon: epsilon}
}

// String describes the rule in Keras's terms, e.g. "SGD(learning_rate=0.1, momentum=0.9)".
func (s Spec) String() string {
	switch s.Kind {
	case SGD:
		if s.Momentum == 0 && !s.Nesterov {
			return fmt.Sprintf("SGD(learning_rate=%v)", s.LearningRate)
		}
		return fmt.Sprintf("SGD(learning_rate=%v, momentum=%v, nesterov=%v)", s.LearningRate, s.Momentum, s.Nesterov)
	case Adam:
		return fmt.Sprintf("Adam(learning_rate=%v, beta_1=%v, beta_2=%v, epsilon=%v)", s.LearningRate, s.Beta1, s.Beta2, s.Epsilon)
	case RMSprop:
		return fmt.Sprintf("RMSprop(learning_rate=%v, rho=%v, momentum=%v, epsilon=%v)", s.LearningRate, s.Rho, s.Momentum, s.Epsilon)
	}
	return fmt.Sprintf("Spec(kind=%d)", uint8(s.Kind))
}

// Validate returns an error wrapping ErrInvalidSpec that names the bad field when s is not
// a rule Apply can run: an unknown kind, a negative or non-finite learning rate, a decay
// outside [0, 1), an epsilon <= 0, or a field its kind does not have.
func (s Spec) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalidSpec, s.Kind, fmt.Sprintf(format, args...))
	}
	if s.Kind < SGD || s.Kind > RMSprop {
		return fmt.Errorf("%w: unknown rule kind %d (want optim.SGD, optim.Adam or optim.RMSprop)", ErrInvalidSpec, uint8(s.Kind))
	}
	if !(s.LearningRate >= 0) || math.IsInf(s.LearningRate, 0) {
		return bad("learning rate %g must be finite and >= 0", s.LearningRate)
	}
	unit := func(name string, v float64) error {
		if !(v >= 0 && v < 1) {
			return bad("%s %g must be in [0, 1)", name, v)
		}
		return nil
	}
	unused := func(name string, set bool) error {
		if set {
			return bad("has no %s (it is a hyperparameter of another rule): leave it zero", name)
		}
		return nil
	}
	var errs []error
	switch s.Kind {
	case SGD:
		errs = append(errs, unit("momentum", s.Momentum),
			unused("beta1", s.Beta1 != 0), unused("beta2", s.Beta2 != 0),
			unused("epsilon", s.Epsilon != 0), unused("rho", s.Rho != 0))
	case Adam:
		errs = append(errs, unit("beta1", s.Beta1), unit("beta2", s.Beta2),
			unused("momentum", s.Momentum != 0), unused("nesterov", s.Nesterov), unused("rho", s.Rho != 0))
	case RMSprop:
		errs = append(errs, unit("rho", s.Rho), unit("momentum", s.Momentum),
			unused("nesterov", s.Nesterov), unused("beta1", s.Beta1 != 0), unused("beta2", s.Beta2 != 0))
	}
	if s.Kind != SGD && (!(s.Epsilon > 0) || math.IsInf(s.Epsilon, 0)) {
		errs = append(errs, bad("epsilon %g must be finite and > 0", s.Epsilon))
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Slots returns how many slot arrays (each the variable's size) the rule keeps per
// variable: SGD 0 (1 with momentum), Adam 2 (m, v), RMSprop 1 (2 with momentum).
func (s Spec) Slots() int {
	switch s.Kind {
	case SGD:
		if s.Momentum != 0 {
			return 1
		}
	case Adam:
		return 2
	case RMSprop:
		if s.Momentum != 0 {
			return 2
		}
		return 1
	}
	return 0
}

// Apply runs step t (counting from 1: Adam's bias correction) of the rule on weights w
// with gradient g and the variable's slots (at least Slots() arrays, each at least len(w)
// long, zero before the first step). g must be at least len(w) long. Apply does not
// check s: Validate it once where it comes in.
func (s *Spec) Apply(w, g []float32, slots [][]float32, t int64) {
	switch s.Kind {
	case SGD:
		s.sgd(w, g, slots)
	case Adam:
		s.adam(w, g, slots, t)
	case RMSprop:
		s.rmsprop(w, g, slots)
	}
}

// termsChunk is how many elements ApplyTerms sums at a time: the sum stays in the
// first-level cache while the rule reads it.
const termsChunk = 2048

// ApplyTerms runs step t of the rule like Apply, with the gradient the sum of terms added in
// order (terms[0] + terms[1] + ...): the ranks' gradients of an all-reduce read where they
// lie, summed in rank order as the all-reduce sums them, so that the sum is never written
// to memory. Every term must be at least len(w) long. The result is Apply's on the summed
// gradient bit for bit: the rules are elementwise, so ApplyTerms sums and updates a
// cache-sized piece at a time (Adam with two terms, two workers' or replicas' gradients,
// sums them in its vector loop: adamSum).
func (s *Spec) ApplyTerms(w []float32, terms [][]float32, slots [][]float32, t int64) {
	if len(terms) == 1 {
		s.Apply(w, terms[0], slots, t)
		return
	}
	if len(terms) == 2 && s.Kind == Adam && simd.AdamWidth() > 0 {
		s.adamSum(w, terms[0], terms[1], slots, t, nil, nil)
		return
	}
	var acc [termsChunk]float32
	sub := make([][]float32, len(slots))
	for lo := 0; lo < len(w); lo += termsChunk {
		hi := min(lo+termsChunk, len(w))
		g := acc[:hi-lo]
		copy(g, terms[0][lo:hi])
		for _, term := range terms[1:] {
			simd.AddTo(g, term[lo:hi])
		}
		for k := range sub {
			sub[k] = slots[k][lo:hi]
		}
		s.Apply(w[lo:hi], g, sub, t)
	}
}

// ApplyTermsMirrored is ApplyTerms on w and slots that also leaves its results in w2 and
// slots2: a second copy of the variable and of its slots, holding the same values as the
// first (a mirrored variable's other replica), so that both copies come out of one update
// instead of the same update run twice. Adam with two terms updates both in one loop
// (simd.AdamSum2: the second copy is written, never read); any other rule updates the first
// copy and copies the results into the second. Every slice must be at least len(w) long.
func (s *Spec) ApplyTermsMirrored(w, w2 []float32, terms [][]float32, slots, slots2 [][]float32, t int64) {
	n := len(w)
	if len(terms) == 2 && s.Kind == Adam && simd.AdamWidth() > 0 {
		s.adamSum(w, terms[0], terms[1], slots, t, w2, slots2)
		return
	}
	s.ApplyTerms(w, terms, slots, t)
	copy(w2[:n], w)
	for k := range slots {
		copy(slots2[k][:n], slots[k][:n])
	}
}

// sgd: velocity = m*velocity - lr*g; w += velocity (Nesterov: w += m*velocity - lr*g).
func (s *Spec) sgd(w, g []float32, slots [][]float32) {
	n := len(w)
	g = g[:n]
	l := float32(s.LearningRate)
	if s.Momentum == 0 {
		for i := range w {
			w[i] -= l * g[i]
		}
		return
	}
	v, m := slots[0][:n], float32(s.Momentum)
	if s.Nesterov {
		for i := range w {
			v[i] = m*v[i] - l*g[i]
			w[i] += m*v[i] - l*g[i]
		}
		return
	}
	for i := range w {
		v[i] = m*v[i] - l*g[i]
		w[i] += v[i]
	}
}

// adam is Keras 3's Adam: lr_t = lr*sqrt(1-b2^t)/(1-b1^t); m += (g-m)(1-b1);
// v += (g²-v)(1-b2); w -= lr_t*m/(sqrt(v)+eps), t counting from 1.
func (s *Spec) adam(w, g []float32, slots [][]float32, t int64) {
	n := len(w)
	g, m, v := g[:n], slots[0][:n], slots[1][:n]
	alpha, b1, b2, eps := s.adamFactors(t)
	// The vector loop (AVX-512, else AVX2) does the same arithmetic (bit for bit) 16 or 8
	// elements at a time; the Go loop does the rest.
	i := simd.Adam(w, g, m, v, alpha, b1, b2, eps)
	adamGo(w[i:], g[i:], m[i:], v[i:], alpha, b1, b2, eps)
}

// adamFactors returns step t's learning rate with the bias corrections (alpha) and the
// factors 1-beta1, 1-beta2 and epsilon, as adam's loops take them.
func (s *Spec) adamFactors(t int64) (alpha, b1, b2, eps float32) {
	tf := float64(t)
	alpha = float32(s.LearningRate * math.Sqrt(1-math.Pow(s.Beta2, tf)) / (1 - math.Pow(s.Beta1, tf)))
	return alpha, float32(1 - s.Beta1), float32(1 - s.Beta2), float32(s.Epsilon)
}

// adamSum is adam with the gradient g0+g1, the two terms summed as the vector loop reads
// them (simd.AdamSum): one pass over the six arrays instead of a copy and a sum into a
// buffer first. When the terms are two workers' gradients, one of them lies in the other
// core's cache, and the loop's arithmetic overlaps with fetching it (bench/RESULTS.md,
// multiworker, "Adam reads both terms in one pass"). Blocks the vector loop declines (a
// subnormal term, the tail) are summed here and updated by the Go loop, so every element
// is adam's on the exact sum. With w2 non-nil the results also go into w2 and slots2, a second copy that
// held the same values (ApplyTermsMirrored; simd.AdamSum2 writes both in its loop).
func (s *Spec) adamSum(w, g0, g1 []float32, slots [][]float32, t int64, w2 []float32, slots2 [][]float32) {
	n := len(w)
	g0, g1, m, v := g0[:n], g1[:n], slots[0][:n], slots[1][:n]
	var m2, v2 []float32
	if w2 != nil {
		w2, m2, v2 = w2[:n], slots2[0][:n], slots2[1][:n]
	}
	alpha, b1, b2, eps := s.adamFactors(t)
	width := simd.AdamWidth()
	var acc [16]float32
	for i := 0; i < n; {
		if w2 != nil {
			i += simd.AdamSum2(w[i:], g0[i:], g1[i:], m[i:], v[i:], w2[i:], m2[i:], v2[i:], alpha, b1, b2, eps)
		} else {
			i += simd.AdamSum(w[i:], g0[i:], g1[i:], m[i:], v[i:], alpha, b1, b2, eps)
		}
		k := min(width, n-i)
		for j := range k {
			acc[j] = g0[i+j] + g1[i+j]
		}
		adamGo(w[i:i+k], acc[:k], m[i:i+k], v[i:i+k], alpha, b1, b2, eps)
		if w2 != nil {
			copy(w2[i:i+k], w[i:i+k])
			copy(m2[i:i+k], m[i:i+k])
			copy(v2[i:i+k], v[i:i+k])
		}
		i += k
	}
}

// adamGo is adam's update in Go, alpha the step's learning rate with the bias corrections.
// Like the vector loops, it computes with flush-to-zero and denormals-are-zero (as
// TensorFlow's CPU kernels do): every subnormal operand and result counts as a zero of its
// sign (flush), so that a moment decaying toward zero becomes zero instead of spending
// thousands of steps in subnormal arithmetic, which the CPU runs far slower
// (BenchmarkAdamSmallMoments). The two loops agree bit for bit, except, in principle, for a
// result within an ulp of the smallest normal: the CPU judges tininess on the result rounded
// to 24 bits with an unbounded exponent, flush on the result rounded to a subnormal.
func adamGo(w, g, m, v []float32, alpha, b1, b2, eps float32) {
	n := len(w)
	g, m, v = g[:n], m[:n], v[:n]
	alpha, b1, b2, eps = flush(alpha), flush(b1), flush(b2), flush(eps)
	i := 0
	// Four elements per iteration, independent of each other, so that their divisions and
	// roots overlap (the same arithmetic per element as the loop below; the root of a
	// normal is normal and eps > 0, so the divisor needs no flush).
	for ; i+4 <= n; i += 4 {
		g0, m0, v0 := flush(g[i]), flush(m[i]), flush(v[i])
		m0 = flush(m0 + flush(flush(g0-m0)*b1))
		v0 = flush(v0 + flush(flush(flush(g0*g0)-v0)*b2))
		g1, m1, v1 := flush(g[i+1]), flush(m[i+1]), flush(v[i+1])
		m1 = flush(m1 + flush(flush(g1-m1)*b1))
		v1 = flush(v1 + flush(flush(flush(g1*g1)-v1)*b2))
		g2, m2, v2 := flush(g[i+2]), flush(m[i+2]), flush(v[i+2])
		m2 = flush(m2 + flush(flush(g2-m2)*b1))
		v2 = flush(v2 + flush(flush(flush(g2*g2)-v2)*b2))
		g3, m3, v3 := flush(g[i+3]), flush(m[i+3]), flush(v[i+3])
		m3 = flush(m3 + flush(flush(g3-m3)*b1))
		v3 = flush(v3 + flush(flush(flush(g3*g3)-v3)*b2))
		m[i], v[i] = m0, v0
		m[i+1], v[i+1] = m1, v1
		m[i+2], v[i+2] = m2, v2
		m[i+3], v[i+3] = m3, v3
		w[i] = flush(flush(w[i]) - flush(flush(alpha*m0)/(float32(math.Sqrt(float64(v0)))+eps)))
		w[i+1] = flush(flush(w[i+1]) - flush(flush(alpha*m1)/(float32(math.Sqrt(float64(v1)))+eps)))
		w[i+2] = flush(flush(w[i+2]) - flush(flush(alpha*m2)/(float32(math.Sqrt(float64(v2)))+eps)))
		w[i+3] = flush(flush(w[i+3]) - flush(flush(alpha*m3)/(float32(math.Sqrt(float64(v3)))+eps)))
	}
	for ; i < n; i++ {
		gi, mi, vi := flush(g[i]), flush(m[i]), flush(v[i])
		mi = flush(mi + flush(flush(gi-mi)*b1))
		vi = flush(vi + flush(flush(flush(gi*gi)-vi)*b2))
		m[i], v[i] = mi, vi
		w[i] = flush(flush(w[i]) - flush(flush(alpha*mi)/(float32(math.Sqrt(float64(vi)))+eps)))
	}
}

// flush returns x, or a zero of x's sign when x is subnormal: the flush-to-zero and
// denormals-are-zero modes of the CPU's vector unit, written out.
func flush(x float32) float32 {
	if x < minNormal && x > -minNormal {
		return x * 0 // ±0
	}
	return x
}

// minNormal is the smallest normal float32 (2^-126).
const minNormal = 0x1p-126

// rmsprop is Keras 3's RMSprop: v = rho*v + (1-rho)g²; inc = lr*g/sqrt(v+eps);
// with momentum mom = momentum*mom + inc and w -= mom, else w -= inc.
func (s *Spec) rmsprop(w, g []float32, slots [][]float32) {
	n := len(w)
	g, v := g[:n], slots[0][:n]
	rho, l, eps, mm := float32(s.Rho), float32(s.LearningRate), float32(s.Epsilon), float32(s.Momentum)
	if s.Momentum == 0 {
		for i := range w {
			gi := g[i]
			v[i] = rho*v[i] + (1-rho)*gi*gi
			w[i] -= l * gi / float32(math.Sqrt(float64(v[i]+eps)))
		}
		return
	}
	mom := slots[1][:n]
	for i := range w {
		gi := g[i]
		v[i] = rho*v[i] + (1-rho)*gi*gi
		inc := l * gi / float32(math.Sqrt(float64(v[i]+eps)))
		mom[i] = mm*mom[i] + inc
		w[i] -= mom[i]
	}
}

// EncodedSize is the length of a Spec's binary encoding.
const EncodedSize = 2 + 6*8

// AppendBinary appends s's binary encoding (EncodedSize bytes: kind, flags, then the
// float64 hyperparameters little-endian) to b. It fails when s is not valid.
func (s Spec) AppendBinary(b []byte) ([]byte, error) {
	if err := s.Validate(); err != nil {
		return b, err
	}
	var flags byte
	if s.Nesterov {
		flags |= 1
	}
	b = append(b, byte(s.Kind), flags)
	for _, f := range [...]float64{s.LearningRate, s.Momentum, s.Beta1, s.Beta2, s.Epsilon, s.Rho} {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(f))
	}
	return b, nil
}

// MarshalBinary returns s's binary encoding (see AppendBinary).
func (s Spec) MarshalBinary() ([]byte, error) {
	return s.AppendBinary(make([]byte, 0, EncodedSize))
}

// UnmarshalBinary sets s from the EncodedSize bytes of b that AppendBinary wrote, and
// validates it: an unknown kind or a bad value is an error wrapping ErrInvalidSpec.
func (s *Spec) UnmarshalBinary(b []byte) error {
	if len(b) != EncodedSize {
		return fmt.Errorf("%w: encoding of %d bytes, want %d", ErrInvalidSpec, len(b), EncodedSize)
	}
	if b[1]&^1 != 0 {
		return fmt.Errorf("%w: unknown flags %#x", ErrInvalidSpec, b[1])
	}
	f := func(i int) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(b[2+8*i:])) }
	d := Spec{Kind: Kind(b[0]), Nesterov: b[1]&1 != 0, LearningRate: f(0), Momentum: f(1),
		Beta1: f(2), Beta2: f(3), Epsilon: f(4), Rho: f(5)}
	if err := d.Validate(); err != nil {
		return err
	}
	*s = d
	return nil
}
