package distribute

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

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
