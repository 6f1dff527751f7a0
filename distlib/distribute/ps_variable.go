package distribute

import (
	"context"
	"fmt"
	"sort"

	"godist/distlib/tensor"
	"godist/distlib/transport"
)

// ShardedVariable is a variable held by the parameter servers, split along its first axis
// into shards placed on (possibly) different ps tasks, like TensorFlow's ShardedVariable;
// a variable that is not partitioned has one shard. It behaves as one variable: reads
// concatenate the shards, updates are split among them, and EmbeddingLookup reads only the
// shards that hold the rows it needs.
//
// The methods on the variable itself go through the coordinator's connections; inside a
// scheduled function use the WorkerContext's methods, which go through that worker's
// connections and make the step's updates apply exactly once.
type ShardedVariable struct {
	s         *ParameterServerStrategy
	name      string
	shape     []int
	rowSize   int
	trainable bool
	shards    []shard
}

type shard struct {
	key          string
	task         int
	offset, rows int
}

// ShardInfo describes one shard of a ShardedVariable.
type ShardInfo struct {
	Key    string // the variable's key on its ps
	Task   int    // the ps task that holds it
	Offset int    // first row (along axis 0) of the full variable it holds
	Rows   int    // number of rows
}

// Name returns the variable's name.
func (v *ShardedVariable) Name() string { return v.name }

// Shape returns the full variable's shape.
func (v *ShardedVariable) Shape() []int { return append([]int(nil), v.shape...) }

// Trainable reports whether the variable is trained.
func (v *ShardedVariable) Trainable() bool { return v.trainable }

// NumShards returns the number of shards.
func (v *ShardedVariable) NumShards() int { return len(v.shards) }

// Shards describes the shards in order.
func (v *ShardedVariable) Shards() []ShardInfo {
	out := make([]ShardInfo, len(v.shards))
	for i, sh := range v.shards {
		out[i] = ShardInfo{Key: sh.key, Task: sh.task, Offset: sh.offset, Rows: sh.rows}
	}
	return out
}

// String describes the variable.
func (v *ShardedVariable) String() string {
	return fmt.Sprintf("ShardedVariable(name=%q, shape=%v, shards=%d)", v.name, v.shape, len(v.shards))
}

// access is how an operation reaches the ps tasks: whose connections, and which step
// (0: not deduplicated) with a counter of the step's updates.
type access struct {
	ctx     context.Context
	clients []*transport.PSClient
	step    uint64
	op      *uint32
}

func (s *ParameterServerStrategy) coordAccess() (access, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	return access{ctx: ctx, clients: s.clients}, cancel
}

func (a access) nextID() transport.UpdateID {
	if a.op == nil || a.step == 0 {
		return transport.UpdateID{}
	}
	id := transport.UpdateID{Step: a.step, Op: *a.op}
	*a.op++
	return id
}

func (v *ShardedVariable) fail(a access, task int, op string, err error) error {
	if a.step == 0 {
		err = v.s.psError(task, err)
	}
	return fmt.Errorf("distribute: %s variable %q: %w", op, v.name, err)
}

func (v *ShardedVariable) read(a access) (*tensor.Tensor, error) { return v.readInto(a, nil) }

// readInto is read writing the values into dst when it is not nil (a tensor of the
// variable's shape, returned), else into a fresh tensor.
func (v *ShardedVariable) readInto(a access, dst *tensor.Tensor) (*tensor.Tensor, error) {
	out, err := v.dstData("read", dst)
	if err != nil {
		return nil, err
	}
	var b psBatch
	b.add(v, nil, out)
	if err := b.do(a, "read"); err != nil {
		return nil, err
	}
	return v.result(dst, out)
}

// dstData returns the memory a read writes into: dst's (checked against the variable's
// shape) or, for a nil dst, fresh memory.
func (v *ShardedVariable) dstData(op string, dst *tensor.Tensor) ([]float32, error) {
	if dst == nil {
		return make([]float32, v.size()), nil
	}
	if !sameShape(dst.Shape(), v.shape) {
		return nil, fmt.Errorf("distribute: %s variable %q of shape %v into a destination of shape %v", op, v.name, v.shape, dst.Shape())
	}
	return dst.Data(), nil
}

// landed checks that a shard's answer got is the whole of part; when the transport
// answered in memory of its own (not part), it copies it there.
func (v *ShardedVariable) landed(sh shard, got, part []float32) error {
	if len(got) != len(part) {
		return fmt.Errorf("shard %q holds %d values, want %d", sh.key, len(got), len(part))
	}
	if len(part) > 0 && &got[0] != &part[0] {
		copy(part, got)
	}
	return nil
}

// result returns the values read: dst itself, or a new tensor on out.
func (v *ShardedVariable) result(dst *tensor.Tensor, out []float32) (*tensor.Tensor, error) {
	if dst != nil {
		return dst, nil
	}
	return tensor.New(v.shape, out)
}

// size returns the number of elements of the full variable.
func (v *ShardedVariable) size() int {
	if len(v.shape) == 0 {
		return 1
	}
	return v.rowSize * v.shape[0]
}

// shardPart returns the part of data (the full variable's elements) that sh holds.
func (v *ShardedVariable) shardPart(data []float32, sh shard) []float32 {
	if len(v.shape) == 0 {
		return data
	}
	return data[sh.offset*v.rowSize : (sh.offset+sh.rows)*v.rowSize]
}

func (v *ShardedVariable) update(a access, kind transport.UpdateKind, rule transport.Rule, value *tensor.Tensor) error {
	return v.updateID(a, a.nextID(), kind, rule, value)
}

// updateID is update with the update id taken beforehand (updates sent concurrently).
func (v *ShardedVariable) updateID(a access, id transport.UpdateID, kind transport.UpdateKind, rule transport.Rule, value *tensor.Tensor) error {
	if err := v.checkValue(kind, value); err != nil {
		return err
	}
	var b psBatch
	b.add(v, &transport.Update{ID: id, Kind: kind, Rule: rule, Value: value.Data()}, nil)
	return b.do(a, kind.String())
}

// psBatch is a step's pushes and reads grouped by the ps task that holds each shard, in
// the order the tasks are first met.
type psBatch []psTaskOps

// psTaskOps is what one ps task gets: its ops, and the shard each is about.
type psTaskOps struct {
	task   int
	ops    []*transport.PSOp
	shards []psShardOf // one per op
}

// psShardOf is the shard an op is about, and where its value read belongs (part: the
// shard's part of the variable; nil for a push alone).
type psShardOf struct {
	v    *ShardedVariable
	sh   shard
	part []float32
}

// add adds v's shards: each pushes its part of u's value when u is not nil, and reads
// its part of data when data is not nil.
func (b *psBatch) add(v *ShardedVariable, u *transport.Update, data []float32) {
	for _, sh := range v.shards {
		op := &transport.PSOp{Key: sh.key}
		if u != nil {
			su := *u
			su.Value = v.shardPart(u.Value, sh)
			op.Update = &su
		}
		r := psShardOf{v: v, sh: sh}
		if data != nil {
			r.part = v.shardPart(data, sh)
			op.Read, op.Dst = true, r.part
		}
		k := 0
		for k < len(*b) && (*b)[k].task != sh.task {
			k++
		}
		if k == len(*b) {
			*b = append(*b, psTaskOps{task: sh.task})
		}
		g := &(*b)[k]
		g.ops = append(g.ops, op)
		g.shards = append(g.shards, r)
	}
}

// results runs b and returns the values of read (datas[k] is where read[k]'s value goes:
// dst[k]'s memory, or fresh memory when dst is nil).
func (b psBatch) results(a access, op string, read []*ShardedVariable, dst []*tensor.Tensor, datas [][]float32) ([]*tensor.Tensor, error) {
	if err := b.do(a, op); err != nil {
		return nil, err
	}
	out := make([]*tensor.Tensor, len(read))
	for k, v := range read {
		var err error
		if out[k], err = v.result(dstAt(dst, k), datas[k]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// do sends each task's ops as one Do, the tasks concurrently, and puts the values read
// in their places. A failed Do names the variable of its first op.
func (b psBatch) do(a access, op string) error {
	return parallel(len(b), func(k int) error {
		g := b[k]
		if err := a.clients[g.task].Do(a.ctx, g.ops); err != nil {
			return g.shards[0].v.fail(a, g.task, op, err)
		}
		for i, o := range g.ops {
			if r := g.shards[i]; o.Read {
				if err := r.v.landed(r.sh, o.Value, r.part); err != nil {
					return r.v.fail(a, g.task, op, err)
				}
			}
		}
		return nil
	})
}

func (v *ShardedVariable) checkValue(kind transport.UpdateKind, value *tensor.Tensor) error {
	if value == nil {
		return fmt.Errorf("distribute: %s variable %q: nil value", kind, v.name)
	}
	if !sameShape(value.Shape(), v.shape) {
		return fmt.Errorf("distribute: %s variable %q of shape %v: value of shape %v", kind, v.name, v.shape, value.Shape())
	}
	return nil
}

// shardOf returns the index of the shard that holds row r.
func (v *ShardedVariable) shardOf(r int) int {
	return sort.Search(len(v.shards), func(i int) bool { return v.shards[i].offset+v.shards[i].rows > r })
}

func (v *ShardedVariable) lookup(a access, ids []int) (*tensor.Tensor, error) {
	if len(v.shape) == 0 {
		return nil, fmt.Errorf("distribute: embedding lookup in scalar variable %q", v.name)
	}
	// Group the ids by shard; each shard that holds one of them is read once.
	byShard := map[int][]int{} // shard -> positions in ids
	for i, id := range ids {
		if id < 0 || id >= v.shape[0] {
			return nil, fmt.Errorf("distribute: embedding lookup in %q: id %d outside [0, %d)", v.name, id, v.shape[0])
		}
		k := v.shardOf(id)
		byShard[k] = append(byShard[k], i)
	}
	out := make([]float32, len(ids)*v.rowSize)
	for k, pos := range byShard {
		sh := v.shards[k]
		local := make([]int, len(pos))
		for j, p := range pos {
			local[j] = ids[p] - sh.offset
		}
		rows, err := a.clients[sh.task].Gather(a.ctx, sh.key, local)
		if err != nil {
			return nil, v.fail(a, sh.task, "embedding lookup in", err)
		}
		for j, p := range pos {
			copy(out[p*v.rowSize:(p+1)*v.rowSize], rows[j*v.rowSize:(j+1)*v.rowSize])
		}
	}
	return tensor.New(append([]int{len(ids)}, v.shape[1:]...), out)
}

// scatter applies a row update (rows of the full variable, value [len(rows), ...]) to the
// shards that hold those rows only.
func (v *ShardedVariable) scatter(a access, kind transport.UpdateKind, rule transport.Rule, rows []int, value *tensor.Tensor) error {
	if len(v.shape) == 0 {
		return fmt.Errorf("distribute: row update of scalar variable %q", v.name)
	}
	if value == nil || value.Size() != len(rows)*v.rowSize {
		return fmt.Errorf("distribute: row update of %q: %d rows need %d values", v.name, len(rows), len(rows)*v.rowSize)
	}
	id := a.nextID()
	byShard := map[int][]int{}
	for i, r := range rows {
		if r < 0 || r >= v.shape[0] {
			return fmt.Errorf("distribute: row update of %q: row %d outside [0, %d)", v.name, r, v.shape[0])
		}
		k := v.shardOf(r)
		byShard[k] = append(byShard[k], i)
	}
	data := value.Data()
	for k := range v.shards {
		pos, ok := byShard[k]
		if !ok {
			continue
		}
		sh := v.shards[k]
		local := make([]int, len(pos))
		vals := make([]float32, 0, len(pos)*v.rowSize)
		for j, p := range pos {
			local[j] = rows[p] - sh.offset
			vals = append(vals, data[p*v.rowSize:(p+1)*v.rowSize]...)
		}
		if _, err := a.clients[sh.task].Update(a.ctx, sh.key, transport.Update{ID: id, Kind: kind, Rule: rule, Rows: local, Value: vals}); err != nil {
			return v.fail(a, sh.task, kind.String(), err)
		}
	}
	return nil
}

func (v *ShardedVariable) must(err error) {
	if err != nil {
		panic(err)
	}
}

// Value reads the whole variable (all shards, concatenated). It panics with an error
// naming the ps when one cannot be reached.
func (v *ShardedVariable) Value() *tensor.Tensor {
	a, cancel := v.s.coordAccess()
	defer cancel()
	t, err := v.read(a)
	v.must(err)
	return t
}

// AssignContext sets the variable to t (of its shape) through the coordinator's
// connections, within ctx and the strategy's timeout; the error names a ps that cannot be
// reached.
func (v *ShardedVariable) AssignContext(ctx context.Context, t *tensor.Tensor) error {
	if ctx == nil {
		ctx = context.Background()
	}
	a, cancel := v.s.psAccess(ctx)
	defer cancel()
	return v.update(a, transport.UpdateAssign, transport.Rule{}, t)
}

// AssignAdd adds t (of the variable's shape) to the variable.
func (v *ShardedVariable) AssignAdd(t *tensor.Tensor) {
	a, cancel := v.s.coordAccess()
	defer cancel()
	v.must(v.update(a, transport.UpdateAssignAdd, transport.Rule{}, t))
}

// AssignSub subtracts t from the variable.
func (v *ShardedVariable) AssignSub(t *tensor.Tensor) {
	a, cancel := v.s.coordAccess()
	defer cancel()
	v.must(v.update(a, transport.UpdateAssignAdd, transport.Rule{}, tensor.Neg(t)))
}

// EmbeddingLookup returns the rows ids of the variable, shape [len(ids), shape[1:]...],
// reading only the shards that hold them (tf.nn.embedding_lookup on a ShardedVariable).
func (v *ShardedVariable) EmbeddingLookup(ids []int) *tensor.Tensor {
	a, cancel := v.s.coordAccess()
	defer cancel()
	t, err := v.lookup(a, ids)
	v.must(err)
	return t
}

// ScatterAdd adds the rows of value ([len(rows), shape[1:]...]) to rows of the variable,
// updating only the shards that hold them.
func (v *ShardedVariable) ScatterAdd(rows []int, value *tensor.Tensor) {
	a, cancel := v.s.coordAccess()
	defer cancel()
	v.must(v.scatter(a, transport.UpdateAssignAdd, transport.Rule{}, rows, value))
}
