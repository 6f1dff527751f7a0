// Package psched is the scheduling of a parameter-server ClusterCoordinator as a state
// machine, in the manner of etcd-io/raft's Step/Tick/Ready: it does no I/O, starts no
// goroutine and keeps no clock. A driver (distribute.ClusterCoordinator) feeds it events
// (Schedule, WorkerUp, WorkerDown, ClosureDone, Join, Cancel, Close, Tick, ...) and
// carries out the actions it returns from Ready: run closure X with step id S on worker W,
// resolve X's RemoteValue, stop a running closure, answer a Join, report a worker that has
// been down for the configured ticks, ...
//
// A closure is known by its step id, which stays the same when the closure runs again
// after its worker failed: the parameter servers apply the updates of a step once. A
// Scheduler is not safe for concurrent use; the driver serializes the events.
package psched

import (
	"errors"
	"fmt"
	"slices"
)

// ErrRetriesExhausted is wrapped by the error of a closure whose workers failed more
// times than Config.MaxRetries allows.
var ErrRetriesExhausted = errors.New("psched: closure retried too often")

// ErrCancelled is wrapped by the error of a closure cancelled before it finished (an
// earlier closure failed, Cancel, Close or Fail).
var ErrCancelled = errors.New("psched: closure cancelled")

// Outcome is how a closure run ended (ClosureDone).
type Outcome int

const (
	// OK: the closure returned a value.
	OK Outcome = iota
	// UserError: the closure returned an error of its own; it is not retried.
	UserError
	// WorkerFailure: the worker running it failed; the closure runs again elsewhere.
	WorkerFailure
	// Cancelled: the closure's own context ended (the driver saw it before or after
	// CancelClosure); like CancelClosure, it is not a later Join's error.
	Cancelled
)

func (o Outcome) String() string {
	switch o {
	case OK:
		return "ok"
	case UserError:
		return "user error"
	case WorkerFailure:
		return "worker failure"
	case Cancelled:
		return "cancelled"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Config configures a Scheduler.
type Config struct {
	Workers          int    // worker tasks, indices 0..Workers-1 (at least 1)
	Slots            int    // closures in flight per worker (pipelining; 0 means 1)
	MaxRetries       int    // runs again of one closure after worker failures (0 means 16)
	UnreachableTicks int    // ticks after which a down worker, or a queue no worker serves, is reported (0 means 10)
	ForgetEvery      int    // emit Ready.Forget every so many finished closures (0 means 256)
	FirstStep        uint64 // step ids start after this value
	// CancelErr is wrapped by the errors of closures cancelled because an earlier one
	// failed or the scheduler failed (nil means ErrCancelled).
	CancelErr error
}

// Run asks the driver to run the closure with step id Step on worker Worker. Attempt
// counts from 1 and grows each time the closure runs again after a worker failure.
type Run struct {
	Step    uint64
	Worker  int
	Attempt int
}

// Resolve asks the driver to settle the closure's RemoteValue: with the value its run
// produced when Err is nil, else with Err. Worker is the worker that ran it (-1: none).
type Resolve struct {
	Step   uint64
	Worker int
	Err    error
}

// Retry reports a closure queued again after its worker failed.
type Retry struct {
	Step    uint64
	Worker  int   // the worker that failed
	Err     error // its error
	Attempt int   // the attempt that failed
}

// JoinResult answers the Join with ID.
type JoinResult struct {
	ID  uint64
	Err error
}

// Unreachable reports a worker that has been down for Ticks ticks (once per down period).
type Unreachable struct {
	Worker int
	Ticks  int
	Err    error // the error it went down with (nil: never came up)
}

// Stall reports that closures have waited Ticks ticks while no worker was up. The driver
// decides why (a ps down: Fail; else FailQueued with an error naming the workers).
type Stall struct {
	Ticks int
	Down  []int // the workers (all of them)
}

// Ready is what the driver must do after the events fed since the last Ready.
type Ready struct {
	Runs        []Run         // start these closures
	Resolves    []Resolve     // settle these RemoteValues
	Cancels     []uint64      // stop these running closures (their result is then discarded)
	Retries     []Retry       // closures queued again (for logs and counters)
	Joins       []JoinResult  // answer these Joins
	Unreachable []Unreachable // workers down for the configured ticks
	Stall       *Stall        // closures waiting with no worker up
	Forget      uint64        // when non-zero: no step below this one will run again
}

// Empty reports whether rd asks for nothing.
func (rd Ready) Empty() bool {
	return len(rd.Runs) == 0 && len(rd.Resolves) == 0 && len(rd.Cancels) == 0 && len(rd.Retries) == 0 &&
		len(rd.Joins) == 0 && len(rd.Unreachable) == 0 && rd.Stall == nil && rd.Forget == 0
}

type closureState struct {
	step      uint64
	worker    int // -1 while queued
	attempt   int // runs started
	cancelled error
}

type workerState struct {
	up        bool
	running   []uint64
	downTicks int
	reported  bool
	err       error
}

// Scheduler is the coordinator's scheduling state.
type Scheduler struct {
	cfg      Config
	nextStep uint64
	queue    []*closureState
	live     map[uint64]*closureState // queued or running
	workers  []workerState
	joins    []uint64
	nextJoin uint64
	// joins waiting for cancelled running closures to come back (Cancel)
	cancelJoins []uint64
	cancelErr   error
	firstErr    error
	fatal       error
	closeErr    error
	stallTicks  int
	stalled     bool
	finished    int
	resolved    int // closures resolved, with an error or not
	failed      int // closures resolved with an error
	retries     int
	next        int // round-robin start for placing closures
	rd          Ready
}

// New returns a Scheduler for cfg, or an error naming the bad field.
func New(cfg Config) (*Scheduler, error) {
	if cfg.Workers < 1 {
		return nil, fmt.Errorf("psched: Config.Workers = %d: want at least 1 worker", cfg.Workers)
	}
	if cfg.Slots < 0 || cfg.MaxRetries < 0 || cfg.UnreachableTicks < 0 || cfg.ForgetEvery < 0 {
		return nil, fmt.Errorf("psched: Config %+v: Slots, MaxRetries, UnreachableTicks and ForgetEvery must not be negative", cfg)
	}
	if cfg.Slots == 0 {
		cfg.Slots = 1
	}
	if cfg.MaxRetries == 0 {
		cfg.MaxRetries = 16
	}
	if cfg.UnreachableTicks == 0 {
		cfg.UnreachableTicks = 10
	}
	if cfg.ForgetEvery == 0 {
		cfg.ForgetEvery = 256
	}
	if cfg.CancelErr == nil {
		cfg.CancelErr = ErrCancelled
	}
	return &Scheduler{cfg: cfg, nextStep: cfg.FirstStep, live: map[uint64]*closureState{},
		workers: make([]workerState, cfg.Workers)}, nil
}

// Schedule queues a new closure and returns its step id. After Close or Fail the closure
// is resolved at once with that error.
func (s *Scheduler) Schedule() uint64 {
	s.nextStep++
	step := s.nextStep
	switch {
	case s.closeErr != nil:
		s.rd.Resolves = append(s.rd.Resolves, Resolve{Step: step, Worker: -1, Err: s.closeErr})
		s.resolved++
		s.failed++
		return step
	case s.fatal != nil:
		s.rd.Resolves = append(s.rd.Resolves, Resolve{Step: step, Worker: -1, Err: s.fatal})
		s.resolved++
		s.failed++
		return step
	}
	c := &closureState{step: step, worker: -1}
	s.live[step] = c
	s.queue = append(s.queue, c)
	s.place()
	return step
}

// WorkerUp records that worker w is reachable and may take closures.
func (s *Scheduler) WorkerUp(w int) {
	if !s.valid(w) || s.workers[w].up {
		return
	}
	s.workers[w] = workerState{up: true}
	s.stallTicks, s.stalled = 0, false
	s.place()
}

// WorkerDown records that worker w is lost: the closures it runs are queued again (same
// step ids) and it takes no more until WorkerUp.
func (s *Scheduler) WorkerDown(w int, err error) {
	if !s.valid(w) {
		return
	}
	ws := &s.workers[w]
	if ws.up {
		ws.up, ws.downTicks, ws.reported = false, 0, false
	}
	ws.err = err
	running := ws.running
	ws.running = nil
	var requeue []*closureState
	for _, step := range running {
		c := s.live[step]
		if c == nil {
			continue
		}
		if c.cancelled != nil || s.closeErr != nil || s.fatal != nil {
			s.resolve(c, -1, s.stopErr(c))
			continue
		}
		if c.attempt > s.cfg.MaxRetries {
			s.failUser(c, w, fmt.Errorf("%w: step %d failed on a worker %d times (limit: 1 run + %d retries); last on worker %d: %w",
				ErrRetriesExhausted, c.step, c.attempt, s.cfg.MaxRetries, w, err))
			continue
		}
		s.retries++
		s.rd.Retries = append(s.rd.Retries, Retry{Step: c.step, Worker: w, Err: err, Attempt: c.attempt})
		c.worker = -1
		requeue = append(requeue, c)
	}
	// Closures that were running go first: they were scheduled before the queued ones.
	s.queue = append(requeue, s.queue...)
	s.place()
	s.checkJoins()
}

// ClosureDone records how the run of step on worker w ended. A report for a step no
// longer assigned to w (its worker was declared down meanwhile) is ignored. A
// WorkerFailure also takes the worker down (WorkerDown).
func (s *Scheduler) ClosureDone(w int, step uint64, o Outcome, err error) {
	c := s.live[step]
	if !s.valid(w) || c == nil || c.worker != w {
		return
	}
	if o == WorkerFailure {
		if err == nil {
			err = fmt.Errorf("psched: worker %d failed", w)
		}
		s.WorkerDown(w, err)
		return
	}
	s.unassign(w, step)
	switch {
	case o == OK: // its updates are in: report its value even if it was being stopped
		s.resolve(c, w, nil)
	case c.cancelled != nil:
		s.resolve(c, w, c.cancelled)
	case o == Cancelled:
		if err == nil {
			err = fmt.Errorf("%w: step %d", ErrCancelled, step)
		}
		s.resolve(c, w, err)
	default:
		if err == nil {
			err = fmt.Errorf("psched: step %d failed on worker %d", step, w)
		}
		s.failUser(c, w, err)
	}
	s.place()
	s.checkJoins()
}

// CancelClosure cancels one closure with err (its own context ended): a queued one is
// resolved at once, a running one is stopped and resolved with err when it returns.
// Cancelling costs O(1) however long the queue.
func (s *Scheduler) CancelClosure(step uint64, err error) {
	c := s.live[step]
	if c == nil || c.cancelled != nil {
		return
	}
	// A cancellation is not a function's failure: it does not become a later Join's
	// error (the Join of the cell that was interrupted reports it itself).
	if c.worker < 0 {
		// Resolved now; its queue entry is dropped when place reaches it (no O(queue)
		// removal: cancelling every queued closure one by one stays linear).
		s.resolve(c, -1, err)
		s.checkJoins()
		return
	}
	c.cancelled = err
	s.rd.Cancels = append(s.rd.Cancels, step)
}

// Join asks to be told (Ready.Joins with the returned id) when every scheduled closure
// has finished; the answer carries the first error since the last answered Join.
func (s *Scheduler) Join() uint64 {
	s.nextJoin++
	s.joins = append(s.joins, s.nextJoin)
	s.checkJoins()
	return s.nextJoin
}

// Cancel cancels everything scheduled with err (a Join's context ended): queued closures
// are resolved with err wrapped in Config.CancelErr, running ones are stopped (and so
// resolved when they return); the Joins waiting now are answered with err once the
// running closures have returned. The scheduler stays usable.
func (s *Scheduler) Cancel(err error) {
	if err == nil {
		err = ErrCancelled
	}
	cerr := err // what the closures say: wrapped in CancelErr
	if !errors.Is(err, s.cfg.CancelErr) {
		cerr = fmt.Errorf("%w: %w", s.cfg.CancelErr, err)
	}
	s.stopAll(cerr)
	s.cancelJoins = append(s.cancelJoins, s.joins...)
	s.joins = nil
	s.cancelErr = err
	s.firstErr = nil
	s.checkJoins()
}

// FailQueued resolves every queued closure with err (for instance: no worker answered for
// too long) and makes err the next Join's error if none came before.
func (s *Scheduler) FailQueued(err error) {
	s.compact()
	if len(s.queue) == 0 {
		return
	}
	if s.firstErr == nil {
		s.firstErr = err
	}
	s.cancelQueue(err)
	s.stallTicks, s.stalled = 0, false
	s.checkJoins()
}

// Fail stops the scheduler for good with err (a parameter server failed): queued
// closures are resolved with it, running ones with it when their worker fails, every
// Join and every later Schedule returns it.
func (s *Scheduler) Fail(err error) {
	if s.fatal != nil || s.closeErr != nil {
		return
	}
	s.fatal = err
	s.cancelQueue(fmt.Errorf("%w: %w", s.cfg.CancelErr, err))
	s.checkJoins()
}

// Close cancels the queue with err, stops the running closures and answers every Join;
// later Schedules are resolved with err.
func (s *Scheduler) Close(err error) {
	if s.closeErr != nil {
		return
	}
	if err == nil {
		err = fmt.Errorf("%w: scheduler closed", s.cfg.CancelErr)
	}
	s.closeErr = err
	s.stopAll(err)
	s.checkJoins()
}

// Tick advances the scheduler's clock by one tick: workers down for UnreachableTicks are
// reported (Ready.Unreachable), and closures waiting that long with no worker up are
// (Ready.Stall).
func (s *Scheduler) Tick() {
	anyUp := false
	for w := range s.workers {
		ws := &s.workers[w]
		if ws.up {
			anyUp = true
			continue
		}
		ws.downTicks++
		if ws.downTicks >= s.cfg.UnreachableTicks && !ws.reported {
			ws.reported = true
			s.rd.Unreachable = append(s.rd.Unreachable, Unreachable{Worker: w, Ticks: ws.downTicks, Err: ws.err})
		}
	}
	if !anyUp {
		s.compact()
	}
	if anyUp || len(s.queue) == 0 || s.closeErr != nil || s.fatal != nil {
		s.stallTicks, s.stalled = 0, false
		return
	}
	s.stallTicks++
	if s.stallTicks >= s.cfg.UnreachableTicks && !s.stalled {
		s.stalled = true
		down := make([]int, len(s.workers))
		for i := range down {
			down[i] = i
		}
		s.rd.Stall = &Stall{Ticks: s.stallTicks, Down: down}
	}
}

// HasReady reports whether Ready has actions.
func (s *Scheduler) HasReady() bool { return !s.rd.Empty() }

// Ready returns the actions accumulated since the last call and forgets them.
func (s *Scheduler) Ready() Ready {
	rd := s.rd
	s.rd = Ready{}
	return rd
}

// Pending returns the closures scheduled and not yet resolved.
func (s *Scheduler) Pending() int { return len(s.live) }

// Queued returns the closures waiting for a worker.
func (s *Scheduler) Queued() int {
	s.compact()
	return len(s.queue)
}

// compact drops the queue entries of closures cancelled while queued.
func (s *Scheduler) compact() {
	s.queue = slices.DeleteFunc(s.queue, func(c *closureState) bool { return s.live[c.step] != c })
}

// Done reports whether every closure has finished or the scheduler failed.
func (s *Scheduler) Done() bool { return len(s.live) == 0 || s.fatal != nil }

// Stats are a Scheduler's counters (the cluster panel shows them).
type Stats struct {
	Scheduled int    // closures scheduled
	Done      int    // closures resolved: succeeded, failed or cancelled
	Failed    int    // closures resolved with an error (cancelled ones included)
	Retried   int    // times a closure was queued again after its worker failed
	Queued    int    // closures waiting for a worker
	Running   int    // closures running on a worker
	Up        []bool // each worker: up (reachable) or down
}

// Stats returns the scheduler's counters now.
func (s *Scheduler) Stats() Stats {
	st := Stats{Scheduled: int(s.nextStep - s.cfg.FirstStep), Done: s.resolved, Failed: s.failed, Retried: s.retries}
	for _, w := range s.workers {
		st.Running += len(w.running)
		st.Up = append(st.Up, w.up)
	}
	st.Queued = max(len(s.live)-st.Running, 0) // a stopped closure may still be on its worker
	return st
}

// Retries returns how many times a closure was queued again after its worker failed.
func (s *Scheduler) Retries() int { return s.retries }

// Err returns the error of Fail or Close (nil while usable).
func (s *Scheduler) Err() error {
	if s.fatal != nil {
		return s.fatal
	}
	return s.closeErr
}

// WorkerIsUp reports whether worker w is up.
func (s *Scheduler) WorkerIsUp(w int) bool { return s.valid(w) && s.workers[w].up }

func (s *Scheduler) valid(w int) bool { return w >= 0 && w < len(s.workers) }

// stopErr is the error of a closure stopped by Cancel, Close or Fail.
func (s *Scheduler) stopErr(c *closureState) error {
	switch {
	case c.cancelled != nil:
		return c.cancelled
	case s.fatal != nil:
		return s.fatal
	}
	return s.closeErr
}

// place assigns queued closures to up workers with a free slot, round robin.
func (s *Scheduler) place() {
	if s.closeErr != nil || s.fatal != nil {
		return
	}
	n := len(s.workers)
	for {
		for len(s.queue) > 0 && s.live[s.queue[0].step] != s.queue[0] {
			s.queue = s.queue[1:] // cancelled while queued
		}
		if len(s.queue) == 0 {
			return
		}
		placed := false
		for k := range n {
			w := (s.next + k) % n
			ws := &s.workers[w]
			if !ws.up || len(ws.running) >= s.cfg.Slots {
				continue
			}
			c := s.queue[0]
			s.queue = s.queue[1:]
			c.worker = w
			c.attempt++
			ws.running = append(ws.running, c.step)
			s.rd.Runs = append(s.rd.Runs, Run{Step: c.step, Worker: w, Attempt: c.attempt})
			s.next = (w + 1) % n
			placed = true
			break
		}
		if !placed {
			return
		}
	}
}

func (s *Scheduler) unassign(w int, step uint64) {
	ws := &s.workers[w]
	ws.running = slices.DeleteFunc(ws.running, func(x uint64) bool { return x == step })
}

// failUser resolves c with its own error; the first one is Join's, and (as in
// TensorFlow) the closures still queued are cancelled.
func (s *Scheduler) failUser(c *closureState, w int, err error) {
	s.resolve(c, w, err)
	if s.firstErr == nil {
		s.firstErr = err
		s.cancelQueue(fmt.Errorf("%w: an earlier function (step %d) failed: %w", s.cfg.CancelErr, c.step, err))
	}
}

// stopAll resolves the queued closures with err and stops the running ones (Ready.Cancels,
// in step order); they are resolved with err when they return.
func (s *Scheduler) stopAll(err error) {
	s.cancelQueue(err)
	var stop []uint64
	for _, c := range s.live {
		if c.worker >= 0 && c.cancelled == nil {
			c.cancelled = err
			stop = append(stop, c.step)
		}
	}
	slices.Sort(stop)
	s.rd.Cancels = append(s.rd.Cancels, stop...)
}

func (s *Scheduler) cancelQueue(err error) {
	for _, c := range s.queue {
		s.resolve(c, -1, err)
	}
	s.queue = nil
}

func (s *Scheduler) resolve(c *closureState, w int, err error) {
	if s.live[c.step] != c {
		return
	}
	delete(s.live, c.step)
	s.rd.Resolves = append(s.rd.Resolves, Resolve{Step: c.step, Worker: w, Err: err})
	s.resolved++
	if err != nil {
		s.failed++
	}
	if c.attempt == 0 {
		return // never ran: nothing of it on the parameter servers to forget
	}
	s.finished++
	if s.finished%s.cfg.ForgetEvery == 0 {
		below := s.nextStep + 1
		for step := range s.live {
			below = min(below, step)
		}
		s.rd.Forget = below
	}
}

// checkJoins answers the Joins that can be answered.
func (s *Scheduler) checkJoins() {
	if len(s.cancelJoins) > 0 {
		running := false
		for _, c := range s.live {
			if c.worker >= 0 && c.cancelled != nil {
				running = true
				break
			}
		}
		if !running {
			for _, id := range s.cancelJoins {
				s.rd.Joins = append(s.rd.Joins, JoinResult{ID: id, Err: s.cancelErr})
			}
			s.cancelJoins, s.cancelErr = nil, nil
		}
	}
	if len(s.joins) == 0 {
		return
	}
	switch {
	case s.fatal != nil:
		for _, id := range s.joins {
			s.rd.Joins = append(s.rd.Joins, JoinResult{ID: id, Err: s.fatal})
		}
	case len(s.live) == 0:
		for _, id := range s.joins {
			s.rd.Joins = append(s.rd.Joins, JoinResult{ID: id, Err: s.firstErr})
			s.firstErr = nil
		}
	case s.closeErr != nil:
		for _, id := range s.joins {
			err := s.firstErr
			s.firstErr = nil
			if err == nil {
				err = s.closeErr
			}
			s.rd.Joins = append(s.rd.Joins, JoinResult{ID: id, Err: err})
		}
	default:
		return
	}
	s.joins = nil
}
