package keras

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"godist/distlib/tensor"
)

// checkpointExt is the file extension of a Checkpoint's file ("ckpt-3" is saved as
// "ckpt-3.gdck", in BackupAndRestore's format).
const checkpointExt = ".gdck"

// Checkpoint saves and restores a model's variables with an optimizer's state, for custom
// training loops, like tf.train.Checkpoint(model=model, optimizer=optimizer):
//
//	checkpoint := keras.NewCheckpoint(model, optimizer)
//	path, err := checkpoint.Save("ckpts/ckpt")   // "ckpts/ckpt-1", then -2, ...
//	...
//	latest := keras.LatestCheckpoint("ckpts")     // tf.train.latest_checkpoint
//	err = checkpoint.Restore(latest)
//
// The file holds the variables, the optimizer's iterations, learning rate and slots, and
// the save counter, with a CRC-32C that detects a torn or damaged file; it is written to a
// temporary name and renamed. Under a multi-worker strategy every worker calls Save and the
// chief alone writes (the others return the same path). The file holds global values, so
// it restores under another number of replicas or workers, or another device-mesh layout;
// another optimizer's state or a variable of another shape is refused. Under a
// ParameterServerStrategy the variables are read from the parameter servers and written
// back to them by Restore, however many ps tasks hold them then; so are the optimizer's
// slots and step count, which the parameter servers keep beside the variables.
type Checkpoint struct {
	model     *Model
	optimizer *Optimizer
	mu        sync.Mutex
	saves     int
	extra     []namedVariable // Add's variables, in the order added
}

// Add makes the checkpoint save and restore v under name beside the model, like the other
// keyword arguments of tf.train.Checkpoint(model=model, epoch=epoch,
// step_in_epoch=step_in_epoch) in the multi-worker custom loop tutorial:
//
//	epoch := tensor.NewVariable("epoch", tensor.Scalar(0), false)
//	checkpoint := keras.NewCheckpoint(model, optimizer).Add("epoch", epoch)
//
// Restore sets it from a checkpoint that holds name and leaves it as it is otherwise (as TF
// restores only what the file has). It returns c, and panics on an empty name, a nil
// variable or a name added twice.
func (c *Checkpoint) Add(name string, v *tensor.Variable) *Checkpoint {
	if name == "" || v == nil {
		panic(fmt.Errorf("%w: Checkpoint.Add(%q, %v): give a name and a variable", ErrInvalidArgument, name, v))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.extra {
		if e.name == name {
			panic(fmt.Errorf("%w: Checkpoint.Add: %q is already in the checkpoint", ErrInvalidArgument, name))
		}
	}
	c.extra = append(c.extra, namedVariable{name: name, v: v})
	return c
}

// NewCheckpoint returns a Checkpoint of model and optimizer (nil: the model's variables
// only). It panics on a nil model.
func NewCheckpoint(model *Model, optimizer *Optimizer) *Checkpoint {
	if model == nil {
		panic(fmt.Errorf("%w: NewCheckpoint needs a model", ErrInvalidArgument))
	}
	return &Checkpoint{model: model, optimizer: optimizer}
}

// SaveCounter returns how many times Save has run (restored with the checkpoint).
func (c *Checkpoint) SaveCounter() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.saves
}

// Save writes the checkpoint to prefix-N, N the save counter after this save (1, 2, ...),
// records it as the directory's latest checkpoint (the "checkpoint" file that
// LatestCheckpoint reads), and returns the path "prefix-N".
func (c *Checkpoint) Save(prefix string) (string, error) {
	if prefix == "" {
		return "", fmt.Errorf("%w: Checkpoint.Save needs a file prefix, such as \"ckpts/ckpt\"", ErrInvalidArgument)
	}
	c.mu.Lock()
	c.saves++
	n := c.saves
	c.mu.Unlock()
	path := fmt.Sprintf("%s-%d", prefix, n)
	if err := c.write(path, n); err != nil {
		return "", err
	}
	if c.model.strategy.Extended().IsChief() {
		dir := filepath.Dir(path)
		index := fmt.Sprintf("model_checkpoint_path: %q\n", filepath.Base(path))
		if err := writeFileAtomic(filepath.Join(dir, "checkpoint"), []byte(index)); err != nil {
			return "", fmt.Errorf("keras: Checkpoint.Save: %w", err)
		}
	}
	return path, nil
}

// Write writes the checkpoint to path exactly (no counter, no index), like
// checkpoint.write.
func (c *Checkpoint) Write(path string) error {
	c.mu.Lock()
	n := c.saves
	c.mu.Unlock()
	return c.write(path, n)
}

func (c *Checkpoint) write(path string, saves int) error {
	if !c.model.Built() {
		return fmt.Errorf("%w: Checkpoint: model %s is not built yet; call it on a batch or give its first layer an input shape", ErrInvalidArgument, c.model.name)
	}
	if !c.model.strategy.Extended().IsChief() {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("keras: Checkpoint: %w", err)
	}
	c.mu.Lock()
	extra := append([]namedVariable(nil), c.extra...)
	c.mu.Unlock()
	if err := writeFileAtomic(path+checkpointExt, c.model.encodeState(c.optimizer, 0, saves, extra...)); err != nil {
		return fmt.Errorf("keras: Checkpoint %s: %w", path, err)
	}
	return nil
}

// Restore loads the checkpoint saved at path ("prefix-N", as Save returned it) into the
// model (every replica's copy) and the optimizer, and sets the save counter. A missing,
// torn or mismatched file (other variables or shapes, another optimizer's slots) is an
// error naming it; nothing is changed then.
func (c *Checkpoint) Restore(path string) error {
	if path == "" {
		return fmt.Errorf("%w: Checkpoint.Restore: empty path (LatestCheckpoint returns \"\" when the directory has none)", ErrInvalidArgument)
	}
	file := path
	if !strings.HasSuffix(file, checkpointExt) {
		file += checkpointExt
	}
	st, err := readBackup(file)
	if errors.Is(err, fs.ErrNotExist) {
		if isWeightsFile(path) {
			// A weights file (ModelCheckpoint, SaveWeights): the variables only.
			return c.model.LoadWeights(path)
		}
		return fmt.Errorf("keras: Checkpoint.Restore: no checkpoint at %s (no file %s)", path, file)
	}
	if err != nil {
		return err
	}
	c.mu.Lock()
	extra := append([]namedVariable(nil), c.extra...)
	c.mu.Unlock()
	values := st.extraValues()
	for _, e := range extra {
		if d, ok := values[e.name]; ok && len(d) != e.v.Size() {
			return fmt.Errorf("%w: %s holds %q with %d values, the checkpoint's variable has shape %v", ErrBackup, file, e.name, len(d), e.v.Shape())
		}
	}
	if err := c.model.restoreState(c.optimizer, file, st); err != nil {
		return err
	}
	for _, e := range extra {
		if d, ok := values[e.name]; ok {
			e.v.Assign(tensor.MustNew(e.v.Shape(), d))
		}
	}
	c.mu.Lock()
	c.saves = st.SaveCounter
	c.mu.Unlock()
	return nil
}

// latestSaved returns the checkpoint that dir's "checkpoint" index names (written by
// Checkpoint.Save), or "" when there is no index.
func latestSaved(dir string) string {
	f, err := os.Open(filepath.Join(dir, "checkpoint"))
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || strings.TrimSpace(k) != "model_checkpoint_path" {
			continue
		}
		name, err := strconv.Unquote(strings.TrimSpace(v))
		if err != nil || name == "" {
			return ""
		}
		if !filepath.IsAbs(name) {
			name = filepath.Join(dir, name)
		}
		if _, err := os.Stat(name + checkpointExt); err != nil {
			return ""
		}
		return name
	}
	return ""
}
