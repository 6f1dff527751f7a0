package distribute

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"unsafe"

	"godist/distlib/cluster"
	"godist/distlib/tensor"
	"godist/distlib/transport"
)

// Remote workers. TensorFlow ships a scheduled tf.function to the workers as a serialized
// graph. Go cannot serialize a closure, so godist ships a name instead: a function is
// registered under a name with RegisterFunction in the program's init (or before the
// workers serve), the same program runs as coordinator and as worker tasks (godist launch
// starts one binary for every task), and ScheduleFunction sends the name, the step id,
// the arguments and the catalog of the strategy's variables to a worker task, which
// looks the name up in its own registry. A function that is not compiled into the worker
// binary fails with an error naming it.

// RemoteFunc is a function that workers run by name (see RegisterFunction). It reaches
// the variables by name through w.Variable and returns one tensor (or nil).
type RemoteFunc func(w *WorkerContext, args []*tensor.Tensor) (*tensor.Tensor, error)

var registry = struct {
	sync.RWMutex
	fns map[string]RemoteFunc
}{fns: map[string]RemoteFunc{}}

// RegisterFunction registers fn under name so that ClusterCoordinator.ScheduleFunction can
// run it on any worker, in-process or a remote worker task built from the same program.
// Registering a name again replaces the function (a re-run notebook cell). It panics on
// an empty name or a nil function.
func RegisterFunction(name string, fn RemoteFunc) {
	if name == "" || fn == nil {
		panic(fmt.Errorf("distribute: RegisterFunction(%q): want a name and a non-nil function", name))
	}
	registry.Lock()
	registry.fns[name] = fn
	registry.Unlock()
}

// RegisteredFunctions returns the registered names, sorted.
func RegisteredFunctions() []string {
	registry.RLock()
	defer registry.RUnlock()
	out := make([]string, 0, len(registry.fns))
	for k := range registry.fns {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func lookupFunction(name string) (RemoteFunc, error) {
	registry.RLock()
	fn := registry.fns[name]
	registry.RUnlock()
	if fn == nil {
		return nil, fmt.Errorf("distribute: no function registered as %q in this program (register it with distribute.RegisterFunction in every task's binary; registered: %v)", name, RegisteredFunctions())
	}
	return fn, nil
}

// ScheduleFunctionContext queues the function registered as name with args, like
// ScheduleContext, and returns its RemoteValue at once; ctx bounds its run as it does
// ScheduleContext's. It runs on remote worker tasks (WithRemoteWorkers) as well as on
// in-process workers.
func (c *ClusterCoordinator) ScheduleFunctionContext(ctx context.Context, name string, args ...*tensor.Tensor) *RemoteValue {
	rv := &RemoteValue{done: make(chan struct{}), worker: -1}
	if ctx == nil {
		rv.finish(nil, errors.New("distribute: ScheduleFunctionContext: nil context (pass context.Background() or the cell's context)"), -1)
		return rv
	}
	if _, err := lookupFunction(name); err != nil && !c.s.remote {
		rv.finish(nil, err, -1)
		return rv
	}
	for i, a := range args {
		if a == nil {
			rv.finish(nil, fmt.Errorf("distribute: ScheduleFunction(%q): argument %d is nil", name, i), -1)
			return rv
		}
	}
	return c.enqueueContext(ctx, &closure{name: name, args: args}, rv)
}

// BytesSent returns the bytes the coordinator sent to remote workers (function names,
// arguments and variable catalogs); 0 with in-process workers.
func (c *ClusterCoordinator) BytesSent() int64 {
	return c.bytesSent.Load()
}

// connectRemote dials this worker's task and waits until it answers.
func (w *psWorker) connectRemote() bool {
	s := w.c.s
	wc, err := transport.DialWorker(s.workerAddrs[w.index], transport.WorkerClientOptions{Token: s.token,
		Caller: s.coordRank, Timeout: s.workerTO})
	if err != nil {
		logf("WARNING", "worker %d: %v", w.index, err)
		w.setErr(err)
		return false
	}
	ctx, cancel := context.WithTimeout(w.c.ctx, min(s.timeout, s.reachTO))
	err = wc.WaitReady(ctx)
	cancel()
	if err != nil {
		w.setErr(err)
	}
	if err == nil {
		w.mu.Lock()
		if !w.killed {
			w.remote = wc
			w.mu.Unlock()
			return true
		}
		w.mu.Unlock()
	}
	wc.Close()
	return false
}

// runRemote runs cl on the worker task.
func (w *psWorker) runRemote(cl *closure) (*tensor.Tensor, error) {
	w.mu.Lock()
	wc, killed := w.remote, w.killed
	w.mu.Unlock()
	if killed || wc == nil {
		return nil, fmt.Errorf("%w: worker %d", errWorkerLost, w.index)
	}
	payload := encodeCall(w.c.s.Variables(), cl.args)
	w.c.bytesSent.Add(int64(len(payload) + len(cl.name)))
	out, err := wc.Run(cl.ctx, cl.name, cl.step, payload)
	if err != nil {
		return nil, fmt.Errorf("distribute: worker %d: %w", w.index, err)
	}
	return decodeResult(out)
}

// WorkerTask is a worker task serving the functions the coordinator schedules.
type WorkerTask struct {
	run     sync.Mutex   // the task runs one function at a time; the next one waits decoded
	ahead   atomic.Int64 // functions that arrived while another ran (sent one ahead)
	srv     *transport.WorkerServer
	task    int
	clients []*transport.PSClient
}

// Addr is the address the task listens on.
func (t *WorkerTask) Addr() net.Addr { return t.srv.Addr() }

// Runs returns how many functions the task has run.
func (t *WorkerTask) Runs() int64 { return t.srv.Runs() }

// Close stops serving and closes the connections to the parameter servers.
func (t *WorkerTask) Close() error {
	t.srv.Close()
	for _, c := range t.clients {
		c.Close()
	}
	return nil
}

// ServeWorker serves this worker task (the task that r names, of type "worker") on its
// cluster address, or on lis when it is not nil: it runs the registered functions the
// coordinator schedules, reaching the parameter servers of r's cluster with its own
// connections. The task serves until Close.
func ServeWorker(r cluster.Resolver, lis net.Listener, opts ...PSOption) (*WorkerTask, error) {
	if r == nil {
		return nil, fmt.Errorf("%w: ServeWorker needs a cluster resolver", ErrCluster)
	}
	o := applyPSOptions(opts)
	if r.TaskType() != cluster.Worker {
		return nil, fmt.Errorf("%w: task %s %d is not a worker task", ErrCluster, r.TaskType(), r.TaskID())
	}
	if o.token == "" {
		return nil, fmt.Errorf("%w: %v; or use WithClusterToken", ErrCluster, o.tokenErr)
	}
	spec := r.ClusterSpec()
	me := spec.Rank(cluster.Task{Type: cluster.Worker, Index: r.TaskID()})
	t := &WorkerTask{task: r.TaskID()}
	for i, addr := range spec.JobTasks(cluster.PS) {
		c, err := transport.DialPS(addr, transport.PSClientOptions{Token: o.token, Caller: max(0, me), Timeout: o.timeout,
			NoSharedMemory: cluster.NoSharedMemoryFromEnv()})
		if err != nil {
			t.Close()
			return nil, fmt.Errorf("distribute: worker %d: ps %d: %w", r.TaskID(), i, err)
		}
		t.clients = append(t.clients, c)
	}
	if lis == nil {
		addr, err := spec.TaskAddress(cluster.Worker, r.TaskID())
		if err != nil {
			t.Close()
			return nil, fmt.Errorf("%w: %v", ErrCluster, err)
		}
		_, port, err := net.SplitHostPort(addr)
		if err != nil {
			t.Close()
			return nil, fmt.Errorf("%w: worker %d address %q: %v", ErrCluster, r.TaskID(), addr, err)
		}
		if lis, err = net.Listen("tcp", ":"+port); err != nil {
			t.Close()
			return nil, fmt.Errorf("distribute: worker %d: listen on port %s: %w", r.TaskID(), port, err)
		}
	}
	srv, err := transport.NewWorkerServer(lis, t.handle, transport.WorkerServerOptions{Token: o.token, Task: r.TaskID()})
	if err != nil {
		lis.Close()
		t.Close()
		return nil, fmt.Errorf("distribute: worker %d: %w", r.TaskID(), err)
	}
	t.srv = srv
	return t, nil
}

// handle runs one scheduled function in this worker task.
func (t *WorkerTask) handle(ctx context.Context, name string, step uint64, payload []byte) (out []byte, err error) {
	fn, err := lookupFunction(name)
	if err != nil {
		return nil, err
	}
	vars, args, err := decodeCall(payload)
	if err != nil {
		return nil, fmt.Errorf("distribute: worker %d: function %q: %w", t.task, name, err)
	}
	for _, v := range vars {
		for _, sh := range v.shards {
			if sh.task < 0 || sh.task >= len(t.clients) {
				return nil, fmt.Errorf("distribute: worker %d: variable %q lives on ps %d, the cluster has %d ps tasks", t.task, v.name, sh.task, len(t.clients))
			}
		}
	}
	// The coordinator sends the next function while this task runs one (ahead by one):
	// it waits here, received and decoded, and starts as soon as the current one ends.
	if !t.run.TryLock() {
		t.ahead.Add(1)
		t.run.Lock()
	}
	release := sync.OnceFunc(t.run.Unlock) // WorkerContext.Release, or the return
	defer release()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("distribute: worker %d: function %q: %w", t.task, name, err)
	}
	defer func() {
		if p := recover(); p != nil {
			out, err = nil, fmt.Errorf("distribute: function %q panicked on worker %d: %w", name, t.task, panicError(p))
		}
	}()
	var op uint32
	wc := &WorkerContext{ctx: ctx, index: t.task, step: step, release: release,
		a: access{ctx: ctx, clients: t.clients, step: step, op: &op},
		vars: func(n string) *ShardedVariable {
			for _, v := range vars {
				if v.name == n {
					return v
				}
			}
			return nil
		}}
	val, err := fn(wc, args)
	if err != nil {
		// A ps that did not answer travels as the worker's unavailability (the transport's
		// rule): the coordinator checks the ps and reports it, or runs the step again.
		return nil, err
	}
	return encodeResult(val), nil
}

// The call payload: the variable catalog, then the arguments; little-endian.
type enc struct{ b []byte }

func (e *enc) u32(v uint32) { e.b = binary.LittleEndian.AppendUint32(e.b, v) }
func (e *enc) str(s string) { e.u32(uint32(len(s))); e.b = append(e.b, s...) }
func (e *enc) ints(v []int) {
	e.u32(uint32(len(v)))
	for _, x := range v {
		e.u32(uint32(int32(x)))
	}
}
func (e *enc) tensor(t *tensor.Tensor) {
	e.ints(t.Shape())
	d := t.Data()
	e.u32(uint32(len(d)))
	if nativeLittleEndian && len(d) > 0 {
		// The wire format is the memory layout: one copy, no per-element encoding.
		e.b = append(e.b, unsafe.Slice((*byte)(unsafe.Pointer(&d[0])), 4*len(d))...)
		return
	}
	for _, x := range d {
		e.u32(math.Float32bits(x))
	}
}

// nativeLittleEndian reports whether float32 values sit in memory as the call payload
// writes them (little-endian IEEE 754).
var nativeLittleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

type dec struct {
	b   []byte
	err error
}

func (d *dec) u32() uint32 {
	if d.err != nil || len(d.b) < 4 {
		if d.err == nil {
			d.err = errors.New("truncated payload")
		}
		return 0
	}
	v := binary.LittleEndian.Uint32(d.b)
	d.b = d.b[4:]
	return v
}

func (d *dec) n(size int) int {
	n := int(d.u32())
	if d.err == nil && n*size > len(d.b) {
		d.err = fmt.Errorf("payload claims %d elements, has room for %d", n, len(d.b)/size)
		return 0
	}
	return n
}

func (d *dec) str() string {
	n := d.n(1)
	if d.err != nil {
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *dec) ints() []int {
	v := make([]int, d.n(4))
	for i := range v {
		v[i] = int(int32(d.u32()))
	}
	return v
}

func (d *dec) tensor() *tensor.Tensor {
	shape := d.ints()
	data := make([]float32, d.n(4))
	if nativeLittleEndian && d.err == nil && len(data) > 0 {
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&data[0])), 4*len(data)), d.b)
		d.b = d.b[4*len(data):]
	} else {
		for i := range data {
			data[i] = math.Float32frombits(d.u32())
		}
	}
	if d.err != nil {
		return nil
	}
	t, err := tensor.New(shape, data)
	if err != nil {
		d.err = err
	}
	return t
}

func encodeCall(vars []*ShardedVariable, args []*tensor.Tensor) []byte {
	var e enc
	e.u32(uint32(len(vars)))
	for _, v := range vars {
		e.str(v.name)
		e.ints(v.shape)
		tr := uint32(0)
		if v.trainable {
			tr = 1
		}
		e.u32(tr)
		e.u32(uint32(len(v.shards)))
		for _, sh := range v.shards {
			e.str(sh.key)
			e.u32(uint32(sh.task))
			e.u32(uint32(sh.offset))
			e.u32(uint32(sh.rows))
		}
	}
	e.u32(uint32(len(args)))
	for _, a := range args {
		e.tensor(a)
	}
	return e.b
}

func decodeCall(b []byte) ([]*ShardedVariable, []*tensor.Tensor, error) {
	d := &dec{b: b}
	vars := make([]*ShardedVariable, d.n(8))
	for i := range vars {
		v := &ShardedVariable{name: d.str(), shape: d.ints(), rowSize: 1}
		v.trainable = d.u32() == 1
		v.shards = make([]shard, d.n(16))
		for j := range v.shards {
			v.shards[j] = shard{key: d.str(), task: int(d.u32()), offset: int(d.u32()), rows: int(d.u32())}
		}
		for _, x := range v.shape[min(1, len(v.shape)):] {
			v.rowSize *= x
		}
		vars[i] = v
	}
	args := make([]*tensor.Tensor, d.n(8))
	for i := range args {
		args[i] = d.tensor()
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%d trailing bytes in payload", len(d.b))
	}
	if d.err != nil {
		return nil, nil, d.err
	}
	return vars, args, nil
}

func encodeResult(t *tensor.Tensor) []byte {
	var e enc
	if t == nil {
		e.u32(0)
		return e.b
	}
	e.u32(1)
	e.tensor(t)
	return e.b
}

func decodeResult(b []byte) (*tensor.Tensor, error) {
	d := &dec{b: b}
	var t *tensor.Tensor
	if d.u32() == 1 {
		t = d.tensor()
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%d trailing bytes", len(d.b))
	}
	if d.err != nil {
		return nil, fmt.Errorf("distribute: result from a worker: %w", d.err)
	}
	return t, nil
}
