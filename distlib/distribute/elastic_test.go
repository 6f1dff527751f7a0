package distribute

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"godist/distlib/tensor"
	"godist/distlib/transport"
)

// elasticGroup makes n elastic workers over an in-memory group (WithElastic(min, 0)), each
// on its own device; the transports close at the test's end.
func elasticGroup(t *testing.T, n, min int) ([]*MultiWorkerMirroredStrategy, []*transport.Mem) {
	t.Helper()
	splitCPU(t, n)
	mems := transport.NewMem(n)
	ss := make([]*MultiWorkerMirroredStrategy, n)
	for w := range n {
		s, err := newMultiWorker([]MultiWorkerOption{WithTransport(mems[w]), WithDevices(cpu(w)),
			WithCommunicationTimeout(10 * time.Second), WithHealthCheck(0, 5*time.Second), WithElastic(min, 0)})
		if err != nil {
			t.Fatal(err)
		}
		ss[w] = s
	}
	t.Cleanup(func() {
		for w := range n {
			ss[w].Close()
			mems[w].Close()
		}
	})
	return ss, mems
}

// allReduceAll runs one all-reduce of a single value on each of the workers ws of ss
// concurrently and returns their errors.
func allReduceAll(ss []*MultiWorkerMirroredStrategy, ws []int) []error {
	errs := make([]error, len(ss))
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, errs[w] = ss[w].allReduceWorkers(ctx, ReduceSum, []*tensor.Tensor{vec(float32(w + 1))})
		}()
	}
	wg.Wait()
	return errs
}

// A lost worker ends the collective of the others with an error Fit regroups on; they
// agree on the steps completed (the most, 5), and the worker one step behind gets the
// state of the lowest worker that has it; the group is then the two, re-numbered, and
// their all-reduce sums their values only.
func TestRegroupAfterLoss(t *testing.T) {
	logs := captureLog(t)
	ss, mems := elasticGroup(t, 3, 2)
	if errs := allReduceAll(ss, []int{0, 1, 2}); errors.Join(errs...) != nil {
		t.Fatal(errors.Join(errs...))
	}
	mems[1].Close()
	errs := allReduceAll(ss, []int{0, 2})
	for _, w := range []int{0, 2} {
		if !ss[w].ext.(ElasticWorkers).Regroupable(errs[w]) {
			t.Fatalf("worker %d: error %v is not regroupable", w, errs[w])
		}
	}
	dones := map[int]int64{0: 4, 2: 5}
	out := make([]Regrouped, 3)
	var wg sync.WaitGroup
	for _, w := range []int{0, 2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			out[w], err = ss[w].ext.(ElasticWorkers).Regroup(context.Background(), dones[w], errs[w], func() ([]byte, error) {
				return []byte(fmt.Sprintf("state of worker %d", w)), nil
			})
			if err != nil {
				t.Errorf("worker %d: Regroup: %v", w, err)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for _, w := range []int{0, 2} {
		o := out[w]
		if o.Done != 5 || o.Count != 2 || len(o.Lost) != 1 || o.Lost[0] != "worker 1" {
			t.Errorf("worker %d: regrouped %+v, want Done 5, Count 2, Lost [worker 1]", w, o)
		}
	}
	if out[0].Index != 0 || out[2].Index != 1 {
		t.Errorf("indexes %d and %d, want 0 and 1", out[0].Index, out[2].Index)
	}
	if string(out[0].State) != "state of worker 2" || out[2].State != nil {
		t.Errorf("states %q and %q, want worker 2's on worker 0 and none on worker 2", out[0].State, out[2].State)
	}
	if idx, n := ss[2].Extended().Worker(); idx != 1 || n != 2 || !ss[0].Extended().IsChief() || ss[2].Extended().IsChief() {
		t.Errorf("worker 2 is now (%d, %d), chief %v; want (1, 2), worker 0 chief", idx, n, ss[2].Extended().IsChief())
	}
	if ss[0].NumReplicasInSync() != 2 {
		t.Errorf("NumReplicasInSync %d after the regroup, want 2", ss[0].NumReplicasInSync())
	}
	// The next all-reduce is the two survivors' values: 1 + 3.
	var got [3][]float32
	var wg2 sync.WaitGroup
	for _, w := range []int{0, 2} {
		wg2.Add(1)
		go func() {
			defer wg2.Done()
			out, err := ss[w].allReduceWorkers(context.Background(), ReduceSum, []*tensor.Tensor{vec(float32(w + 1))})
			if err != nil {
				t.Errorf("worker %d after the regroup: %v", w, err)
				return
			}
			got[w] = out[0].Data()
		}()
	}
	wg2.Wait()
	for _, w := range []int{0, 2} {
		if len(got[w]) != 1 || got[w][0] != 4 {
			t.Errorf("worker %d: all-reduce after the regroup gave %v, want [4]", w, got[w])
		}
	}
	if s := logs.String(); !strings.Contains(s, "worker 1 lost; the 2 remaining workers go on after step 5") {
		t.Errorf("log does not say which worker left at which step:\n%s", s)
	}
}

// A worker that has not noticed the loss (its collective waits on a live peer) is stopped
// by the regroup of the others, which found the loss, and joins it: each worker regroups
// as soon as its own all-reduce fails, as Fit does.
func TestRegroupReachesWaitingWorker(t *testing.T) {
	ss, mems := elasticGroup(t, 4, 2)
	if errs := allReduceAll(ss, []int{0, 1, 2, 3}); errors.Join(errs...) != nil {
		t.Fatal(errors.Join(errs...))
	}
	mems[3].Close()
	start := time.Now()
	var wg sync.WaitGroup
	for _, w := range []int{0, 1, 2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, err := ss[w].allReduceWorkers(ctx, ReduceSum, []*tensor.Tensor{vec(1)})
			if !ss[w].ext.(ElasticWorkers).Regroupable(err) {
				t.Errorf("worker %d: error %v is not regroupable", w, err)
				return
			}
			rg, err := ss[w].ext.(ElasticWorkers).Regroup(ctx, 7, err, nil)
			if err != nil || rg.Count != 3 || rg.Index != w || rg.Done != 7 || rg.State != nil {
				t.Errorf("worker %d: Regroup gave %+v, %v; want index %d of 3 after 7 steps", w, rg, err, w)
			}
		}()
	}
	wg.Wait()
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("the regroup took %v, want well under 2 s", d)
	}
}

// Below min, Regroup stops with an error naming the missing workers; it still unwraps to
// the loss.
func TestRegroupBelowMin(t *testing.T) {
	ss, mems := elasticGroup(t, 3, 3)
	if errs := allReduceAll(ss, []int{0, 1, 2}); errors.Join(errs...) != nil {
		t.Fatal(errors.Join(errs...))
	}
	mems[2].Close()
	errs := allReduceAll(ss, []int{0, 1})
	var wg sync.WaitGroup
	for _, w := range []int{0, 1} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := ss[w].ext.(ElasticWorkers).Regroup(context.Background(), 3, errs[w], nil)
			var tf *TooFewWorkersError
			if !errors.As(err, &tf) || !strings.Contains(err.Error(), "worker 2 was lost after step 3; 2 workers remain, fewer than the 3 of WithElastic") {
				t.Errorf("worker %d: Regroup error %v, want a TooFewWorkersError naming worker 2", w, err)
			}
		}()
	}
	wg.Wait()
}

// Without WithElastic the strategy offers no regroup, and a loss is the PeerUnavailableError
// it always was.
func TestNotElasticByDefault(t *testing.T) {
	splitCPU(t, 2)
	mems := transport.NewMem(2)
	s := NewMultiWorkerMirroredStrategy(WithTransport(mems[0]), WithDevices(cpu(0)))
	defer mems[1].Close()
	defer mems[0].Close()
	if _, ok := s.Extended().(ElasticWorkers); ok {
		t.Fatal("a strategy without WithElastic offers ElasticWorkers")
	}
	if s.g != s.t || s.gen != nil {
		t.Fatal("a strategy without WithElastic runs its collectives over a generation's view")
	}
}

// WithElastic's bounds are checked against the cluster.
func TestElasticOptionErrors(t *testing.T) {
	for _, c := range []struct {
		min, max int
		want     string
	}{
		{0, 0, "min must be at least 1"},
		{3, 2, "max must be 0 (the cluster's size) or at least min"},
		{3, 0, "the cluster has 2 workers, fewer than min"},
		{1, 1, "the cluster has 2 workers, more than max"},
	} {
		splitCPU(t, 2)
		mems := transport.NewMem(2)
		_, err := newMultiWorker([]MultiWorkerOption{WithTransport(mems[0]), WithDevices(cpu(0)), WithElastic(c.min, c.max)})
		if !errors.Is(err, ErrCluster) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("WithElastic(%d, %d): error %v, want %q", c.min, c.max, err, c.want)
		}
	}
}
