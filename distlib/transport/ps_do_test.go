//go:build linux

package transport

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"godist/distlib/optim"
	"godist/internal/leakcheck"
)

// One Do call gives what the same calls made one by one give, bit for bit: pushes
// answered with the value, pushes alone and reads alone, of large variables (through the
// client's region when it has one) and small ones (in the message), a value answered into
// Dst or into a new slice; a step run again is refused and answers the current value.
func TestPSDoMatchesSingleCalls(t *testing.T) {
	for _, shared := range []bool{true, false} {
		t.Run(fmt.Sprintf("shared=%v", shared), func(t *testing.T) {
			if shared {
				needShm(t)
			}
			leakcheck.Check(t)
			ctx := testCtx(t)
			sdo := startPSWith(t, PSServerOptions{Token: "tok"})
			sone := startPSWith(t, PSServerOptions{Token: "tok"})
			cdo := dialPSWith(t, sdo, PSClientOptions{Token: "tok", Caller: 1, NoSharedMemory: !shared})
			cone := dialPSWith(t, sone, PSClientOptions{Token: "tok", Caller: 1, NoSharedMemory: !shared})
			r := rand.New(rand.NewPCG(5, 6))
			sizes := map[string]int{"w": 5000, "b": 10, "v": 2048, "s": 3}
			keys := []string{"w", "b", "v", "s"}
			for _, k := range keys {
				init := randFloats(r, sizes[k])
				for _, c := range []*PSClient{cdo, cone} {
					if err := c.Create(ctx, k, []int{sizes[k]}, init, false); err != nil {
						t.Fatal(err)
					}
				}
			}
			adam := optim.NewAdam(0.01, 0.9, 0.999, 1e-7)
			for step := uint64(1); step <= 4; step++ {
				grads := map[string][]float32{}
				for _, k := range keys {
					grads[k] = randFloats(r, sizes[k])
				}
				push := func(k string, op uint32) *Update {
					return &Update{ID: UpdateID{step, op}, Kind: UpdateOptimizer, Rule: adam, Value: grads[k]}
				}
				var dstW []float32
				if step%2 == 0 {
					dstW = make([]float32, sizes["w"]) // else a new slice
				}
				ops := []*PSOp{
					{Key: "w", Update: push("w", 0), Read: true, Dst: dstW},
					{Key: "b", Update: push("b", 1), Read: true, Dst: make([]float32, 10)},
					{Key: "v", Update: push("v", 2)},
					{Key: "s", Update: push("s", 3)},
				}
				if step > 1 {
					// Reads alone, of a large and a small variable, after their pushes.
					ops = append(ops, &PSOp{Key: "v", Read: true, Dst: make([]float32, 2048)}, &PSOp{Key: "s", Read: true})
				}
				if err := cdo.Do(ctx, ops); err != nil {
					t.Fatalf("step %d: Do: %v", step, err)
				}
				for i, op := range ops {
					var want []float32
					var applied bool
					var err error
					switch {
					case op.Update != nil && op.Read:
						applied, want, err = cone.UpdateRead(ctx, op.Key, *op.Update, nil)
					case op.Update != nil:
						applied, err = cone.Update(ctx, op.Key, *op.Update)
					default:
						want, err = cone.ReadInto(ctx, op.Key, nil)
					}
					if err != nil {
						t.Fatal(err)
					}
					if op.Update != nil && (!op.Applied || !applied) {
						t.Errorf("step %d, op %d (%s): applied %v, one by one %v; want both", step, i, op.Key, op.Applied, applied)
					}
					if !slices.Equal(op.Value, want) {
						t.Fatalf("step %d, op %d (%s): Do read %d values, one by one %d; they differ", step, i, op.Key, len(op.Value), len(want))
					}
					if op.Read && len(op.Dst) == len(op.Value) && &op.Value[0] != &op.Dst[0] {
						t.Errorf("step %d, op %d (%s): the value was not written into Dst", step, i, op.Key)
					}
				}
			}
			// The last step again: refused, answered with the current values.
			again := []*PSOp{{Key: "w", Update: &Update{ID: UpdateID{4, 0}, Kind: UpdateOptimizer, Rule: adam, Value: make([]float32, 5000)}, Read: true}}
			if err := cdo.Do(ctx, again); err != nil || again[0].Applied {
				t.Fatalf("the step run again: applied %v, err %v; want refused", again[0].Applied, err)
			}
			if want, _ := cone.ReadInto(ctx, "w", nil); !slices.Equal(again[0].Value, want) {
				t.Error("the refused push answered another value than the current one")
			}
			st := sdo.Stats()
			if shared && (st.SharedIn == 0 || st.SharedOut == 0) {
				t.Errorf("Do moved nothing through shared memory: %+v", st)
			}
			if !shared && (st.SharedIn != 0 || st.SharedOut != 0) {
				t.Errorf("a client without shared memory moved values through it: %+v", st)
			}
			if a, b := st.Applied, sone.Stats().Applied; a != b {
				t.Errorf("Do applied %d updates, the calls one by one %d", a, b)
			}
		})
	}
}

// A ps that does not map the client's region (it restarted) runs none of a Do's calls;
// the client sends them all again as payloads, each applied once, and offers a new region
// at its next call.
func TestPSDoForgottenRegion(t *testing.T) {
	needShm(t)
	leakcheck.Check(t)
	ctx, s, c := attachedClient(t, 4, 2048)
	if err := c.Create(ctx, "b", []int{4}, make([]float32, 4), false); err != nil {
		t.Fatal(err)
	}
	one := func(n int) []float32 { return slices.Repeat([]float32{1}, n) }
	add := func(step uint64) []*PSOp {
		t.Helper()
		// The small push first: a ps that ran it before refusing the region's call would
		// apply it twice (plain updates have no id here).
		ops := []*PSOp{
			{Key: "b", Update: &Update{Kind: UpdateAssignAdd, Value: one(4)}, Read: true},
			{Key: "v", Update: &Update{Kind: UpdateAssignAdd, Value: one(2048)}, Read: true, Dst: make([]float32, 2048)},
		}
		if err := c.Do(ctx, ops); err != nil {
			t.Fatalf("step %d: Do: %v", step, err)
		}
		return ops
	}
	add(1)
	s.forgetRegions()
	in := s.Stats().SharedIn
	ops := add(2)
	if ops[0].Value[0] != 2 || ops[1].Value[0] != 2 || ops[1].Value[2047] != 2 {
		t.Fatalf("after the ps forgot the region: b %v, v %v...%v; want 2 (each push applied once)", ops[0].Value[0], ops[1].Value[0], ops[1].Value[2047])
	}
	if st := s.Stats(); st.SharedIn != in {
		t.Errorf("the refused Do moved values through shared memory: SharedIn %d -> %d", in, st.SharedIn)
	}
	add(3)
	if s.mappedRegions() != 1 || s.Stats().SharedIn == in {
		t.Errorf("the client did not offer a new region: %d mapped, SharedIn %d", s.mappedRegions(), s.Stats().SharedIn)
	}
}

// A Do whose op neither updates nor reads is refused before anything is sent.
func TestPSDoBadOp(t *testing.T) {
	leakcheck.Check(t)
	ctx := testCtx(t)
	s := startPSWith(t, PSServerOptions{Token: "tok"})
	c := dialPSWith(t, s, PSClientOptions{Token: "tok", Caller: 1})
	if err := c.Create(ctx, "w", []int{2}, []float32{1, 2}, false); err != nil {
		t.Fatal(err)
	}
	err := c.Do(ctx, []*PSOp{{Key: "w", Update: &Update{Kind: UpdateAssignAdd, Value: []float32{1, 1}}}, {Key: "w"}})
	if err == nil {
		t.Fatal("Do with an op that neither updates nor reads: no error")
	}
	if got, _ := c.ReadInto(ctx, "w", nil); got[0] != 1 {
		t.Errorf("the refused Do changed w to %v", got)
	}
	if err := c.Do(ctx, []*PSOp{{Key: "nope", Read: true}}); err == nil {
		t.Error("Do reading a variable the ps does not hold: no error")
	}
}

// A training step of the peer CNN through one Do: Adam pushes of its 6 variables (the
// 5408x64 kernel 1.4 MB, through the client's region when shared) each answered with the
// variable, as a keras ps worker's step sends them. The time is the round trip with the
// ps in this process (no wake-up of another process), against the CPU it takes.
func BenchmarkPSDoStep(b *testing.B) {
	for _, shared := range []bool{true, false} {
		b.Run(fmt.Sprintf("shared=%v", shared), func(b *testing.B) {
			ctx := context.Background()
			s := startPSWith(b, PSServerOptions{Token: "tok"})
			c := dialPSWith(b, s, PSClientOptions{Token: "tok", Caller: 1, NoSharedMemory: !shared})
			sizes := []int{288, 32, 5408 * 64, 64, 640, 10}
			r := rand.New(rand.NewPCG(1, 2))
			adam := optim.NewAdam(1e-3, 0.9, 0.999, 1e-7)
			ops := make([]*PSOp, len(sizes))
			for i, n := range sizes {
				key := fmt.Sprintf("v%d", i)
				if err := c.Create(ctx, key, []int{n}, randFloats(r, n), false); err != nil {
					b.Fatal(err)
				}
				ops[i] = &PSOp{Key: key, Update: &Update{Kind: UpdateOptimizer, Rule: adam, Value: randFloats(r, n)}, Read: true, Dst: make([]float32, n)}
			}
			step := uint64(0)
			for b.Loop() {
				step++
				for i, op := range ops {
					op.Update.ID = UpdateID{Step: step, Op: uint32(i)}
				}
				if err := c.Do(ctx, ops); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
