package mesh

import (
	"fmt"

	"godist/distlib/tensor"
)

// Weights implements keras.MeshEngine: the global value of every parameter, assembled from
// the devices' parts.
func (e *Engine) Weights() []*tensor.Tensor {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]*tensor.Tensor, len(e.params))
	for i := range e.params {
		parts := make([][]float32, len(e.vars))
		for d, vs := range e.vars {
			parts[d] = vs[i].Value().Data()
		}
		t, err := e.gatherLocked(i, parts)
		if err != nil {
			panic(err)
		}
		out[i] = t
	}
	return out
}

// Gather implements keras.MeshEngine: the global value of parameter i's layout made of
// parts, one per device in mesh order, each shaped as that device's part of the parameter
// (an optimizer's slot, say).
func (e *Engine) Gather(i int, parts [][]float32) ([]float32, error) {
	if i < 0 || i >= len(e.params) {
		return nil, errorf("Gather", "parameter %d out of range [0, %d)", i, len(e.params))
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	t, err := e.gatherLocked(i, parts)
	if err != nil {
		return nil, err
	}
	return t.Data(), nil
}

func (e *Engine) gatherLocked(i int, parts [][]float32) (*tensor.Tensor, error) {
	p := e.params[i]
	if len(parts) != len(e.vars) {
		return nil, errorf("Gather", "%q: %d parts for %d devices", p.Path, len(parts), len(e.vars))
	}
	shards := make([]Shard, len(e.vars))
	for d, vs := range e.vars {
		coords := e.mesh.Coords(d)
		off := make([]int, p.Init.Rank())
		shape := vs[i].Shape()
		if s := e.split[i]; s >= 0 {
			off[s] = coords[e.mAxis] * shape[s]
		}
		val, err := tensor.New(shape, parts[d])
		if err != nil {
			return nil, fmt.Errorf("mesh: gather %q on %s: %w", p.Path, e.mesh.devices[d], err)
		}
		shards[d] = Shard{Device: e.mesh.devices[d], Coords: coords, Offset: off, Tensor: val}
	}
	return Assemble(shards, p.Init.Shape())
}

// Scatter implements keras.MeshEngine: each device's part, in mesh order, of a global value
// laid out as parameter i.
func (e *Engine) Scatter(i int, data []float32) ([][]float32, error) {
	if i < 0 || i >= len(e.params) {
		return nil, errorf("Scatter", "parameter %d out of range [0, %d)", i, len(e.params))
	}
	t, err := tensor.New(e.params[i].Init.Shape(), append([]float32(nil), data...))
	if err != nil {
		return nil, fmt.Errorf("mesh: scatter %q: %w", e.params[i].Path, err)
	}
	shards, err := DistributeTensor(t, e.layouts[i])
	if err != nil {
		return nil, err
	}
	out := make([][]float32, len(shards))
	for d, sh := range shards {
		out[d] = sh.Tensor.Data()
	}
	return out, nil
}

// Assign implements keras.MeshEngine: it sets parameter i from its global value.
func (e *Engine) Assign(i int, data []float32) error {
	parts, err := e.Scatter(i, data)
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for d, part := range parts {
		e.vars[d][i].AssignData(part)
	}
	return nil
}
