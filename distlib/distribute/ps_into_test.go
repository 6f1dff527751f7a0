package distribute

import (
	"context"
	"strings"
	"testing"
	"time"
	"unsafe"

	"godist/distlib/tensor"
	"godist/internal/leakcheck"
)

// sameMemory reports whether a and b start at the same element.
func sameMemory(a, b []float32) bool {
	return len(a) > 0 && len(b) > 0 && unsafe.SliceData(a) == unsafe.SliceData(b)
}

// The Into variants write the values read into the caller's tensors (every shard of a
// partitioned variable in its place) and answer with them; without destinations they
// answer fresh tensors, as ReadAll and ApplyGradientsAndRead do, which later reads leave
// as they were.
func TestWorkerReadsInto(t *testing.T) {
	leakcheck.Check(t)
	s, _ := psCluster(t, 2, 1, WithVariablePartitioner(NewFixedShardsPartitioner(2)))
	w := s.NewVariable("w", mat(2, 2, 1, 2, 3, 4), true) // two shards, one per ps
	b := s.NewVariable("b", vec(10, 20), true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var op uint32
	wc := &WorkerContext{ctx: ctx, step: 5, a: access{ctx: ctx, clients: s.clients, step: 5, op: &op}}
	vars := []*ShardedVariable{w, b}
	dst := []*tensor.Tensor{tensor.Zeros(2, 2), tensor.Zeros(2)}
	mem := [][]float32{dst[0].Data(), dst[1].Data()}
	check := func(what string, got []*tensor.Tensor, want [][]float32) {
		t.Helper()
		for i, g := range got {
			if g != dst[i] || !sameMemory(g.Data(), mem[i]) {
				t.Errorf("%s: value %d is not the destination given", what, i)
			}
			if !equalData(g.Data(), want[i]) {
				t.Errorf("%s: value %d = %v, want %v", what, i, g.Data(), want[i])
			}
		}
	}
	got, err := wc.ReadAllInto(vars, dst)
	if err != nil {
		t.Fatal(err)
	}
	check("ReadAllInto", got, [][]float32{{1, 2, 3, 4}, {10, 20}})
	fresh, err := wc.ReadAll(vars)
	if err != nil || sameMemory(fresh[0].Data(), mem[0]) || sameMemory(fresh[1].Data(), mem[1]) {
		t.Fatalf("ReadAll = %v, %v: want fresh tensors", fresh, err)
	}

	opt := NewPSSGD(1, 0)
	grads := []*tensor.Tensor{mat(2, 2, 1, 1, 1, 1), vec(1, 2)}
	got, err = wc.ApplyGradientsAndReadInto(opt, grads, vars, vars, dst)
	if err != nil {
		t.Fatal(err)
	}
	check("ApplyGradientsAndReadInto", got, [][]float32{{0, 1, 2, 3}, {9, 18}})
	// A variable only read (not pushed) is written into its destination too.
	got, err = wc.ApplyGradientsAndReadAsyncInto(opt, grads[1:], vars[1:], vars, dst).Wait()
	if err != nil {
		t.Fatal(err)
	}
	check("ApplyGradientsAndReadAsyncInto", got, [][]float32{{0, 1, 2, 3}, {8, 16}})
	// The fresh tensors of ReadAll kept the values they had.
	if !equalData(fresh[0].Data(), []float32{1, 2, 3, 4}) || !equalData(fresh[1].Data(), []float32{10, 20}) {
		t.Errorf("ReadAll's values changed to %v, %v", fresh[0].Data(), fresh[1].Data())
	}
	// Without destinations: fresh tensors.
	got, err = wc.ApplyGradientsAndReadInto(opt, []*tensor.Tensor{nil, nil}, vars, vars, nil)
	if err != nil || sameMemory(got[0].Data(), mem[0]) || !equalData(got[1].Data(), []float32{8, 16}) {
		t.Errorf("ApplyGradientsAndReadInto without destinations = %v, %v: want fresh tensors, b [8 16]", got, err)
	}

	// Bad destinations are refused, naming what is wrong, before anything is pushed.
	before := [][]float32{w.Value().Data(), b.Value().Data()}
	tests := []struct {
		name string
		call func() error
		want string
	}{
		{"ReadAllInto count", func() error { _, err := wc.ReadAllInto(vars, dst[:1]); return err }, "1 destinations for 2 variables"},
		{"ReadAllInto shape", func() error {
			_, err := wc.ReadAllInto(vars, []*tensor.Tensor{tensor.Zeros(4), dst[1]})
			return err
		}, `variable "w" of shape [2 2] into a destination of shape [4]`},
		{"ApplyGradientsAndReadInto count", func() error {
			_, err := wc.ApplyGradientsAndReadInto(opt, grads, vars, vars, dst[:1])
			return err
		}, "ApplyGradientsAndReadInto: 1 destinations for 2 variables read"},
		{"ApplyGradientsAndReadInto shape", func() error {
			_, err := wc.ApplyGradientsAndReadInto(opt, grads, vars, vars, []*tensor.Tensor{dst[0], tensor.Zeros(3)})
			return err
		}, `ApplyGradientsAndReadInto: variable "b" of shape [2] read into a destination of shape [3]`},
		{"ApplyGradientsAndReadAsyncInto count", func() error {
			_, err := wc.ApplyGradientsAndReadAsyncInto(opt, grads, vars, vars, dst[:1]).Wait()
			return err
		}, "ApplyGradientsAndReadAsyncInto: 1 destinations for 2 variables read"},
	}
	for _, tt := range tests {
		if err := tt.call(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want one containing %q", tt.name, err, tt.want)
		}
	}
	for i, v := range vars {
		if after := v.Value().Data(); !equalData(after, before[i]) {
			t.Errorf("%s = %v after the refused calls, want %v (nothing pushed)", v.Name(), after, before[i])
		}
	}
}
