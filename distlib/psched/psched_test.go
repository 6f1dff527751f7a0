package psched

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

var (
	errUser = errors.New("user: bad batch")
	errConn = errors.New("conn: worker connection reset")
	errStop = errors.New("join: context canceled")
	errPS   = errors.New("ps 0 down")
)

// trace feeds events to a Scheduler and collects every action it returns, in order.
type trace struct {
	t   *testing.T
	s   *Scheduler
	all Ready
}

func newTrace(t *testing.T, cfg Config) *trace {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &trace{t: t, s: s}
}

// do applies fn and returns the actions it produced (also appended to tr.all).
func (tr *trace) do(fn func(s *Scheduler)) Ready {
	fn(tr.s)
	rd := tr.s.Ready()
	tr.all.Runs = append(tr.all.Runs, rd.Runs...)
	tr.all.Resolves = append(tr.all.Resolves, rd.Resolves...)
	tr.all.Cancels = append(tr.all.Cancels, rd.Cancels...)
	tr.all.Retries = append(tr.all.Retries, rd.Retries...)
	tr.all.Joins = append(tr.all.Joins, rd.Joins...)
	tr.all.Unreachable = append(tr.all.Unreachable, rd.Unreachable...)
	if rd.Stall != nil {
		tr.all.Stall = rd.Stall
	}
	if rd.Forget != 0 {
		tr.all.Forget = rd.Forget
	}
	return rd
}

func (tr *trace) resolved(step uint64) (Resolve, bool) {
	for _, r := range tr.all.Resolves {
		if r.Step == step {
			return r, true
		}
	}
	return Resolve{}, false
}

func TestNewRejectsBadConfig(t *testing.T) {
	for _, cfg := range []Config{{Workers: 0}, {Workers: 2, Slots: -1}, {Workers: 1, MaxRetries: -2}} {
		if _, err := New(cfg); err == nil || !strings.HasPrefix(err.Error(), "psched: Config") {
			t.Errorf("New(%+v) error = %v, want one naming the Config field", cfg, err)
		}
	}
}

func TestScheduler(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		run  func(t *testing.T, tr *trace)
	}{
		{"runs round robin and join waits for all", Config{Workers: 2, FirstStep: 100}, func(t *testing.T, tr *trace) {
			tr.do(func(s *Scheduler) { s.WorkerUp(0); s.WorkerUp(1) })
			var steps []uint64
			rd := tr.do(func(s *Scheduler) {
				for range 3 {
					steps = append(steps, s.Schedule())
				}
			})
			if want := []Run{{101, 0, 1}, {102, 1, 1}}; !reflect.DeepEqual(rd.Runs, want) {
				t.Fatalf("runs %v, want %v (one per worker; the third waits)", rd.Runs, want)
			}
			var id uint64
			if rd := tr.do(func(s *Scheduler) { id = s.Join() }); len(rd.Joins) != 0 {
				t.Fatalf("join answered with closures pending: %v", rd.Joins)
			}
			rd = tr.do(func(s *Scheduler) { s.ClosureDone(0, 101, OK, nil) })
			if want := []Run{{103, 0, 1}}; !reflect.DeepEqual(rd.Runs, want) {
				t.Fatalf("runs %v, want %v", rd.Runs, want)
			}
			tr.do(func(s *Scheduler) { s.ClosureDone(1, 102, OK, nil) })
			if len(tr.all.Joins) != 0 {
				t.Fatalf("join answered before step 103 finished")
			}
			rd = tr.do(func(s *Scheduler) { s.ClosureDone(0, 103, OK, nil) })
			if want := []JoinResult{{id, nil}}; !reflect.DeepEqual(rd.Joins, want) {
				t.Fatalf("joins %v, want %v", rd.Joins, want)
			}
			if !tr.s.Done() || tr.s.Pending() != 0 {
				t.Errorf("Done %v Pending %d after all finished", tr.s.Done(), tr.s.Pending())
			}
		}},
		{"pipelining keeps slots closures in flight per worker", Config{Workers: 1, Slots: 2}, func(t *testing.T, tr *trace) {
			tr.do(func(s *Scheduler) { s.WorkerUp(0) })
			rd := tr.do(func(s *Scheduler) { s.Schedule(); s.Schedule(); s.Schedule() })
			if len(rd.Runs) != 2 || tr.s.Queued() != 1 {
				t.Fatalf("runs %v queued %d, want 2 in flight and 1 queued", rd.Runs, tr.s.Queued())
			}
		}},
		{"worker lost mid-closure: rerun elsewhere with the same step id", Config{Workers: 2}, func(t *testing.T, tr *trace) {
			tr.do(func(s *Scheduler) { s.WorkerUp(0); s.WorkerUp(1) })
			var a, b uint64
			tr.do(func(s *Scheduler) { a, b = s.Schedule(), s.Schedule() })
			rd := tr.do(func(s *Scheduler) { s.ClosureDone(1, b, WorkerFailure, errConn) })
			if len(rd.Resolves) != 0 {
				t.Fatalf("a worker failure resolved the closure: %v", rd.Resolves)
			}
			if want := []Retry{{b, 1, errConn, 1}}; !reflect.DeepEqual(rd.Retries, want) {
				t.Fatalf("retries %v, want %v", rd.Retries, want)
			}
			if tr.s.WorkerIsUp(1) {
				t.Fatalf("worker 1 still up after a worker failure")
			}
			rd = tr.do(func(s *Scheduler) { s.ClosureDone(0, a, OK, nil) })
			if want := []Run{{b, 0, 2}}; !reflect.DeepEqual(rd.Runs, want) {
				t.Fatalf("runs %v, want step %d again on worker 0, attempt 2", rd.Runs, b)
			}
			// A late report from the lost worker is ignored.
			if rd := tr.do(func(s *Scheduler) { s.ClosureDone(1, b, OK, nil) }); len(rd.Resolves) != 0 {
				t.Fatalf("stale report resolved: %v", rd.Resolves)
			}
			tr.do(func(s *Scheduler) { s.ClosureDone(0, b, OK, nil) })
			if r, ok := tr.resolved(b); !ok || r.Err != nil || r.Worker != 0 {
				t.Fatalf("step %d resolved %v %v, want ok on worker 0", b, r, ok)
			}
			if tr.s.Retries() != 1 {
				t.Errorf("Retries() = %d, want 1", tr.s.Retries())
			}
		}},
		{"worker down event requeues its running closures", Config{Workers: 2, Slots: 2}, func(t *testing.T, tr *trace) {
			tr.do(func(s *Scheduler) { s.WorkerUp(0) })
			var a, b uint64
			tr.do(func(s *Scheduler) { a, b = s.Schedule(), s.Schedule() })
			rd := tr.do(func(s *Scheduler) { s.WorkerDown(0, errConn); s.WorkerUp(1) })
			if want := []Run{{a, 1, 2}, {b, 1, 2}}; !reflect.DeepEqual(rd.Runs, want) {
				t.Fatalf("runs %v, want both steps on worker 1 in order", rd.Runs)
			}
		}},
		{"retries are bounded with a clear error", Config{Workers: 1, MaxRetries: 2}, func(t *testing.T, tr *trace) {
			var a uint64
			tr.do(func(s *Scheduler) { a = s.Schedule() })
			for range 3 {
				rd := tr.do(func(s *Scheduler) { s.WorkerUp(0) })
				if len(rd.Runs) != 1 {
					t.Fatalf("runs %v, want the step again", rd.Runs)
				}
				tr.do(func(s *Scheduler) { s.ClosureDone(0, a, WorkerFailure, errConn) })
			}
			r, ok := tr.resolved(a)
			if !ok || !errors.Is(r.Err, ErrRetriesExhausted) || !errors.Is(r.Err, errConn) || !strings.Contains(r.Err.Error(), "3 times") {
				t.Fatalf("resolved %v %v, want ErrRetriesExhausted naming 3 runs and the last error", r, ok)
			}
			var id uint64
			rd := tr.do(func(s *Scheduler) { id = s.Join() })
			if len(rd.Joins) != 1 || rd.Joins[0].ID != id || !errors.Is(rd.Joins[0].Err, ErrRetriesExhausted) {
				t.Fatalf("joins %v, want the retries error", rd.Joins)
			}
		}},
		{"user error is not retried, cancels the queue and surfaces at join once", Config{Workers: 1}, func(t *testing.T, tr *trace) {
			tr.do(func(s *Scheduler) { s.WorkerUp(0) })
			var a, b, c uint64
			tr.do(func(s *Scheduler) { a, b, c = s.Schedule(), s.Schedule(), s.Schedule() })
			rd := tr.do(func(s *Scheduler) { s.ClosureDone(0, a, UserError, errUser) })
			if len(rd.Runs) != 0 || len(rd.Retries) != 0 {
				t.Fatalf("user error retried: runs %v retries %v", rd.Runs, rd.Retries)
			}
			if r, _ := tr.resolved(a); r.Err != errUser {
				t.Fatalf("step a resolved with %v, want the user error", r.Err)
			}
			for _, step := range []uint64{b, c} {
				if r, ok := tr.resolved(step); !ok || !errors.Is(r.Err, ErrCancelled) || !errors.Is(r.Err, errUser) {
					t.Fatalf("queued step resolved %v %v, want ErrCancelled wrapping the user error", r, ok)
				}
			}
			rd = tr.do(func(s *Scheduler) { s.Join() })
			if len(rd.Joins) != 1 || rd.Joins[0].Err != errUser {
				t.Fatalf("joins %v, want the user error", rd.Joins)
			}
			rd = tr.do(func(s *Scheduler) { s.Join() })
			if len(rd.Joins) != 1 || rd.Joins[0].Err != nil {
				t.Fatalf("second join %v, want nil (the error was reported)", rd.Joins)
			}
			if rd := tr.do(func(s *Scheduler) { s.Schedule() }); len(rd.Runs) != 1 {
				t.Fatalf("schedule after a user error: runs %v, want it to run", rd.Runs)
			}
		}},
		{"worker down for the configured ticks is reported once", Config{Workers: 2, UnreachableTicks: 3}, func(t *testing.T, tr *trace) {
			tr.do(func(s *Scheduler) { s.WorkerUp(0); s.WorkerUp(1) })
			tr.do(func(s *Scheduler) { s.WorkerDown(1, errConn) })
			for i := 1; i <= 5; i++ {
				rd := tr.do(func(s *Scheduler) { s.Tick() })
				if got := len(rd.Unreachable); (i == 3) != (got == 1) {
					t.Fatalf("tick %d: unreachable %v", i, rd.Unreachable)
				}
			}
			if want := []Unreachable{{1, 3, errConn}}; !reflect.DeepEqual(tr.all.Unreachable, want) {
				t.Fatalf("unreachable %v, want %v", tr.all.Unreachable, want)
			}
			if tr.all.Stall != nil {
				t.Fatalf("stall reported while worker 0 is up")
			}
		}},
		{"closures waiting with no worker up stall, FailQueued resolves them", Config{Workers: 2, UnreachableTicks: 2}, func(t *testing.T, tr *trace) {
			var a uint64
			tr.do(func(s *Scheduler) { a = s.Schedule() })
			tr.do(func(s *Scheduler) { s.Tick() })
			rd := tr.do(func(s *Scheduler) { s.Tick() })
			if rd.Stall == nil || !reflect.DeepEqual(rd.Stall.Down, []int{0, 1}) || len(rd.Unreachable) != 2 {
				t.Fatalf("ready %+v, want a stall naming workers 0 and 1 and both unreachable", rd)
			}
			stallErr := fmt.Errorf("no worker answered")
			tr.do(func(s *Scheduler) { s.FailQueued(stallErr) })
			if r, ok := tr.resolved(a); !ok || r.Err != stallErr {
				t.Fatalf("resolved %v %v, want the stall error", r, ok)
			}
			rd = tr.do(func(s *Scheduler) { s.Join() })
			if len(rd.Joins) != 1 || rd.Joins[0].Err != stallErr {
				t.Fatalf("joins %v", rd.Joins)
			}
		}},
		{"cancel: queue resolved, running stopped, join answered after they return", Config{Workers: 1}, func(t *testing.T, tr *trace) {
			tr.do(func(s *Scheduler) { s.WorkerUp(0) })
			var a, b uint64
			var id uint64
			tr.do(func(s *Scheduler) { a, b = s.Schedule(), s.Schedule(); id = s.Join() })
			rd := tr.do(func(s *Scheduler) { s.Cancel(errStop) })
			if !reflect.DeepEqual(rd.Cancels, []uint64{a}) || len(rd.Joins) != 0 {
				t.Fatalf("cancels %v joins %v, want step a stopped and the join still waiting", rd.Cancels, rd.Joins)
			}
			if r, ok := tr.resolved(b); !ok || !errors.Is(r.Err, errStop) || !errors.Is(r.Err, ErrCancelled) {
				t.Fatalf("queued step resolved %v %v, want ErrCancelled wrapping the cancel error", r, ok)
			}
			rd = tr.do(func(s *Scheduler) { s.ClosureDone(0, a, UserError, errors.New("ps read: context canceled")) })
			if len(rd.Joins) != 1 || rd.Joins[0].ID != id || rd.Joins[0].Err != errStop {
				t.Fatalf("joins %v, want the cancel error", rd.Joins)
			}
			if r, _ := tr.resolved(a); !errors.Is(r.Err, errStop) || !errors.Is(r.Err, ErrCancelled) {
				t.Fatalf("running step resolved with %v, want ErrCancelled wrapping the cancel error", r.Err)
			}
			// Usable afterwards: the next cell schedules and joins cleanly.
			var c uint64
			rd = tr.do(func(s *Scheduler) { c = s.Schedule() })
			if len(rd.Runs) != 1 {
				t.Fatalf("runs after cancel %v", rd.Runs)
			}
			rd = tr.do(func(s *Scheduler) { s.ClosureDone(0, c, OK, nil); s.Join() })
			if len(rd.Joins) != 1 || rd.Joins[0].Err != nil {
				t.Fatalf("join after cancel %v, want nil", rd.Joins)
			}
		}},
		{"cancel one closure", Config{Workers: 1}, func(t *testing.T, tr *trace) {
			var a uint64
			tr.do(func(s *Scheduler) { a = s.Schedule() })
			tr.do(func(s *Scheduler) { s.CancelClosure(a, errStop) })
			if r, ok := tr.resolved(a); !ok || r.Err != errStop {
				t.Fatalf("resolved %v %v", r, ok)
			}
			if rd := tr.do(func(s *Scheduler) { s.WorkerUp(0) }); len(rd.Runs) != 0 {
				t.Fatalf("cancelled closure ran: %v", rd.Runs)
			}
		}},
		{"close cancels the queue with the reason and refuses later schedules", Config{Workers: 1}, func(t *testing.T, tr *trace) {
			tr.do(func(s *Scheduler) { s.WorkerUp(0) })
			var a, b uint64
			tr.do(func(s *Scheduler) { a, b = s.Schedule(), s.Schedule(); s.Join() })
			closed := errors.New("coordinator closed")
			rd := tr.do(func(s *Scheduler) { s.Close(closed) })
			if !reflect.DeepEqual(rd.Cancels, []uint64{a}) || len(rd.Joins) != 1 || rd.Joins[0].Err != closed {
				t.Fatalf("ready %+v, want step a stopped and the join answered with the close error", rd)
			}
			if r, _ := tr.resolved(b); r.Err != closed {
				t.Fatalf("queued step resolved with %v", r.Err)
			}
			tr.do(func(s *Scheduler) { s.ClosureDone(0, a, UserError, errors.New("context canceled")) })
			if r, _ := tr.resolved(a); r.Err != closed {
				t.Fatalf("running step resolved with %v, want the close error", r.Err)
			}
			var c uint64
			rd = tr.do(func(s *Scheduler) { c = s.Schedule() })
			if len(rd.Runs) != 0 || len(rd.Resolves) != 1 || rd.Resolves[0].Step != c || rd.Resolves[0].Err != closed {
				t.Fatalf("schedule after close: %+v", rd)
			}
		}},
		{"a failed ps stops everything for good", Config{Workers: 2}, func(t *testing.T, tr *trace) {
			tr.do(func(s *Scheduler) { s.WorkerUp(0) })
			var a, b uint64
			tr.do(func(s *Scheduler) { a, b = s.Schedule(), s.Schedule() })
			tr.do(func(s *Scheduler) { s.Fail(errPS); s.ClosureDone(0, a, WorkerFailure, errConn) })
			for _, step := range []uint64{a, b} {
				if r, ok := tr.resolved(step); !ok || !errors.Is(r.Err, errPS) {
					t.Fatalf("step %d resolved %v %v, want the ps error", step, r, ok)
				}
			}
			if len(tr.all.Retries) != 0 {
				t.Fatalf("retried after a ps failure: %v", tr.all.Retries)
			}
			for range 2 {
				rd := tr.do(func(s *Scheduler) { s.Join(); s.Schedule() })
				if len(rd.Joins) != 1 || rd.Joins[0].Err != errPS || len(rd.Resolves) != 1 || rd.Resolves[0].Err != errPS {
					t.Fatalf("after Fail: %+v", rd)
				}
			}
		}},
		{"forget: steps below the oldest unfinished", Config{Workers: 1, ForgetEvery: 2, FirstStep: 10}, func(t *testing.T, tr *trace) {
			tr.do(func(s *Scheduler) { s.WorkerUp(0); s.Schedule(); s.Schedule(); s.Schedule() })
			tr.do(func(s *Scheduler) { s.ClosureDone(0, 11, OK, nil) })
			rd := tr.do(func(s *Scheduler) { s.ClosureDone(0, 12, OK, nil) })
			if rd.Forget != 13 {
				t.Fatalf("forget %d, want 13 (step 13 still runs)", rd.Forget)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.run(t, newTrace(t, tc.cfg))
		})
	}
}

// TestCancelManyQueuedIsLinear: cancelling each of many queued closures one by one (every
// Schedule under a notebook cell's context that ends) costs O(1) each, not O(queue).
func TestCancelManyQueuedIsLinear(t *testing.T) {
	s, err := New(Config{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	const n = 200000
	steps := make([]uint64, n)
	for i := range steps {
		steps[i] = s.Schedule()
	}
	s.Ready()
	start := time.Now()
	for _, st := range steps {
		s.CancelClosure(st, ErrCancelled)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("cancelling %d queued closures took %v", n, took)
	}
	if rd := s.Ready(); len(rd.Resolves) != n || s.Queued() != 0 || !s.Done() {
		t.Fatalf("%d resolves, %d queued, done %v; want %d, 0, true", len(rd.Resolves), s.Queued(), s.Done(), n)
	}
	s.WorkerUp(0)
	if rd := s.Ready(); len(rd.Runs) != 0 {
		t.Fatalf("a worker that comes up runs %v, want nothing (all cancelled)", rd.Runs)
	}
	next := s.Schedule()
	if rd := s.Ready(); len(rd.Runs) != 1 || rd.Runs[0].Step != next {
		t.Fatalf("after the cancellations a new closure runs %v, want step %d", rd.Runs, next)
	}
}

// TestCancelledOutcomeIsNotAJoinError: a running closure that returns because its own
// context ended (reported as Cancelled, whether or not CancelClosure came first) settles
// its RemoteValue with the error but does not fail the Join, and later closures still run;
// a UserError does fail it.
func TestCancelledOutcomeIsNotAJoinError(t *testing.T) {
	for _, tc := range []struct {
		name        string
		cancelFirst bool
		outcome     Outcome
		joinFails   bool
	}{
		{"Cancelled before CancelClosure", false, Cancelled, false},
		{"Cancelled after CancelClosure", true, Cancelled, false},
		{"UserError", false, UserError, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(Config{Workers: 1})
			if err != nil {
				t.Fatal(err)
			}
			s.WorkerUp(0)
			step := s.Schedule()
			if rd := s.Ready(); len(rd.Runs) != 1 {
				t.Fatalf("runs %v, want step %d", rd.Runs, step)
			}
			stopped := errors.New("step stopped: context canceled")
			if tc.cancelFirst {
				s.CancelClosure(step, stopped)
			}
			s.ClosureDone(0, step, tc.outcome, stopped)
			rd := s.Ready()
			if len(rd.Resolves) != 1 || rd.Resolves[0].Err == nil {
				t.Fatalf("resolves %+v, want step %d settled with an error", rd.Resolves, step)
			}
			id := s.Join()
			rd = s.Ready()
			if len(rd.Joins) != 1 || rd.Joins[0].ID != id {
				t.Fatalf("joins %+v, want join %d answered", rd.Joins, id)
			}
			if got := rd.Joins[0].Err != nil; got != tc.joinFails {
				t.Fatalf("join error %v, want an error: %v", rd.Joins[0].Err, tc.joinFails)
			}
		})
	}
}

// TestStats: the counters the cluster panel shows follow scheduling, a retry, a failure
// (which cancels the queue) and the workers going down and up.
func TestStats(t *testing.T) {
	s, err := New(Config{Workers: 2, Slots: 1, UnreachableTicks: 3, FirstStep: 100})
	if err != nil {
		t.Fatal(err)
	}
	s.WorkerUp(0)
	s.WorkerUp(1)
	a, b, c := s.Schedule(), s.Schedule(), s.Schedule()
	check := func(when string, want Stats) {
		t.Helper()
		if got := s.Stats(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: Stats = %+v, want %+v", when, got, want)
		}
	}
	check("3 scheduled on 2 workers", Stats{Scheduled: 3, Queued: 1, Running: 2, Up: []bool{true, true}})
	s.ClosureDone(0, a, OK, nil)
	check("a done, c runs", Stats{Scheduled: 3, Done: 1, Running: 2, Up: []bool{true, true}})
	s.ClosureDone(1, b, WorkerFailure, errConn)
	check("worker 1 failed: b again on worker 0 after c", Stats{Scheduled: 3, Done: 1, Retried: 1, Queued: 1, Running: 1, Up: []bool{true, false}})
	s.ClosureDone(0, c, UserError, errUser)
	s.WorkerUp(1)
	// A closure's own error cancels the queued ones until the next Join, as in TF.
	check("c failed: b cancelled", Stats{Scheduled: 3, Done: 3, Failed: 2, Retried: 1, Up: []bool{true, true}})
	s.Close(errStop)
	s.Schedule()
	check("scheduled after Close", Stats{Scheduled: 4, Done: 4, Failed: 3, Retried: 1, Up: []bool{true, true}})
}
