package distribute

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"godist/distlib/tensor"
)

// psReshardVars are the variables of the reshard tests: an embedding split along its rows
// and a vector, with values whose bits are all distinct.
func psReshardVars(s *ParameterServerStrategy, fill bool) []*ShardedVariable {
	shapes := map[string][]int{"emb": {10, 3}, "bias": {7}}
	var out []*ShardedVariable
	for _, name := range []string{"emb", "bias"} {
		n := 1
		for _, d := range shapes[name] {
			n *= d
		}
		d := make([]float32, n)
		if fill {
			for i := range d {
				d[i] = float32(math.Sin(float64(i+len(name)))) / 3
			}
		}
		out = append(out, s.NewVariable(name, tensor.MustNew(shapes[name], d), true))
	}
	return out
}

// TestPSCheckpointReshards: a ParameterServerStrategy checkpoint written with P ps tasks
// and one partitioning restores into another P and partitioning bit for bit: the file
// holds each variable's global value, which the new shards split as they are laid out.
func TestPSCheckpointReshards(t *testing.T) {
	tests := []struct{ fromPS, fromShards, toPS, toShards int }{
		{2, 2, 1, 1},
		{2, 2, 3, 3},
		{2, 3, 3, 2},
		{1, 1, 2, 4},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d ps %d shards to %d ps %d shards", tt.fromPS, tt.fromShards, tt.toPS, tt.toShards), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "ckpt")
			s, _ := psCluster(t, tt.fromPS, 1, WithVariablePartitioner(NewFixedShardsPartitioner(tt.fromShards)))
			saved := psReshardVars(s, true)
			saved[0].AssignAdd(tensor.Fill(0.25, 10, 3)) // a value the ps computed
			want := make([][]float32, len(saved))
			for i, v := range saved {
				want[i] = v.Value().Data()
			}
			if err := s.SaveCheckpoint(path); err != nil {
				t.Fatal(err)
			}
			s2, _ := psCluster(t, tt.toPS, 1, WithVariablePartitioner(NewFixedShardsPartitioner(tt.toShards)))
			got := psReshardVars(s2, false)
			if got[0].NumShards() != tt.toShards {
				t.Fatalf("restored emb has %d shards, want %d", got[0].NumShards(), tt.toShards)
			}
			if err := s2.RestoreCheckpoint(path); err != nil {
				t.Fatal(err)
			}
			for i, v := range got {
				g := v.Value().Data()
				for j := range g {
					if math.Float32bits(g[j]) != math.Float32bits(want[i][j]) {
						t.Fatalf("%s[%d] = %v after the restore, saved %v", v.Name(), j, g[j], want[i][j])
					}
				}
				// Each shard holds its rows of the global value.
				rows := v.EmbeddingLookup([]int{0, v.Shape()[0] - 1}).Data()
				row := len(g) / v.Shape()[0]
				if math.Float32bits(rows[0]) != math.Float32bits(want[i][0]) || math.Float32bits(rows[row]) != math.Float32bits(want[i][len(g)-row]) {
					t.Errorf("%s: first and last rows %v, saved %v and %v", v.Name(), rows, want[i][0], want[i][len(g)-row])
				}
			}
		})
	}
}

// TestPSCheckpointReshardErrors: a restore that cannot be done names the checkpoint, the
// variable and what differs, and changes nothing.
func TestPSCheckpointReshardErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ckpt")
	s, _ := psCluster(t, 2, 1, WithVariablePartitioner(NewFixedShardsPartitioner(2)))
	psReshardVars(s, true)
	if err := s.SaveCheckpoint(path); err != nil {
		t.Fatal(err)
	}
	s2, _ := psCluster(t, 3, 1, WithVariablePartitioner(NewFixedShardsPartitioner(3)))
	bias := s2.NewVariable("bias", tensor.Fill(7, 7), true)
	s2.NewVariable("emb", tensor.Fill(7, 12, 3), true)
	err := s2.RestoreCheckpoint(path)
	if got := bias.Value().Data(); got[0] != 7 || got[6] != 7 {
		t.Errorf("bias = %v after a failed restore, want it unchanged (7s)", got)
	}
	if !errors.Is(err, ErrCheckpoint) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), `"emb"`) ||
		!strings.Contains(err.Error(), "[10 3]") || !strings.Contains(err.Error(), "[12 3]") {
		t.Errorf("restore of emb [10 3] into [12 3]: %v, want ErrCheckpoint naming the file, the variable and both shapes", err)
	}
	s3, _ := psCluster(t, 1, 1)
	s3.NewVariable("other", tensor.Fill(7, 2), true)
	err = s3.RestoreCheckpoint(path)
	if !errors.Is(err, ErrCheckpoint) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), `"other"`) {
		t.Errorf("restore of a variable the checkpoint lacks: %v, want ErrCheckpoint naming the file and the variable", err)
	}
}

// psReshardTrain applies step i of a deterministic Adam training to vars through the
// coordinator: a gradient per variable whose bits depend on i only.
func psReshardTrain(t *testing.T, s *ParameterServerStrategy, opt *PSOptimizer, vars []*ShardedVariable, i int) {
	t.Helper()
	for _, v := range vars {
		g := make([]float32, v.size())
		for j := range g {
			g[j] = float32(math.Cos(float64(i*31+j+len(v.name)))) / 4
		}
		a, cancel := s.coordAccess()
		err := v.update(a, opt.kind, opt.rule, tensor.MustNew(v.shape, g))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
}

func sameFloatBits(a, b []float32) bool {
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

// TestPSCheckpointReshardsOptimizerState: after a few Adam steps on 2 ps tasks, the
// checkpoint restores on 1 and 3 ps tasks the slots and step counts bit for bit, and the
// next step there gives the weights the original cluster's next step gives, bit for bit.
func TestPSCheckpointReshardsOptimizerState(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ckpt")
	opt := NewPSAdam(0.05)
	s, _ := psCluster(t, 2, 1, WithVariablePartitioner(NewFixedShardsPartitioner(2)))
	orig := psReshardVars(s, true)
	for i := range 3 {
		psReshardTrain(t, s, opt, orig, i)
	}
	if err := s.SaveCheckpoint(path); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	wantState := make([]*OptimizerState, len(orig))
	for i, v := range orig {
		st, err := v.OptimizerState(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Slots) != 2 || st.Steps[0].T != 3 {
			t.Fatalf("%s: state after 3 Adam steps has %d slots, t %d; want 2 and 3", v.Name(), len(st.Slots), st.Steps[0].T)
		}
		wantState[i] = st
	}
	psReshardTrain(t, s, opt, orig, 3) // the original continues
	want := make([][]float32, len(orig))
	for i, v := range orig {
		want[i] = v.Value().Data()
	}
	for _, p := range []int{1, 3} {
		t.Run(fmt.Sprintf("to %d ps", p), func(t *testing.T) {
			s2, _ := psCluster(t, p, 1, WithVariablePartitioner(NewFixedShardsPartitioner(p)))
			got := psReshardVars(s2, false)
			if err := s2.RestoreCheckpoint(path); err != nil {
				t.Fatal(err)
			}
			for i, v := range got {
				st, err := v.OptimizerState(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if len(st.Steps) != p || len(st.Slots) != len(wantState[i].Slots) {
					t.Fatalf("%s: restored state %d shards, %d slots; want %d, %d", v.Name(), len(st.Steps), len(st.Slots), p, len(wantState[i].Slots))
				}
				for _, sh := range st.Steps {
					if sh.T != 3 {
						t.Errorf("%s: restored shard at row %d has t %d, want 3", v.Name(), sh.Offset, sh.T)
					}
				}
				for k := range st.Slots {
					if !sameFloatBits(st.Slots[k], wantState[i].Slots[k]) {
						t.Errorf("%s: restored slot %d differs from the saved one", v.Name(), k)
					}
				}
			}
			psReshardTrain(t, s2, opt, got, 3)
			for i, v := range got {
				if g := v.Value().Data(); !sameFloatBits(g, want[i]) {
					t.Errorf("%s after the next step on the restored cluster: %v, the original's %v", v.Name(), g, want[i])
				}
			}
		})
	}
}

// TestPSCheckpointShardStepsDiffer: shards saved at different optimizer steps (a sparse
// update touched one) restore onto the same partitioning, each with its own t; onto
// another partitioning that would merge them the restore fails naming the variable, and
// sets nothing.
func TestPSCheckpointShardStepsDiffer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ckpt")
	opt := NewPSAdam(0.05)
	s, _ := psCluster(t, 2, 1, WithVariablePartitioner(NewFixedShardsPartitioner(2)))
	orig := psReshardVars(s, true)
	psReshardTrain(t, s, opt, orig, 0)
	a, cancel := s.coordAccess()
	err := orig[0].scatter(a, opt.kind, opt.rule, []int{1}, tensor.Fill(0.5, 1, 3)) // shard 0 only
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SaveCheckpoint(path); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	want, _ := orig[0].OptimizerState(ctx)
	if want.Steps[0].T != 2 || want.Steps[1].T != 1 {
		t.Fatalf("steps after a sparse update of shard 0: %+v, want t 2 and 1", want.Steps)
	}
	s2, _ := psCluster(t, 2, 1, WithVariablePartitioner(NewFixedShardsPartitioner(2)))
	same := psReshardVars(s2, false)
	if err := s2.RestoreCheckpoint(path); err != nil {
		t.Fatal(err)
	}
	if got, _ := same[0].OptimizerState(ctx); got.Steps[0].T != 2 || got.Steps[1].T != 1 || !sameFloatBits(got.Slots[0], want.Slots[0]) {
		t.Errorf("restored on the same partitioning: steps %+v, want t 2 and 1 and the saved slots", got.Steps)
	}
	s3, _ := psCluster(t, 1, 1)
	other := psReshardVars(s3, false)
	err = s3.RestoreCheckpoint(path)
	if !errors.Is(err, ErrCheckpoint) || !strings.Contains(err.Error(), `"emb"`) || !strings.Contains(err.Error(), "different optimizer steps") {
		t.Errorf("restore merging shards at t 2 and 1: %v, want ErrCheckpoint naming emb and the differing steps", err)
	}
	if got := other[1].Value().Data(); got[0] != 0 {
		t.Errorf("bias = %v after a refused restore, want it unchanged", got)
	}
}

// TestPSCheckpointFirstFormat: a checkpoint of the first format (values only) still
// restores the values, and a WARNING says that the optimizer state is not restored.
func TestPSCheckpointFirstFormat(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ckpt")
	le := binary.LittleEndian
	b := []byte(psCheckpointMagicV1)
	b = le.AppendUint64(b, 1)
	b = le.AppendUint64(b, 1)
	b = append(b, 'w')
	b = le.AppendUint64(b, 1)
	b = le.AppendUint64(b, 2)
	b = le.AppendUint32(b, math.Float32bits(1.5))
	b = le.AppendUint32(b, math.Float32bits(-2))
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	s, _ := psCluster(t, 1, 1)
	v := s.NewVariable("w", tensor.Fill(0, 2), true)
	var logs bytes.Buffer
	old := SetLogOutput(&logs)
	defer SetLogOutput(old)
	if err := s.RestoreCheckpoint(path); err != nil {
		t.Fatal(err)
	}
	if got := v.Value().Data(); got[0] != 1.5 || got[1] != -2 {
		t.Errorf("restored %v, want [1.5 -2]", got)
	}
	if l := logs.String(); !strings.Contains(l, "WARNING") || !strings.Contains(l, path) || !strings.Contains(l, "no optimizer state") {
		t.Errorf("logs %q: want a WARNING naming the file and that it holds no optimizer state", l)
	}
}
