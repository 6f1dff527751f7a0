package distribute

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"godist/distlib/collective"
)

// Joining an elastic job. Every worker but the chief asks every other worker to be admitted
// (the chief may change later). The chief starts the first generation with the workers that
// asked within the regroup wait (all of them, when they are up): at least min. A worker that
// asks later is admitted at the next epoch's end (Admit, at keras Fit's wait there): the
// chief tells the group and the new workers who the next generation is, and sends the new
// workers the state and the epoch to start at.

// Admission is what Join returns.
type Admission struct {
	// Epoch is the epoch this worker starts at (0 for a worker of the first generation).
	Epoch int
	// State is, for a worker admitted at an epoch's end, the state of the job there (what
	// the chief's state function returned to Admit); nil for a worker of the first
	// generation.
	State []byte
}

// admitMsg tells a worker it is admitted, to generation Gen of Members, at Epoch; the state
// follows under stateTag(Gen) when State is true.
type admitMsg struct {
	Gen     int   `json:"gen"`
	Members []int `json:"members"`
	Epoch   int   `json:"epoch"`
	State   bool  `json:"state"`
}

// joinRequests counts the join requests of every rank (watchJoins): a rank asks once per
// process, so a worker that was lost and started again asks again.
type joinRequests struct {
	mu    sync.Mutex
	count map[int]int
	seen  map[int]int   // the count when the rank was last admitted
	more  chan struct{} // closed and replaced at each request
}

// rejoinPoll is how often watchJoins looks again for a request from a rank that was lost:
// its transport refuses receives from it until a process at its address connects again.
const rejoinPoll = 250 * time.Millisecond

const (
	joinTag  = "elastic/join"
	admitTag = "elastic/admit"
)

// watchJoins receives the join requests of every other rank, for the strategy's life.
func (s *MultiWorkerMirroredStrategy) watchJoins() {
	s.el.joins = joinRequests{count: map[int]int{}, seen: map[int]int{}, more: make(chan struct{})}
	for r := range s.peers {
		if r == s.rank {
			continue
		}
		go func() {
			for {
				_, err := s.t.Recv(s.life, r, joinTag)
				if s.life.Err() != nil {
					return
				}
				if err != nil { // lost: a process at its address may connect again
					select {
					case <-time.After(rejoinPoll):
						continue
					case <-s.life.Done():
						return
					}
				}
				j := &s.el.joins
				j.mu.Lock()
				j.count[r]++
				again := j.count[r] > max(j.seen[r], 1)
				close(j.more)
				j.more = make(chan struct{})
				j.mu.Unlock()
				// A member that asks again was started again: its old process is gone, and
				// the transport, which forgets a rank's loss once a process at its address
				// connects, may not have told the collectives. End the generation.
				if g := s.el.cur.Load(); again && g != nil && slices.Contains(g.members, r) {
					g.end(&genEnd{peer: s.peer(r).String() + " was started again and"})
				}
			}
		}()
	}
}

// requests returns the ranks waiting to be admitted (a request since they were last
// admitted), ascending, and a channel closed at the next request.
func (j *joinRequests) requests() ([]int, <-chan struct{}) {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []int
	for r, n := range j.count {
		if n > j.seen[r] {
			out = append(out, r)
		}
	}
	slices.Sort(out)
	return out, j.more
}

// again returns the ranks of members that asked to join since they were admitted: they
// were started again.
func (j *joinRequests) again(members []int) []int {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []int
	for _, r := range members {
		if j.count[r] > j.seen[r] {
			out = append(out, r)
		}
	}
	return out
}

// forget records that ranks were admitted: only a later request counts for them, that of
// a process started again after a loss (a rank's first request is its first process's,
// even where it arrives after the rank was admitted).
func (j *joinRequests) forget(ranks []int) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, r := range ranks {
		j.seen[r] = max(j.count[r], 1)
	}
}

// elasticJoin is join under WithElastic: the chief starts the first generation; the other
// workers ask to be admitted and wait until they are (at the start, or at an epoch's end).
func (s *MultiWorkerMirroredStrategy) elasticJoin(ctx context.Context) error {
	s.watchJoins()
	if s.rank != 0 {
		return s.awaitAdmission(ctx)
	}
	start := time.Now()
	deadline := time.NewTimer(s.el.wait)
	defer deadline.Stop()
	var asked []int
	expired := false // the wait for every worker is over: go on with min
	for {
		var more <-chan struct{}
		asked, more = s.el.joins.requests()
		if len(asked) == len(s.peers)-1 || (expired && len(asked)+1 >= s.el.min) {
			break
		}
		select {
		case <-more:
		case <-deadline.C:
			expired = true
			if len(asked)+1 < s.el.min {
				logf("INFO", "waiting for the cluster: %d of the %d workers connected, %d needed (%v)", len(asked)+1, len(s.peers), s.el.min, time.Since(start).Round(time.Second))
				deadline.Reset(waitLogInterval)
			}
		case <-ctx.Done():
			return fmt.Errorf("waiting for the cluster: %w", context.Cause(ctx))
		}
	}
	members := append([]int{0}, asked...)
	if s.el.max > 0 && len(members) > s.el.max {
		members = members[:s.el.max]
	}
	for _, r := range members[1:] {
		if err := s.sendAdmission(ctx, r, admitMsg{Gen: 0, Members: members}, nil); err != nil {
			return err
		}
	}
	if len(members) < len(s.peers) {
		verb := "joins"
		if len(s.peers)-len(members) > 1 {
			verb = "join"
		}
		logf("INFO", "elastic training starts with %d of the %d workers; %s %s at an epoch's end once connected",
			len(members), len(s.peers), s.ranksNot(members), verb)
	}
	return s.startGeneration(0, members)
}

// ranksNot names the workers of the cluster outside members.
func (s *MultiWorkerMirroredStrategy) ranksNot(members []int) string {
	var out []string
	for r := range s.peers {
		if !slices.Contains(members, r) {
			out = append(out, s.peer(r).String())
		}
	}
	return strings.Join(out, ", ")
}

// sendAdmission tells rank r it is admitted (m), then sends it state when m.State.
func (s *MultiWorkerMirroredStrategy) sendAdmission(ctx context.Context, r int, m admitMsg, state []byte) error {
	b, _ := json.Marshal(m)
	if err := s.t.Send(ctx, r, admitTag, b); err != nil {
		return s.regroupLoss(r, "admitting it", err)
	}
	if m.State {
		if err := s.t.Send(ctx, r, stateTag(m.Gen), state); err != nil {
			return s.regroupLoss(r, "sending it the state", err)
		}
	}
	return nil
}

// awaitAdmission asks every other worker to admit this one and waits until one does.
func (s *MultiWorkerMirroredStrategy) awaitAdmission(ctx context.Context) error {
	for r := range s.peers {
		if r != s.rank {
			go func() { _ = s.t.Send(s.life, r, joinTag, nil) }() // a worker not up yet may hold the send
		}
	}
	type got struct {
		from int
		b    []byte
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := make(chan got, len(s.peers))
	for r := range s.peers {
		if r == s.rank {
			continue
		}
		go func() {
			if b, err := s.t.Recv(wctx, r, admitTag); err == nil {
				ch <- got{r, b}
			}
		}()
	}
	var a got
	select {
	case a = <-ch:
	case <-ctx.Done():
		return fmt.Errorf("waiting to be admitted to the elastic job: %w", context.Cause(ctx))
	}
	cancel()
	var m admitMsg
	if err := json.Unmarshal(a.b, &m); err != nil || !slices.Contains(m.Members, s.rank) {
		return fmt.Errorf("distribute: %s sent an admission this worker cannot read (%q)", s.peer(a.from), a.b)
	}
	if m.State {
		rctx, cancel := context.WithTimeout(ctx, s.el.wait)
		defer cancel()
		b, err := s.t.Recv(rctx, a.from, stateTag(m.Gen))
		if err != nil {
			return s.regroupLoss(a.from, "receiving the state", err)
		}
		s.el.admitted, s.el.adopting = &Admission{Epoch: m.Epoch, State: b}, true
		logf("INFO", "admitted by %s: worker %d of %d from epoch %d", s.peer(a.from), slices.Index(m.Members, s.rank), len(m.Members), m.Epoch+1)
	}
	return s.startGeneration(m.Gen, m.Members)
}

// join is the strategy's Join (ElasticWorkers).
func (e *elasticExtended) Join(ctx context.Context) (Admission, error) {
	s := e.s
	if s.workers <= 1 && s.gen == nil {
		return Admission{}, nil
	}
	if err := s.ensureJoined(ctx); err != nil {
		return Admission{}, s.stepError(ctx, opJoin, err)
	}
	if s.el.admitted == nil {
		return Admission{}, nil
	}
	a := *s.el.admitted
	s.el.admitted = nil
	return a, nil
}

// Admit is the strategy's admit (ElasticWorkers).
func (e *elasticExtended) Admit(ctx context.Context, next int, state func() ([]byte, error)) (bool, error) {
	return e.s.admit(ctx, next, state)
}

// admit lets the workers that asked to join in, at an epoch's end (next is the epoch they
// start at): the chief tells the group which (a broadcast of one flag per rank), and they
// and the new workers start the next generation; the chief sends the new workers the state
// (state, called there). It reports whether the group changed.
func (s *MultiWorkerMirroredStrategy) admit(ctx context.Context, next int, state func() ([]byte, error)) (bool, error) {
	if s.gen == nil {
		return false, nil
	}
	flags := make([]float32, len(s.peers))
	if s.worker == 0 {
		asked, _ := s.el.joins.requests()
		room := len(s.peers)
		if s.el.max > 0 {
			room = s.el.max - len(s.gen.members)
		}
		for _, r := range asked {
			if room > 0 && !slices.Contains(s.gen.members, r) {
				flags[r] = 1
				room--
			}
		}
	}
	if err := s.collective(ctx, "admit", func(ctx context.Context, opts []collective.Option) error {
		return collective.Broadcast(ctx, s.g, flags, 0, opts...)
	}); err != nil {
		return false, err
	}
	var joiners []int
	for r, f := range flags {
		if f == 1 {
			joiners = append(joiners, r)
		}
	}
	if len(joiners) == 0 {
		return false, nil
	}
	if _, err := s.takeTurn(ctx); err != nil {
		return false, err
	}
	defer s.endTurn()
	g := s.gen
	members := append(slices.Clone(g.members), joiners...)
	sort.Ints(members)
	if s.worker == 0 {
		blob, err := state()
		if err != nil {
			return false, fmt.Errorf("distribute: the state for the workers that join: %w", err)
		}
		for _, r := range joiners {
			// A worker lost since it asked fails the next generation's first collective,
			// and a regroup leaves it out.
			if err := s.sendAdmission(ctx, r, admitMsg{Gen: g.n + 1, Members: members, Epoch: next, State: true}, blob); err != nil {
				logf("WARNING", "%v", err)
			}
		}
	}
	g.unwatch()
	names := make([]string, len(joiners))
	for i, r := range joiners {
		names[i] = s.peer(r).String()
	}
	if err := s.startGeneration(g.n+1, members); err != nil {
		return false, err
	}
	logf("INFO", "%s joined; the %d workers go on from epoch %d (this is worker %d of %d now)",
		strings.Join(names, ", "), len(members), next+1, s.worker, s.workers)
	return true, nil
}
