package distribute

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"godist/distlib/collective"
)

// Elastic training (WithElastic). A generation is a set of workers training together: its
// collectives run over a view of the transport holding only them (collective.Subgroup), with
// the generation in every tag, so that messages of a collective abandoned when a worker was
// lost never reach the next generation's. A worker that sees a member lost, or that is told
// by another that the group is regrouping, ends its generation: the collective in flight
// fails with a regroupError, and keras Fit calls Regroup. The remaining workers exchange
// notes (their completed steps and the workers they know lost) until they agree; the ring
// is re-formed over them; a worker one step behind (it lost the last all-reduce that others
// completed) receives the state after that step from one that has it. Then Fit retries the
// step, its global batch split among the workers left.

// WithElastic makes MultiWorkerMirroredStrategy elastic (off by default: as in TensorFlow,
// a lost worker stops the job). When a worker is lost during keras Fit, the remaining
// workers agree on the last step they all completed, re-form their ring without it, keep
// their weights and optimizer state in memory, split the following global batches among
// themselves, and go on; every global batch is trained once. The job stops, naming the
// missing tasks, when fewer than min workers remain (then BackupAndRestore resumes it, as
// without WithElastic). max is the most workers the job may have (0: the cluster's size);
// the cluster may not be larger. Elastic workers do not use the shared memory of workers on
// one host: their all-reduce takes the ring (a lost worker's memory cannot be read).
func WithElastic(min, max int) MultiWorkerOption {
	return multiWorkerOption(func(o *options) { o.multi().elastic = &[2]int{min, max} })
}

// Regrouped is what Regroup agreed.
type Regrouped struct {
	// Done is the number of steps every remaining worker has now completed.
	Done int64
	// State is, on a worker that was one step behind, the state after step Done from a
	// worker that completed it (what the state function of that worker returned); nil on
	// the others.
	State []byte
	// Index and Count are this worker's index and the number of workers from now on.
	Index, Count int
	// Lost names the workers left out, such as "worker 2 (127.0.0.1:2223)".
	Lost []string
}

// generation is one set of workers training together.
type generation struct {
	n       int
	members []int                // the transport's ranks, ascending
	view    collective.Transport // the members' view of the transport
	ctx     context.Context      // ended (cause *genEnd) when a member is lost or regroups
	end     context.CancelCauseFunc
	notes   chan regroupNote   // the first round's notes of the other members
	unwatch context.CancelFunc // stops the watchers of the notes
}

// genEnd is why a generation ended for this worker: a worker started a regroup.
type genEnd struct{ peer string }

func (e *genEnd) Error() string { return e.peer + " started a regroup" }

// regroupError reports a collective stopped because its generation ended: Fit regroups and
// retries the step (Regroupable).
type regroupError struct {
	op    string
	cause error
}

func (e *regroupError) Error() string {
	return fmt.Sprintf("distribute: %s stopped: the workers are regrouping: %v (keras Fit regroups them and goes on; elsewhere, restart the job)", e.op, e.cause)
}

// TooFewWorkersError reports that an elastic job lost workers until fewer than WithElastic's
// min remain; it unwraps to the loss that started the last regroup.
type TooFewWorkersError struct {
	Missing []string // the workers lost, such as "worker 2 (127.0.0.1:2223)"
	Left    int      // the workers remaining
	Min     int      // WithElastic's min
	Step    int64    // the steps the remaining workers completed
	Err     error
}

func (e *TooFewWorkersError) Error() string {
	verb, remain := "was", "workers remain"
	if len(e.Missing) > 1 {
		verb = "were"
	}
	if e.Left == 1 {
		remain = "worker remains"
	}
	return fmt.Sprintf("distribute: %s %s lost after step %d; %d %s, fewer than the %d of WithElastic: "+
		"restart the job with the missing workers (keras.BackupAndRestore resumes from the last epoch) or lower min",
		strings.Join(e.Missing, ", "), verb, e.Step, e.Left, remain, e.Min)
}

func (e *TooFewWorkersError) Unwrap() error { return e.Err }

// regroupNote is a note received from rank from (or the error receiving it).
type regroupNote struct {
	from int
	msg  regroupMsg
	err  error
}

// regroupMsg is what a worker tells the others in each round of a regroup.
type regroupMsg struct {
	Done int64 `json:"done"` // steps it completed
	Lost []int `json:"lost"` // the ranks it knows lost, ascending
}

func regroupTag(gen, round int) string { return fmt.Sprintf("elastic/%d/%d", gen, round) }

// stateTag is the tag of the state a worker receives as it enters generation gen (one step
// behind at a regroup, or admitted at an epoch's end).
func stateTag(gen int) string { return fmt.Sprintf("elastic/%d/state", gen) }

// startGeneration makes members (ranks of s.t) the workers training together as
// generation n: the collectives run over their view, and a watcher per other member ends
// the generation when that member sends its first regroup note. A member's loss does not
// end it: a collective that needs the lost member fails by itself, while one whose
// messages from it had all arrived (a worker that finished Fit and exited) completes.
// s.turn is held (or the strategy is being made).
func (s *MultiWorkerMirroredStrategy) startGeneration(n int, members []int) error {
	view, err := collective.NewSubgroup(s.t, members, fmt.Sprintf("g%d/", n))
	if err != nil {
		return err
	}
	g := &generation{n: n, members: members, view: view, notes: make(chan regroupNote, len(members))}
	g.ctx, g.end = context.WithCancelCause(context.Background())
	var wctx context.Context
	wctx, g.unwatch = context.WithCancel(s.life)
	for _, r := range members {
		if r == s.rank {
			continue
		}
		go func() {
			b, err := s.t.Recv(wctx, r, regroupTag(n, 1))
			if wctx.Err() != nil {
				return
			}
			note := regroupNote{from: r, err: err}
			if err == nil {
				note.err = json.Unmarshal(b, &note.msg)
			}
			g.notes <- note
			if err == nil {
				g.end(&genEnd{peer: s.peer(r).String()})
			}
		}()
	}
	s.el.joins.forget(members)
	s.gen, s.g = g, view
	s.el.cur.Store(g)
	s.worker, s.workers = view.Rank(), view.Size()
	s.chief = s.worker == 0
	s.seq = 0
	s.kept = nil
	return nil
}

// bindGeneration returns ctx, also ended when g ends.
func bindGeneration(ctx context.Context, g *generation) (context.Context, func()) {
	if g == nil {
		return ctx, func() {}
	}
	cctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(g.ctx, func() { cancel(context.Cause(g.ctx)) })
	return cctx, func() { stop(); cancel(nil) }
}

// genError returns err as a regroupError when g ended while op ran under the caller's ctx
// (which has not ended), else nil.
func genError(ctx context.Context, g *generation, op string, err error) error {
	if g == nil || g.ctx.Err() == nil || ctx.Err() != nil {
		return nil
	}
	return &regroupError{op: op, cause: context.Cause(g.ctx)}
}

// elasticExtended is the extended of an elastic MultiWorkerMirroredStrategy: it also
// offers ElasticWorkers.
type elasticExtended struct{ multiWorkerExtended }

// Regroupable reports whether err says that a worker was lost or the workers are
// regrouping: the step can be retried after Regroup.
func (e *elasticExtended) Regroupable(err error) bool {
	var re *regroupError
	var pu *PeerUnavailableError
	return errors.As(err, &re) || errors.As(err, &pu)
}

// Regroup is the strategy's regroup (ElasticWorkers).
func (e *elasticExtended) Regroup(ctx context.Context, done int64, cause error, state func() ([]byte, error)) (Regrouped, error) {
	return e.s.regroup(ctx, done, cause, state)
}

// regroup agrees with the other remaining members on who goes on and on the steps they
// completed (done is this worker's count), re-forms the group over them, and moves the
// state of a worker that completed the most steps (state, called there) to those one step
// behind. cause is the error that stopped this worker's step.
func (s *MultiWorkerMirroredStrategy) regroup(ctx context.Context, done int64, cause error, state func() ([]byte, error)) (Regrouped, error) {
	if _, err := s.takeTurn(ctx); err != nil {
		return Regrouped{}, err
	}
	defer s.endTurn()
	g := s.gen
	start := time.Now()
	g.end(&genEnd{peer: s.peer(s.rank).String()}) // this worker's collectives of g are over too
	defer g.unwatch()
	lost := map[int]bool{}
	var pu *PeerUnavailableError
	if errors.As(cause, &pu) && pu.rank != s.rank && pu.rank >= 0 {
		lost[pu.rank] = true
	}
	dones := map[int]int64{s.rank: done}
	for round := 1; ; round++ {
		// A member that asked to join again was started again: its process is gone.
		for _, r := range s.el.joins.again(g.members) {
			lost[r] = true
		}
		if round > len(g.members)+1 {
			return Regrouped{}, fmt.Errorf("distribute: worker %d: the workers did not agree on who goes on after %d rounds", s.rank, round-1)
		}
		agreed, err := s.regroupRound(ctx, g, round, done, lost, dones)
		if err != nil {
			return Regrouped{}, err
		}
		if agreed {
			break
		}
	}
	var left, gone []int
	for _, r := range g.members {
		if lost[r] {
			gone = append(gone, r)
		} else {
			left = append(left, r)
		}
	}
	names := make([]string, len(gone))
	for i, r := range gone {
		names[i] = s.peer(r).String()
	}
	most, root := done, s.rank
	for _, r := range left {
		if d := dones[r]; d > most || (d == most && r < root) {
			most, root = d, r
		}
	}
	if len(left) < s.el.min {
		return Regrouped{}, &TooFewWorkersError{Missing: names, Left: len(left), Min: s.el.min, Step: most, Err: cause}
	}
	for _, r := range left {
		if dones[r] < most-1 {
			return Regrouped{}, fmt.Errorf("distribute: %s completed %d steps, %s %d: more than one step apart, which a synchronous step cannot leave",
				s.peer(r), dones[r], s.peer(root), most)
		}
	}
	if err := s.startGeneration(g.n+1, left); err != nil {
		return Regrouped{}, err
	}
	out := Regrouped{Done: most, Index: s.worker, Count: s.workers, Lost: names}
	if len(gone) > 0 {
		logf("WARNING", "%s lost; the %d remaining workers go on after step %d (this is worker %d of %d now; regrouped in %v)",
			strings.Join(names, ", "), len(left), most, s.worker, s.workers, time.Since(start).Round(time.Millisecond))
	}
	tag := stateTag(g.n + 1)
	switch {
	case s.rank == root:
		var blob []byte
		for _, r := range left {
			if dones[r] == most {
				continue
			}
			if blob == nil {
				b, err := state()
				if err != nil {
					return Regrouped{}, fmt.Errorf("distribute: state for %s: %w", s.peer(r), err)
				}
				blob = b
			}
			if err := s.t.Send(ctx, r, tag, blob); err != nil {
				return Regrouped{}, s.regroupLoss(r, "sending the state", err)
			}
		}
	case done < most:
		rctx, cancel := context.WithTimeout(ctx, s.el.wait)
		defer cancel()
		b, err := s.t.Recv(rctx, root, tag)
		if err != nil {
			if ctx.Err() != nil {
				return Regrouped{}, context.Cause(ctx)
			}
			return Regrouped{}, s.regroupLoss(root, "receiving the state", err)
		}
		out.State = b
	}
	return out, nil
}

// regroupLoss is the PeerUnavailableError of base rank r lost during op of a regroup.
func (s *MultiWorkerMirroredStrategy) regroupLoss(r int, op string, err error) error {
	p := s.peer(r)
	return &PeerUnavailableError{Task: p.task.Type, Index: p.task.Index, Addr: p.addr, Op: op, Wait: s.el.wait, Err: err, rank: r}
}

// regroupRound sends this worker's note of round to every member not known lost and reads
// theirs, adding the ranks they know lost (and those whose note does not come within the
// regroup wait) to lost, and their completed steps to dones. It reports whether the round
// agreed: every note named the same lost ranks as this worker's, and no rank was found lost.
func (s *MultiWorkerMirroredStrategy) regroupRound(ctx context.Context, g *generation, round int, done int64, lost map[int]bool, dones map[int]int64) (bool, error) {
	known := sortedKeys(lost)
	body, _ := json.Marshal(regroupMsg{Done: done, Lost: known})
	tag := regroupTag(g.n, round)
	pending := map[int]bool{}
	for _, r := range g.members {
		if r == s.rank || lost[r] {
			continue
		}
		if err := s.t.Send(ctx, r, tag, body); err != nil {
			if ctx.Err() != nil {
				return false, context.Cause(ctx)
			}
			lost[r] = true
			continue
		}
		pending[r] = true
	}
	notes := g.notes
	if round > 1 {
		rctx, cancel := context.WithCancel(ctx)
		defer cancel()
		ch := make(chan regroupNote, len(pending))
		for r := range pending {
			go func() {
				b, err := s.t.Recv(rctx, r, tag)
				n := regroupNote{from: r, err: err}
				if err == nil {
					n.err = json.Unmarshal(b, &n.msg)
				}
				ch <- n
			}()
		}
		notes = ch
	}
	agreed := len(lost) == len(known)
	timer := time.NewTimer(s.el.wait)
	defer timer.Stop()
	for len(pending) > 0 {
		select {
		case n := <-notes:
			if !pending[n.from] {
				continue
			}
			delete(pending, n.from)
			if n.err != nil {
				lost[n.from], agreed = true, false
				continue
			}
			dones[n.from] = n.msg.Done
			if !slices.Equal(n.msg.Lost, known) {
				agreed = false
			}
			for _, r := range n.msg.Lost {
				if r != s.rank && !lost[r] {
					lost[r], agreed = true, false
					delete(pending, r)
				}
			}
		case <-timer.C:
			for r := range pending {
				lost[r], agreed = true, false
			}
			clear(pending)
		case <-ctx.Done():
			return false, context.Cause(ctx)
		}
	}
	return agreed, nil
}

func sortedKeys(m map[int]bool) []int {
	out := make([]int, 0, len(m))
	for r := range m {
		out = append(out, r)
	}
	slices.Sort(out)
	return out
}
