package distribute

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"

	"godist/distlib/tensor"
	"godist/distlib/transport"
)

// ErrCheckpoint reports a checkpoint file that cannot be read or does not match.
var ErrCheckpoint = errors.New("distribute: bad checkpoint")

// The checkpoint file: a magic line naming the format version, the variable count, then
// per variable its name, shape and values; version 2 adds after the values the optimizer
// state on the ps (slot count, per shard its first row, rows and step count t, then the
// slots' global values). Version 1 files carry no optimizer state and still load.
const (
	psCheckpointMagic   = "GODISTPS2\n"
	psCheckpointMagicV1 = "GODISTPS1\n"
)

// SaveCheckpoint writes the value of every variable of the strategy and its optimizer
// state on the ps (the rule's slots and each shard's step count, as TensorFlow's ps
// checkpoints hold the slot variables) to path (the coordinator saves, the evaluator reads
// with ReadCheckpoint, a restarted coordinator resumes with RestoreCheckpoint). The file
// is written to a temporary name and renamed, so a reader never sees half a checkpoint.
func (s *ParameterServerStrategy) SaveCheckpoint(path string) (err error) {
	vars := s.Variables()
	values := make([]*tensor.Tensor, len(vars))
	states := make([]*OptimizerState, len(vars))
	for i, v := range vars {
		a, cancel := s.coordAccess()
		values[i], err = v.read(a)
		if err == nil {
			states[i], err = v.readState(a)
		}
		cancel()
		if err != nil {
			return fmt.Errorf("distribute: save checkpoint %s: %w", path, err)
		}
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("distribute: save checkpoint: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	w := bufio.NewWriter(tmp)
	w.WriteString(psCheckpointMagic)
	le := binary.LittleEndian
	put := func(v uint64) { w.Write(le.AppendUint64(nil, v)) }
	put(uint64(len(vars)))
	for i, v := range vars {
		put(uint64(len(v.name)))
		w.WriteString(v.name)
		put(uint64(len(v.shape)))
		for _, d := range v.shape {
			put(uint64(d))
		}
		putFloats := func(d []float32) {
			buf := make([]byte, 4*len(d))
			for j, x := range d {
				le.PutUint32(buf[4*j:], math.Float32bits(x))
			}
			w.Write(buf)
		}
		putFloats(values[i].Data())
		st := states[i]
		put(uint64(len(st.Slots)))
		put(uint64(len(st.Steps)))
		for _, sh := range st.Steps {
			put(uint64(sh.Offset))
			put(uint64(sh.Rows))
			put(uint64(sh.T))
		}
		for _, sl := range st.Slots {
			putFloats(sl)
		}
	}
	if err = w.Flush(); err != nil {
		return fmt.Errorf("distribute: save checkpoint %s: %w", path, err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("distribute: save checkpoint %s: %w", path, err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("distribute: save checkpoint %s: %w", path, err)
	}
	return nil
}

// ReadCheckpoint reads the variables saved by SaveCheckpoint, by name (an evaluator task
// needs no cluster to read them).
func ReadCheckpoint(path string) (map[string]*tensor.Tensor, error) {
	ck, err := readCheckpoint(path)
	if err != nil {
		return nil, err
	}
	return ck.values, nil
}

// psCheckpoint is a checkpoint file's contents: the values and, from version 2, the
// optimizer states (states nil: a version 1 file, which has none).
type psCheckpoint struct {
	values map[string]*tensor.Tensor
	states map[string]*OptimizerState
}

func readCheckpoint(path string) (*psCheckpoint, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	defer f.Close()
	r := bufio.NewReader(f)
	bad := func(what string, err error) error {
		return fmt.Errorf("%w: %s: %s: %v", ErrCheckpoint, path, what, err)
	}
	magic := make([]byte, len(psCheckpointMagic))
	if _, err := io.ReadFull(r, magic); err != nil || (string(magic) != psCheckpointMagic && string(magic) != psCheckpointMagicV1) {
		return nil, bad("not a godist parameter-server checkpoint", err)
	}
	v2 := string(magic) == psCheckpointMagic
	var b [8]byte
	get := func() (uint64, error) {
		_, err := io.ReadFull(r, b[:])
		return binary.LittleEndian.Uint64(b[:]), err
	}
	getFloats := func(n uint64) ([]float32, error) {
		buf := make([]byte, 4*n)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		data := make([]float32, n)
		for j := range data {
			data[j] = math.Float32frombits(binary.LittleEndian.Uint32(buf[4*j:]))
		}
		return data, nil
	}
	n, err := get()
	if err != nil || n > 1<<20 {
		return nil, bad("variable count", err)
	}
	ck := &psCheckpoint{values: make(map[string]*tensor.Tensor, n)}
	if v2 {
		ck.states = make(map[string]*OptimizerState, n)
	}
	for i := uint64(0); i < n; i++ {
		ln, err := get()
		if err != nil || ln > 1<<16 {
			return nil, bad("name length", err)
		}
		name := make([]byte, ln)
		if _, err := io.ReadFull(r, name); err != nil {
			return nil, bad("name", err)
		}
		rank, err := get()
		if err != nil || rank > 16 {
			return nil, bad(fmt.Sprintf("rank of %q", name), err)
		}
		shape := make([]int, rank)
		elems := uint64(1)
		for j := range shape {
			d, err := get()
			if err != nil || d > 1<<40 {
				return nil, bad(fmt.Sprintf("shape of %q", name), err)
			}
			shape[j] = int(d)
			elems *= d
		}
		if elems > 1<<34 {
			return nil, bad(fmt.Sprintf("size of %q", name), errors.New("too large"))
		}
		data, err := getFloats(elems)
		if err != nil {
			return nil, bad(fmt.Sprintf("values of %q", name), err)
		}
		t, err := tensor.New(shape, data)
		if err != nil {
			return nil, bad(fmt.Sprintf("variable %q", name), err)
		}
		ck.values[string(name)] = t
		if !v2 {
			continue
		}
		nslots, err := get()
		if err != nil || nslots > 16 {
			return nil, bad(fmt.Sprintf("optimizer slot count of %q", name), err)
		}
		nsteps, err := get()
		if err != nil || nsteps > 1<<20 {
			return nil, bad(fmt.Sprintf("shard count of %q", name), err)
		}
		st := &OptimizerState{}
		for range nsteps {
			off, err1 := get()
			rows, err2 := get()
			steps, err3 := get()
			if err := errors.Join(err1, err2, err3); err != nil || off > 1<<40 || rows > 1<<40 || steps > 1<<62 {
				return nil, bad(fmt.Sprintf("optimizer steps of %q", name), err)
			}
			st.Steps = append(st.Steps, ShardSteps{Offset: int(off), Rows: int(rows), T: int64(steps)})
		}
		for range nslots {
			sl, err := getFloats(elems)
			if err != nil {
				return nil, bad(fmt.Sprintf("optimizer slots of %q", name), err)
			}
			st.Slots = append(st.Slots, sl)
		}
		ck.states[string(name)] = st
	}
	return ck, nil
}

// RestoreCheckpoint sets every variable of the strategy, and its optimizer state on the
// ps, to what the checkpoint at path holds; the file may have been written with other ps
// tasks and partitioning. A variable missing from the checkpoint, saved with another
// shape, or whose shards were saved at different optimizer steps and are partitioned
// otherwise now (see SetOptimizerState), is an error naming it, and nothing is set then.
// A file of the first format holds no optimizer state: the variables are restored, the
// optimizer state is cleared, and a WARNING says so.
func (s *ParameterServerStrategy) RestoreCheckpoint(path string) error {
	ck, err := readCheckpoint(path)
	if err != nil {
		return err
	}
	// Every variable is checked before any is set, so a mismatch changes nothing. The
	// file holds global values: Assign splits them among the shards as they are laid out
	// now, whatever the ps tasks and partitioning that wrote them.
	vars := s.Variables()
	plans := make([][]transport.PSState, len(vars))
	for i, v := range vars {
		t, ok := ck.values[v.name]
		if !ok {
			return fmt.Errorf("%w: %s has no variable %q", ErrCheckpoint, path, v.name)
		}
		if !sameShape(t.Shape(), v.shape) {
			return fmt.Errorf("%w: %s: variable %q saved with shape %v, the model's has %v", ErrCheckpoint, path, v.name, t.Shape(), v.shape)
		}
		if plans[i], err = v.statePlan(ck.states[v.name]); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrCheckpoint, path, err)
		}
	}
	if ck.states == nil && len(vars) > 0 {
		logf("WARNING", "checkpoint %s was written in the first format, which holds no optimizer state: the variables are restored, "+
			"the optimizer's slots (momenta, Adam's moments) and step counts on the ps start afresh, so training does not resume as it would have", path)
	}
	for i, v := range vars {
		t := ck.values[v.name]
		if err := catchPanic(func() { v.Assign(t) }); err != nil {
			return fmt.Errorf("distribute: restore %s: %w", path, err)
		}
		a, cancel := s.coordAccess()
		err := v.setState(a, plans[i])
		cancel()
		if err != nil {
			return fmt.Errorf("distribute: restore %s: %w", path, err)
		}
	}
	return nil
}

// catchPanic runs fn and returns what it panicked with, as an error.
func catchPanic(fn func()) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = panicError(p)
		}
	}()
	fn()
	return nil
}
