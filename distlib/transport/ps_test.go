package transport

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"godist/distlib/optim"
	"godist/internal/leakcheck"
)

func startPS(t *testing.T, token string) *PSServer {
	t.Helper()
	return startPSWith(t, PSServerOptions{Token: token, Task: 0})
}

func dialPS(t *testing.T, s *PSServer, token string, caller int) *PSClient {
	t.Helper()
	return dialPSWith(t, s, PSClientOptions{Token: token, Caller: caller})
}

func startPSWith(t testing.TB, opts PSServerOptions) *PSServer {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewPSServer(lis, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func dialPSWith(t testing.TB, s *PSServer, opts PSClientOptions) *PSClient {
	t.Helper()
	opts.Timeout = 5 * time.Second
	c, err := DialPS(s.Addr().String(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestPSCreateReadGather(t *testing.T) {
	leakcheck.Check(t)
	s := startPS(t, "tok")
	c := dialPS(t, s, "tok", 1)
	ctx := testCtx(t)
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, "emb/part_0", []int{3, 2}, []float32{1, 2, 3, 4, 5, 6}, false); err != nil {
		t.Fatal(err)
	}
	// Creating again keeps the value; overwrite replaces it; another shape is refused.
	if err := c.Create(ctx, "emb/part_0", []int{3, 2}, make([]float32, 6), false); err != nil {
		t.Fatal(err)
	}
	shape, data, err := c.Read(ctx, "emb/part_0")
	if err != nil || !slices.Equal(shape, []int{3, 2}) || !slices.Equal(data, []float32{1, 2, 3, 4, 5, 6}) {
		t.Fatalf("Read = %v, %v, %v, want [3 2], [1..6]", shape, data, err)
	}
	if err := c.Create(ctx, "emb/part_0", []int{2, 3}, make([]float32, 6), false); err == nil || !strings.Contains(err.Error(), "emb/part_0") {
		t.Errorf("Create with another shape: error = %v, want one naming the variable", err)
	}
	got, err := c.Gather(ctx, "emb/part_0", []int{2, 0, 2})
	if want := []float32{5, 6, 1, 2, 5, 6}; err != nil || !slices.Equal(got, want) {
		t.Errorf("Gather([2 0 2]) = %v, %v, want %v", got, err, want)
	}
	if _, err := c.Gather(ctx, "emb/part_0", []int{3}); err == nil || !strings.Contains(err.Error(), "row 3") {
		t.Errorf("Gather([3]) error = %v, want one naming row 3", err)
	}
	if _, _, err := c.Read(ctx, "nope"); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("Read(nope) error = %v, want one naming the variable", err)
	}
	if err := c.Create(ctx, "bad", []int{2, 2}, []float32{1}, false); err == nil {
		t.Error("Create with 1 value for shape [2 2] succeeded")
	}
	keys, err := c.List(ctx)
	if err != nil || !slices.Equal(keys, []string{"emb/part_0"}) {
		t.Errorf("List = %v, %v, want [emb/part_0]", keys, err)
	}
}

func TestPSUpdateExactlyOnce(t *testing.T) {
	leakcheck.Check(t)
	s := startPS(t, "tok")
	ctx := testCtx(t)
	c := dialPS(t, s, "tok", 1)
	if err := c.Create(ctx, "counter", []int{}, []float32{0}, false); err != nil {
		t.Fatal(err)
	}
	// Two clients (workers) push the same 100 steps concurrently, as a step retried on
	// another worker does: every step counts once. Step 0 is never deduplicated.
	var wg sync.WaitGroup
	for w := 0; w < 2; w++ {
		cw := dialPS(t, s, "tok", 2+w)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for step := uint64(1); step <= 100; step++ {
				if _, err := cw.Update(ctx, "counter", Update{ID: UpdateID{Step: step}, Kind: UpdateAssignAdd, Value: []float32{1}}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for i := 0; i < 3; i++ {
		if ok, err := c.Update(ctx, "counter", Update{Kind: UpdateAssignAdd, Value: []float32{1}}); !ok || err != nil {
			t.Fatalf("step-0 update: %v, %v", ok, err)
		}
	}
	_, data, err := c.Read(ctx, "counter")
	if err != nil || data[0] != 103 {
		t.Fatalf("counter = %v, %v, want 103", data, err)
	}
	st := s.Stats()
	if st.Applied != 103 || st.Duplicates != 100 {
		t.Errorf("Stats = %+v, want 103 applied, 100 duplicates", st)
	}
	// Two updates of one step are distinct ops.
	for op := uint32(0); op < 2; op++ {
		if ok, err := c.Update(ctx, "counter", Update{ID: UpdateID{Step: 500, Op: op}, Kind: UpdateAssignAdd, Value: []float32{1}}); !ok || err != nil {
			t.Fatalf("op %d: %v, %v", op, ok, err)
		}
	}
	if err := c.Forget(ctx, 101); err != nil {
		t.Fatal(err)
	}
	// Forgotten steps are no longer remembered (the coordinator only forgets finished ones).
	if ok, _ := c.Update(ctx, "counter", Update{ID: UpdateID{Step: 5}, Kind: UpdateAssignAdd, Value: []float32{0}}); !ok {
		t.Error("update of a forgotten step was refused")
	}
	if ok, _ := c.Update(ctx, "counter", Update{ID: UpdateID{Step: 500, Op: 1}, Kind: UpdateAssignAdd, Value: []float32{0}}); ok {
		t.Error("update of a remembered step was applied twice")
	}
}

func TestPSOptimizerRules(t *testing.T) {
	leakcheck.Check(t)
	s := startPS(t, "tok")
	ctx := testCtx(t)
	c := dialPS(t, s, "tok", 0)
	w0 := []float32{1, -2, 3, 0.5}
	grads := [][]float32{{0.1, -0.2, 0.3, 0}, {0.5, 0.5, -1, 2}, {-0.3, 0.1, 0.2, 0.4}}
	// The ps applies each rule with the kernels of package optim, keeping the slots and the
	// step count per variable: after several steps its value equals a local run bit for bit.
	tests := []struct {
		name string
		rule Rule
	}{
		{"sgd", optim.NewSGD(0.1, 0, false)},
		{"momentum", optim.NewSGD(0.1, 0.9, false)},
		{"nesterov", optim.NewSGD(0.05, 0.8, true)},
		{"adam", optim.NewAdam(0.01, 0.9, 0.999, 1e-7)},
		{"adam-betas", optim.NewAdam(0.02, 0.7, 0.95, 1e-4)},
		{"rmsprop", optim.NewRMSprop(0.01, 0.9, 0, 1e-7)},
		{"rmsprop-momentum", optim.NewRMSprop(0.01, 0.8, 0.5, 1e-6)},
	}
	for _, tt := range tests {
		if err := c.Create(ctx, tt.name, []int{2, 2}, w0, false); err != nil {
			t.Fatal(err)
		}
		want := slices.Clone(w0)
		slots := make([][]float32, tt.rule.Slots())
		for k := range slots {
			slots[k] = make([]float32, len(w0))
		}
		for step, g := range grads {
			if _, err := c.Update(ctx, tt.name, Update{ID: UpdateID{Step: uint64(step + 1)}, Kind: UpdateOptimizer, Rule: tt.rule, Value: g}); err != nil {
				t.Fatal(err)
			}
			tt.rule.Apply(want, g, slots, int64(step+1))
		}
		_, got, err := c.Read(ctx, tt.name)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) || slices.Equal(got, w0) {
			t.Errorf("%s: ps value after %d steps = %v, want %v (optim.Spec.Apply)", tt.name, len(grads), got, want)
		}
	}
	// A rule applied to some rows updates those rows and their slots only.
	if err := c.Create(ctx, "rows", []int{3, 2}, []float32{1, 2, 3, 4, 5, 6}, false); err != nil {
		t.Fatal(err)
	}
	mom := optim.NewSGD(1, 0.5, false)
	for range 2 {
		if _, err := c.Update(ctx, "rows", Update{Kind: UpdateOptimizer, Rule: mom, Rows: []int{2, 0}, Value: []float32{1, 1, 2, 2}}); err != nil {
			t.Fatal(err)
		}
	}
	// Row 2: v = -1, -1.5 (w 5 -> 2.5); row 0: v = -2, -3 (w 1 -> -4).
	if _, got, _ := c.Read(ctx, "rows"); !slices.Equal(got, []float32{-4, -3, 3, 4, 2.5, 3.5}) {
		t.Errorf("rows after 2 momentum steps on rows 2 and 0 = %v, want [-4 -3 3 4 2.5 3.5]", got)
	}
	// A bad rule is refused before it is sent, naming the variable and the value.
	_, err := c.Update(ctx, "sgd", Update{Kind: UpdateOptimizer, Rule: optim.NewSGD(-1, 0, false), Value: grads[0]})
	if err == nil || !errors.Is(err, optim.ErrInvalidSpec) || !strings.Contains(err.Error(), "learning rate -1") || !strings.Contains(err.Error(), `"sgd"`) {
		t.Errorf("Update with learning rate -1 = %v, want an optim.ErrInvalidSpec naming it and the variable", err)
	}
	// The server checks what arrives too: an unknown rule kind or update kind is refused
	// with a message naming it, and the variable is left alone.
	for _, tc := range []struct {
		name string
		kind byte
		spec func(b []byte)
		want string
	}{
		{"unknown rule", byte(UpdateOptimizer), func(b []byte) { b[0] = 9 }, "unknown rule kind 9"},
		{"bad momentum", byte(UpdateOptimizer), func(b []byte) { b[11] = 0x3f; b[17] = 0x40 }, "momentum"},
		{"unknown update kind", 7, nil, "unknown update kind 7"},
	} {
		var e psEncoder
		e.u64(0)
		e.u32(0)
		e.u8(tc.kind)
		if tc.spec != nil {
			b, _ := optim.NewSGD(0.1, 0.5, false).MarshalBinary()
			tc.spec(b)
			e.b = append(e.b, b...)
		}
		e.u8(0)
		e.floats(grads[0])
		_, err := c.invoke(ctx, "Update", "sgd", e.b, false)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Update = %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	if _, got, _ := c.Read(ctx, "sgd"); slices.Equal(got, w0) {
		t.Errorf("sgd was not trained")
	}
	// Row updates touch only their rows.
	if _, err := c.Update(ctx, "sgd", Update{Kind: UpdateAssign, Rows: []int{1}, Value: []float32{7, 8}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.Gather(ctx, "sgd", []int{1}); !slices.Equal(got, []float32{7, 8}) {
		t.Errorf("row 1 after assign = %v, want [7 8]", got)
	}
	if _, err := c.Update(ctx, "sgd", Update{Kind: UpdateAssignAdd, Value: []float32{1}}); err == nil {
		t.Error("update with 1 value for 4 elements succeeded")
	}
}

func TestPSTokenAndFailure(t *testing.T) {
	leakcheck.Check(t)
	s := startPS(t, "right")
	ctx := testCtx(t)
	bad := dialPS(t, s, "wrong", 0)
	if err := bad.WaitReady(ctx); !errors.Is(err, ErrBadToken) {
		t.Errorf("call with a wrong token: error = %v, want ErrBadToken", err)
	}
	if _, err := DialPS(s.Addr().String(), PSClientOptions{}); err == nil {
		t.Error("DialPS without a token succeeded")
	}
	c := dialPS(t, s, "right", 0)
	if err := c.Create(ctx, "v", []int{1}, []float32{1}, false); err != nil {
		t.Fatal(err)
	}
	s.Close()
	start := time.Now()
	if _, _, err := c.Read(ctx, "v"); !errors.Is(err, ErrPSUnavailable) || !strings.Contains(err.Error(), s.Addr().String()) {
		t.Errorf("Read from a stopped ps: error = %v, want ErrPSUnavailable naming its address", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Read from a stopped ps took %v", d)
	}
	c.Close()
	if err := c.Ping(ctx); !errors.Is(err, ErrPSUnavailable) {
		t.Errorf("Ping on a closed client: error = %v, want ErrPSUnavailable", err)
	}
}

// UpdateRead applies an update once and answers the value right after it; ReadInto
// reuses the caller's slice when it has the variable's size.
func TestPSUpdateReadAndReadInto(t *testing.T) {
	leakcheck.Check(t)
	s := startPS(t, "tok")
	c := dialPS(t, s, "tok", 1)
	ctx := testCtx(t)
	if err := c.Create(ctx, "v", []int{3}, []float32{1, 2, 3}, false); err != nil {
		t.Fatal(err)
	}
	add := Update{ID: UpdateID{Step: 5, Op: 0}, Kind: UpdateAssignAdd, Value: []float32{1, 1, 1}}
	dst := make([]float32, 3)
	for _, tc := range []struct {
		name        string
		dst         []float32
		wantApplied bool
	}{
		{"first", dst, true},
		{"step run again", nil, false},
	} {
		applied, got, err := c.UpdateRead(ctx, "v", add, tc.dst)
		if err != nil || applied != tc.wantApplied || !slices.Equal(got, []float32{2, 3, 4}) {
			t.Errorf("%s: UpdateRead = %v, %v, %v, want %v, [2 3 4]", tc.name, applied, got, err, tc.wantApplied)
		}
		if tc.dst != nil && &got[0] != &tc.dst[0] {
			t.Errorf("%s: UpdateRead did not write into dst", tc.name)
		}
	}
	got, err := c.ReadInto(ctx, "v", dst[:2]) // wrong size: a new slice
	if err != nil || !slices.Equal(got, []float32{2, 3, 4}) || len(got) != 3 {
		t.Errorf("ReadInto(short dst) = %v, %v, want [2 3 4]", got, err)
	}
	if _, _, err := c.UpdateRead(ctx, "v", Update{Kind: UpdateAssignAdd, Value: []float32{1}}, nil); err == nil || !strings.Contains(err.Error(), `"v"`) {
		t.Errorf("UpdateRead with 1 value for 3: error = %v, want one naming the variable", err)
	}
	if _, err := c.ReadInto(ctx, "nope", nil); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("ReadInto(nope) error = %v, want one naming the variable", err)
	}
	if st := s.Stats(); st.Applied != 1 || st.Duplicates != 1 {
		t.Errorf("stats %+v, want 1 applied and 1 duplicate", st)
	}
}

// BenchmarkPSAdamApply measures Adam on the ps for the peer CNN's largest variable
// (Dense 5408x64): the work a ps does per pushed gradient.
func BenchmarkPSAdamApply(b *testing.B) {
	n := 5408 * 64
	v := &psVar{shape: []int{5408, 64}, row: 64, data: make([]float32, n), applied: map[UpdateID]struct{}{}}
	g := make([]float32, n)
	for i := range g {
		g[i] = float32(i%7) - 3
	}
	u := Update{Kind: UpdateOptimizer, Rule: optim.NewAdam(1e-3, 0.9, 0.999, 1e-7), Value: g}
	b.SetBytes(int64(4 * n))
	for b.Loop() {
		if err := v.apply("w", u); err != nil {
			b.Fatal(err)
		}
	}
}
