package transport

import (
	"context"
	"encoding/binary"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// PSOp is one variable's part of a PSClient.Do call: an update, a read, or an update
// answered with the variable's value right after it.
type PSOp struct {
	Key     string
	Update  *Update   // the update to apply; nil for a read alone
	Read    bool      // answer with the variable's value (after Update)
	Dst     []float32 // where the value goes when it has the variable's size (else a new slice)
	Applied bool      // set by Do: Update was applied (false: its ID had been applied before)
	Value   []float32 // set by Do: the value read
}

// The calls a Do message may carry, by their index on the wire; each runs as its own
// method does.
var psDoMethods = [...]struct {
	name string
	h    func(s *PSServer, key string, d *psDecoder) ([]byte, error)
	shm  bool // the payload starts with a region's key and places
}{
	{"Update", (*PSServer).update, false},
	{"UpdateRead", (*PSServer).updateRead, false},
	{"Read", (*PSServer).read, false},
	{"UpdateShm", (*PSServer).updateShm, true},
	{"UpdateReadShm", (*PSServer).updateReadShm, true},
	{"ReadShm", (*PSServer).readShm, true},
}

const (
	psDoUpdate = iota
	psDoUpdateRead
	psDoRead
	psDoShm = 3 // added to the three above: the same call through the client's region
)

// Do runs ops on the ps in order, in one round trip (Update, UpdateRead and ReadInto are
// a Do of one op): a value of at least psShmMin float32s goes through the client's shared
// memory when it has a region, a smaller one in the message. A training step sends its pushes and reads of all the variables this
// ps holds as one Do instead of a call each. When Do fails, some ops may have been
// applied (each is applied once, under its variable's lock); a step that runs again
// sends the same UpdateIDs, and the ps refuses those it applied. A ps that does not map
// the client's region answers so before it runs any op, and Do sends them all again as
// payloads.
func (c *PSClient) Do(ctx context.Context, ops []*PSOp) error {
	n := 0
	for _, op := range ops {
		in, out := op.sizes()
		n = max(n, in, out)
	}
	r := c.region(ctx, n)
	if r != nil {
		defer c.release(r)
	}
	done, err := c.do(ctx, ops, r)
	if !done {
		c.drop(r)
		_, err = c.do(ctx, ops, nil)
	}
	return err
}

// sizes returns the float32s op sends and the place its answer needs.
func (op *PSOp) sizes() (in, out int) {
	if op.Update != nil {
		in = len(op.Update.Value)
	}
	if op.Read {
		out = len(op.Dst)
		if out == 0 && op.Update != nil && op.Update.Rows == nil {
			out = in // the variable's size
		}
	}
	return in, out
}

// do sends ops as one Do message, through region r where an op's value is large enough
// (r nil: all as payloads); done is false when the ps did not map r (nothing ran).
func (c *PSClient) do(ctx context.Context, ops []*PSOp, r *psRegion) (done bool, err error) {
	calls := make([]shmCall, len(ops))
	via := make([]bool, len(ops)) // the calls whose buffers in r are freed at the end
	defer func() {
		for i := range calls {
			if via[i] {
				calls[i].free()
			}
		}
	}()
	e := psEncoder{b: make([]byte, 0, 128*len(ops))} // a value in the message grows it once
	e.u32(uint32(len(ops)))
	for i, op := range ops {
		method := psDoRead
		switch {
		case op.Update != nil && op.Read:
			method = psDoUpdateRead
		case op.Update != nil:
			method = psDoUpdate
		case !op.Read:
			return true, fmt.Errorf("transport: ps at %s: Do: op %d on %q neither updates nor reads", c.addr, i, op.Key)
		}
		in, out := op.sizes()
		if r != nil && max(in, out) >= psShmMin {
			var value []float32
			if op.Update != nil {
				value = op.Update.Value
			}
			calls[i], via[i] = c.prepare(r, value, out)
		}
		if via[i] {
			method += psDoShm
		}
		e.u8(uint8(method))
		e.str(op.Key)
		at := len(e.b) // the payload's length goes here once it is written
		e.u32(0)
		var err error
		switch {
		case via[i]:
			calls[i].encode(&e)
			if op.Update != nil {
				err = encodeUpdateHead(&e, *op.Update)
			}
		case op.Update != nil:
			err = encodeUpdate(&e, *op.Update)
		}
		if err != nil {
			return true, fmt.Errorf("%w (variable %q)", err, op.Key)
		}
		binary.LittleEndian.PutUint32(e.b[at:], uint32(len(e.b)-at-4))
	}
	tag := "" // names the variable in the transport's errors when there is one
	if len(ops) == 1 {
		tag = ops[0].Key
	}
	b, err := c.invoke(ctx, "Do", tag, e.b, false)
	if isUnknownRegion(err) {
		return false, nil
	}
	if err != nil {
		for i := range via {
			if via[i] {
				c.abandon(r) // the ps may still use the calls' buffers: never handed out again
				clear(via)
				break
			}
		}
		return true, err
	}
	d := psDecoder{b: b}
	for i, op := range ops {
		if op.Update != nil {
			op.Applied = d.u8() == 1
		}
		if op.Read {
			switch {
			case via[i]:
				op.Value = calls[i].readAnswer(&d, op.Dst)
			case op.Update == nil:
				d.ints() // Read answers with the shape first
				op.Value = d.floatsOrInto(op.Dst)
			default:
				op.Value = d.floatsOrInto(op.Dst)
			}
		}
		if d.err != nil {
			return true, fmt.Errorf("transport: ps at %s: Do: the answer to %q: %w", c.addr, op.Key, d.err)
		}
	}
	if err := d.done(); err != nil {
		return true, fmt.Errorf("transport: ps at %s: Do: %w", c.addr, err)
	}
	return true, nil
}

// doCall is one call of a Do message, decoded.
type doCall struct {
	method  int
	key     string
	payload []byte
}

// do runs the calls of a Do message in order and answers with their answers one after
// the other (each delimits itself). It first holds every region the calls name, so that a
// call naming one this ps does not map is answered before any call runs.
func (s *PSServer) do(d *psDecoder) ([]byte, error) {
	n := d.count(1 + 4 + 4) // each call has at least its method, key length and payload length
	calls := make([]doCall, n)
	for i := range calls {
		c := &calls[i]
		c.method = int(d.u8())
		c.key = d.str()
		c.payload = d.take(d.count(1))
		if d.err == nil && c.method >= len(psDoMethods) {
			d.err = fmt.Errorf("transport: ps: Do: call %d has method %d, want < %d", i, c.method, len(psDoMethods))
		}
	}
	if err := d.done(); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	var held []*psRegion
	defer func() {
		for _, r := range held {
			s.releaseRegion(r)
		}
	}()
	for _, c := range calls {
		if !psDoMethods[c.method].shm {
			continue
		}
		var key psRegionKey
		if len(c.payload) < len(key) {
			return nil, status.Errorf(codes.InvalidArgument, "transport: ps: Do: %s %q of %d bytes has no region", psDoMethods[c.method].name, c.key, len(c.payload))
		}
		copy(key[:], c.payload)
		r := s.holdRegion(key)
		if r == nil {
			return nil, status.Error(codes.FailedPrecondition, psUnknownRegion+" (this ps restarted, or the client detached it)")
		}
		held = append(held, r)
	}
	// The answers follow each other in e, each as its call alone answers (they delimit
	// themselves), written there by the handlers: a value read is copied once.
	var e psEncoder
	for _, c := range calls {
		if _, err := psDoMethods[c.method].h(s, c.key, &psDecoder{b: c.payload, out: &e}); err != nil {
			return nil, err
		}
	}
	return e.b, nil
}
