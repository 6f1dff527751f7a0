package keras

import (
	"fmt"
	"math"
	"path/filepath"
)

// StateMatches reports where model m and its optimizer differ from the state file at path
// (a backup, a Checkpoint's .gdck, a .keras model's state): the global values and slots, and every copy's part of
// them (a replica's copy, a mesh device's part), compared bit for bit; nil when they agree.
func StateMatches(path string, m *Model) error {
	st, err := readBackup(path)
	if filepath.Ext(path) == modelExt {
		var w []byte
		if _, w, err = readModelFile(path); err == nil {
			st, err = decodeBackup(w, path)
		}
	}
	if err != nil {
		return err
	}
	return stateMatches(st, m)
}

func stateMatches(st *backupState, m *Model) error {
	o := m.optimizer
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.iterations != st.Iterations || o.lr != st.LR {
		return fmt.Errorf("optimizer at iteration %d, lr %g; saved %d, %g", o.iterations, o.lr, st.Iterations, st.LR)
	}
	off := 0
	get := func(n int) []float32 {
		d := st.floats(off, n)
		off += 4 * n
		return d
	}
	vs := m.Variables()
	if len(vs) != len(st.Variables) {
		return fmt.Errorf("%d variables, saved %d", len(vs), len(st.Variables))
	}
	for i, spec := range st.Variables {
		n := prodInts(spec.Shape)
		vals := get(n)
		var slots [][]float32
		for range spec.Slots {
			slots = append(slots, get(n))
		}
		if err := sameBits(fmt.Sprintf("%s (global)", spec.Name), vs[i].Value().Data(), vals); err != nil {
			return err
		}
		// Every copy: the whole value, or its device's part on a mesh.
		want := func(g []float32) [][]float32 {
			parts, err := m.store.slotParts(i, g)
			if err != nil || parts == nil {
				parts = make([][]float32, len(m.vars))
				for c := range parts {
					parts[c] = g
				}
			}
			return parts
		}
		vp := want(vals)
		for c := range m.vars {
			if err := sameBits(fmt.Sprintf("%s copy %d", spec.Name, c), m.vars[c][i].Value().Data(), vp[c]); err != nil {
				return err
			}
		}
		g := m.store.slotState(m, o, i, vs[i])
		if spec.Slots == 0 {
			if g != nil && g.t != 0 {
				return fmt.Errorf("%s: optimizer state at step %d, saved none", spec.Name, g.t)
			}
			continue
		}
		if g == nil || g.t != spec.T || len(g.slots) != len(slots) {
			return fmt.Errorf("%s: optimizer state %v, saved step %d with %d slots", spec.Name, g, spec.T, len(slots))
		}
		for k := range slots {
			if err := sameBits(fmt.Sprintf("%s slot %d (global)", spec.Name, k), g.slots[k], slots[k]); err != nil {
				return err
			}
		}
		sp := make([][][]float32, len(slots))
		for k := range slots {
			sp[k] = want(slots[k])
		}
		for c := range m.vars {
			v := m.vars[c][i]
			cs := o.slots[v]
			if cs == nil || cs.t != spec.T {
				return fmt.Errorf("%s copy %d: optimizer state %v, saved step %d", spec.Name, c, cs, spec.T)
			}
			for k := range slots {
				if err := sameBits(fmt.Sprintf("%s copy %d slot %d", spec.Name, c, k), cs.slots[k], sp[k][c]); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// sameBits reports the first element where got and want differ in their bits.
func sameBits(what string, got, want []float32) error {
	if len(got) != len(want) {
		return fmt.Errorf("%s: %d values, saved %d", what, len(got), len(want))
	}
	for j := range got {
		if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
			return fmt.Errorf("%s[%d] = %v, saved %v", what, j, got[j], want[j])
		}
	}
	return nil
}
