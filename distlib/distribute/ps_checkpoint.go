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
)

// ErrCheckpoint reports a checkpoint file that cannot be read or does not match.
var ErrCheckpoint = errors.New("distribute: bad checkpoint")

const psCheckpointMagic = "GODISTPS1\n"

// SaveCheckpoint writes the value of every variable of the strategy to path (the
// coordinator saves, the evaluator reads with ReadCheckpoint, a restarted coordinator
// resumes with RestoreCheckpoint). The file is written to a temporary name and renamed,
// so a reader never sees half a checkpoint.
func (s *ParameterServerStrategy) SaveCheckpoint(path string) (err error) {
	vars := s.Variables()
	values := make([]*tensor.Tensor, len(vars))
	for i, v := range vars {
		a, cancel := s.coordAccess()
		values[i], err = v.read(a)
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
		buf := make([]byte, 4*values[i].Size())
		for j, x := range values[i].Data() {
			le.PutUint32(buf[4*j:], math.Float32bits(x))
		}
		w.Write(buf)
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
	if _, err := io.ReadFull(r, magic); err != nil || string(magic) != psCheckpointMagic {
		return nil, bad("not a godist parameter-server checkpoint", err)
	}
	var b [8]byte
	get := func() (uint64, error) {
		_, err := io.ReadFull(r, b[:])
		return binary.LittleEndian.Uint64(b[:]), err
	}
	n, err := get()
	if err != nil || n > 1<<20 {
		return nil, bad("variable count", err)
	}
	out := make(map[string]*tensor.Tensor, n)
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
		buf := make([]byte, 4*elems)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, bad(fmt.Sprintf("values of %q", name), err)
		}
		data := make([]float32, elems)
		for j := range data {
			data[j] = math.Float32frombits(binary.LittleEndian.Uint32(buf[4*j:]))
		}
		t, err := tensor.New(shape, data)
		if err != nil {
			return nil, bad(fmt.Sprintf("variable %q", name), err)
		}
		out[string(name)] = t
	}
	return out, nil
}

// RestoreCheckpoint sets every variable of the strategy to its value in the checkpoint
// at path, which may have been written with other ps tasks and partitioning; a variable
// missing from the checkpoint, or saved with another shape, is an error naming it, and
// nothing is set then. The optimizer's slots on the ps are not in the file.
func (s *ParameterServerStrategy) RestoreCheckpoint(path string) error {
	values, err := ReadCheckpoint(path)
	if err != nil {
		return err
	}
	// Every variable is checked before any is set, so a mismatch changes nothing. The
	// file holds global values: Assign splits them among the shards as they are laid out
	// now, whatever the ps tasks and partitioning that wrote them.
	vars := s.Variables()
	for _, v := range vars {
		t, ok := values[v.name]
		if !ok {
			return fmt.Errorf("%w: %s has no variable %q", ErrCheckpoint, path, v.name)
		}
		if !sameShape(t.Shape(), v.shape) {
			return fmt.Errorf("%w: %s: variable %q saved with shape %v, the model's has %v", ErrCheckpoint, path, v.name, t.Shape(), v.shape)
		}
	}
	for _, v := range vars {
		t := values[v.name]
		if err := catchPanic(func() { v.Assign(t) }); err != nil {
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
