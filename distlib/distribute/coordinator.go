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

	"godist/distlib/cell"
	"godist/distlib/cluster"
	"godist/distlib/data"
	"godist/distlib/progress"
	"godist/distlib/psched"
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
//
// The scheduling (queue, retries, step ids, workers up and down, joins) is a
// psched.Scheduler; the coordinator is its driver: it owns the connections, goroutines
// and the ticker, feeds the scheduler events and carries out the actions it returns.
type ClusterCoordinator struct {
	s       *ParameterServerStrategy
	workers []*psWorker
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	tick    time.Duration // the scheduler's tick

	mu       sync.Mutex
	sm       *psched.Scheduler
	closures map[uint64]*closure // scheduled and not resolved, by step id
	watches  map[context.Context]*ctxWatch
	joins    map[uint64]chan error // Joins waiting, by the scheduler's join id
	closed   bool

	retries   atomic.Int64
	bytesSent atomic.Int64

	panel     progress.JobPanel // the live cluster panel (nil without the widget front end)
	showPanel bool              // a panel at all (not for a library loop's own coordinator)
}

type closure struct {
	fn   WorkerFunc       // in-process workers
	name string           // remote workers: the registered function
	args []*tensor.Tensor // and its arguments
	step uint64
	rv   *RemoteValue

	ctx    context.Context         // the run's context: the Schedule ctx, cancelled when the function is stopped
	cancel context.CancelCauseFunc // stops the run
	watch  *ctxWatch               // the watch on the Schedule ctx (nil: it never ends)
	val    *tensor.Tensor          // the value of a run that succeeded
}

// ctxWatch cancels the functions scheduled under one context when it ends: one watch per
// context, not one per function (a cell schedules thousands under its one context).
type ctxWatch struct {
	ctx   context.Context
	steps map[uint64]struct{}
	stop  func() bool
}

// NewClusterCoordinator starts the coordinator of s, with one executor per worker task,
// each with its own connections to the parameter servers.
func NewClusterCoordinator(s *ParameterServerStrategy) *ClusterCoordinator {
	return newClusterCoordinator(s, true)
}

// newClusterCoordinator is NewClusterCoordinator, with the cluster panel when panel is set.
func newClusterCoordinator(s *ParameterServerStrategy, panel bool) *ClusterCoordinator {
	if s == nil {
		panic(fmt.Errorf("%w: NewClusterCoordinator needs a ParameterServerStrategy", ErrCluster))
	}
	ctx, cancel := context.WithCancel(context.Background())
	tick := min(max(s.reachTO/10, 5*time.Millisecond), 250*time.Millisecond)
	slots := 1
	if s.remote {
		// A remote worker task gets one function ahead of the one it runs (two calls in
		// flight; the task runs them one at a time): the next function's arguments travel
		// while the current one computes. In-process workers run one at a time.
		slots = 2
	}
	sm, err := psched.New(psched.Config{Workers: s.numWorkers, Slots: slots,
		// One tick more than the timeout holds: the first tick that sees the queue waiting
		// may come right after it started waiting.
		UnreachableTicks: int((s.reachTO+tick-1)/tick) + 1,
		// Step ids are unique across coordinator restarts: a restarted coordinator must not
		// reuse the ids the parameter servers remember.
		FirstStep: uint64(time.Now().UnixNano()), CancelErr: ErrClosureCancelled})
	if err != nil {
		cancel()
		panic(fmt.Errorf("%w: NewClusterCoordinator: %w", ErrCluster, err))
	}
	c := &ClusterCoordinator{s: s, ctx: ctx, cancel: cancel, tick: tick, sm: sm,
		closures: map[uint64]*closure{}, joins: map[uint64]chan error{}, watches: map[context.Context]*ctxWatch{}}
	for i := 0; i < s.numWorkers; i++ {
		w := &psWorker{c: c, index: i, slots: slots, restart: make(chan struct{}, 1), runs: make(chan *closure, 2*slots)}
		c.workers = append(c.workers, w)
		c.wg.Add(1)
		go w.loop()
	}
	c.wg.Add(1)
	go c.watch()
	if panel {
		c.startPanel()
	}
	c.showPanel = panel
	return c
}

// Strategy returns the coordinator's strategy.
func (c *ClusterCoordinator) Strategy() *ParameterServerStrategy { return c.s }

// Schedule queues fn to run on a worker and returns its RemoteValue at once; it is
// ScheduleContext(cell.Context(), fn): interrupting the notebook cell cancels it.
func (c *ClusterCoordinator) Schedule(fn WorkerFunc) *RemoteValue {
	return c.ScheduleContext(cell.Context(), fn)
}

// ScheduleContext queues fn to run on a worker and returns its RemoteValue at once. When
// ctx ends before fn ran, fn does not run and its RemoteValue holds an error wrapping
// ctx's cause; a running fn sees ctx end through w.Context() and its next ps read or
// write fails. After a parameter server failed, or after Close, the RemoteValue holds
// that error.
func (c *ClusterCoordinator) ScheduleContext(ctx context.Context, fn WorkerFunc) *RemoteValue {
	rv := &RemoteValue{done: make(chan struct{}), worker: -1}
	switch {
	case ctx == nil:
		rv.finish(nil, errors.New("distribute: ScheduleContext: nil context (pass context.Background() or the cell's context)"), -1)
		return rv
	case fn == nil:
		rv.finish(nil, errors.New("distribute: Schedule: nil function"), -1)
		return rv
	case c.s.remote:
		rv.finish(nil, errors.New("distribute: Schedule: a Go closure cannot run on a remote worker process: register it with RegisterFunction and use ScheduleFunction"), -1)
		return rv
	}
	return c.enqueueContext(ctx, &closure{fn: fn}, rv)
}

// enqueue queues cl under the running cell's context.
func (c *ClusterCoordinator) enqueue(cl *closure, rv *RemoteValue) *RemoteValue {
	return c.enqueueContext(cell.Context(), cl, rv)
}

// enqueueContext gives cl a step id and queues it; ctx bounds its run.
func (c *ClusterCoordinator) enqueueContext(ctx context.Context, cl *closure, rv *RemoteValue) *RemoteValue {
	cl.rv = rv
	cl.ctx, cl.cancel = context.WithCancelCause(ctx)
	c.step(func(sm *psched.Scheduler) {
		cl.step = sm.Schedule()
		c.closures[cl.step] = cl
		if ctx.Done() == nil {
			return
		}
		w := c.watches[ctx]
		if w == nil {
			w = &ctxWatch{ctx: ctx, steps: map[uint64]struct{}{}}
			c.watches[ctx] = w
			w.stop = context.AfterFunc(ctx, func() {
				c.step(func(sm *psched.Scheduler) {
					if c.watches[ctx] == w {
						delete(c.watches, ctx)
					}
					err := fmt.Errorf("%w: %w", ErrClosureCancelled, context.Cause(ctx))
					for step := range w.steps {
						sm.CancelClosure(step, err)
					}
				})
			})
		}
		w.steps[cl.step] = struct{}{}
		cl.watch = w
	})
	return rv
}

// step feeds the scheduler an event under the lock, carries out the actions it returns
// and then does the I/O they ask for (outside the lock).
func (c *ClusterCoordinator) step(event func(sm *psched.Scheduler)) {
	c.mu.Lock()
	event(c.sm)
	later := c.applyLocked(c.sm.Ready())
	c.mu.Unlock()
	for _, fn := range later {
		fn()
	}
}

// applyLocked carries out rd's actions that need no I/O and returns the others.
func (c *ClusterCoordinator) applyLocked(rd psched.Ready) (later []func()) {
	for _, r := range rd.Retries {
		c.retries.Add(1)
		logf("WARNING", "worker %d failed (%v); its step %d runs again on another worker", r.Worker, r.Err, r.Step)
	}
	for _, r := range rd.Runs {
		cl := c.closures[r.Step]
		if cl == nil {
			continue
		}
		select {
		case c.workers[r.Worker].runs <- cl:
		default: // the scheduler keeps at most slots in flight per worker: cannot happen
			panic(fmt.Sprintf("distribute: coordinator: worker %d has more than %d functions in flight", r.Worker, cap(c.workers[r.Worker].runs)))
		}
	}
	for _, r := range rd.Cancels {
		if cl := c.closures[r]; cl != nil {
			cl.cancel(ErrClosureCancelled)
		}
	}
	for _, r := range rd.Resolves {
		cl := c.closures[r.Step]
		if cl == nil {
			continue
		}
		delete(c.closures, r.Step)
		if r.Err != nil {
			cl.rv.finish(nil, r.Err, r.Worker)
		} else {
			cl.rv.finish(cl.val, nil, r.Worker)
		}
		c.releaseLocked(cl)
	}
	for _, j := range rd.Joins {
		if ch := c.joins[j.ID]; ch != nil {
			delete(c.joins, j.ID)
			ch <- j.Err
		}
	}
	for _, u := range rd.Unreachable {
		logf("WARNING", "worker %d (%s) has been unreachable for %v: %v", u.Worker, c.s.workerAddrs[u.Worker],
			time.Duration(u.Ticks-1)*c.tick, c.workers[u.Worker].err())
	}
	if rd.Stall != nil {
		waited := time.Duration(rd.Stall.Ticks-1) * c.tick
		later = append(later, func() { c.stalled(waited) })
	}
	if rd.Forget != 0 {
		below := rd.Forget
		later = append(later, func() { c.forget(below) })
	}
	return later
}

// releaseLocked frees what cl holds once it is resolved: its place in its context's
// watch (the watch ends with its last function) and its run context.
func (c *ClusterCoordinator) releaseLocked(cl *closure) {
	if w := cl.watch; w != nil {
		delete(w.steps, cl.step)
		if len(w.steps) == 0 && c.watches[w.ctx] == w {
			delete(c.watches, w.ctx)
			w.stop()
		}
	}
	cl.cancel(ErrClosureCancelled)
}

// Join waits until every scheduled function has finished and returns the first error
// since the last Join (then forgets it), like ClusterCoordinator.join; it is
// JoinContext(cell.Context()).
func (c *ClusterCoordinator) Join() error { return c.JoinContext(cell.Context()) }

// JoinContext is Join bounded by ctx. When ctx ends first, the functions still queued are
// cancelled, the running ones are stopped at their next ps read or write, and JoinContext
// returns an error wrapping ctx's cause once they have returned; the coordinator stays
// usable for later Schedules. A failed parameter server makes Join return its
// *PSFailureError at once, and every later Join too.
func (c *ClusterCoordinator) JoinContext(ctx context.Context) error {
	if ctx == nil {
		return errors.New("distribute: JoinContext: nil context (pass context.Background() or the cell's context)")
	}
	ch := make(chan error, 1)
	c.step(func(sm *psched.Scheduler) { c.joins[sm.Join()] = ch })
	stopped := func() error {
		return fmt.Errorf("%w: Join stopped (the queued and running functions were cancelled): %w", ErrClosureCancelled, context.Cause(ctx))
	}
	select {
	case err := <-ch:
		if err == nil && ctx.Err() != nil {
			// Its context ended as the functions did (they shared it, as the cell's
			// Schedule and Join do, and were cancelled by it): the wait was interrupted.
			return stopped()
		}
		return err
	case <-ctx.Done():
	}
	cause := stopped()
	c.step(func(sm *psched.Scheduler) { sm.Cancel(cause) })
	if err := <-ch; err != nil {
		return err
	}
	// The functions were all cancelled by their own context (the same one) before the
	// Cancel: the Join was answered with no error, but it was interrupted all the same.
	return cause
}

// Done reports whether every scheduled function has finished (ClusterCoordinator.done).
func (c *ClusterCoordinator) Done() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sm.Done()
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
	c.mu.Unlock()
	closeErr := fmt.Errorf("%w: %w", ErrClosureCancelled, ErrCoordinatorClosed)
	c.step(func(sm *psched.Scheduler) { sm.Close(closeErr) })
	c.cancel()
	for _, w := range c.workers {
		w.kill() // wakes a worker waiting to be restarted
	}
	c.wg.Wait()
	for _, w := range c.workers {
		w.closeClients()
	}
	// Functions handed to a worker that stopped before starting them.
	c.mu.Lock()
	for step, cl := range c.closures {
		delete(c.closures, step)
		cl.rv.finish(nil, closeErr, -1)
		c.releaseLocked(cl)
	}
	c.mu.Unlock()
	c.finishPanel()
	return nil
}

// stalled answers the scheduler's report that functions waited the worker timeout with
// no worker up: a ps that does not answer fails the coordinator (*PSFailureError); else
// the queued functions fail with a *WorkerUnreachableError.
func (c *ClusterCoordinator) stalled(waited time.Duration) {
	if perr := c.s.checkPS(); perr != nil { // executors in this process fail to connect only when a ps is down
		logf("ERROR", "%v", perr)
		c.step(func(sm *psched.Scheduler) { sm.Fail(perr) })
		return
	}
	err := c.unreachableError(waited)
	logf("ERROR", "%v", err)
	c.step(func(sm *psched.Scheduler) { sm.FailQueued(err) })
}

// forget tells the parameter servers to drop the update records of steps below below,
// which are finished and will never run again.
func (c *ClusterCoordinator) forget(below uint64) {
	for i, cl := range c.s.clients {
		ctx, cancel := context.WithTimeout(c.ctx, c.s.timeout)
		if err := cl.Forget(ctx, below); err != nil && c.ctx.Err() == nil {
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

// Fetch waits for the function and returns its result or error; it is
// FetchContext(cell.Context()), so interrupting the notebook cell ends the wait.
func (r *RemoteValue) Fetch() (*tensor.Tensor, error) {
	return r.FetchContext(cell.Context())
}

// FetchContext is Fetch bounded by ctx: when ctx ends first it returns an error wrapping
// ctx's cause (the function itself goes on; cancel its Schedule ctx or Join's to stop it).
func (r *RemoteValue) FetchContext(ctx context.Context) (*tensor.Tensor, error) {
	if ctx == nil {
		return nil, errors.New("distribute: FetchContext: nil context (pass context.Background() or the cell's context)")
	}
	select {
	case <-r.done:
		return r.val, r.err
	case <-ctx.Done():
		select {
		case <-r.done: // both ready: the result wins
			return r.val, r.err
		default:
		}
		return nil, fmt.Errorf("distribute: fetch: %w", context.Cause(ctx))
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
	slots int           // functions in flight (psched.Config.Slots)
	runs  chan *closure // functions the scheduler placed on this worker

	mu      sync.Mutex
	clients []*transport.PSClient
	remote  *transport.WorkerClient // the worker task's function service (remote workers)
	lastErr error                   // the last connection error
	killed  bool
	restart chan struct{}
	ran     atomic.Int64
}

// loop connects the worker, reports it up, runs the functions placed on it until it fails,
// and reconnects (rejoins) before taking more work.
func (w *psWorker) loop() {
	defer w.c.wg.Done()
	for {
		if !w.connect() {
			return
		}
		w.drain()
		w.c.step(func(sm *psched.Scheduler) { sm.WorkerUp(w.index) })
		if !w.serve() {
			return // the coordinator stopped
		}
		w.closeClients()
	}
}

// drain drops functions placed on this worker before it went down (the scheduler placed
// them again elsewhere).
func (w *psWorker) drain() {
	for {
		select {
		case <-w.runs:
		default:
			return
		}
	}
}

// serve runs the worker's functions, slots at a time, and reports whether it stopped
// because the worker failed (false: the coordinator stopped).
func (w *psWorker) serve() bool {
	down := make(chan struct{})
	var once sync.Once
	var g sync.WaitGroup
	for range w.slots {
		g.Add(1)
		go func() {
			defer g.Done()
			for {
				select {
				case <-down:
					return
				case <-w.c.ctx.Done():
					return
				case cl := <-w.runs:
					select {
					case <-down:
						return // placed again elsewhere when the worker went down
					default:
					}
					if w.execute(cl) {
						once.Do(func() { close(down) })
						return
					}
				}
			}
		}()
	}
	g.Wait()
	if w.c.ctx.Err() != nil {
		return false
	}
	select {
	case <-down:
		return true
	default:
		return false
	}
}

// execute runs cl and reports its outcome to the scheduler; it returns true when the
// worker failed.
func (w *psWorker) execute(cl *closure) (workerFailed bool) {
	var val *tensor.Tensor
	err := context.Cause(cl.ctx)
	if err == nil {
		val, err = w.run(cl)
	}
	o := psched.OK
	switch {
	case err == nil:
		w.ran.Add(1)
	case cl.ctx.Err() != nil:
		o = psched.Cancelled
		err = fmt.Errorf("%w: step %d stopped: %w", ErrClosureCancelled, cl.step, context.Cause(cl.ctx))
	case isWorkerFailure(err) && w.c.ctx.Err() == nil:
		// A ps that does not answer the coordinator either is fatal; otherwise the worker
		// is lost and the function runs again elsewhere.
		if perr := w.c.s.checkPS(); perr != nil {
			logf("ERROR", "%v", perr)
			w.c.step(func(sm *psched.Scheduler) {
				sm.Fail(perr)
				sm.ClosureDone(w.index, cl.step, psched.WorkerFailure, err)
			})
			return false
		}
		o, workerFailed = psched.WorkerFailure, true
		w.setErr(err)
	default:
		o = psched.UserError
	}
	w.c.step(func(sm *psched.Scheduler) {
		if o == psched.OK {
			cl.val = val
		}
		sm.ClosureDone(w.index, cl.step, o, err)
	})
	return workerFailed
}

// err returns the worker's last connection error.
func (w *psWorker) err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastErr
}

// watch ticks the scheduler, which reports workers down for the worker timeout and
// functions that waited that long with no worker up (so that Join, Fetch and Fit never
// wait forever for worker tasks that were never started or are all gone).
func (c *ClusterCoordinator) watch() {
	defer c.wg.Done()
	t := time.NewTicker(c.tick)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
		c.step(func(sm *psched.Scheduler) { sm.Tick() })
	}
}

// unreachableError describes every worker not connected now.
func (c *ClusterCoordinator) unreachableError(waited time.Duration) *WorkerUnreachableError {
	e := &WorkerUnreachableError{Waited: waited.Round(time.Millisecond), Timeout: c.s.reachTO, Remote: c.s.remote}
	for _, w := range c.workers {
		e.Workers = append(e.Workers, w.index)
		e.Addrs = append(e.Addrs, c.s.workerAddrs[w.index])
		e.Errs = append(e.Errs, w.err())
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
				Caller: max(0, s.callerBase) + w.index, Timeout: s.timeout, NoSharedMemory: cluster.NoSharedMemoryFromEnv()}); err != nil {
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
	wc := &WorkerContext{ctx: cl.ctx, index: w.index, step: cl.step, a: access{ctx: cl.ctx, clients: clients, step: cl.step, op: &op}, vars: w.c.s.varByName}
	defer inScheduled(wc)()
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

// Context returns a context that ends when the function is stopped: its Schedule ctx
// ended, a Join's ctx ended, or the coordinator closed.
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

// ReadAll reads vars (for a forward pass): one call per ps task for the shards it holds,
// the tasks concurrently, not one call per variable.
func (w *WorkerContext) ReadAll(vars []*ShardedVariable) ([]*tensor.Tensor, error) {
	return w.ReadAllInto(vars, nil)
}

// ReadAllInto is ReadAll writing the values into the caller's tensors: dst is nil (fresh
// tensors, as ReadAll) or has one tensor per variable, of its shape, and the result is
// dst with the values read. It is how a training loop that keeps its value buffers from
// step to step reads without allocating; the caller must not use dst's values while the
// call runs, and after an error they may be partly written.
func (w *WorkerContext) ReadAllInto(vars []*ShardedVariable, dst []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if dst != nil && len(dst) != len(vars) {
		return nil, fmt.Errorf("distribute: ReadAllInto: %d destinations for %d variables", len(dst), len(vars))
	}
	var b psBatch
	datas := make([][]float32, len(vars))
	for i, v := range vars {
		data, err := v.dstData("read", dstAt(dst, i))
		if err != nil {
			return nil, err
		}
		datas[i] = data
		b.add(v, nil, data)
	}
	return b.results(w.a, "ReadAllInto", vars, dst, datas)
}

// dstAt returns dst[i], or nil when there is no dst.
func dstAt(dst []*tensor.Tensor, i int) *tensor.Tensor {
	if dst == nil {
		return nil
	}
	return dst[i]
}

// ApplyGradients pushes grads[i] for vars[i]; opt's rule updates the variables on the
// parameter servers (a nil gradient is skipped). The pushes go out as one call per ps
// task, the tasks concurrently; each keeps the update id it would have in order, so a
// rerun step is deduplicated the same.
func (w *WorkerContext) ApplyGradients(opt *PSOptimizer, grads []*tensor.Tensor, vars []*ShardedVariable) error {
	call, err := w.applyAndRead("ApplyGradients", opt, grads, vars, nil, nil)
	if err != nil {
		return err
	}
	_, err = call()
	return err
}

// ApplyGradientsAndRead is ApplyGradients followed by ReadAll(read), with one round trip
// to the parameter servers: a variable in both lists answers its push with its value
// right after its own update (and every update applied before it), and all the pushes and
// reads of the shards one ps task holds go as one call (the tasks concurrently). It is how
// a training step pushes its gradients and reads the variables for its next batch; the
// update ids are ApplyGradients's.
func (w *WorkerContext) ApplyGradientsAndRead(opt *PSOptimizer, grads []*tensor.Tensor, vars, read []*ShardedVariable) ([]*tensor.Tensor, error) {
	call, err := w.applyAndRead("ApplyGradientsAndRead", opt, grads, vars, read, nil)
	if err != nil {
		return nil, err
	}
	return call()
}

// ApplyGradientsAndReadInto is ApplyGradientsAndRead writing the values read into the
// caller's tensors: dst is nil (fresh tensors) or has one tensor per variable of read, of
// its shape (checked before anything is pushed), and the result is dst with the values
// read. The caller must not use dst's values while the call runs, and after an error they
// may be partly written.
func (w *WorkerContext) ApplyGradientsAndReadInto(opt *PSOptimizer, grads []*tensor.Tensor, vars, read []*ShardedVariable, dst []*tensor.Tensor) ([]*tensor.Tensor, error) {
	call, err := w.applyAndRead("ApplyGradientsAndReadInto", opt, grads, vars, read, dst)
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
	return w.applyAndReadAsync("ApplyGradientsAndReadAsync", opt, grads, vars, read, nil)
}

// ApplyGradientsAndReadAsyncInto is ApplyGradientsAndReadAsync writing the values read
// into dst, as ApplyGradientsAndReadInto does: p.Wait returns dst. Until p.Wait has
// returned, the push reads grads and writes dst: the caller must leave the gradients as
// they are and not use dst's values (a pipelined loop keeps two sets of each and
// alternates).
func (w *WorkerContext) ApplyGradientsAndReadAsyncInto(opt *PSOptimizer, grads []*tensor.Tensor, vars, read []*ShardedVariable, dst []*tensor.Tensor) *PendingPush {
	return w.applyAndReadAsync("ApplyGradientsAndReadAsyncInto", opt, grads, vars, read, dst)
}

// applyAndReadAsync runs applyAndRead's call in the background (op names the method).
func (w *WorkerContext) applyAndReadAsync(op string, opt *PSOptimizer, grads []*tensor.Tensor, vars, read []*ShardedVariable, dst []*tensor.Tensor) *PendingPush {
	p := &PendingPush{done: make(chan struct{})}
	call, err := w.applyAndRead(op, opt, grads, vars, read, dst)
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
func (w *WorkerContext) applyAndRead(op string, opt *PSOptimizer, grads []*tensor.Tensor, vars, read []*ShardedVariable, dst []*tensor.Tensor) (func() ([]*tensor.Tensor, error), error) {
	if dst != nil && len(dst) != len(read) {
		return nil, fmt.Errorf("distribute: %s: %d destinations for %d variables read", op, len(dst), len(read))
	}
	for k, d := range dst {
		// Checked before anything is pushed, so a bad destination pushes nothing.
		if d != nil && !sameShape(d.Shape(), read[k].shape) {
			return nil, fmt.Errorf("distribute: %s: variable %q of shape %v read into a destination of shape %v", op, read[k].name, read[k].shape, d.Shape())
		}
	}
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
	// One Do per ps task: every shard's push and read that task holds, in one round trip.
	var b psBatch
	datas := make([][]float32, len(read))
	for k, v := range read {
		var u *transport.Update
		if i, ok := pushed[v]; ok && firstRead[k] {
			if err := v.checkValue(opt.kind, grads[i]); err != nil {
				return nil, err
			}
			u = &transport.Update{ID: ids[i], Kind: opt.kind, Rule: opt.rule, Value: grads[i].Data()}
		}
		data, err := v.dstData(op, dstAt(dst, k))
		if err != nil {
			return nil, err
		}
		datas[k] = data
		b.add(v, u, data)
	}
	for _, i := range push {
		if err := vars[i].checkValue(opt.kind, grads[i]); err != nil {
			return nil, err
		}
		b.add(vars[i], &transport.Update{ID: ids[i], Kind: opt.kind, Rule: opt.rule, Value: grads[i].Data()}, nil)
	}
	a := w.a
	return func() ([]*tensor.Tensor, error) { return b.results(a, op, read, dst, datas) }, nil
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
