package distribute

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"godist/distlib/cluster"
	"godist/distlib/collective"
	"godist/distlib/transport"
)

// Defaults of the multi-worker health checks (WithHealthCheck): a worker checks every peer
// it has talked to this often, and a peer that does not answer a check within the timeout is
// lost. A peer whose connection closes (its process ended or was killed) is lost at once.
const (
	DefaultHealthCheckInterval = 10 * time.Second
	DefaultHealthCheckTimeout  = 30 * time.Second
)

// waitLogInterval is how often a worker waiting for its cluster names the tasks that have
// not connected yet (TensorFlow logs "Waiting for the cluster" the same way); the first
// line comes after waitLogGrace, so that a cluster that is all up logs nothing.
var (
	waitLogInterval = 30 * time.Second
	waitLogGrace    = time.Second
)

// PeerUnavailableError reports that another task of a multi-worker job is gone or does not
// answer (TensorFlow's UnavailableError): its connection closed (the process ended or was
// killed), it failed a health check, it did not answer within the communication timeout,
// or it never connected. The step cannot finish without it; the job must restart.
type PeerUnavailableError struct {
	Task  string        // the task's type: "chief" or "worker"
	Index int           // the task's index in its type
	Addr  string        // the task's address ("" without a cluster, as with WithTransport)
	Op    string        // what this worker was doing: "allreduce", "broadcast", "barrier", "waiting for the cluster"
	Wait  time.Duration // for a peer that did not answer: how long this worker waited
	Err   error         // the cause, often a *collective.PeerError wrapping transport.ErrPeerLost

	rank int // the task's rank in the strategy's transport
}

// Error names the task, what happened and what to do.
func (e *PeerUnavailableError) Error() string {
	what := "is unavailable"
	switch {
	case errors.Is(e.Err, transport.ErrPeerLost):
		what = "was lost"
	case e.Op == opJoin:
		what = fmt.Sprintf("did not connect within %v", e.Wait)
	case errors.Is(e.Err, context.DeadlineExceeded):
		what = fmt.Sprintf("did not answer within %v", e.Wait)
	}
	during := "during " + e.Op
	if e.Op == opJoin {
		during = "while " + e.Op
	}
	return fmt.Sprintf("distribute: %s %s %s: %v; the job cannot go on without it: restart the job (every task; keras.BackupAndRestore resumes from the last epoch)",
		e.taskName(), what, during, e.Err)
}

func (e *PeerUnavailableError) taskName() string {
	if e.Addr == "" {
		return fmt.Sprintf("%s %d", e.Task, e.Index)
	}
	return fmt.Sprintf("%s %d (%s)", e.Task, e.Index, e.Addr)
}

// Unwrap returns the cause.
func (e *PeerUnavailableError) Unwrap() error { return e.Err }

const opJoin = "waiting for the cluster"

// peerTask names the task of every rank of the strategy's transport.
type peerTask struct {
	task cluster.Task
	addr string
}

func (p peerTask) String() string {
	if p.addr == "" {
		return fmt.Sprintf("%s %d", p.task.Type, p.task.Index)
	}
	return fmt.Sprintf("%s %d (%s)", p.task.Type, p.task.Index, p.addr)
}

// rankOf returns the transport's rank of worker index i of the current group.
func (s *MultiWorkerMirroredStrategy) rankOf(i int) int {
	if s.gen == nil || i < 0 || i >= len(s.gen.members) {
		return i
	}
	return s.gen.members[i]
}

// peer returns the task of rank r of the strategy's transport.
func (s *MultiWorkerMirroredStrategy) peer(r int) peerTask {
	if r >= 0 && r < len(s.peers) {
		return s.peers[r]
	}
	return peerTask{task: cluster.Task{Type: cluster.Worker, Index: r}}
}

// unavailable turns err into a *PeerUnavailableError naming the peer when err says that a
// peer was lost or did not answer; it returns nil for other errors.
func (s *MultiWorkerMirroredStrategy) unavailable(op string, err error) error {
	var pe *collective.PeerError
	if !errors.As(err, &pe) || pe.Rank == s.worker {
		return nil
	}
	if !errors.Is(err, transport.ErrPeerLost) && !errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	r := s.rankOf(pe.Rank)
	p := s.peer(r)
	return &PeerUnavailableError{Task: p.task.Type, Index: p.task.Index, Addr: p.addr, Op: op, Wait: s.timeout, Err: err, rank: r}
}

// join waits until every other worker has been up (collective.PeerWaiter; transports without it
// are not waited for), logging the tasks that have not connected yet after waitLogGrace and
// then every waitLogInterval. It returns an error naming a task that did not connect before
// ctx ended, or one that refused this worker.
func (s *MultiWorkerMirroredStrategy) join(ctx context.Context) error {
	if s.el != nil && len(s.peers) > 1 {
		return s.elasticJoin(ctx)
	}
	pg, ok := s.t.(collective.PeerWaiter)
	if !ok || len(s.peers) <= 1 {
		return nil
	}
	start := time.Now()
	var (
		mu      sync.Mutex
		missing = map[int]bool{}
		failed  error
		logged  bool
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var others []int
	for r := range s.peers {
		if r != s.rank {
			missing[r] = true // before any waiter can delete it
			others = append(others, r)
		}
	}
	for _, r := range others {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := pg.WaitPeer(ctx, r)
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				delete(missing, r)
				return
			}
			if failed == nil && ctx.Err() == nil {
				if errors.Is(err, transport.ErrPeerLost) {
					p := s.peer(r)
					failed = &PeerUnavailableError{Task: p.task.Type, Index: p.task.Index, Addr: p.addr, Op: opJoin, Err: err, rank: r}
				} else {
					failed = fmt.Errorf("%s: %w", s.peer(r), err)
				}
				cancel()
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	timer := time.NewTimer(waitLogGrace)
	defer timer.Stop()
	for {
		select {
		case <-done:
			mu.Lock()
			defer mu.Unlock()
			if failed != nil {
				return failed
			}
			if len(missing) == 0 {
				if logged {
					logf("INFO", "the cluster is complete: all %d workers connected (%v)", len(s.peers), time.Since(start).Round(time.Second))
				}
				return nil
			}
			r := lowest(missing)
			p := s.peer(r)
			err := &PeerUnavailableError{Task: p.task.Type, Index: p.task.Index, Addr: p.addr, Op: opJoin,
				Wait: time.Since(start).Round(time.Millisecond), Err: context.Cause(ctx), rank: r}
			if len(missing) > 1 {
				err.Err = fmt.Errorf("%w (%s missing too)", err.Err, s.tasksOf(missing, r))
			}
			return err
		case <-timer.C:
			mu.Lock()
			if len(missing) > 0 {
				verb := "has"
				if len(missing) > 1 {
					verb = "have"
				}
				line := fmt.Sprintf("waiting for the cluster: %s %s not connected yet (%v)", s.tasksOf(missing, -1), verb, time.Since(start).Round(time.Second))
				logged = true
				logf("INFO", "%s", line)
			}
			mu.Unlock()
			timer.Reset(waitLogInterval)
		}
	}
}

// tasksOf lists the tasks of the ranks in set, but skip, in rank order.
func (s *MultiWorkerMirroredStrategy) tasksOf(set map[int]bool, skip int) string {
	var rs []int
	for r := range set {
		if r != skip {
			rs = append(rs, r)
		}
	}
	sort.Ints(rs)
	names := make([]string, len(rs))
	for i, r := range rs {
		names[i] = s.peer(r).String()
	}
	return strings.Join(names, ", ")
}

func lowest(set map[int]bool) int {
	low := -1
	for r := range set {
		if low < 0 || r < low {
			low = r
		}
	}
	return low
}
