package optim

import (
	"errors"
	"math"
	"math/rand"
	"slices"
	"strings"
	"testing"
)

// ref is a straightforward float64 reference of one rule over one weight vector.
type ref struct {
	s         Spec
	w, s1, s2 []float64
	t         int
}

func newRef(s Spec, w []float32) *ref {
	r := &ref{s: s, w: make([]float64, len(w)), s1: make([]float64, len(w)), s2: make([]float64, len(w))}
	for i, x := range w {
		r.w[i] = float64(x)
	}
	return r
}

func (r *ref) step(g []float32) {
	r.t++
	s := r.s
	for i := range r.w {
		gi := float64(g[i])
		switch s.Kind {
		case SGD:
			if s.Momentum == 0 {
				r.w[i] -= s.LearningRate * gi
				continue
			}
			r.s1[i] = s.Momentum*r.s1[i] - s.LearningRate*gi
			if s.Nesterov {
				r.w[i] += s.Momentum*r.s1[i] - s.LearningRate*gi
			} else {
				r.w[i] += r.s1[i]
			}
		case Adam:
			r.s1[i] = s.Beta1*r.s1[i] + (1-s.Beta1)*gi
			r.s2[i] = s.Beta2*r.s2[i] + (1-s.Beta2)*gi*gi
			alpha := s.LearningRate * math.Sqrt(1-math.Pow(s.Beta2, float64(r.t))) / (1 - math.Pow(s.Beta1, float64(r.t)))
			r.w[i] -= alpha * r.s1[i] / (math.Sqrt(r.s2[i]) + s.Epsilon)
		case RMSprop:
			r.s1[i] = s.Rho*r.s1[i] + (1-s.Rho)*gi*gi
			inc := s.LearningRate * gi / math.Sqrt(r.s1[i]+s.Epsilon)
			if s.Momentum > 0 {
				r.s2[i] = s.Momentum*r.s2[i] + inc
				r.w[i] -= r.s2[i]
			} else {
				r.w[i] -= inc
			}
		}
	}
}

func TestApplyMatchesReference(t *testing.T) {
	tests := []Spec{
		NewSGD(0.1, 0, false),
		NewSGD(0.05, 0.9, false),
		NewSGD(0.05, 0.9, true),
		NewAdam(0.01, 0.9, 0.999, 1e-7),
		NewAdam(0.003, 0.8, 0.99, 1e-4),
		NewRMSprop(0.01, 0.9, 0, 1e-7),
		NewRMSprop(0.005, 0.8, 0.5, 1e-6),
	}
	// 7 elements: Adam's unrolled loop and its tail both run.
	w0 := []float32{0.5, -1.25, 2, 0.1, -0.3, 3.5, -2}
	grads := [][]float32{
		{0.1, -0.2, 0.3, 1.5, -0.05, 0.7, -1},
		{-0.3, 0.4, 0.1, 1.2, 0.02, -0.6, -0.8},
		{0.2, 0.2, -0.5, 0.9, 0.01, 0.4, 0.3},
		{0.05, -0.1, 0.2, 0.6, -0.04, 0.3, 0.5},
	}
	for _, s := range tests {
		t.Run(s.String(), func(t *testing.T) {
			if err := s.Validate(); err != nil {
				t.Fatal(err)
			}
			w := append([]float32(nil), w0...)
			slots := make([][]float32, s.Slots())
			for k := range slots {
				slots[k] = make([]float32, len(w))
			}
			r := newRef(s, w0)
			for step, g := range grads {
				s.Apply(w, g, slots, int64(step+1))
				r.step(g)
				for i := range w {
					want := r.w[i]
					if d := math.Abs(float64(w[i]) - want); d > 1e-5*math.Max(1, math.Abs(want)) {
						t.Fatalf("step %d: w[%d] = %v, want %v (float64 reference)", step+1, i, w[i], want)
					}
				}
			}
			if w[0] == w0[0] {
				t.Fatalf("Apply did not change the weights")
			}
		})
	}
}

func TestSlots(t *testing.T) {
	tests := []struct {
		s    Spec
		want int
	}{
		{NewSGD(0.1, 0, false), 0},
		{NewSGD(0.1, 0.9, false), 1},
		{NewAdam(0.1, 0.9, 0.999, 1e-7), 2},
		{NewRMSprop(0.1, 0.9, 0, 1e-7), 1},
		{NewRMSprop(0.1, 0.9, 0.5, 1e-7), 2},
	}
	for _, tc := range tests {
		if got := tc.s.Slots(); got != tc.want {
			t.Errorf("%v.Slots() = %d, want %d", tc.s, got, tc.want)
		}
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		s    Spec
		want string // "" for valid
	}{
		{"sgd", NewSGD(0.1, 0.9, true), ""},
		{"zero lr", NewSGD(0, 0, false), ""},
		{"adam", NewAdam(1e-3, 0.9, 0.999, 1e-7), ""},
		{"rmsprop", NewRMSprop(1e-3, 0.9, 0.1, 1e-7), ""},
		{"unknown kind", Spec{Kind: 9, LearningRate: 0.1}, "unknown rule kind 9"},
		{"no kind", Spec{LearningRate: 0.1}, "unknown rule kind 0"},
		{"negative lr", NewSGD(-0.1, 0, false), "learning rate -0.1"},
		{"nan lr", NewAdam(math.NaN(), 0.9, 0.999, 1e-7), "learning rate NaN"},
		{"inf lr", NewSGD(math.Inf(1), 0, false), "learning rate +Inf"},
		{"momentum 1", NewSGD(0.1, 1, false), "momentum 1 must be in [0, 1)"},
		{"beta1", NewAdam(0.1, 1.5, 0.999, 1e-7), "beta1 1.5"},
		{"beta2", NewAdam(0.1, 0.9, -0.1, 1e-7), "beta2 -0.1"},
		{"epsilon", NewAdam(0.1, 0.9, 0.999, 0), "epsilon 0 must be finite and > 0"},
		{"rho", NewRMSprop(0.1, 1, 0, 1e-7), "rho 1"},
		{"sgd beta1", Spec{Kind: SGD, LearningRate: 0.1, Beta1: 0.9}, "SGD: has no beta1"},
		{"adam nesterov", Spec{Kind: Adam, LearningRate: 0.1, Beta1: 0.9, Beta2: 0.9, Epsilon: 1e-7, Nesterov: true}, "Adam: has no nesterov"},
		{"rmsprop beta2", Spec{Kind: RMSprop, LearningRate: 0.1, Rho: 0.9, Epsilon: 1e-7, Beta2: 0.9}, "RMSprop: has no beta2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.s.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate(%+v) = %v, want nil", tc.s, err)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrInvalidSpec) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate(%+v) = %v, want an ErrInvalidSpec containing %q", tc.s, err, tc.want)
			}
			if _, err := tc.s.MarshalBinary(); err == nil {
				t.Fatalf("MarshalBinary(%+v) = nil error, want one", tc.s)
			}
		})
	}
}

func TestBinaryRoundTrip(t *testing.T) {
	for _, s := range []Spec{NewSGD(0.1, 0.9, true), NewAdam(1e-3, 0.8, 0.99, 1e-6), NewRMSprop(0.01, 0.95, 0.3, 1e-7)} {
		b, err := s.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != EncodedSize {
			t.Fatalf("MarshalBinary(%v) has %d bytes, want %d", s, len(b), EncodedSize)
		}
		var got Spec
		if err := got.UnmarshalBinary(b); err != nil {
			t.Fatalf("UnmarshalBinary(%v) = %v", s, err)
		}
		if got != s {
			t.Fatalf("round trip of %+v = %+v", s, got)
		}
	}
}

func TestUnmarshalBinaryErrors(t *testing.T) {
	good, _ := NewSGD(0.1, 0, false).MarshalBinary()
	mod := func(f func(b []byte)) []byte {
		b := append([]byte(nil), good...)
		f(b)
		return b
	}
	tests := []struct {
		name string
		b    []byte
		want string
	}{
		{"short", good[:10], "encoding of 10 bytes"},
		{"unknown kind", mod(func(b []byte) { b[0] = 42 }), "unknown rule kind 42"},
		{"flags", mod(func(b []byte) { b[1] = 6 }), "unknown flags"},
		{"negative lr", mod(func(b []byte) { b[9] = 0xbf }), "learning rate"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var s Spec
			err := s.UnmarshalBinary(tc.b)
			if err == nil || !errors.Is(err, ErrInvalidSpec) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("UnmarshalBinary = %v, want an ErrInvalidSpec containing %q", err, tc.want)
			}
			if s != (Spec{}) {
				t.Fatalf("UnmarshalBinary changed the spec on error: %+v", s)
			}
		})
	}
}

// TestAdamVectorLoopIsTheGoLoop: the AVX-512 Adam (16 elements at a time) gives the Go
// loop's values bit for bit, over lengths around multiples of 16 and several steps.
func TestAdamVectorLoopIsTheGoLoop(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	// Half the elements start with moments near the smallest normal (1.18e-38) and get tiny
	// or zero gradients, so that operands and results cross into the subnormals.
	small := func() float32 { return float32(math.Ldexp(rng.Float64(), -126+rng.Intn(12)-8)) }
	for _, n := range []int{1, 15, 16, 17, 33, 1000} {
		init := func() (w, m, v []float32) {
			w, m, v = make([]float32, n), make([]float32, n), make([]float32, n)
			for i := range w {
				w[i] = rng.Float32()*2 - 1
				if i%2 == 1 {
					m[i], v[i] = small(), small()
				}
			}
			return
		}
		w1, m1, v1 := init()
		w2, m2, v2 := append([]float32(nil), w1...), append([]float32(nil), m1...), append([]float32(nil), v1...)
		s := Spec{Kind: Adam, LearningRate: 1e-3, Beta1: 0.9, Beta2: 0.999, Epsilon: 1e-7}
		for step := int64(1); step <= 40; step++ {
			g := make([]float32, n)
			for i := range g {
				switch i % 4 {
				case 1:
					g[i] = 0
				case 3:
					g[i] = small() * 1e18 // g*g subnormal
				default:
					g[i] = rng.Float32()*2 - 1
				}
			}
			s.adam(w1, g, [][]float32{m1, v1}, step)
			tf := float64(step)
			alpha := float32(s.LearningRate * math.Sqrt(1-math.Pow(s.Beta2, tf)) / (1 - math.Pow(s.Beta1, tf)))
			adamGo(w2, g, m2, v2, alpha, float32(1-s.Beta1), float32(1-s.Beta2), float32(s.Epsilon))
		}
		for i := range w1 {
			if math.Float32bits(w1[i]) != math.Float32bits(w2[i]) || m1[i] != m2[i] || v1[i] != v2[i] {
				t.Fatalf("n %d: element %d: w %v m %v v %v, Go loop %v %v %v", n, i, w1[i], m1[i], v1[i], w2[i], m2[i], v2[i])
			}
		}
	}
}

// TestApplyTermsIsApply: ApplyTerms with the gradient as one, two or three terms gives
// Apply's weights and slots bit for bit (Apply run on a copy with the terms summed in
// order), for every rule, over lengths around its chunk size. Some terms are subnormal
// (their sum with the other term can be normal, which a flush before the sum would lose),
// some zero.
func TestApplyTermsIsApply(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	specs := []Spec{
		NewSGD(0.1, 0, false), NewSGD(0.1, 0.9, false), NewSGD(0.1, 0.9, true),
		NewAdam(1e-3, 0.9, 0.999, 1e-7),
		NewRMSprop(1e-3, 0.9, 0, 1e-7), NewRMSprop(1e-3, 0.9, 0.5, 1e-7),
	}
	random := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = rng.Float32()*2 - 1
		}
		return x
	}
	for _, s := range specs {
		for _, n := range []int{1, 100, termsChunk, termsChunk + 17, 3*termsChunk + 5} {
			for nt := 1; nt <= 3; nt++ {
				w1 := random(n)
				w2 := append([]float32(nil), w1...)
				slots1, slots2 := make([][]float32, s.Slots()), make([][]float32, s.Slots())
				for k := range slots1 {
					slots1[k], slots2[k] = make([]float32, n), make([]float32, n)
					for i := 1; i < n; i += 2 { // a little above the smallest normal
						slots1[k][i] = float32(math.Ldexp(1+rng.Float64(), -120))
						slots2[k][i] = slots1[k][i]
					}
				}
				for step := int64(1); step <= 3; step++ {
					terms := make([][]float32, nt)
					sum := make([]float32, n)
					for k := range terms {
						terms[k] = random(n + 3) // terms may be longer than w
						for i := range terms[k] {
							switch rng.Intn(10) {
							case 0: // subnormal and positive: two of them can sum to a normal
								terms[k][i] = float32(math.Ldexp(0.5+rng.Float64()/2, -126))
							case 1:
								terms[k][i] = 0
							}
						}
						for i := range sum {
							sum[i] += terms[k][i]
						}
					}
					s.Apply(w1, sum, slots1, step)
					s.ApplyTerms(w2, terms, slots2, step)
					// Every step: a later step hides a slot's difference in its last bits.
					for i := range w1 {
						same := math.Float32bits(w1[i]) == math.Float32bits(w2[i])
						for k := range slots1 {
							same = same && math.Float32bits(slots1[k][i]) == math.Float32bits(slots2[k][i])
						}
						if !same {
							t.Fatalf("%v, n %d, %d terms, step %d: element %d: w %v, Apply gives %v", s, n, nt, step, i, w2[i], w1[i])
						}
					}
				}
			}
		}
	}
}

// TestApplyTermsMirroredIsApplyTermsTwice: ApplyTermsMirrored leaves in both copies what
// ApplyTerms leaves in each when run on each, bit for bit, for every rule and one to three
// terms (subnormal ones among them), whatever the second copy held before (it is not read).
func TestApplyTermsMirroredIsApplyTermsTwice(t *testing.T) {
	rng := rand.New(rand.NewSource(12))
	specs := []Spec{
		NewSGD(0.1, 0.9, false), NewAdam(1e-3, 0.9, 0.999, 1e-7), NewRMSprop(1e-3, 0.9, 0.5, 1e-7),
	}
	random := func(n int, scale float64) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32((rng.Float64()*2 - 1) * scale)
			if rng.Intn(10) == 0 {
				x[i] = float32(math.Ldexp(0.5+rng.Float64()/2, -126))
			}
		}
		return x
	}
	for _, s := range specs {
		for _, n := range []int{5, 100, termsChunk + 17} {
			for nt := 1; nt <= 3; nt++ {
				w := random(n, 1)
				slots := make([][]float32, s.Slots())
				for k := range slots {
					slots[k] = random(n, 0.01)
					for i := range slots[k] {
						slots[k][i] *= slots[k][i] // RMSprop's and Adam's second moments are >= 0
					}
				}
				ref, refSlots := slices.Clone(w), make([][]float32, len(slots))
				for k := range slots {
					refSlots[k] = slices.Clone(slots[k])
				}
				for step := int64(1); step <= 3; step++ {
					terms := make([][]float32, nt)
					for k := range terms {
						terms[k] = random(n+3, 1)
					}
					// The second copy holds garbage before every step: it is written, not read.
					w2, slots2 := random(n, 9), make([][]float32, len(slots))
					for k := range slots2 {
						slots2[k] = random(n, 9)
					}
					s.ApplyTerms(ref, terms, refSlots, step)
					s.ApplyTermsMirrored(w, w2, terms, slots, slots2, step)
					for i := range ref {
						same := true
						for _, c := range [][]float32{w, w2} {
							same = same && math.Float32bits(c[i]) == math.Float32bits(ref[i])
						}
						for k := range slots {
							for _, c := range [][]float32{slots[k], slots2[k]} {
								same = same && math.Float32bits(c[i]) == math.Float32bits(refSlots[k][i])
							}
						}
						if !same {
							t.Fatalf("%v, n %d, %d terms, step %d: element %d: w %v and %v, ApplyTerms gives %v", s, n, nt, step, i, w[i], w2[i], ref[i])
						}
					}
				}
			}
		}
	}
}

// TestAdamFlushesSubnormals: moments that are subnormal count as zero and come out zero, so
// a weight whose gradient is zero stays where it is, as under TensorFlow's flush-to-zero.
func TestAdamFlushesSubnormals(t *testing.T) {
	for _, n := range []int{16, 3} { // the AVX-512 loop (where the CPU has it), the Go loop
		w, g := make([]float32, n), make([]float32, n)
		m, v := make([]float32, n), make([]float32, n)
		for i := range w {
			w[i], m[i], v[i] = 0.5, 1e-39, 1e-40
		}
		s := NewAdam(1e-3, 0.9, 0.999, 1e-7)
		s.Apply(w, g, [][]float32{m, v}, 5)
		for i := range w {
			if w[i] != 0.5 || m[i] != 0 || v[i] != 0 {
				t.Fatalf("n %d: element %d: w %v m %v v %v, want 0.5, 0, 0", n, i, w[i], m[i], v[i])
			}
		}
	}
}

// BenchmarkAdamSmallMoments updates the peer CNN's largest variable with moments of normal
// size and with moments decaying toward zero (a weight whose gradient is zero: v shrinks
// 0.1% a step), where subnormal arithmetic would take 20x longer.
func BenchmarkAdamSmallMoments(b *testing.B) {
	const n = 5408 * 64
	s := NewAdam(1e-3, 0.9, 0.999, 1e-7)
	for _, tc := range []struct {
		name    string
		g, m, v float32
	}{{"normal", 1e-3, 1e-3, 1e-6}, {"decaying", 0, 1e-37, 1e-36}} {
		w, g, m, v := make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)
		b.Run(tc.name, func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				if i%100 == 0 { // keep the decaying moments near the smallest normal
					for j := range m {
						g[j], m[j], v[j] = tc.g, tc.m, tc.v
					}
				}
				s.Apply(w, g, [][]float32{m, v}, 100)
			}
		})
	}
}
