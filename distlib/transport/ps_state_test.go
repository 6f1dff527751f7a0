package transport

import (
	"math"
	"strings"
	"testing"

	"godist/distlib/optim"
	"godist/internal/leakcheck"
)

// TestPSStateReadSet: ReadState returns the slots and step count the rule left on the ps;
// SetState puts them on another variable, whose next update then equals the first's bit
// for bit; bad states are refused and change nothing.
func TestPSStateReadSet(t *testing.T) {
	leakcheck.Check(t)
	s := startPS(t, "tok")
	c := dialPS(t, s, "tok", 0)
	ctx := testCtx(t)
	init := []float32{0.5, -1, 2, 0.25, 3, -0.75}
	for _, k := range []string{"a", "b"} {
		if err := c.Create(ctx, k, []int{3, 2}, init, false); err != nil {
			t.Fatal(err)
		}
	}
	if st, err := c.ReadState(ctx, "a"); err != nil || st.T != 0 || len(st.Slots) != 0 {
		t.Fatalf("ReadState before any update = %+v, %v; want no slots, T 0", st, err)
	}
	adam := optim.NewAdam(0.1, 0.9, 0.999, 1e-7)
	grad := func(i int) []float32 {
		g := make([]float32, 6)
		for j := range g {
			g[j] = float32(math.Sin(float64(i*6+j))) / 2
		}
		return g
	}
	for i := range 3 {
		if _, err := c.Update(ctx, "a", Update{Kind: UpdateOptimizer, Rule: adam, Value: grad(i)}); err != nil {
			t.Fatal(err)
		}
	}
	st, err := c.ReadState(ctx, "a")
	if err != nil || st.T != 3 || len(st.Slots) != adam.Slots() || len(st.Slots[0]) != 6 {
		t.Fatalf("ReadState after 3 Adam steps = %+v, %v; want T 3 and %d slots of 6", st, err, adam.Slots())
	}
	_, va, _ := c.Read(ctx, "a")
	if _, err := c.Update(ctx, "b", Update{Kind: UpdateAssign, Value: va}); err != nil {
		t.Fatal(err)
	}
	if err := c.SetState(ctx, "b", st); err != nil {
		t.Fatal(err)
	}
	if got, err := c.ReadState(ctx, "b"); err != nil || got.T != 3 || !sameBits(got.Slots[0], st.Slots[0]) || !sameBits(got.Slots[1], st.Slots[1]) {
		t.Fatalf("ReadState after SetState = %+v, %v; want %+v", got, err, st)
	}
	for _, k := range []string{"a", "b"} {
		if _, err := c.Update(ctx, k, Update{Kind: UpdateOptimizer, Rule: adam, Value: grad(3)}); err != nil {
			t.Fatal(err)
		}
	}
	_, va, _ = c.Read(ctx, "a")
	_, vb, _ := c.Read(ctx, "b")
	if !sameBits(va, vb) {
		t.Fatalf("next Adam step from the set state: %v, from the original %v", vb, va)
	}
	// A slot of the wrong size is refused, naming the variable; nothing changes.
	bad := PSState{T: 9, Slots: [][]float32{make([]float32, 5)}}
	if err := c.SetState(ctx, "b", bad); err == nil || !strings.Contains(err.Error(), `"b"`) {
		t.Errorf("SetState with a slot of 5 values on 6: %v, want an error naming the variable", err)
	}
	if got, _ := c.ReadState(ctx, "b"); got.T != 4 {
		t.Errorf("T = %d after a refused SetState, want 4", got.T)
	}
	if err := c.SetState(ctx, "nope", PSState{}); err == nil {
		t.Error("SetState of a missing variable succeeded")
	}
	// An empty state resets the variable to no optimizer state.
	if err := c.SetState(ctx, "b", PSState{}); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.ReadState(ctx, "b"); got.T != 0 || len(got.Slots) != 0 {
		t.Errorf("ReadState after an empty SetState = %+v, want none", got)
	}
}

func sameBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}
