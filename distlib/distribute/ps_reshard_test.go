package distribute

import (
	"errors"
	"fmt"
	"math"
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
