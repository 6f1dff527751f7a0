package keras

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"godist/distlib/data"
	"godist/distlib/distribute"
	"godist/distlib/keras/layers"
	"godist/distlib/tensor"
)

// reshardLayout is how a job runs: workers > 0 in-process MultiWorkerMirrored workers (one
// replica each), else one MirroredStrategy over replicas CPU devices.
type reshardLayout struct {
	workers, replicas int
}

func (l reshardLayout) String() string {
	if l.workers > 0 {
		return fmt.Sprintf("%d workers", l.workers)
	}
	return fmt.Sprintf("%d replicas", l.replicas)
}

// run calls fn on every worker of l (concurrently), with the worker's strategy and a
// reshardModel made in its scope. Every worker has left the scope before any calls fn:
// scopes are process-wide, and a Fit inside another worker's scope is refused.
func (l reshardLayout) run(t *testing.T, fn func(w int, s distribute.Strategy, m *Model)) {
	t.Helper()
	if l.workers == 0 {
		devs := make([]string, l.replicas)
		for i := range devs {
			devs[i] = fmt.Sprintf("/cpu:%d", i)
		}
		s := distribute.NewMirroredStrategy(distribute.WithDevices(devs...))
		fn(0, s, reshardModel(s))
		return
	}
	var made sync.WaitGroup
	made.Add(l.workers)
	memWorkers(t, l.workers, 20*time.Second, func(w int, s *distribute.MultiWorkerMirroredStrategy) {
		m := reshardModel(s)
		made.Done()
		made.Wait()
		fn(w, s, m)
	})
}

// reshardModel is mwModel's CNN compiled with Adam (two slots per variable) in s's scope.
// It has no input shape: in-process workers build it together in Fit or a restore, not
// while one holds inProcessScopes.
func reshardModel(s distribute.Strategy) *Model {
	var m *Model
	inProcessScopes.Lock()
	defer inProcessScopes.Unlock()
	s.Scope(func() {
		SetRandomSeed(11)
		m = Sequential(layers.Conv2D(4, 3, layers.ReLU), layers.MaxPooling2D(2), layers.Flatten(),
			layers.Dense(8, layers.ReLU), layers.Dense(3))
		m.Compile(Adam(0.01), SparseCategoricalCrossentropy(true))
	})
	quiet(m)
	return m
}

// reshardData: 48 images in global batches of 12, which 1, 2 and 3 workers split evenly.
func reshardData() *data.Dataset {
	x, y := mwData(48)
	return data.FromTensorSlices(x, y).Batch(12, false).WithOptions(data.Options{AutoShardPolicy: data.AutoShardData})
}

var reshardCases = []struct{ from, to reshardLayout }{
	{reshardLayout{replicas: 2}, reshardLayout{replicas: 1}},
	{reshardLayout{replicas: 2}, reshardLayout{replicas: 3}},
	{reshardLayout{workers: 2}, reshardLayout{workers: 1}},
	{reshardLayout{workers: 2}, reshardLayout{workers: 3}},
	{reshardLayout{workers: 2}, reshardLayout{replicas: 3}},
}

// TestCheckpointReshards: a Checkpoint written under one number of replicas or workers
// restores under another, every copy's weights and Adam slots bit for bit the saved ones.
func TestCheckpointReshards(t *testing.T) {
	splitCPU(t, 3)
	for _, tc := range reshardCases {
		t.Run(tc.from.String()+" to "+tc.to.String(), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "ckpt-1")
			tc.from.run(t, func(_ int, _ distribute.Strategy, m *Model) {
				m.Fit(reshardData(), Epochs(1), Verbose(0))
				if err := NewCheckpoint(m, m.optimizer).Write(path); err != nil {
					t.Error(err)
				}
			})
			tc.to.run(t, func(w int, _ distribute.Strategy, m *Model) {
				if err := NewCheckpoint(m, m.optimizer).Restore(path); err != nil {
					t.Errorf("worker %d: %v", w, err)
					return
				}
				if err := StateMatches(path+checkpointExt, m); err != nil {
					t.Errorf("worker %d: restored state differs from the saved one: %v", w, err)
				}
			})
		})
	}
}

// stateCheck checks, when Fit begins (after BackupAndRestore restored), that the model
// holds the backup at path bit for bit.
type stateCheck struct {
	BaseCallback
	t      *testing.T
	path   string
	epochs []int
}

func (c *stateCheck) TrainBegin(Logs) {
	if err := StateMatches(c.path, c.Model()); err != nil {
		c.t.Errorf("state after the restore differs from the backup: %v", err)
	}
}

func (c *stateCheck) EpochBegin(e int, _ Logs) { c.epochs = append(c.epochs, e) }

// TestBackupAndRestoreReshards: a Fit stopped after its first epoch under one number of
// replicas or workers resumes under another at the second epoch, from the backup's
// weights and slots bit for bit, and trains the remaining epochs on the new split.
func TestBackupAndRestoreReshards(t *testing.T) {
	splitCPU(t, 3)
	for _, tc := range reshardCases {
		t.Run(tc.from.String()+" to "+tc.to.String(), func(t *testing.T) {
			dir := t.TempDir()
			tc.from.run(t, func(_ int, _ distribute.Strategy, m *Model) {
				m.Fit(reshardData(), Epochs(3), Verbose(0), Callbacks(BackupAndRestore(dir), &stopAfter{epoch: 0}))
			})
			tc.to.run(t, func(w int, _ distribute.Strategy, m *Model) {
				out := quiet(m)
				bk := BackupAndRestore(dir)
				check := &stateCheck{t: t, path: bk.Path()}
				m.Fit(reshardData(), Epochs(3), Verbose(0), Callbacks(bk, check))
				if bk.RestoredEpoch() != 0 || !equalInts(check.epochs, []int{1, 2}) {
					t.Errorf("worker %d: resumed after epoch index %d and ran epochs %v, want 0 and [1 2]", w, bk.RestoredEpoch(), check.epochs)
				}
				if w == 0 && !strings.Contains(out.String(), "epoch 2's batches are split among these") {
					t.Errorf("no line on the new split:\n%s", out)
				}
			})
		})
	}
}

// TestModelCheckpointReshards: ModelCheckpoint's weights file and .keras model written
// under one number of replicas or workers load under another bit for bit.
func TestModelCheckpointReshards(t *testing.T) {
	splitCPU(t, 3)
	for _, tc := range reshardCases {
		for _, file := range []string{"w.weights.gdw", "m.keras"} {
			if file == "m.keras" && tc.to.workers > 0 {
				continue // LoadModel builds in the scope, which in-process workers cannot share
			}
			t.Run(tc.from.String()+" to "+tc.to.String()+" "+file, func(t *testing.T) {
				path := filepath.Join(t.TempDir(), file)
				var saved []*tensor.Tensor
				tc.from.run(t, func(w int, _ distribute.Strategy, m *Model) {
					m.Fit(reshardData(), Epochs(1), Verbose(0), Callbacks(ModelCheckpoint(path)))
					if w == 0 {
						saved = m.GetWeights()
					}
				})
				tc.to.run(t, func(w int, s distribute.Strategy, m *Model) {
					if strings.HasSuffix(file, modelExt) {
						var err error
						inProcessScopes.Lock()
						s.Scope(func() { m, err = LoadModel(path) })
						inProcessScopes.Unlock()
						if err != nil {
							t.Errorf("worker %d: %v", w, err)
							return
						}
						if err := StateMatches(path, m); err != nil {
							t.Errorf("worker %d: %v", w, err)
						}
					} else {
						if err := m.Build(6, 6, 1); err != nil {
							t.Error(err)
							return
						}
						if err := m.LoadWeights(path); err != nil {
							t.Errorf("worker %d: %v", w, err)
							return
						}
					}
					for c := range m.vars {
						for i, v := range m.vars[c] {
							if err := sameBits(fmt.Sprintf("worker %d copy %d weight %d", w, c, i), v.Value().Data(), saved[i].Data()); err != nil {
								t.Error(err)
							}
						}
					}
				})
			})
		}
	}
}

// TestReshardRestoreErrors: a restore that cannot be done (a variable of another global
// shape, another optimizer's state) is an error naming the file, the variable or the
// optimizers and what differs, and leaves the model as it was.
func TestReshardRestoreErrors(t *testing.T) {
	splitCPU(t, 3)
	path := filepath.Join(t.TempDir(), "ckpt-1")
	reshardLayout{replicas: 2}.run(t, func(_ int, _ distribute.Strategy, m *Model) {
		m.Fit(reshardData(), Epochs(1), Verbose(0))
		if err := NewCheckpoint(m, m.optimizer).Write(path); err != nil {
			t.Fatal(err)
		}
	})
	file := path + checkpointExt
	reshardLayout{replicas: 3}.run(t, func(_ int, s distribute.Strategy, m *Model) {
		if err := m.Build(6, 6, 1); err != nil {
			t.Fatal(err)
		}
		if err := StateMatches(file, m); err == nil {
			t.Fatal("StateMatches finds an unrestored model equal to the checkpoint")
		}
		before := m.GetWeights()
		tests := []struct {
			name string
			m    *Model
			want []string
		}{
			{"wider layer", func() *Model {
				var w *Model
				s.Scope(func() {
					w = Sequential(layers.Conv2D(4, 3, layers.ReLU), layers.MaxPooling2D(2), layers.Flatten(),
						layers.Dense(9, layers.ReLU), layers.Dense(3))
					w.Compile(Adam(0.01), SparseCategoricalCrossentropy(true))
				})
				return w
			}(), []string{file, "kernel", "[16 9]", "[16 8]"}},
			{"another optimizer", func() *Model {
				m.Compile(RMSprop(0.01, Momentum(0.5)), SparseCategoricalCrossentropy(true))
				return m
			}(), []string{file, "optimizer Adam", "RMSprop"}},
		}
		for _, tt := range tests {
			err := NewCheckpoint(tt.m, tt.m.optimizer).Restore(path)
			if !errors.Is(err, ErrBackup) {
				t.Errorf("%s: restore = %v, want ErrBackup", tt.name, err)
				continue
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s: error %q does not name %q", tt.name, err, w)
				}
			}
		}
		for i, w := range m.GetWeights() {
			if err := sameBits(fmt.Sprint("weight ", i), w.Data(), before[i].Data()); err != nil {
				t.Errorf("after the failed restores: %v", err)
			}
		}
	})
}

// psReshardModel is the small Adam model the ps resharding tests save and restore, made in
// s's scope with the same seed each time.
func psReshardModel(s *distribute.ParameterServerStrategy) *Model {
	var m *Model
	s.Scope(func() {
		SetRandomSeed(11)
		m = Sequential(layers.Input(4), layers.Dense(6, layers.ReLU), layers.Dense(2))
		m.Compile(Adam(0.01), MeanSquaredError())
	})
	quiet(m)
	return m
}

// TestCheckpointReshardsPS: a keras Checkpoint of a model whose variables live on 2 ps
// tasks (2 shards each) restores into one on 1 or 3 ps tasks: the values on the new ps
// tasks are the saved ones bit for bit (the file holds global values, and the optimizer's
// slots read from the ps: TestCheckpointReshardsPSOptimizerState).
func TestCheckpointReshardsPS(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ckpt-1")
	build := psReshardModel
	x, y := tensor.RandomNormal([]int{24, 4}, 0, 1, 3), tensor.RandomNormal([]int{24, 2}, 0, 1, 4)
	s, _ := psStrategy(t, 2, 1, distribute.WithVariablePartitioner(distribute.NewFixedShardsPartitioner(2)))
	m := build(s)
	m.Fit(data.FromTensorSlices(x, y).Batch(8, false), Epochs(1), Verbose(0))
	if err := NewCheckpoint(m, m.optimizer).Write(path); err != nil {
		t.Fatal(err)
	}
	st, err := readBackup(path + checkpointExt)
	if err != nil {
		t.Fatal(err)
	}
	for _, nps := range []int{1, 3} {
		s2, _ := psStrategy(t, nps, 1, distribute.WithVariablePartitioner(distribute.NewFixedShardsPartitioner(nps)))
		m2 := build(s2)
		if err := NewCheckpoint(m2, m2.optimizer).Restore(path); err != nil {
			t.Fatalf("%d ps: %v", nps, err)
		}
		off := 0
		for i, v := range s2.Variables() {
			n := prodInts(st.Variables[i].Shape)
			want := st.floats(off, n)
			off += 4 * n * (1 + st.Variables[i].Slots)
			if err := sameBits(fmt.Sprintf("%d ps: %s on the ps", nps, v.Name()), v.Value().Data(), want); err != nil {
				t.Error(err)
			}
			if err := sameBits(fmt.Sprintf("%d ps: %s's local copy", nps, v.Name()), m2.vars[0][i].Value().Data(), want); err != nil {
				t.Error(err)
			}
		}
		if m2.optimizer.Iterations() != m.optimizer.Iterations() {
			t.Errorf("%d ps: optimizer iterations %d, saved %d", nps, m2.optimizer.Iterations(), m.optimizer.Iterations())
		}
	}
}

// TestCheckpointReshardsPSOptimizerState: a keras Checkpoint of a model trained with Adam
// on 2 ps tasks holds the slots and step counts the ps kept; restored on 1 or 3 ps tasks
// they are on the new shards bit for bit, and the next step there gives the weights the
// original cluster's next step gives, bit for bit.
func TestCheckpointReshardsPSOptimizerState(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ckpt-1")
	build := psReshardModel
	x, y := tensor.RandomNormal([]int{24, 4}, 0, 1, 3), tensor.RandomNormal([]int{24, 2}, 0, 1, 4)
	next := func() *data.Dataset { return data.FromTensorSlices(x, y).Take(8).Batch(8, false) }
	ctx := context.Background()
	s, _ := psStrategy(t, 2, 1, distribute.WithVariablePartitioner(distribute.NewFixedShardsPartitioner(2)))
	m := build(s)
	m.Fit(data.FromTensorSlices(x, y).Batch(8, false), Epochs(1), Verbose(0))
	if err := NewCheckpoint(m, m.optimizer).Write(path); err != nil {
		t.Fatal(err)
	}
	saved := make([]*distribute.OptimizerState, len(s.Variables()))
	for i, v := range s.Variables() {
		st, err := v.OptimizerState(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Slots) != 2 || st.Steps[0].T != 3 {
			t.Fatalf("%s after 3 Adam steps on the ps: %d slots, t %d; want 2 and 3", v.Name(), len(st.Slots), st.Steps[0].T)
		}
		saved[i] = st
	}
	bk, err := readBackup(path + checkpointExt)
	if err != nil {
		t.Fatal(err)
	}
	for _, spec := range bk.Variables {
		if spec.T != 3 || spec.Slots != 2 {
			t.Errorf("the checkpoint holds t %d and %d slots for %s, want 3 and 2", spec.T, spec.Slots, spec.Name)
		}
	}
	m.Fit(next(), Epochs(1), Verbose(0)) // the original continues one step
	want := make([][]float32, len(s.Variables()))
	for i, v := range s.Variables() {
		want[i] = v.Value().Data()
	}
	for _, nps := range []int{1, 3} {
		s2, _ := psStrategy(t, nps, 1, distribute.WithVariablePartitioner(distribute.NewFixedShardsPartitioner(nps)))
		m2 := build(s2)
		if err := NewCheckpoint(m2, m2.optimizer).Restore(path); err != nil {
			t.Fatalf("%d ps: %v", nps, err)
		}
		for i, v := range s2.Variables() {
			st, err := v.OptimizerState(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, sh := range st.Steps {
				if sh.T != 3 {
					t.Errorf("%d ps: %s's shard at row %d restored at t %d, want 3", nps, v.Name(), sh.Offset, sh.T)
				}
			}
			if len(st.Slots) != len(saved[i].Slots) {
				t.Fatalf("%d ps: %s restored with %d slots, want %d", nps, v.Name(), len(st.Slots), len(saved[i].Slots))
			}
			for k := range st.Slots {
				if err := sameBits(fmt.Sprintf("%d ps: %s slot %d", nps, v.Name(), k), st.Slots[k], saved[i].Slots[k]); err != nil {
					t.Error(err)
				}
			}
		}
		m2.Fit(next(), Epochs(1), Verbose(0))
		for i, v := range s2.Variables() {
			if err := sameBits(fmt.Sprintf("%d ps: %s after the next step", nps, v.Name()), v.Value().Data(), want[i]); err != nil {
				t.Error(err)
			}
		}
	}
}

// TestCheckpointPSNoOptimizerState: a checkpoint of a ps model whose variables carry no
// optimizer state although the model had trained (one written before the ps state was
// saved) restores the weights with a WARNING that the optimizer state starts afresh.
func TestCheckpointPSNoOptimizerState(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ckpt-1")
	build := func(s *distribute.ParameterServerStrategy) *Model {
		var m *Model
		s.Scope(func() {
			SetRandomSeed(11)
			m = Sequential(layers.Input(4), layers.Dense(6, layers.ReLU), layers.Dense(2))
			m.Compile(Adam(0.01), MeanSquaredError())
		})
		return m
	}
	x, y := tensor.RandomNormal([]int{16, 4}, 0, 1, 3), tensor.RandomNormal([]int{16, 2}, 0, 1, 4)
	s, _ := psStrategy(t, 1, 1)
	m := build(s)
	quiet(m)
	m.Fit(data.FromTensorSlices(x, y).Batch(8, false), Epochs(1), Verbose(0))
	for _, v := range s.Variables() {
		if err := v.SetOptimizerState(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := NewCheckpoint(m, m.optimizer).Write(path); err != nil {
		t.Fatal(err)
	}
	s2, _ := psStrategy(t, 2, 1)
	m2 := build(s2)
	out := quiet(m2)
	if err := NewCheckpoint(m2, m2.optimizer).Restore(path); err != nil {
		t.Fatal(err)
	}
	if l := out.String(); !strings.Contains(l, "WARNING") || !strings.Contains(l, "no optimizer state") || !strings.Contains(l, path) {
		t.Errorf("output %q: want a WARNING naming the file and that it holds no optimizer state", l)
	}
}

// TestBackupAndRestoreReshardsPS: a Fit on 2 ps tasks stopped after its first epoch
// resumes on 3 ps tasks with the backup's weights and the optimizer's slots and step
// counts on the new ps shards, bit for bit.
func TestBackupAndRestoreReshardsPS(t *testing.T) {
	dir := t.TempDir()
	build := psReshardModel
	x, y := tensor.RandomNormal([]int{24, 4}, 0, 1, 3), tensor.RandomNormal([]int{24, 2}, 0, 1, 4)
	ds := func() *data.Dataset { return data.FromTensorSlices(x, y).Batch(8, false) }
	s, _ := psStrategy(t, 2, 1, distribute.WithVariablePartitioner(distribute.NewFixedShardsPartitioner(2)))
	build(s).Fit(ds(), Epochs(3), Verbose(0), Callbacks(BackupAndRestore(dir), &stopAfter{epoch: 0}))
	s2, _ := psStrategy(t, 3, 1, distribute.WithVariablePartitioner(distribute.NewFixedShardsPartitioner(3)))
	m := build(s2)
	bk := BackupAndRestore(dir)
	check := &stateCheck{t: t, path: bk.Path()}
	m.Fit(ds(), Epochs(3), Verbose(0), Callbacks(bk, check))
	if bk.RestoredEpoch() != 0 || !equalInts(check.epochs, []int{1, 2}) {
		t.Errorf("resumed after epoch index %d and ran epochs %v, want 0 and [1 2]", bk.RestoredEpoch(), check.epochs)
	}
}
