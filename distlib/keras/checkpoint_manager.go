package keras

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// CheckpointManager keeps the latest checkpoints of a Checkpoint in a directory, like
// tf.train.CheckpointManager(checkpoint, directory, max_to_keep):
//
//	manager := keras.NewCheckpointManager(checkpoint, "/tmp/ckpt", 1)
//	path, err := manager.Save()            // "/tmp/ckpt/ckpt-1", then -2, ...
//	latest := manager.LatestCheckpoint()   // checkpoint_manager.latest_checkpoint
//
// Save writes directory/ckpt-N (N the checkpoint's save counter) and deletes the oldest
// checkpoints beyond maxToKeep. Under a multi-worker strategy only the chief writes, as
// Checkpoint.Save.
type CheckpointManager struct {
	checkpoint *Checkpoint
	directory  string
	maxToKeep  int

	mu    sync.Mutex
	saved []string // the paths of the checkpoints kept, oldest first
}

// NewCheckpointManager returns a manager of checkpoint's saves in directory keeping the
// latest maxToKeep (0 keeps every one, TF's max_to_keep=None). The checkpoints already in
// directory (ckpt-N files) count among the kept, oldest first, as TF recovers them.
func NewCheckpointManager(checkpoint *Checkpoint, directory string, maxToKeep int) *CheckpointManager {
	if checkpoint == nil {
		panic(fmt.Errorf("%w: NewCheckpointManager needs a checkpoint (keras.NewCheckpoint(model, optimizer))", ErrInvalidArgument))
	}
	if directory == "" || maxToKeep < 0 {
		panic(fmt.Errorf("%w: NewCheckpointManager(checkpoint, %q, %d): give a directory and max_to_keep >= 0 (0: keep all)",
			ErrInvalidArgument, directory, maxToKeep))
	}
	return &CheckpointManager{checkpoint: checkpoint, directory: directory, maxToKeep: maxToKeep, saved: existingCheckpoints(directory)}
}

// existingCheckpoints lists directory's ckpt-N checkpoints, by N.
func existingCheckpoints(dir string) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	type numbered struct {
		n    int
		path string
	}
	var found []numbered
	for _, e := range ents {
		name := strings.TrimSuffix(e.Name(), checkpointExt)
		if e.IsDir() || name == e.Name() || !strings.HasPrefix(name, "ckpt-") {
			continue
		}
		if n, err := strconv.Atoi(strings.TrimPrefix(name, "ckpt-")); err == nil {
			found = append(found, numbered{n, filepath.Join(dir, name)})
		}
	}
	sort.Slice(found, func(i, j int) bool { return found[i].n < found[j].n })
	out := make([]string, len(found))
	for i, f := range found {
		out[i] = f.path
	}
	return out
}

// Directory returns the manager's directory.
func (m *CheckpointManager) Directory() string { return m.directory }

// Checkpoints returns the kept checkpoints, oldest first (checkpoint_manager.checkpoints).
func (m *CheckpointManager) Checkpoints() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.saved...)
}

// LatestCheckpoint returns the newest kept checkpoint, or "" when there is none
// (checkpoint_manager.latest_checkpoint, None in TF).
func (m *CheckpointManager) LatestCheckpoint() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.saved) == 0 {
		return ""
	}
	return m.saved[len(m.saved)-1]
}

// Save writes a new checkpoint, directory/ckpt-N, deletes the oldest beyond maxToKeep and
// returns its path.
func (m *CheckpointManager) Save() (string, error) {
	path, err := m.checkpoint.Save(filepath.Join(m.directory, "ckpt"))
	if err != nil {
		return "", err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	kept := m.saved[:0:0]
	for _, p := range m.saved {
		if p != path {
			kept = append(kept, p)
		}
	}
	m.saved = append(kept, path)
	if m.maxToKeep > 0 && len(m.saved) > m.maxToKeep {
		drop := m.saved[:len(m.saved)-m.maxToKeep]
		m.saved = append([]string(nil), m.saved[len(drop):]...)
		if m.checkpoint.model.strategy.Extended().IsChief() {
			for _, p := range drop {
				if err := os.Remove(p + checkpointExt); err != nil && !os.IsNotExist(err) {
					return path, fmt.Errorf("keras: CheckpointManager: delete the old checkpoint %s: %w", p, err)
				}
			}
		}
	}
	return path, nil
}
