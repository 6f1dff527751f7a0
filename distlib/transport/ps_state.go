package transport

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// PSState is a variable's optimizer state on its ps: the rule's slots (each the variable's
// size; none before the first optimizer update) and the step count T (optimizer updates
// applied, Adam's bias correction). Checkpoints read and set it with the values.
type PSState struct {
	T     int64
	Slots [][]float32
}

// ReadState returns variable key's optimizer state (copies of its slots).
func (c *PSClient) ReadState(ctx context.Context, key string) (PSState, error) {
	b, err := c.invoke(ctx, "ReadState", key, nil, false)
	if err != nil {
		return PSState{}, err
	}
	d := psDecoder{b: b}
	st := PSState{T: int64(d.u64())}
	n := d.count(4)
	for range n {
		st.Slots = append(st.Slots, d.floats())
	}
	if err := d.done(); err != nil {
		return PSState{}, fmt.Errorf("transport: ps at %s: ReadState %q: %w", c.addr, key, err)
	}
	return st, nil
}

// SetState replaces variable key's optimizer state by st (a restored checkpoint's): every
// slot must have the variable's size. The variable's value is not changed.
func (c *PSClient) SetState(ctx context.Context, key string, st PSState) error {
	if st.T < 0 {
		return fmt.Errorf("transport: ps at %s: SetState %q: negative step count %d", c.addr, key, st.T)
	}
	var e psEncoder
	e.u64(uint64(st.T))
	e.u32(uint32(len(st.Slots)))
	for _, s := range st.Slots {
		e.floats(s)
	}
	_, err := c.invoke(ctx, "SetState", key, e.b, false)
	return err
}

func (s *PSServer) readState(key string, d *psDecoder) ([]byte, error) {
	return s.readWith(key, d, func(e *psEncoder, v *psVar) {
		e.u64(uint64(v.iters))
		e.u32(uint32(len(v.slots)))
		for _, sl := range v.slots {
			e.floats(sl)
		}
	})
}

func (s *PSServer) setState(key string, d *psDecoder) ([]byte, error) {
	t := int64(d.u64())
	slots := make([][]float32, d.count(4))
	for i := range slots {
		slots[i] = d.floats()
	}
	if err := d.done(); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if t < 0 {
		return nil, status.Errorf(codes.InvalidArgument, "variable %q: negative step count %d", key, t)
	}
	v, err := s.get(key)
	if err != nil {
		return nil, err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	for i, sl := range slots {
		if len(sl) != len(v.data) {
			return nil, status.Errorf(codes.InvalidArgument, "variable %q of shape %v: optimizer slot %d has %d values, want %d", key, v.shape, i, len(sl), len(v.data))
		}
	}
	if len(slots) == 0 {
		slots = nil
	}
	v.slots, v.iters = slots, t
	return nil, nil
}
