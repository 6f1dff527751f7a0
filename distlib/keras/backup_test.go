package keras

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"godist/distlib/data"
)

// backupModel trains mwModel with Adam (an optimizer with state) on a fixed data order.
func backupModel(t *testing.T) (*Model, *data.Dataset) {
	t.Helper()
	SetRandomSeed(11)
	m := mwModel()
	m.Compile(Adam(0.01), SparseCategoricalCrossentropy(true), "accuracy")
	x, y := mwData(48)
	return m, data.FromTensorSlices(x, y).Batch(16, false)
}

// stopAfter stops Fit at the end of an epoch, as if the job died between epochs.
type stopAfter struct {
	BaseCallback
	epoch int
}

func (s *stopAfter) EpochEnd(e int, _ Logs) {
	if e == s.epoch {
		s.Model().StopTraining = true
	}
}

// TestBackupAndRestoreResumes: a Fit stopped after epoch 2 of 4 and started again resumes at
// epoch 3, repeats no epoch, and ends with the weights of an uninterrupted Fit.
func TestBackupAndRestoreResumes(t *testing.T) {
	ref, ds := backupModel(t)
	ref.Fit(ds, Epochs(4), Verbose(0))

	dir := t.TempDir()
	m, ds := backupModel(t)
	var seen []int
	rec := LambdaCallback{OnEpochBegin: func(e int, _ Logs) { seen = append(seen, e) }}
	bk := BackupAndRestore(dir)
	m.Fit(ds, Epochs(4), Verbose(0), Callbacks(bk, rec, &stopAfter{epoch: 1}))
	if _, err := os.Stat(bk.Path()); err != nil {
		t.Fatalf("no backup after a stopped Fit: %v", err)
	}
	m2, ds := backupModel(t)
	bk2 := BackupAndRestore(dir)
	m2.Fit(ds, Epochs(4), Verbose(0), Callbacks(bk2, rec))
	if got, want := seen, []int{0, 1, 2, 3}; !equalInts(got, want) {
		t.Errorf("epochs run across the two Fits = %v, want %v", got, want)
	}
	if bk2.RestoredEpoch() != 1 {
		t.Errorf("RestoredEpoch() = %d, want 1", bk2.RestoredEpoch())
	}
	a, b := ref.GetWeights(), m2.GetWeights()
	for i := range a {
		for j, v := range a[i].Data() {
			if w := b[i].Data()[j]; v != w {
				t.Fatalf("weight %d[%d]: uninterrupted %g, resumed %g", i, j, v, w)
			}
		}
	}
	if _, err := os.Stat(bk2.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("backup still there after a completed Fit: %v", err)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestBackupTornDetected: a truncated, bit-flipped or foreign file is refused with ErrBackup.
func TestBackupTornDetected(t *testing.T) {
	m, ds := backupModel(t)
	m.Fit(ds, Epochs(1), Verbose(0))
	good := m.encodeBackup(0)
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"truncated", good[:len(good)-5], "torn"},
		{"bit flipped", flip(good, len(good)-3), "checksum"},
		{"header flipped", flip(good, len(backupMagic)+12), "torn"},
		{"empty", nil, "no backup header"},
		{"not a backup", []byte("hello, this is not a backup file"), "no backup header"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "b")
			if err := os.WriteFile(p, tc.data, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := readBackup(p)
			if !errors.Is(err, ErrBackup) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), p) {
				t.Errorf("readBackup(%s) = %v, want ErrBackup naming the file and %q", tc.name, err, tc.want)
			}
		})
	}
	p := filepath.Join(t.TempDir(), "ok")
	if err := writeFileAtomic(p, good); err != nil {
		t.Fatal(err)
	}
	st, err := readBackup(p)
	if err != nil || st.Epoch != 0 {
		t.Fatalf("readBackup(good) = %v, %v; want epoch 0", st, err)
	}
	// Fit refuses a torn backup rather than training from scratch silently.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, backupFile), good[:30], 0o644); err != nil {
		t.Fatal(err)
	}
	defer func() {
		r := recover()
		if err, ok := r.(error); !ok || !errors.Is(err, ErrBackup) {
			t.Errorf("Fit with a torn backup: recovered %v, want an ErrBackup panic", r)
		}
	}()
	m.Fit(ds, Epochs(2), Verbose(0), Callbacks(BackupAndRestore(dir)))
}

func flip(b []byte, i int) []byte {
	out := append([]byte(nil), b...)
	out[i] ^= 0x40
	return out
}

// TestBackupWorkerKilled: two worker processes, one killed (SIGKILL) in the middle of epoch
// 3; the job started again with the same command resumes after epoch 2 and ends with the
// weights of an uninterrupted run. With a 1024-unit layer, the killed worker's gradients lie
// in the memory the workers share (the survivor must fail, not hang or read on).
func TestBackupWorkerKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes; skipped under -short")
	}
	const batch, epochs = 16, 4
	for _, width := range []string{"8", "1024"} {
		t.Run(width+" units", func(t *testing.T) {
			env := func(dir string) []string {
				return []string{"GODIST_KERAS_MW_BACKUP=" + dir, "GODIST_KERAS_MW_WIDTH=" + width}
			}
			ref, log, err := launchMW(t, "fit", 2, batch, epochs, env(t.TempDir())...)
			if err != nil {
				t.Fatalf("uninterrupted run: %v\n%s", err, log)
			}
			dir := t.TempDir()
			_, log, err = launchMW(t, "die", 2, batch, epochs, env(dir)...)
			if err == nil || !strings.Contains(err.Error(), "worker 1") {
				t.Fatalf("run with a killed worker = %v, want worker 1's failure\n%s", err, log)
			}
			st, err := readBackup(filepath.Join(dir, backupFile))
			if err != nil || st.Epoch != 1 {
				t.Fatalf("backup after the kill: %v, %v; want one of epoch index 1\n%s", st, err, log)
			}
			res, log, err := launchMW(t, "fit", 2, batch, epochs, env(dir)...)
			if err != nil {
				t.Fatalf("restarted run: %v\n%s", err, log)
			}
			if !strings.Contains(log, "resuming after epoch 2") {
				t.Errorf("restarted run did not say it resumed:\n%s", log)
			}
			for w := range res {
				if got := res[w].Epochs; !equalInts(got, []int{2, 3}) {
					t.Errorf("worker %d of the restarted run ran epochs %v, want [2 3]", w, got)
				}
				if d := maxWeightDiff(t, ref[w].Weights, res[w].Weights); d != 0 {
					t.Errorf("worker %d: weights differ from the uninterrupted run by up to %g", w, d)
				}
			}
		})
	}
}
