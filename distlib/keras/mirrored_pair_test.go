package keras

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"godist/distlib/tensor"
)

// TestMirroredPairUpdateIsEachCopysOwn: two replicas' copies updated together (each
// goroutine half of every large variable, into both copies) end with the values and slots
// that each copy's own update gives, bit for bit, over steps with subnormal terms among the
// gradients; variables under mirroredMin and over it, and odd sizes.
func TestMirroredPairUpdateIsEachCopysOwn(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	random := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = rng.Float32()*2 - 1
			if rng.Intn(50) == 0 {
				x[i] = float32(math.Ldexp(0.75, -126))
			}
		}
		return x
	}
	sizes := []int{10, mirroredMin - 1, mirroredMin, 5408*64 + 7}
	paired, own := Adam(1e-3), Adam(1e-3)
	pv, ov := replicaCopies(sizes), replicaCopies(sizes)
	for step := 0; step < 3; step++ {
		shared := make([]gradTerms, len(sizes))
		cloned := make([]gradTerms, len(sizes))
		for i, n := range sizes {
			shared[i] = gradTerms{random(n), random(n)}
			cloned[i] = gradTerms{slices.Clone(shared[i][0]), slices.Clone(shared[i][1])}
		}
		before := paired.pairSteps.Load()
		if err := paired.applyTerms([][]gradTerms{shared, shared}, pv); err != nil {
			t.Fatal(err)
		}
		if paired.pairSteps.Load() != before+1 {
			t.Fatal("the copies were not updated as a pair")
		}
		// Replica 1's terms in other memory: not a pair, each copy updated on its own.
		if err := own.applyTerms([][]gradTerms{shared, cloned}, ov); err != nil {
			t.Fatal(err)
		}
		if own.pairSteps.Load() != 0 {
			t.Fatal("terms in different memory were updated as a pair")
		}
		sameUpdates(t, fmt.Sprintf("step %d", step), paired, own, pv, ov)
	}
}

// replicaCopies returns two replicas' copies (by replica) of variables of the given sizes,
// the same values in both.
func replicaCopies(sizes []int) [][]*tensor.Variable {
	vars := make([][]*tensor.Variable, 2)
	for r := range vars {
		for i, n := range sizes {
			init := tensor.MustNew([]int{n}, make([]float32, n))
			for j := range init.Data() {
				init.Data()[j] = float32(math.Sin(float64(i*1000 + j)))
			}
			vars[r] = append(vars[r], tensor.NewVariable("v", init, true))
		}
	}
	return vars
}

// sameUpdates fails t unless every copy in pv and its slots in paired hold, bit for bit,
// what the same copy in ov and its slots in own hold.
func sameUpdates(t *testing.T, at string, paired, own *Optimizer, pv, ov [][]*tensor.Variable) {
	t.Helper()
	for r := range ov {
		for i := range ov[r] {
			n := ov[r][i].Size()
			got, want := pv[r][i].Value().Data(), ov[r][i].Value().Data()
			for j := range want {
				if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
					t.Fatalf("%s, copy %d, variable of %d: element %d is %v, its own update gives %v", at, r, n, j, got[j], want[j])
				}
			}
			for k, s := range own.slots[ov[r][i]].slots {
				g := paired.slots[pv[r][i]].slots[k]
				for j := range s {
					if math.Float32bits(g[j]) != math.Float32bits(s[j]) {
						t.Fatalf("%s, copy %d, variable of %d: slot %d element %d is %v, its own update gives %v", at, r, n, k, j, g[j], s[j])
					}
				}
			}
		}
	}
}

// TestMirroredPairPanicFailsTheStep: a panic on one goroutine of a pair update releases
// the other (no hang) and comes back as the update's error.
func TestMirroredPairPanicFailsTheStep(t *testing.T) {
	vars := [2][]*tensor.Variable{}
	for r := range vars {
		for range 3 {
			vars[r] = append(vars[r], tensor.NewVariable("v", tensor.Zeros(mirroredMin), true))
		}
	}
	done := make(chan error, 1)
	go func() {
		done <- runMirroredPair(3, func(r, i int) (*tensor.Variable, int) { return vars[r][i], mirroredMin },
			func(r, i int, w []float32) {},
			func(r, i, lo, hi int, w, other []float32) {
				if r == 0 && i == 1 {
					panic("boom")
				}
			})
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "replica 0") || !strings.Contains(err.Error(), "boom") {
			t.Fatalf("runMirroredPair with a panicking update = %v, want an error naming replica 0 and the panic", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("runMirroredPair hung after one goroutine panicked")
	}
}

// TestMirroredPairBorrowsSlotsUntilAStepIsNot: while two copies are updated as a pair, the
// second copy of a large variable borrows the first's slots (one copy of Adam's moments);
// a step that updates the copies each on its own (replica 1's terms in other memory) first
// gives the second copy slots of its own again, so that the two updates do not both apply
// to one moment. Over pair, own, pair, own steps, every copy's values and slots stay those
// of copies always updated on their own, bit for bit.
func TestMirroredPairBorrowsSlotsUntilAStepIsNot(t *testing.T) {
	sizes := []int{100, mirroredMin + 3}
	paired, own := Adam(1e-2), Adam(1e-2)
	pv, ov := replicaCopies(sizes), replicaCopies(sizes)
	rng := rand.New(rand.NewSource(5))
	shares := func(i int) bool {
		a, b := paired.slots[pv[0][i]], paired.slots[pv[1][i]]
		return &a.slots[0][0] == &b.slots[0][0] || &a.slots[1][0] == &b.slots[1][0]
	}
	for step, pair := range []bool{true, true, false, true, false, false, true} {
		terms := make([]gradTerms, len(sizes))
		other := make([]gradTerms, len(sizes))
		for i, n := range sizes {
			g0, g1 := make([]float32, n), make([]float32, n)
			for j := range n {
				g0[j], g1[j] = rng.Float32()-0.5, rng.Float32()-0.5
			}
			terms[i] = gradTerms{g0, g1}
			other[i] = gradTerms{slices.Clone(g0), slices.Clone(g1)}
		}
		before := paired.pairSteps.Load()
		second := other // the same values in other memory: each copy on its own
		if pair {
			second = terms
		}
		if err := paired.applyTerms([][]gradTerms{terms, second}, pv); err != nil {
			t.Fatal(err)
		}
		if got := paired.pairSteps.Load() - before; got != map[bool]int64{true: 1, false: 0}[pair] {
			t.Fatalf("step %d (pair %v): %d pair updates", step, pair, got)
		}
		if err := own.applyTerms([][]gradTerms{terms, other}, ov); err != nil {
			t.Fatal(err)
		}
		for i, n := range sizes {
			if want := pair && n >= mirroredMin; shares(i) != want {
				t.Fatalf("step %d (pair %v), variable of %d: copies share slots %v, want %v", step, pair, n, shares(i), want)
			}
		}
		sameUpdates(t, fmt.Sprintf("step %d (pair %v)", step, pair), paired, own, pv, ov)
	}
}
