package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"sync"
	"sync/atomic"

	"godist/distlib/optim"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The parameter-server service: a variable store that a ps task serves to the coordinator
// and the workers (tf.distribute's ParameterServerStrategy). Variables are float32 arrays
// with a shape, addressed by key (the variable's name and shard, chosen by the caller).
// Updates carry an UpdateID; an update whose ID the store has already applied is not
// applied again, so a step retried after a worker failure changes every variable once.
//
// Messages travel as raw frames (the transport's codec): the tag is the variable key, the
// payload little-endian fields. Every call is checked against the cluster token by the
// transport's own interceptor.

const (
	psServiceName = "godist.transport.ParameterServer"
	// psMaxCallers bounds the caller ranks the token interceptor accepts: coordinator,
	// workers and evaluator use their cluster rank.
	psMaxCallers = 1 << 12
)

// UpdateKind says what an update does to a variable.
type UpdateKind uint8

const (
	// UpdateAssign sets the variable (or the given rows) to the value.
	UpdateAssign UpdateKind = iota
	// UpdateAssignAdd adds the value to the variable (or the given rows).
	UpdateAssignAdd
	// UpdateOptimizer applies a gradient with the update's Rule (an optim.Spec: SGD with
	// momentum or Nesterov, Adam, RMSprop), the same kernels as keras's optimizers. The
	// rule's slots and the step count (Adam's bias correction) are kept per variable on
	// the ps.
	UpdateOptimizer
)

// String names the update kind.
func (k UpdateKind) String() string {
	switch k {
	case UpdateAssign:
		return "assign"
	case UpdateAssignAdd:
		return "assign_add"
	case UpdateOptimizer:
		return "optimizer"
	}
	return fmt.Sprintf("UpdateKind(%d)", uint8(k))
}

// Rule is the optimizer rule an UpdateOptimizer update applies on the ps, with the
// hyperparameters of the optimizer it comes from (the zero Rule for assignments).
type Rule = optim.Spec

// UpdateID identifies one update: the step (a closure scheduled by the coordinator; 0
// means not deduplicated) and the update's index within the step. A step retried on
// another worker issues the same IDs in the same order.
type UpdateID struct {
	Step uint64
	Op   uint32
}

// Update is one change to a variable.
type Update struct {
	ID    UpdateID
	Kind  UpdateKind
	Rule  Rule      // UpdateOptimizer's rule (ignored by the others)
	Rows  []int     // nil: the whole variable; else the rows (first axis) Value holds, in order
	Value []float32 // the new value, the delta or the gradient
}

// PSStats counts what a parameter server did.
type PSStats struct {
	Variables  int   // variables held
	Applied    int64 // updates applied
	Duplicates int64 // updates refused because their UpdateID was already applied
	Reads      int64 // values read: Read and Gather calls, and updates answered with the value (UpdateRead)
	BytesIn    int64 // request payload bytes received (keys included)
	BytesOut   int64 // answer payload bytes sent
	SharedIn   int64 // value bytes co-located clients sent through shared memory
	SharedOut  int64 // value bytes written into co-located clients' shared memory
}

type psVar struct {
	mu      sync.Mutex
	shape   []int
	row     int // elements per row of the first axis
	data    []float32
	slots   [][]float32 // the optimizer rule's slots (momenta, moving averages)
	iters   int64       // optimizer updates applied (Adam's bias correction)
	applied map[UpdateID]struct{}
}

// PSServerOptions configures NewPSServer.
type PSServerOptions struct {
	// Token is the cluster token (required), checked on every call.
	Token string
	// Task is this ps task's index, used in messages.
	Task int
	// NoSharedMemory makes the server refuse the shared memory of co-located clients, which
	// then send every value in their messages (see PSClientOptions.NoSharedMemory).
	NoSharedMemory bool
}

// PSServer is a parameter-server task's variable store served over gRPC.
type PSServer struct {
	task int
	ts   taskServer

	mu   sync.RWMutex
	vars map[string]*psVar

	shm psShmServer

	applied, dups, reads, bytesIn, bytesOut, sharedIn, sharedOut atomic.Int64
}

// NewPSServer serves a variable store on lis (which it closes on Close).
func NewPSServer(lis net.Listener, opts PSServerOptions) (*PSServer, error) {
	if lis == nil {
		return nil, errors.New("transport: ps: nil listener")
	}
	if opts.Token == "" {
		return nil, errors.New("transport: ps: empty cluster token: set GODIST_CLUSTER_TOKEN (the same on every task) or PSServerOptions.Token")
	}
	s := &PSServer{task: opts.Task, vars: map[string]*psVar{}}
	s.shm = psShmServer{no: opts.NoSharedMemory, max: psShmMaxRegions, regions: map[psRegionKey]*psRegion{}}
	s.ts.start(lis, opts.Token, opts.Task, &psServiceDesc, s)
	return s, nil
}

// Addr is the address the server listens on.
func (s *PSServer) Addr() net.Addr { return s.ts.lis.Addr() }

// Close stops serving at once, cutting open connections (a ps task going away).
func (s *PSServer) Close() error {
	s.ts.close()
	s.closeShm()
	return nil
}

// Stats returns the server's counters.
func (s *PSServer) Stats() PSStats {
	s.mu.RLock()
	n := len(s.vars)
	s.mu.RUnlock()
	return PSStats{Variables: n, Applied: s.applied.Load(), Duplicates: s.dups.Load(), Reads: s.reads.Load(),
		BytesIn: s.bytesIn.Load(), BytesOut: s.bytesOut.Load(), SharedIn: s.sharedIn.Load(), SharedOut: s.sharedOut.Load()}
}

func (s *PSServer) get(key string) (*psVar, error) {
	s.mu.RLock()
	v := s.vars[key]
	s.mu.RUnlock()
	if v == nil {
		return nil, status.Errorf(codes.NotFound, "ps %d has no variable %q (create it first)", s.task, key)
	}
	return v, nil
}

func (s *PSServer) create(key string, d *psDecoder) ([]byte, error) {
	overwrite := d.u8() == 1
	shape := d.ints()
	data := d.floats()
	if err := d.done(); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	n := 1
	for _, x := range shape {
		if x < 0 {
			return nil, status.Errorf(codes.InvalidArgument, "variable %q: negative dimension in shape %v", key, shape)
		}
		n *= x
	}
	if n != len(data) {
		return nil, status.Errorf(codes.InvalidArgument, "variable %q: shape %v needs %d values, got %d", key, shape, n, len(data))
	}
	row := 1
	if len(shape) > 0 {
		row = 1
		for _, x := range shape[1:] {
			row *= x
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.vars[key]; old != nil {
		old.mu.Lock()
		defer old.mu.Unlock()
		if !sameInts(old.shape, shape) {
			return nil, status.Errorf(codes.AlreadyExists, "variable %q exists on ps %d with shape %v, not %v", key, s.task, old.shape, shape)
		}
		if overwrite {
			copy(old.data, data)
			old.slots, old.iters = nil, 0
		}
		return nil, nil
	}
	s.vars[key] = &psVar{shape: shape, row: row, data: data, applied: map[UpdateID]struct{}{}}
	return nil, nil
}

func (s *PSServer) read(key string, d *psDecoder) ([]byte, error) {
	return s.readWith(key, d, func(e *psEncoder, v *psVar) {
		e.ints(v.shape)
		e.floats(v.data)
	})
}

// readWith answers a read of variable key (d must be at its end) with what enc appends,
// under the variable's lock.
func (s *PSServer) readWith(key string, d *psDecoder, enc func(e *psEncoder, v *psVar)) ([]byte, error) {
	if err := d.done(); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	v, err := s.get(key)
	if err != nil {
		return nil, err
	}
	s.reads.Add(1)
	e := d.answer(0)
	v.mu.Lock()
	defer v.mu.Unlock()
	enc(e, v)
	return e.b, nil
}

func (s *PSServer) gather(key string, d *psDecoder) ([]byte, error) {
	rows := d.ints()
	if err := d.done(); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	v, err := s.get(key)
	if err != nil {
		return nil, err
	}
	if len(v.shape) == 0 {
		return nil, status.Errorf(codes.InvalidArgument, "variable %q is a scalar: no rows to gather", key)
	}
	s.reads.Add(1)
	out := make([]float32, 0, len(rows)*v.row)
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, r := range rows {
		if r < 0 || r >= v.shape[0] {
			return nil, status.Errorf(codes.OutOfRange, "variable %q: row %d outside [0, %d)", key, r, v.shape[0])
		}
		out = append(out, v.data[r*v.row:(r+1)*v.row]...)
	}
	var e psEncoder
	e.floats(out)
	return e.b, nil
}

func (s *PSServer) update(key string, d *psDecoder) ([]byte, error) {
	return s.push(key, d, decodeUpdate(d), nil)
}

// push applies u (decoded from d, which must be at its end) to variable key once. With
// read nil it answers whether it applied u; else it also counts a read and read appends
// the variable's value right after the update (under the variable's lock).
func (s *PSServer) push(key string, d *psDecoder, u Update, read func(e *psEncoder, data []float32)) ([]byte, error) {
	if err := d.done(); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	v, err := s.get(key)
	if err != nil {
		return nil, err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	applied, err := s.applyOnce(v, key, u)
	if err != nil {
		return nil, err
	}
	if read == nil {
		e := d.answer(1)
		e.u8(boolByte(applied))
		return e.b, nil
	}
	s.reads.Add(1)
	e := d.answer(16) // read grows it for a value in the message
	e.u8(boolByte(applied))
	read(e, v.data)
	return e.b, nil
}

// applyOnce applies u to v unless an update with u's ID was applied before; v.mu is held.
func (s *PSServer) applyOnce(v *psVar, key string, u Update) (applied bool, err error) {
	if u.ID.Step != 0 {
		if _, ok := v.applied[u.ID]; ok {
			s.dups.Add(1)
			return false, nil
		}
	}
	if err := v.apply(key, u); err != nil {
		return false, err
	}
	if u.ID.Step != 0 {
		v.applied[u.ID] = struct{}{}
	}
	s.applied.Add(1)
	return true, nil
}

// updateRead is update followed by read of the same variable, answered together: a
// training step's push and the next step's read in one round trip. The value is the
// variable right after the update (with every update applied before it).
func (s *PSServer) updateRead(key string, d *psDecoder) ([]byte, error) {
	return s.push(key, d, decodeUpdate(d), (*psEncoder).floats)
}

func (s *PSServer) forget(d *psDecoder) ([]byte, error) {
	below := d.u64()
	if err := d.done(); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, v := range s.vars {
		v.mu.Lock()
		for id := range v.applied {
			if id.Step < below {
				delete(v.applied, id)
			}
		}
		v.mu.Unlock()
	}
	return nil, nil
}

func (s *PSServer) list() ([]byte, error) {
	s.mu.RLock()
	keys := make([]string, 0, len(s.vars))
	for k := range s.vars {
		keys = append(keys, k)
	}
	s.mu.RUnlock()
	sort.Strings(keys)
	var e psEncoder
	e.u32(uint32(len(keys)))
	for _, k := range keys {
		e.str(k)
	}
	return e.b, nil
}

func (s *PSServer) stats() ([]byte, error) {
	st := s.Stats()
	var e psEncoder
	e.u64(uint64(st.Variables))
	e.u64(uint64(st.Applied))
	e.u64(uint64(st.Duplicates))
	e.u64(uint64(st.Reads))
	e.u64(uint64(st.BytesIn))
	e.u64(uint64(st.BytesOut))
	e.u64(uint64(st.SharedIn))
	e.u64(uint64(st.SharedOut))
	return e.b, nil
}

// encodeUpdate appends u; an UpdateOptimizer carries its rule's encoding, checked here
// (the caller hears of a bad rule before anything is sent).
func encodeUpdate(e *psEncoder, u Update) error {
	if err := encodeUpdateHead(e, u); err != nil {
		return err
	}
	e.floats(u.Value)
	return nil
}

// encodeUpdateHead appends u without its value (which a call through shared memory places
// in the caller's region).
func encodeUpdateHead(e *psEncoder, u Update) error {
	e.u64(u.ID.Step)
	e.u32(u.ID.Op)
	e.u8(uint8(u.Kind))
	if u.Kind == UpdateOptimizer {
		var err error
		if e.b, err = u.Rule.AppendBinary(e.b); err != nil {
			return fmt.Errorf("transport: ps: update: %w", err)
		}
	}
	e.u8(boolByte(u.Rows != nil))
	if u.Rows != nil {
		e.ints(u.Rows)
	}
	return nil
}

// decodeUpdate reads what encodeUpdate wrote; a bad rule sets d.err.
func decodeUpdate(d *psDecoder) Update {
	u := decodeUpdateHead(d)
	u.Value = d.floats()
	return u
}

// decodeUpdateHead reads what encodeUpdateHead wrote.
func decodeUpdateHead(d *psDecoder) Update {
	var u Update
	u.ID.Step = d.u64()
	u.ID.Op = d.u32()
	u.Kind = UpdateKind(d.u8())
	if u.Kind == UpdateOptimizer {
		if b := d.take(optim.EncodedSize); b != nil {
			if err := u.Rule.UnmarshalBinary(b); err != nil {
				d.err = fmt.Errorf("transport: ps: update: %w", err)
			}
		}
	}
	if d.u8() == 1 {
		u.Rows = d.ints()
	}
	return u
}

func boolByte(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// apply changes v by u; v.mu is held.
func (v *psVar) apply(key string, u Update) error {
	// idx lists the element ranges of v.data that Value covers, in order.
	type span struct{ lo, hi int }
	var spans []span
	if u.Rows == nil {
		if len(u.Value) != len(v.data) {
			return status.Errorf(codes.InvalidArgument, "variable %q of shape %v: %s with %d values, want %d", key, v.shape, u.Kind, len(u.Value), len(v.data))
		}
		spans = []span{{0, len(v.data)}}
	} else {
		if len(v.shape) == 0 {
			return status.Errorf(codes.InvalidArgument, "variable %q is a scalar: no rows to update", key)
		}
		if len(u.Value) != len(u.Rows)*v.row {
			return status.Errorf(codes.InvalidArgument, "variable %q: %s of %d rows with %d values, want %d", key, u.Kind, len(u.Rows), len(u.Value), len(u.Rows)*v.row)
		}
		for _, r := range u.Rows {
			if r < 0 || r >= v.shape[0] {
				return status.Errorf(codes.OutOfRange, "variable %q: row %d outside [0, %d)", key, r, v.shape[0])
			}
			spans = append(spans, span{r * v.row, (r + 1) * v.row})
		}
	}
	switch u.Kind {
	case UpdateAssign, UpdateAssignAdd:
	case UpdateOptimizer:
		if err := u.Rule.Validate(); err != nil {
			return status.Errorf(codes.InvalidArgument, "variable %q: %v", key, err)
		}
		for len(v.slots) < u.Rule.Slots() {
			v.slots = append(v.slots, make([]float32, len(v.data)))
		}
		v.iters++
	default:
		return status.Errorf(codes.InvalidArgument, "variable %q: unknown update kind %d", key, uint8(u.Kind))
	}
	slots := make([][]float32, len(v.slots))
	k := 0
	for _, sp := range spans {
		w := v.data[sp.lo:sp.hi]
		g := u.Value[k : k+len(w)]
		k += len(w)
		switch u.Kind {
		case UpdateAssign:
			copy(w, g)
		case UpdateAssignAdd:
			for i := range w {
				w[i] += g[i]
			}
		case UpdateOptimizer:
			for j, sl := range v.slots {
				slots[j] = sl[sp.lo:sp.hi]
			}
			u.Rule.Apply(w, g, slots, v.iters)
		}
	}
	return nil
}

func sameInts(a, b []int) bool {
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

// psServer is the handler type of the hand-written service description.
type psServer interface{ isPSServer() }

func (s *PSServer) isPSServer() {}

func psMethod(name string, h func(s *PSServer, key string, d *psDecoder) ([]byte, error)) grpc.MethodDesc {
	return taskMethod(psServiceName, name, func(s *PSServer, _ context.Context, key string, d *psDecoder) ([]byte, error) {
		s.bytesIn.Add(int64(len(key) + len(d.b)))
		out, err := h(s, key, d)
		s.bytesOut.Add(int64(len(out)))
		return out, err
	})
}

var psServiceDesc = grpc.ServiceDesc{
	ServiceName: psServiceName,
	HandlerType: (*psServer)(nil),
	Methods: []grpc.MethodDesc{
		psMethod("Create", (*PSServer).create),
		psMethod("Read", (*PSServer).read),
		psMethod("Gather", (*PSServer).gather),
		psMethod("Update", (*PSServer).update),
		psMethod("UpdateRead", (*PSServer).updateRead),
		psMethod("UpdateShm", (*PSServer).updateShm),
		psMethod("UpdateReadShm", (*PSServer).updateReadShm),
		psMethod("ReadShm", (*PSServer).readShm),
		psMethod("Do", func(s *PSServer, _ string, d *psDecoder) ([]byte, error) { return s.do(d) }),
		psMethod("AttachShm", func(s *PSServer, _ string, d *psDecoder) ([]byte, error) { return s.attachShm(d) }),
		psMethod("DetachShm", func(s *PSServer, _ string, d *psDecoder) ([]byte, error) { return s.detachShm(d) }),
		psMethod("ReadState", (*PSServer).readState),
		psMethod("SetState", (*PSServer).setState),
		psMethod("Forget", func(s *PSServer, _ string, d *psDecoder) ([]byte, error) { return s.forget(d) }),
		psMethod("List", func(s *PSServer, _ string, d *psDecoder) ([]byte, error) { return s.list() }),
		psMethod("Stats", func(s *PSServer, _ string, d *psDecoder) ([]byte, error) { return s.stats() }),
		psMethod("Ping", func(s *PSServer, _ string, d *psDecoder) ([]byte, error) { return nil, nil }),
	},
}
