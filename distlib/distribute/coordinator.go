package distribute

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"godist/distlib/data"
	"godist/distlib/tensor"
	"godist/distlib/transport"
)

// ErrClosureCancelled is wrapped by the error of a scheduled function that did not run
// because an earlier one failed, a ps failed, or the coordinator was closed.
var ErrClosureCancelled = errors.New("distribute: scheduled function cancelled")

// ErrCoordinatorClosed is returned by Schedule and Join after Close.
var ErrCoordinatorClosed = errors.New("distribute: cluster coordinator closed")

// WorkerFunc is a function the coordinator schedules on a worker, like the tf.function
// passed to ClusterCoordinator.schedule. It reaches the variables and the per-worker
// datasets through w.
type WorkerFunc func(w *WorkerContext) (*tensor.Tensor, error)

// ClusterCoordinator schedules functions on the workers of a ParameterServerStrategy,
// like tf.distribute.experimental.coordinator.ClusterCoordinator: Schedule returns at once
// with a RemoteValue; the function runs on the next free worker. A worker that fails (its
// connections break, or a call does not finish within the strategy's timeout) has its
// function run again on another worker, and rejoins when it answers again; every
// scheduled function carries a step id, so the updates of a function run twice are
// applied once. A parameter server that fails stops the coordinator with a
// *PSFailureError naming it.
type ClusterCoordinator struct {
	s       *ParameterServerStrategy
	workers []*psWorker
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	mu         sync.Mutex
	cond       *sync.Cond
	queue      []*closure
	unfinished map[uint64]struct{}
	pending    int   // scheduled and not finished
	firstErr   error // first error since the last Join
	fatal      error // a ps failed
	closed     bool
	finished   int
	nextStep   uint64

	up        int       // workers connected now
	downSince time.Time // when the last connected worker went down (or the start)

	retries   atomic.Int64
	bytesSent atomic.Int64
}

type closure struct {
	fn   WorkerFunc       // in-process workers
	name string           // remote workers: the registered function
	args []*tensor.Tensor // and its arguments
	step uint64
	rv   *RemoteValue
	at   time.Time // when it was first queued
}

// NewClusterCoordinator starts the coordinator of s, with one executor per worker task,
// each with its own connections to the parameter servers.
func NewClusterCoordinator(s *ParameterServerStrategy) *ClusterCoordinator {
	if s == nil {
		panic(fmt.Errorf("%w: NewClusterCoordinator needs a ParameterServerStrategy", ErrCluster))
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &ClusterCoordinator{s: s, ctx: ctx, cancel: cancel, unfinished: map[uint64]struct{}{},
		// Step ids are unique across coordinator restarts: a restarted coordinator must not
		// reuse the ids the parameter servers remember.
		nextStep: uint64(time.Now().UnixNano()), downSince: time.Now()}
	c.cond = sync.NewCond(&c.mu)
	for i := 0; i < s.numWorkers; i++ {
		w := &psWorker{c: c, index: i, restart: make(chan struct{}, 1)}
		c.workers = append(c.workers, w)
		c.wg.Add(1)
		go w.loop()
	}
	c.wg.Add(1)
	go c.watch()
	return c
}

// Strategy returns the coordinator's strategy.
func (c *ClusterCoordinator) Strategy() *ParameterServerStrategy { return c.s }

// Schedule queues fn to run on a worker and returns its RemoteValue at once. After a
// parameter server failed, or after Close, the RemoteValue holds that error.
func (c *ClusterCoordinator) Schedule(fn WorkerFunc) *RemoteValue {
	rv := &RemoteValue{done: make(chan struct{}), worker: -1}
	if fn == nil {
		rv.finish(nil, errors.New("distribute: Schedule: nil function"), -1)
		return rv
	}
	if c.s.remote {
		rv.finish(nil, errors.New("distribute: Schedule: a Go closure cannot run on a remote worker process: register it with RegisterFunction and use ScheduleFunction"), -1)
		return rv
	}
	return c.enqueue(&closure{fn: fn}, rv)
}

// enqueue gives cl a step id and queues it.
func (c *ClusterCoordinator) enqueue(cl *closure, rv *RemoteValue) *RemoteValue {
	cl.rv = rv
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closed:
		rv.finish(nil, ErrCoordinatorClosed, -1)
		return rv
	case c.fatal != nil:
		rv.finish(nil, c.fatal, -1)
		return rv
	}
	c.nextStep++
	cl.step = c.nextStep
	cl.at = time.Now()
	c.queue = append(c.queue, cl)
	c.unfinished[cl.step] = struct{}{}
	c.pending++
	c.cond.Broadcast()
	return rv
}

// Join waits until every scheduled function has finished and returns the first error
// since the last Join (then forgets it), like ClusterCoordinator.join. A failed parameter
// server makes Join return its *PSFailureError at once, and every later Join too.
func (c *ClusterCoordinator) Join() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.pending > 0 && c.fatal == nil && !c.closed {
		c.cond.Wait()
	}
	if c.fatal != nil {
		return c.fatal
	}
	err := c.firstErr
	c.firstErr = nil
	if err == nil && c.closed && c.pending > 0 {
		return ErrCoordinatorClosed
	}
	return err
}

// Done reports whether every scheduled function has finished (ClusterCoordinator.done).
func (c *ClusterCoordinator) Done() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pending == 0 || c.fatal != nil
}

// Retries returns how many times a function was run again after its worker failed.
func (c *ClusterCoordinator) Retries() int64 { return c.retries.Load() }

// Close cancels the functions not yet run, stops the workers and waits for them.
func (c *ClusterCoordinator) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.cancelQueueLocked(fmt.Errorf("%w: %w", ErrClosureCancelled, ErrCoordinatorClosed))
	c.cond.Broadcast()
	c.mu.Unlock()
	c.cancel()
	for _, w := range c.workers {
		w.kill() // wakes a worker waiting to be restarted
	}
	c.wg.Wait()
	for _, w := range c.workers {
		w.closeClients()
	}
	return nil
}

// cancelQueueLocked fails every queued closure with err.
func (c *ClusterCoordinator) cancelQueueLocked(err error) {
	for _, cl := range c.queue {
		cl.rv.finish(nil, err, -1)
		delete(c.unfinished, cl.step)
		c.pending--
	}
	c.queue = nil
}

// take returns the next closure, or nil when the coordinator stops or stop is set (the
// worker failed).
func (c *ClusterCoordinator) take(stop *atomic.Bool) *closure {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.queue) == 0 && !c.closed && c.fatal == nil && !stop.Load() {
		c.cond.Wait()
	}
	if c.closed || c.fatal != nil || stop.Load() {
		return nil
	}
	cl := c.queue[0]
	c.queue = c.queue[1:]
	return cl
}

// finish records the outcome of cl run on worker w and reports whether the worker failed
// (the closure is then queued again).
func (c *ClusterCoordinator) finish(w *psWorker, cl *closure, val *tensor.Tensor, err error) (workerFailed bool) {
	if err != nil && isWorkerFailure(err) && c.ctx.Err() == nil {
		// A ps that does not answer the coordinator either is fatal; otherwise the worker
		// is lost and the function runs again elsewhere.
		if perr := c.s.checkPS(); perr != nil {
			c.mu.Lock()
			if c.fatal == nil {
				c.fatal = perr
				logf("ERROR", "%v", perr)
			}
			cl.rv.finish(nil, c.fatal, w.index)
			delete(c.unfinished, cl.step)
			c.pending--
			c.cancelQueueLocked(fmt.Errorf("%w: %w", ErrClosureCancelled, c.fatal))
			c.cond.Broadcast()
			c.mu.Unlock()
			return false
		}
		c.retries.Add(1)
		logf("WARNING", "worker %d failed (%v); its step %d runs again on another worker", w.index, err, cl.step)
		c.mu.Lock()
		c.queue = append([]*closure{cl}, c.queue...)
		c.cond.Broadcast()
		c.mu.Unlock()
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil && c.ctx.Err() != nil {
		err = fmt.Errorf("%w: %w", ErrClosureCancelled, ErrCoordinatorClosed)
	}
	cl.rv.finish(val, err, w.index)
	delete(c.unfinished, cl.step)
	c.pending--
	if err != nil && c.firstErr == nil {
		c.firstErr = err
		// TensorFlow cancels what is still queued after a function fails.
		c.cancelQueueLocked(fmt.Errorf("%w: an earlier function failed: %w", ErrClosureCancelled, err))
	}
	c.finished++
	if c.finished%256 == 0 {
		c.forgetLocked()
	}
	c.cond.Broadcast()
	return false
}

// forgetLocked tells the parameter servers to drop the update records of steps that are
// finished and will never run again.
func (c *ClusterCoordinator) forgetLocked() {
	below := c.nextStep + 1
	for s := range c.unfinished {
		below = min(below, s)
	}
	for i, cl := range c.s.clients {
		ctx, cancel := context.WithTimeout(c.ctx, c.s.timeout)
		if err := cl.Forget(ctx, below); err != nil {
			logf("WARNING", "ps %d: forget steps below %d: %v", i, below, err)
		}
		cancel()
	}
}

// isWorkerFailure reports whether err comes from a worker's connection rather than from
// the function itself.
func isWorkerFailure(err error) bool {
	return errors.Is(err, transport.ErrPSUnavailable) || errors.Is(err, transport.ErrWorkerUnavailable) ||
		errors.Is(err, errWorkerLost)
}

var errWorkerLost = errors.New("distribute: worker lost")

// RemoteValue is the result of a scheduled function (tf's RemoteValue): Fetch waits for it.
type RemoteValue struct {
	done   chan struct{}
	once   sync.Once
	val    *tensor.Tensor
	err    error
	worker int
}

func (r *RemoteValue) finish(val *tensor.Tensor, err error, worker int) {
	r.once.Do(func() {
		r.val, r.err, r.worker = val, err, worker
		close(r.done)
	})
}

// Fetch waits for the function and returns its result or error.
func (r *RemoteValue) Fetch() (*tensor.Tensor, error) {
	<-r.done
	return r.val, r.err
}

// FetchContext is Fetch bounded by ctx.
func (r *RemoteValue) FetchContext(ctx context.Context) (*tensor.Tensor, error) {
	select {
	case <-r.done:
		return r.val, r.err
	case <-ctx.Done():
		return nil, fmt.Errorf("distribute: fetch: %w", ctx.Err())
	}
}

// Done reports whether the function has finished.
func (r *RemoteValue) Done() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// Worker returns the index of the worker that ran the function (-1 if none did).
func (r *RemoteValue) Worker() int {
	<-r.done
	return r.worker
}

// psWorker runs scheduled functions for one worker task.
type psWorker struct {
	c     *ClusterCoordinator
	index int

	mu      sync.Mutex
	clients []*transport.PSClient
	remote  *transport.WorkerClient // the worker task's function service (remote workers)
	lastErr error                   // the last connection error
	killed  bool
	restart chan struct{}
	ran     atomic.Int64
}

// loop runs the worker's scheduled functions. A remote worker task gets one function
// ahead of the one it runs (two calls in flight; the task runs them one at a time): the
// next function's arguments travel while the current one computes, so the task does not
// idle between functions waiting for the coordinator. In-process workers run one at a
// time (nothing to transfer).
func (w *psWorker) loop() {
	defer w.c.wg.Done()
	slots := 1
	if w.c.s.remote {
		slots = 2
	}
	for {
		if !w.connect() {
			return
		}
		w.c.setUp(+1)
		var failed atomic.Bool
		var g sync.WaitGroup
		for range slots {
			g.Add(1)
			go func() {
				defer g.Done()
				for {
					cl := w.c.take(&failed)
					if cl == nil {
						return
					}
					val, err := w.run(cl)
					if w.c.finish(w, cl, val, err) {
						failed.Store(true)
						w.c.mu.Lock()
						w.c.cond.Broadcast() // the other slot stops taking work
						w.c.mu.Unlock()
						return
					}
					w.ran.Add(1)
				}
			}()
		}
		g.Wait()
		w.c.setUp(-1)
		if !failed.Load() {
			return // the coordinator stopped
		}
		w.closeClients() // reconnect (rejoin) before taking more work
	}
}

// setUp counts a worker that connected (+1) or went down (-1).
func (c *ClusterCoordinator) setUp(d int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.up += d
	if c.up == 0 {
		c.downSince = time.Now()
	}
}

// watch fails the queued functions when no worker has been reachable for the strategy's
// worker timeout while they waited, so that Join, Fetch and Fit never wait forever for
// worker tasks that were never started or are all gone.
func (c *ClusterCoordinator) watch() {
	defer c.wg.Done()
	tick := min(max(c.s.reachTO/10, 5*time.Millisecond), 250*time.Millisecond)
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
		c.checkReachable()
	}
}

// checkReachable fails the queue with a *WorkerUnreachableError (or the *PSFailureError of
// a ps that does not answer) when no worker has answered for the worker timeout while
// functions waited.
func (c *ClusterCoordinator) checkReachable() {
	c.mu.Lock()
	if c.up > 0 || len(c.queue) == 0 || c.closed || c.fatal != nil {
		c.mu.Unlock()
		return
	}
	since := c.downSince
	for _, cl := range c.queue {
		if cl.at.After(since) {
			since = cl.at
		}
	}
	waited := time.Since(since)
	c.mu.Unlock()
	if waited < c.s.reachTO {
		return
	}
	perr := c.s.checkPS() // executors in this process fail to connect only when a ps is down
	err := c.unreachableError(waited)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.up > 0 || len(c.queue) == 0 || c.closed || c.fatal != nil {
		return
	}
	if perr != nil {
		c.fatal = perr
		logf("ERROR", "%v", perr)
		c.cancelQueueLocked(fmt.Errorf("%w: %w", ErrClosureCancelled, c.fatal))
	} else {
		logf("ERROR", "%v", err)
		if c.firstErr == nil {
			c.firstErr = err
		}
		c.cancelQueueLocked(err)
	}
	c.downSince = time.Now()
	c.cond.Broadcast()
}

// unreachableError describes every worker not connected now.
func (c *ClusterCoordinator) unreachableError(waited time.Duration) *WorkerUnreachableError {
	e := &WorkerUnreachableError{Waited: waited.Round(time.Millisecond), Timeout: c.s.reachTO, Remote: c.s.remote}
	for _, w := range c.workers {
		w.mu.Lock()
		last := w.lastErr
		w.mu.Unlock()
		e.Workers = append(e.Workers, w.index)
		e.Addrs = append(e.Addrs, c.s.workerAddrs[w.index])
		e.Errs = append(e.Errs, last)
	}
	return e
}

// ErrWorkerUnreachable is wrapped by the error of scheduled functions that waited the
// worker timeout (WithWorkerTimeout) without any worker task answering (a
// *WorkerUnreachableError).
var ErrWorkerUnreachable = errors.New("distribute: no worker reachable")

// WorkerUnreachableError names the worker tasks that could not be reached within the
// worker timeout while scheduled functions waited for them.
type WorkerUnreachableError struct {
	Workers []int         // worker task indices
	Addrs   []string      // their cluster addresses
	Errs    []error       // the last connection error of each (nil: none yet)
	Waited  time.Duration // how long the functions waited
	Timeout time.Duration // the worker timeout
	Remote  bool          // worker tasks are processes (WithRemoteWorkers)
}

func (e *WorkerUnreachableError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "distribute: no worker task answered within the worker timeout %v (waited %v): ", e.Timeout, e.Waited)
	for i, w := range e.Workers {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "worker %d at %s", w, e.Addrs[i])
		if e.Errs[i] != nil {
			fmt.Fprintf(&b, " (%v)", e.Errs[i])
		}
	}
	if e.Remote {
		b.WriteString("; start the worker tasks (godist launch --workers N --ps M starts every task, or run distribute.ServeWorker in each worker task's program), or give them longer with distribute.WithWorkerTimeout")
	} else {
		b.WriteString("; the executors of this process could not reach the parameter servers: check the ps tasks and the cluster token, or give them longer with distribute.WithWorkerTimeout")
	}
	return b.String()
}

// Unwrap returns ErrWorkerUnreachable.
func (e *WorkerUnreachableError) Unwrap() error { return ErrWorkerUnreachable }

// connect (re)opens this worker's connections and waits until every ps answers through
// them; while the worker is killed it waits for restart. It returns false when the
// coordinator stops.
func (w *psWorker) connect() bool {
	s := w.c.s
	delay := 20 * time.Millisecond
	for {
		if w.c.ctx.Err() != nil {
			return false
		}
		w.mu.Lock()
		killed := w.killed
		w.mu.Unlock()
		if killed {
			select {
			case <-w.restart:
				continue
			case <-w.c.ctx.Done():
				return false
			}
		}
		if s.remote {
			if w.connectRemote() {
				return true
			}
			select {
			case <-time.After(delay):
				delay = min(2*delay, time.Second)
				continue
			case <-w.c.ctx.Done():
				return false
			}
		}
		clients := make([]*transport.PSClient, len(s.psAddrs))
		err := error(nil)
		for i, addr := range s.psAddrs {
			if clients[i], err = transport.DialPS(addr, transport.PSClientOptions{Token: s.token,
				Caller: max(0, s.callerBase) + w.index, Timeout: s.timeout}); err != nil {
				break
			}
			ctx, cancel := context.WithTimeout(w.c.ctx, s.timeout)
			err = clients[i].WaitReady(ctx)
			cancel()
			if err != nil {
				break
			}
		}
		if err == nil {
			w.mu.Lock()
			if !w.killed {
				w.clients = clients
				w.mu.Unlock()
				return true
			}
			w.mu.Unlock()
		} else {
			w.setErr(err)
		}
		for _, cl := range clients {
			if cl != nil {
				cl.Close()
			}
		}
		select {
		case <-time.After(delay):
			delay = min(2*delay, time.Second)
		case <-w.c.ctx.Done():
			return false
		}
	}
}

func (w *psWorker) setErr(err error) {
	w.mu.Lock()
	w.lastErr = err
	w.mu.Unlock()
}

func (w *psWorker) closeClients() {
	w.mu.Lock()
	clients := w.clients
	w.clients = nil
	if w.remote != nil {
		w.remote.Close()
		w.remote = nil
	}
	w.mu.Unlock()
	for _, cl := range clients {
		cl.Close()
	}
}

// kill tears the worker's connections down (a worker task lost); it stays down until
// restartWorker.
func (w *psWorker) kill() {
	w.mu.Lock()
	w.killed = true
	clients := w.clients
	if w.remote != nil {
		w.remote.Close()
	}
	w.mu.Unlock()
	for _, cl := range clients {
		cl.Close()
	}
}

func (w *psWorker) revive() {
	w.mu.Lock()
	w.killed = false
	w.mu.Unlock()
	select {
	case w.restart <- struct{}{}:
	default:
	}
}

func (w *psWorker) run(cl *closure) (val *tensor.Tensor, err error) {
	if w.c.s.remote {
		return w.runRemote(cl)
	}
	w.mu.Lock()
	clients, killed := w.clients, w.killed
	w.mu.Unlock()
	if killed || clients == nil {
		return nil, fmt.Errorf("%w: worker %d", errWorkerLost, w.index)
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("distribute: scheduled function panicked on worker %d: %w", w.index, panicError(p))
		}
	}()
	var op uint32
	wc := &WorkerContext{ctx: w.c.ctx, index: w.index, step: cl.step, a: access{ctx: w.c.ctx, clients: clients, step: cl.step, op: &op}, vars: w.c.s.varByName}
	if cl.fn == nil {
		fn, err := lookupFunction(cl.name)
		if err != nil {
			return nil, err
		}
		return fn(wc, cl.args)
	}
	return cl.fn(wc)
}

// WorkerContext is what a scheduled function sees of the worker that runs it: the
// variables through this worker's connections (updates deduplicated by the step id), and
// this worker's per-worker datasets.
type WorkerContext struct {
	ctx     context.Context
	index   int
	step    uint64
	a       access
	vars    func(name string) *ShardedVariable
	release func() // lets the worker task start its next function (nil: nothing to do)
}

// Release tells the worker that this function has done its compute and now only waits
// for its pushes (PendingPush.Wait): a worker task may start its next function, sent
// one ahead, meanwhile. The function still finishes, and its RemoteValue is ready, only
// when it returns; so its pushes still count exactly once. Calling it again does nothing.
func (w *WorkerContext) Release() {
	if w.release != nil {
		w.release()
	}
}

// Worker returns the index of the worker running the function.
func (w *WorkerContext) Worker() int { return w.index }

// Variable returns the strategy's variable called name (how a registered function, which
// may run in another process, reaches the variables), or an error naming it.
func (w *WorkerContext) Variable(name string) (*ShardedVariable, error) {
	if w.vars != nil {
		if v := w.vars(name); v != nil {
			return v, nil
		}
	}
	return nil, fmt.Errorf("distribute: worker %d: no variable %q (create it with strategy.NewVariable before scheduling)", w.index, name)
}

// StepID returns the scheduled function's step id (the same when it runs again after a
// worker failure).
func (w *WorkerContext) StepID() uint64 { return w.step }

// Context returns a context that ends when the coordinator closes.
func (w *WorkerContext) Context() context.Context { return w.ctx }

// Read returns the current value of v.
func (w *WorkerContext) Read(v *ShardedVariable) (*tensor.Tensor, error) { return v.read(w.a) }

// AssignAdd adds delta to v, once per step even if the step runs again.
func (w *WorkerContext) AssignAdd(v *ShardedVariable, delta *tensor.Tensor) error {
	return v.update(w.a, transport.UpdateAssignAdd, transport.Rule{}, delta)
}

// Assign sets v to value.
func (w *WorkerContext) Assign(v *ShardedVariable, value *tensor.Tensor) error {
	return v.update(w.a, transport.UpdateAssign, transport.Rule{}, value)
}

// EmbeddingLookup returns rows ids of v, reading only the shards that hold them.
func (w *WorkerContext) EmbeddingLookup(v *ShardedVariable, ids []int) (*tensor.Tensor, error) {
	return v.lookup(w.a, ids)
}

// ScatterAdd adds value's rows to rows of v, touching only the shards that hold them.
func (w *WorkerContext) ScatterAdd(v *ShardedVariable, rows []int, value *tensor.Tensor) error {
	return v.scatter(w.a, transport.UpdateAssignAdd, transport.Rule{}, rows, value)
}

// ReadAll reads vars (for a forward pass). The reads go out concurrently: one round trip
// to the parameter servers for the whole list, not one per variable.
func (w *WorkerContext) ReadAll(vars []*ShardedVariable) ([]*tensor.Tensor, error) {
	out := make([]*tensor.Tensor, len(vars))
	err := parallel(len(vars), func(i int) error {
		t, err := vars[i].read(w.a)
		out[i] = t
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ApplyGradients pushes grads[i] for vars[i]; opt's rule updates the variables on the
// parameter servers (a nil gradient is skipped). The pushes go out concurrently; each
// keeps the update id it would have in order, so a rerun step is deduplicated the same.
func (w *WorkerContext) ApplyGradients(opt *PSOptimizer, grads []*tensor.Tensor, vars []*ShardedVariable) error {
	if opt == nil {
		return errors.New("distribute: ApplyGradients: nil optimizer (use distribute.NewPSSGD or NewPSAdam)")
	}
	if len(grads) != len(vars) {
		return fmt.Errorf("distribute: ApplyGradients: %d gradients for %d variables", len(grads), len(vars))
	}
	ids := make([]transport.UpdateID, len(vars))
	for i := range vars {
		ids[i] = w.a.nextID() // a nil gradient keeps its id: the numbering of a rerun is identical
	}
	return parallel(len(vars), func(i int) error {
		if grads[i] == nil {
			return nil
		}
		return vars[i].updateID(w.a, ids[i], opt.kind, opt.rule, grads[i])
	})
}

// ApplyGradientsAndRead is ApplyGradients followed by ReadAll(read), with one round trip
// to the parameter servers where the lists overlap: a variable in both answers its push
// with its value right after its own update (and every update applied before it); the
// others are pushed or read concurrently. It is how a training step pushes its gradients
// and reads the variables for its next batch; the update ids are ApplyGradients's.
func (w *WorkerContext) ApplyGradientsAndRead(opt *PSOptimizer, grads []*tensor.Tensor, vars, read []*ShardedVariable) ([]*tensor.Tensor, error) {
	call, err := w.applyAndRead("ApplyGradientsAndRead", opt, grads, vars, read)
	if err != nil {
		return nil, err
	}
	return call()
}

// PendingPush is a push of gradients in flight (ApplyGradientsAndReadAsync).
type PendingPush struct {
	done chan struct{}
	vals []*tensor.Tensor
	err  error
}

// Wait waits until every push and read of p has answered and returns the values read
// (ApplyGradientsAndRead's result). It may be called more than once.
func (p *PendingPush) Wait() ([]*tensor.Tensor, error) {
	<-p.done
	return p.vals, p.err
}

// ApplyGradientsAndReadAsync is ApplyGradientsAndRead in the background: it takes the
// update ids now (in call order, so a rerun of the scheduled function numbers its pushes
// the same and the parameter servers deduplicate them), sends the pushes and reads from
// another goroutine and returns at once. The caller computes its next step meanwhile
// and must Wait for p before the scheduled function returns (a function's pushes are
// part of its result: exactly-once holds only for pushes that finished). Keep at most
// one in flight per scheduled function to bound staleness to one step.
func (w *WorkerContext) ApplyGradientsAndReadAsync(opt *PSOptimizer, grads []*tensor.Tensor, vars, read []*ShardedVariable) *PendingPush {
	p := &PendingPush{done: make(chan struct{})}
	call, err := w.applyAndRead("ApplyGradientsAndReadAsync", opt, grads, vars, read)
	if err != nil {
		p.err = err
		close(p.done)
		return p
	}
	go func() {
		defer close(p.done)
		p.vals, p.err = call()
	}()
	// With one P (a worker task at GOMAXPROCS=1) let the push reach the socket before the
	// caller's compute takes the processor again.
	runtime.Gosched()
	return p
}

// applyAndRead checks the arguments of ApplyGradientsAndRead, takes the update ids and
// returns the call that sends the pushes and reads.
func (w *WorkerContext) applyAndRead(op string, opt *PSOptimizer, grads []*tensor.Tensor, vars, read []*ShardedVariable) (func() ([]*tensor.Tensor, error), error) {
	if opt == nil {
		return nil, fmt.Errorf("distribute: %s: nil optimizer (use distribute.NewPSSGD or NewPSAdam)", op)
	}
	if len(grads) != len(vars) {
		return nil, fmt.Errorf("distribute: %s: %d gradients for %d variables", op, len(grads), len(vars))
	}
	ids := make([]transport.UpdateID, len(vars))
	pushed := make(map[*ShardedVariable]int, len(vars))
	for i, v := range vars {
		ids[i] = w.a.nextID()
		if grads[i] != nil {
			pushed[v] = i
		}
	}
	out := make([]*tensor.Tensor, len(read))
	fused := make(map[int]bool, len(read)) // indexes into vars answered with a value
	firstRead := make([]bool, len(read))   // the read that carries a variable's push
	for k, v := range read {
		if i, ok := pushed[v]; ok && !fused[i] {
			fused[i], firstRead[k] = true, true
		}
	}
	var push []int // pushes answered without a value
	for i := range vars {
		if grads[i] != nil && !fused[i] {
			push = append(push, i)
		}
	}
	a := w.a
	return func() ([]*tensor.Tensor, error) {
		err := parallel(len(read)+len(push), func(k int) error {
			if k >= len(read) {
				i := push[k-len(read)]
				return vars[i].updateID(a, ids[i], opt.kind, opt.rule, grads[i])
			}
			var err error
			if i, ok := pushed[read[k]]; ok && firstRead[k] {
				out[k], err = read[k].updateRead(a, ids[i], opt.kind, opt.rule, grads[i])
			} else {
				out[k], err = read[k].read(a)
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		return out, nil
	}, nil
}

// parallel runs fn(0..n-1) concurrently (the calling goroutine runs the last one) and
// returns the error of the lowest index that failed.
func parallel(n int, fn func(i int) error) error {
	if n <= 1 {
		if n == 1 {
			return fn(0)
		}
		return nil
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n-1; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn(i)
		}()
	}
	errs[n-1] = fn(n - 1)
	wg.Wait()
	return firstNonNil(errs)
}

func firstNonNil(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// PerWorkerDataset is one dataset per worker, made by the function given to
// CreatePerWorkerDataset (ClusterCoordinator.create_per_worker_dataset).
type PerWorkerDataset struct {
	datasets []*data.Dataset
}

// CreatePerWorkerDataset calls fn once per worker with that worker's InputContext.
func (c *ClusterCoordinator) CreatePerWorkerDataset(fn func(ctx *InputContext) *data.Dataset) *PerWorkerDataset {
	d := &PerWorkerDataset{}
	for i := range c.workers {
		ds := fn(&InputContext{NumInputPipelines: len(c.workers), InputPipelineID: i, NumReplicasInSync: c.s.NumReplicasInSync()})
		if ds == nil {
			panic(fmt.Errorf("distribute: CreatePerWorkerDataset: the function returned nil for worker %d", i))
		}
		d.datasets = append(d.datasets, ds)
	}
	return d
}

// Dataset returns worker i's dataset.
func (d *PerWorkerDataset) Dataset(i int) *data.Dataset { return d.datasets[i] }

// Iterator starts one iterator per worker (iter(per_worker_dataset)); a scheduled
// function takes its worker's next element with WorkerContext.Next.
func (d *PerWorkerDataset) Iterator() *PerWorkerIterator {
	it := &PerWorkerIterator{its: make([]*data.Iterator, len(d.datasets)), mu: make([]sync.Mutex, len(d.datasets))}
	for i, ds := range d.datasets {
		it.its[i] = ds.Iterator()
	}
	return it
}

// PerWorkerIterator holds one iterator per worker.
type PerWorkerIterator struct {
	its []*data.Iterator
	mu  []sync.Mutex
}

// Close stops every worker's iterator.
func (it *PerWorkerIterator) Close() {
	for i, x := range it.its {
		it.mu[i].Lock()
		x.Close()
		it.mu[i].Unlock()
	}
}

// Next returns the next element of this worker's iterator of it; false at the end.
func (w *WorkerContext) Next(it *PerWorkerIterator) (data.Element, bool) {
	i := w.index
	if i >= len(it.its) {
		return nil, false
	}
	it.mu[i].Lock()
	defer it.mu[i].Unlock()
	return it.its[i].Next()
}
