package keras

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"math"
	"os"
	"path/filepath"

	"godist/distlib/tensor"
)

// ErrBackup reports a backup file of BackupAndRestore that cannot be used: torn, corrupt, or
// written for another model.
var ErrBackup = errors.New("keras: backup")

// backupMagic starts every backup file; the version follows it.
const (
	backupMagic   = "GODISTBK"
	backupVersion = 1
	backupFile    = "backup.gdbk"
)

// BackupAndRestoreCallback is the callback BackupAndRestore returns.
type BackupAndRestoreCallback struct {
	BaseCallback
	dir      string
	restored int // epoch resumed after (-1: none)
}

// BackupAndRestore returns a callback that makes training survive a lost worker, like
// tf.keras.callbacks.BackupAndRestore(backup_dir): at the end of every epoch the chief
// writes the model's variables, the optimizer's state and the epoch to a file in dir; when
// Fit starts and a backup is there (the job was stopped and started again with the same
// command), every worker restores it and training resumes at the next epoch, so no finished
// epoch is lost and none is repeated. At the end of a Fit that completes, the backup is
// deleted.
//
// The file is written to a temporary name, synced and renamed, so a crash leaves the
// previous backup whole; a CRC-32C of its contents detects a torn or damaged file, which
// Fit then refuses with an error naming it (delete the file to start over). Resuming gives
// the weights of an uninterrupted run when the data order of an epoch does not depend on
// the epochs before it (no shuffling, or a seeded shuffle per epoch). dir must be
// reachable by every worker (on one host, any directory; across hosts, a shared one).
// The backup holds global values at an epoch's end: a job restarted with another number of
// workers or replicas, or another device-mesh layout, resumes from it at the next epoch,
// whose batches are split among the workers it has now.
func BackupAndRestore(dir string) *BackupAndRestoreCallback {
	if dir == "" {
		panic(fmt.Errorf("%w: BackupAndRestore needs a backup directory", ErrInvalidArgument))
	}
	return &BackupAndRestoreCallback{dir: dir, restored: -1}
}

// Dir returns the backup directory.
func (c *BackupAndRestoreCallback) Dir() string { return c.dir }

// RestoredEpoch returns the 0-based epoch whose backup the last Fit resumed after, or -1
// when it started from scratch.
func (c *BackupAndRestoreCallback) RestoredEpoch() int { return c.restored }

// Path returns the backup file's path.
func (c *BackupAndRestoreCallback) Path() string { return filepath.Join(c.dir, backupFile) }

// TrainBegin restores the backup when there is one and makes Fit start after its epoch.
func (c *BackupAndRestoreCallback) TrainBegin(Logs) {
	c.restored = -1
	m := c.Model()
	st, err := readBackup(c.Path())
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err != nil {
		panic(err)
	}
	if err := m.restoreBackup(c.Path(), st); err != nil {
		panic(err)
	}
	c.restored = st.Epoch
	m.mw.resume = st.Epoch + 1
	fmt.Fprintf(m.out(), "BackupAndRestore: resuming after epoch %d from %s\n", st.Epoch+1, c.Path())
	// The backup is of an epoch's end and its values are global, so another number of
	// workers or replicas resumes at the next epoch with that epoch's split of the data.
	_, workers := m.strategy.Extended().Worker()
	if replicas := m.strategy.NumReplicasInSync(); st.Workers != 0 && (st.Workers != workers || st.Replicas != replicas) {
		fmt.Fprintf(m.out(), "BackupAndRestore: written by %d workers with %d replicas in sync, resumed by %d with %d: epoch %d's batches are split among these\n",
			st.Workers, st.Replicas, workers, replicas, st.Epoch+2)
	}
}

// EpochEnd writes the backup of the epoch (on the chief only).
func (c *BackupAndRestoreCallback) EpochEnd(epoch int, _ Logs) {
	m := c.Model()
	if !m.strategy.Extended().IsChief() {
		return
	}
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		panic(fmt.Errorf("keras: BackupAndRestore: %w", err))
	}
	if err := writeFileAtomic(c.Path(), m.encodeBackup(epoch)); err != nil {
		panic(fmt.Errorf("keras: BackupAndRestore epoch %d: %w", epoch+1, err))
	}
}

// TrainEnd deletes the backup once training completed (on the chief only).
func (c *BackupAndRestoreCallback) TrainEnd(Logs) {
	m := c.Model()
	if m.StopTraining || m.interrupted || !m.strategy.Extended().IsChief() {
		return // an interrupted Fit resumes from the backup when run again
	}
	if err := os.Remove(c.Path()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		panic(fmt.Errorf("keras: BackupAndRestore: %w", err))
	}
}

// backupHeader describes a backup; the body holds, per variable, its values then its
// optimizer slots (float32, little-endian).
type backupHeader struct {
	Model       string          `json:"model"`
	Epoch       int             `json:"epoch"` // 0-based, the last finished epoch
	Step        int64           `json:"step"`
	SaveCounter int             `json:"save_counter,omitempty"` // Checkpoint.Save's counter
	Iterations  int64           `json:"iterations"`
	LR          float64         `json:"learning_rate"`
	Optimizer   string          `json:"optimizer,omitempty"` // the optimizer's name, checked on restore
	Workers     int             `json:"workers,omitempty"`   // workers and replicas in sync that wrote it,
	Replicas    int             `json:"replicas,omitempty"`  // for the message of a resume with others
	InputShape  []int           `json:"input_shape"`
	Variables   []backupVarSpec `json:"variables"`
	Extra       []backupVarSpec `json:"extra,omitempty"` // a Checkpoint's other variables (Checkpoint.Add), after the model's
	BodyBytes   int             `json:"body_bytes"`
	CRC32C      uint32          `json:"crc32c"` // of the header with CRC32C 0, then the body
}

type backupVarSpec struct {
	Name  string `json:"name"`
	Shape []int  `json:"shape"`
	T     int64  `json:"t"`     // optimizer steps applied to the variable
	Slots int    `json:"slots"` // optimizer slots stored after its values
}

// encodeBackup serializes the model's state after epoch.
func (m *Model) encodeBackup(epoch int) []byte { return m.encodeState(m.optimizer, epoch, 0) }

// encodeState serializes the model's variables and the state of optimizer o (nil: none),
// then the values of extra (a Checkpoint's other variables).
func (m *Model) encodeState(o *Optimizer, epoch, saves int, extra ...namedVariable) []byte {
	vs := m.Variables()
	if o == nil {
		o = &Optimizer{}
	}
	o.mu.Lock()
	_, workers := m.strategy.Extended().Worker()
	h := backupHeader{Model: m.name, Epoch: epoch, SaveCounter: saves, Iterations: o.iterations, LR: o.lr, InputShape: m.inputShape,
		Optimizer: o.name, Workers: workers, Replicas: m.strategy.NumReplicasInSync()}
	var body bytes.Buffer
	put := func(d []float32) {
		b := make([]byte, 4*len(d))
		for i, x := range d {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
		}
		body.Write(b)
	}
	for i, v := range vs {
		spec := backupVarSpec{Name: v.Name(), Shape: v.Shape()}
		put(v.Value().Data())
		if st := m.slotStateOf(o, i, v); st != nil {
			spec.T, spec.Slots = st.t, len(st.slots)
			for _, s := range st.slots {
				put(s)
			}
		}
		h.Variables = append(h.Variables, spec)
	}
	o.mu.Unlock()
	for _, e := range extra {
		h.Extra = append(h.Extra, backupVarSpec{Name: e.name, Shape: e.v.Shape()})
		put(e.v.Value().Data())
	}
	m.mu.Lock()
	h.Step = m.step
	m.mu.Unlock()
	h.BodyBytes = body.Len()
	h.CRC32C = backupChecksum(h, body.Bytes())
	hj, _ := json.Marshal(h)
	var out bytes.Buffer
	out.WriteString(backupMagic)
	var n [8]byte
	binary.LittleEndian.PutUint32(n[:4], backupVersion)
	binary.LittleEndian.PutUint32(n[4:], uint32(len(hj)))
	out.Write(n[:])
	out.Write(hj)
	out.Write(body.Bytes())
	return out.Bytes()
}

// slotStateOf returns o's state for parameter i of the model, whose global variable is v,
// with the slots' global values (nil: no state). Under a device mesh the optimizer keeps
// state per device part, assembled here as the parameter is. o.mu is held.
func (m *Model) slotStateOf(o *Optimizer, i int, v *tensor.Variable) *slotState {
	return m.store.slotState(m, o, i, v)
}

func backupChecksum(h backupHeader, body []byte) uint32 {
	h.CRC32C = 0
	hj, _ := json.Marshal(h)
	c := crc32.Checksum(hj, castagnoli)
	return crc32.Update(c, castagnoli, body)
}

// backupState is a decoded backup.
type backupState struct {
	backupHeader
	body []byte
}

// floats returns the n float32 values of the body at byte offset off.
func (st *backupState) floats(off, n int) []float32 {
	d := make([]float32, n)
	for j := range d {
		d[j] = math.Float32frombits(binary.LittleEndian.Uint32(st.body[off+4*j:]))
	}
	return d
}

// readBackup reads and verifies a backup file; a missing file gives an fs.ErrNotExist error.
func readBackup(path string) (*backupState, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return decodeBackup(raw, path)
}

// decodeBackup decodes and verifies the contents raw of a state file named path.
func decodeBackup(raw []byte, path string) (*backupState, error) {
	torn := func(why string) error {
		return fmt.Errorf("%w: %s is torn or corrupt (%s); delete it to train from the start", ErrBackup, path, why)
	}
	if len(raw) < len(backupMagic)+8 || string(raw[:len(backupMagic)]) != backupMagic {
		return nil, torn("no backup header")
	}
	p := raw[len(backupMagic):]
	if v := binary.LittleEndian.Uint32(p); v != backupVersion {
		return nil, fmt.Errorf("%w: %s has format version %d, this godist reads %d", ErrBackup, path, v, backupVersion)
	}
	hl := int(binary.LittleEndian.Uint32(p[4:]))
	p = p[8:]
	if hl > len(p) {
		return nil, torn(fmt.Sprintf("header of %d bytes, %d left in the file", hl, len(p)))
	}
	var st backupState
	if err := json.Unmarshal(p[:hl], &st.backupHeader); err != nil {
		return nil, torn("header: " + err.Error())
	}
	st.body = p[hl:]
	if len(st.body) != st.BodyBytes {
		return nil, torn(fmt.Sprintf("%d bytes of variables, want %d", len(st.body), st.BodyBytes))
	}
	if c := backupChecksum(st.backupHeader, st.body); c != st.CRC32C {
		return nil, torn(fmt.Sprintf("checksum %08x, want %08x", c, st.CRC32C))
	}
	return &st, nil
}

// restoreBackup loads a verified backup into the model (every copy) and its optimizer.
func (m *Model) restoreBackup(path string, st *backupState) error {
	if m.optimizer == nil {
		return fmt.Errorf("%w: restore %s: compile the model first", ErrNotCompiled, path)
	}
	return m.restoreState(m.optimizer, path, st)
}

// restoreState loads a verified state file into the model (every copy) and optimizer o
// (nil: the variables only).
func (m *Model) restoreState(o *Optimizer, path string, st *backupState) error {
	if !m.Built() {
		if err := m.build(st.InputShape); err != nil {
			return fmt.Errorf("%w: restore %s: build for input %v: %v", ErrBackup, path, st.InputShape, err)
		}
	}
	vs := m.Variables()
	if len(vs) != len(st.Variables) {
		return fmt.Errorf("%w: %s holds %d variables, model %s has %d", ErrBackup, path, len(st.Variables), m.name, len(vs))
	}
	if o != nil && st.Optimizer != "" && st.Optimizer != o.name && st.Iterations != 0 {
		return fmt.Errorf("%w: %s holds the state of optimizer %s, model %s is compiled with %s; compile it with %s, or restore the weights alone (LoadWeights)",
			ErrBackup, path, st.Optimizer, m.name, o.name, st.Optimizer)
	}
	vals := make([][]float32, len(vs))
	slots := make([][][]float32, len(vs))
	off := 0
	get := func(n int) []float32 {
		d := st.floats(off, n)
		off += 4 * n
		return d
	}
	for i, spec := range st.Variables {
		if !sameInts(vs[i].Shape(), spec.Shape) {
			return fmt.Errorf("%w: %s: variable %d %s was saved with global shape %v, model %s's %s has %v (the replicas, workers or mesh layout may differ, the global shapes may not)",
				ErrBackup, path, i, spec.Name, spec.Shape, m.name, vs[i].Name(), vs[i].Shape())
		}
		if o != nil && spec.Slots != 0 && spec.Slots != o.nslots {
			return fmt.Errorf("%w: %s was written with %d optimizer slots per variable, %s has %d; use the same optimizer", ErrBackup, path, spec.Slots, o.name, o.nslots)
		}
		n := prodInts(spec.Shape)
		vals[i] = get(n)
		for range spec.Slots {
			slots[i] = append(slots[i], get(n))
		}
	}
	m.assignAll(func(i int) []float32 { return vals[i] })
	m.mu.Lock()
	m.step = st.Step
	m.mu.Unlock()
	if o == nil {
		return nil
	}
	// Each copy's optimizer state is its part of the slots (the whole slot but on a
	// device mesh); nil parts: every copy keeps the global value.
	partSlots := make([][][][]float32, len(slots)) // [param][slot][copy]
	for i := range slots {
		for _, g := range slots[i] {
			parts, err := m.store.slotParts(i, g)
			if err != nil {
				return fmt.Errorf("%w: %s: optimizer slot of %s: %v", ErrBackup, path, st.Variables[i].Name, err)
			}
			partSlots[i] = append(partSlots[i], parts)
		}
	}
	// Where the optimizer does not keep its state itself (the parameter servers), the
	// store puts each variable's global state there.
	global := make([]*slotState, len(slots))
	for i := range slots {
		if len(slots[i]) == 0 && st.Variables[i].T == 0 {
			continue
		}
		ss := &slotState{t: st.Variables[i].T, slots: make([][]float32, o.nslots)}
		for k := range ss.slots {
			if k < len(slots[i]) {
				ss.slots[k] = slots[i][k]
			} else {
				ss.slots[k] = make([]float32, prodInts(st.Variables[i].Shape))
			}
		}
		global[i] = ss
	}
	if err := m.store.restoreSlots(m, path, st.Iterations > 0 || st.Step > 0, global); err != nil {
		return err
	}
	o.mu.Lock()
	o.iterations, o.lr = st.Iterations, st.LR
	for d, copyVars := range m.vars {
		for i, v := range copyVars {
			if st.Variables[i].Slots == 0 && st.Variables[i].T == 0 {
				delete(o.slots, v)
				continue
			}
			n := prodInts(v.Shape())
			ss := &slotState{t: st.Variables[i].T, slots: make([][]float32, o.nslots)}
			for k := range ss.slots {
				switch {
				case k >= len(slots[i]):
					ss.slots[k] = make([]float32, n)
				case partSlots[i][k] != nil:
					ss.slots[k] = append([]float32(nil), partSlots[i][k][d]...) // replicated parts may share memory
				default:
					ss.slots[k] = append([]float32(nil), slots[i][k]...)
				}
			}
			o.slots[v] = ss
		}
	}
	o.mu.Unlock()
	return nil
}

// writeFileAtomic writes b to path through a synced temporary file renamed over it, then
// syncs the directory, so that path holds either its old contents or b, whole.
func writeFileAtomic(path string, b []byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("sync %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// namedVariable is a variable a Checkpoint saves beside the model's (Checkpoint.Add).
type namedVariable struct {
	name string
	v    *tensor.Variable
}

// extraValues returns the values of the state's extra variables by name, read after the
// model's variables and their slots.
func (st *backupState) extraValues() map[string][]float32 {
	off := 0
	for _, spec := range st.Variables {
		off += 4 * prodInts(spec.Shape) * (1 + spec.Slots)
	}
	out := map[string][]float32{}
	for _, spec := range st.Extra {
		n := prodInts(spec.Shape)
		if off+4*n > len(st.body) {
			break
		}
		out[spec.Name] = st.floats(off, n)
		off += 4 * n
	}
	return out
}
