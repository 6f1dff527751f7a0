package distribute

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"godist/distlib/cluster"
	"godist/distlib/tensor"
	"godist/distlib/transport"
	"godist/internal/leakcheck"
)

// shortWaitLog makes the waiting-for-the-cluster log come quickly for one test.
func shortWaitLog(t *testing.T, grace, interval time.Duration) {
	t.Helper()
	g, i := waitLogGrace, waitLogInterval
	waitLogGrace, waitLogInterval = grace, interval
	t.Cleanup(func() { waitLogGrace, waitLogInterval = g, i })
}

// eventually polls cond until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestMultiWorkerWaitLogNamesMissing: a worker waiting for its cluster names the worker that
// has not connected, again every interval, and goes on once it comes.
func TestMultiWorkerWaitLogNamesMissing(t *testing.T) {
	leakcheck.Check(t)
	splitCPU(t, 1)
	log := captureLog(t)
	shortWaitLog(t, 20*time.Millisecond, 50*time.Millisecond)
	mems := transport.NewMem(2)
	defer mems[0].Close()
	defer mems[1].Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errs := make([]error, 2)
	var wg sync.WaitGroup
	barrier := func(w int) {
		defer wg.Done()
		s := NewMultiWorkerMirroredStrategy(WithTransport(mems[w]), WithCommunicationTimeout(20*time.Second))
		errs[w] = s.BarrierContext(ctx)
	}
	wg.Add(1)
	go barrier(0)
	const line = "INFO:distribute:waiting for the cluster: worker 1 has not connected yet ("
	eventually(t, 10*time.Second, "worker 0 logs twice that worker 1 is missing", func() bool {
		return strings.Count(log.String(), line) >= 2
	})
	wg.Add(1)
	go barrier(1)
	wg.Wait()
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("Barrier once both came = %v, want no errors", errs)
	}
	if !strings.Contains(log.String(), "the cluster is complete: all 2 workers connected") {
		t.Errorf("log = %q, want a line saying the cluster is complete", log)
	}
	if strings.Contains(log.String(), "worker 0 has not connected") {
		t.Errorf("log = %q: worker 1 found worker 0 up at once and should not log it missing", log)
	}
}

// TestMultiWorkerNeverJoined: a worker that never comes is named in the error when the
// communication timeout ends the wait, and an interrupt ends the wait with the context's
// error, not a peer error.
func TestMultiWorkerNeverJoined(t *testing.T) {
	leakcheck.Check(t)
	splitCPU(t, 1)
	captureLog(t)
	for _, tc := range []struct {
		name      string
		timeout   time.Duration
		interrupt bool
		closed    bool // worker 1 came and closed before worker 0 joined
		want      []string
	}{
		{"communication timeout", 200 * time.Millisecond, false, false,
			[]string{"worker 1 did not connect within", "while waiting for the cluster", "worker 2 missing too", "restart the job"}},
		{"interrupted", time.Minute, true, false, nil},
		{"lost before joining", time.Minute, false, true,
			[]string{"worker 1 was lost while waiting for the cluster", "rank 1 closed its endpoint", "restart the job"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mems := transport.NewMem(3)
			defer mems[0].Close()
			if tc.closed {
				mems[1].Close()
			}
			s := NewMultiWorkerMirroredStrategy(WithTransport(mems[0]), WithCommunicationTimeout(tc.timeout))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.interrupt {
				time.AfterFunc(100*time.Millisecond, cancel)
			}
			start := time.Now()
			_, err := s.allReduceWorkers(ctx, ReduceSum, []*tensor.Tensor{vec(1, 2)})
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("all-reduce without the other workers returned after %v", d)
			}
			var pu *PeerUnavailableError
			if tc.interrupt {
				if !errors.Is(err, context.Canceled) || errors.As(err, &pu) {
					t.Fatalf("interrupted wait = %v, want context.Canceled and no PeerUnavailableError", err)
				}
				return
			}
			if !errors.As(err, &pu) || pu.Task != "worker" || pu.Index != 1 || pu.Op != opJoin {
				t.Fatalf("all-reduce without the other workers = %v, want *PeerUnavailableError for worker 1 waiting for the cluster", err)
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}

// TestMultiWorkerLostPeer: a worker lost in the middle of a loop of all-reduces (its
// endpoint closes, as a killed process's connections do) fails the other's next step at
// once, well before the communication timeout, with an error naming it.
func TestMultiWorkerLostPeer(t *testing.T) {
	leakcheck.Check(t)
	splitCPU(t, 1)
	captureLog(t)
	mems := transport.NewMem(2)
	defer mems[0].Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errs := make(chan error, 2)
	var took time.Duration
	for w := range 2 {
		go func() {
			s := NewMultiWorkerMirroredStrategy(WithTransport(mems[w]), WithCommunicationTimeout(time.Minute))
			for step := 0; ; step++ {
				if w == 1 && step == 5 {
					mems[1].Close() // worker 1 dies
					errs <- nil
					return
				}
				start := time.Now()
				out, err := s.allReduceWorkers(ctx, ReduceSum, []*tensor.Tensor{vec(float32(w), 1)})
				if err != nil {
					took = time.Since(start)
					errs <- err
					return
				}
				if got := out[0].Data(); got[0] != 1 || got[1] != 2 {
					errs <- errors.New("wrong sum")
					return
				}
			}
		}()
	}
	err := worker1Lost(t, errs)
	for _, want := range []string{"worker 1 was lost during allreduce", "restart the job", "keras.BackupAndRestore"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if took > 10*time.Second {
		t.Errorf("the step failed after %v, want at once (the timeout is a minute)", took)
	}
}

// TestMultiWorkerListensOnTFConfigHost: a worker listens on the host its cluster address
// names (gRPC and data port), and on all interfaces with GODIST_BIND_ALL=1.
func TestMultiWorkerListensOnTFConfigHost(t *testing.T) {
	leakcheck.Check(t)
	splitCPU(t, 1)
	captureLog(t)
	for _, tc := range []struct {
		name    string
		env     string
		wantAll bool
	}{
		{"tf_config host", "", false},
		{"GODIST_BIND_ALL=1", "1", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(cluster.BindAllEnv, tc.env)
			addrs := loopbackAddrs(t, 2)
			spec, err := cluster.NewClusterSpec(map[string][]string{"worker": addrs})
			if err != nil {
				t.Fatal(err)
			}
			r, err := cluster.NewSimpleClusterResolver(spec, "worker", 0, "grpc")
			if err != nil {
				t.Fatal(err)
			}
			s := NewMultiWorkerMirroredStrategy(WithClusterResolver(r), WithClusterToken("test-token"))
			defer s.Close()
			g := s.t.(*transport.GRPC)
			for _, a := range []net.Addr{g.Addr(), g.DataAddr()} {
				ip := a.(*net.TCPAddr).IP
				if tc.wantAll != ip.IsUnspecified() || !tc.wantAll && !ip.Equal(net.IPv4(127, 0, 0, 1)) {
					t.Errorf("worker 0 at %s (%s) listens on %v, want all interfaces %v", addrs[0], tc.name, a, tc.wantAll)
				}
			}
			if !strings.HasSuffix(g.Addr().String(), addrs[0][strings.LastIndex(addrs[0], ":"):]) {
				t.Errorf("worker 0 listens on %v, want the port of %s", g.Addr(), addrs[0])
			}
		})
	}
}

// TestMultiWorkerChiefDoneFirst: the chief broadcasts and closes (its process ends) before
// worker 1 reaches the broadcast: worker 1 still joins and receives the chief's values; only
// a later collective finds the chief lost.
func TestMultiWorkerChiefDoneFirst(t *testing.T) {
	leakcheck.Check(t)
	splitCPU(t, 1)
	captureLog(t)
	addrs := loopbackAddrs(t, 2)
	spec, err := cluster.NewClusterSpec(map[string][]string{"worker": addrs})
	if err != nil {
		t.Fatal(err)
	}
	ss := make([]*MultiWorkerMirroredStrategy, 2)
	for w := range ss {
		r, err := cluster.NewSimpleClusterResolver(spec, "worker", w, "grpc")
		if err != nil {
			t.Fatal(err)
		}
		ss[w] = NewMultiWorkerMirroredStrategy(WithClusterResolver(r), WithClusterToken("test-token"), WithCommunicationTimeout(20*time.Second))
		defer ss[w].Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := BroadcastFromChiefContext(ctx, ss[0], []*tensor.Tensor{vec(7)}); err != nil {
		t.Fatalf("chief: BroadcastFromChief = %v", err)
	}
	ss[0].Close()
	got, err := BroadcastFromChiefContext(ctx, ss[1], []*tensor.Tensor{vec(1)})
	if err != nil || got[0].Data()[0] != 7 {
		t.Fatalf("worker 1 after the chief closed: BroadcastFromChief = %v, %v; want [7]", got, err)
	}
	var pu *PeerUnavailableError
	if err := ss[1].BarrierContext(ctx); !errors.As(err, &pu) || pu.Index != 0 {
		t.Fatalf("worker 1: Barrier after the chief closed = %v, want *PeerUnavailableError for worker 0", err)
	}
}

// TestMultiWorkerBucketsLostPeer: workers that share memory send where their gradient
// buckets lie in one message a step (after the first step); a worker lost there is named
// as in any other all-reduce, at once.
func TestMultiWorkerBucketsLostPeer(t *testing.T) {
	leakcheck.Check(t)
	splitCPU(t, 1)
	captureLog(t)
	mems := transport.NewSharedMem(2, 8<<20)
	defer mems[0].Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sizes := []int{5, 40_000, 3} // buckets [5 40000] in shared memory, [3] inline
	errs := make(chan error, 2)
	var took time.Duration
	for w := range 2 {
		go func() {
			s := NewMultiWorkerMirroredStrategy(WithTransport(mems[w]), WithCommunicationTimeout(time.Minute))
			b, err := s.Extended().(GradientBucketing).GradientBucketer(context.Background(), sizes, 4*40_000)
			if err != nil {
				errs <- err
				return
			}
			for step := 0; ; step++ {
				if w == 1 && step == 4 {
					mems[1].Close() // worker 1 dies
					errs <- nil
					return
				}
				for i, n := range sizes {
					g := b.Buffer(i)
					for j := range n {
						g[j] = float32(w + 1)
					}
					if err := b.Add(i, g); err != nil {
						errs <- err
						return
					}
				}
				start := time.Now()
				terms, err := b.WaitTerms(ctx)
				if err != nil {
					took = time.Since(start)
					errs <- err
					return
				}
				if step > 0 && len(terms[1]) != 2 {
					errs <- fmt.Errorf("step %d: %d terms for the bucket in shared memory, want 2", step, len(terms[1]))
					return
				}
				for i := range sizes {
					var sum float32
					for _, term := range terms[i] {
						sum += term[0]
					}
					if sum != 3 {
						errs <- fmt.Errorf("step %d tensor %d: terms sum to %v, want 3", step, i, sum)
						return
					}
				}
			}
		}()
	}
	worker1Lost(t, errs)
	if took > 10*time.Second {
		t.Errorf("the step failed after %v, want at once (the timeout is a minute)", took)
	}
}

// worker1Lost waits for both workers' ends (nil from the one that died) and checks that
// worker 0's error names worker 1 as lost during an all-reduce; it returns that error.
func worker1Lost(t *testing.T, errs <-chan error) error {
	t.Helper()
	var err error
	for range 2 {
		if e := <-errs; e != nil {
			err = e
		}
	}
	var pu *PeerUnavailableError
	if !errors.As(err, &pu) || pu.Task != "worker" || pu.Index != 1 || pu.Op != "allreduce" || !errors.Is(err, transport.ErrPeerLost) {
		t.Fatalf("worker 0's step after worker 1 died = %v, want *PeerUnavailableError for worker 1 in allreduce wrapping transport.ErrPeerLost", err)
	}
	return err
}
