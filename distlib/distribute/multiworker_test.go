package distribute

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"godist/distlib/cluster"
	"godist/distlib/collective"
	"godist/distlib/data"
	"godist/distlib/device"
	"godist/distlib/tensor"
	"godist/distlib/transport"
	"godist/internal/leakcheck"
)

// runWorkers runs fn for every worker of an in-memory group of n workers, each in its own
// goroutine with its own strategy, and waits (bounded).
func runWorkers(t *testing.T, n int, devices func(w int) []string, fn func(w int, s *MultiWorkerMirroredStrategy)) {
	t.Helper()
	mems := transport.NewMem(n)
	trs := make([]collective.Transport, n)
	for w, m := range mems {
		trs[w] = m
	}
	runWorkersOver(t, trs, devices, fn)
}

// runSharedWorkers is runWorkers over a group whose workers share memory
// (transport.NewSharedMem, 32 MiB each).
func runSharedWorkers(t *testing.T, n int, devices func(w int) []string, fn func(w int, s *MultiWorkerMirroredStrategy)) {
	t.Helper()
	mems := transport.NewSharedMem(n, 32<<20)
	trs := make([]collective.Transport, n)
	for w, m := range mems {
		trs[w] = m
	}
	runWorkersOver(t, trs, devices, fn)
}

// runWorkersOver runs fn for every worker of the group trs (closed at the test's end), each
// in its own goroutine with its own strategy (communication timeout 10 s), and waits
// (bounded).
func runWorkersOver(t *testing.T, trs []collective.Transport, devices func(w int) []string, fn func(w int, s *MultiWorkerMirroredStrategy)) {
	t.Helper()
	t.Cleanup(func() {
		for _, tr := range trs {
			if c, ok := tr.(interface{ Close() error }); ok {
				c.Close()
			}
		}
	})
	withTimeout(t, 30*time.Second, func() {
		var wg sync.WaitGroup
		for w := range trs {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				defer func() {
					if p := recover(); p != nil {
						t.Errorf("worker %d panicked: %v", w, p)
					}
				}()
				s := NewMultiWorkerMirroredStrategy(WithTransport(trs[w]), WithDevices(devices(w)...),
					WithCommunicationTimeout(10*time.Second))
				fn(w, s)
			}(w)
		}
		wg.Wait()
	})
}

func TestMultiWorkerSingleWorkerWithoutTFConfig(t *testing.T) {
	splitCPU(t, 2)
	log := captureLog(t)
	t.Setenv("TF_CONFIG", "")
	s := NewMultiWorkerMirroredStrategy()
	if i, n := s.Extended().Worker(); i != 0 || n != 1 || !s.Extended().IsChief() || s.NumReplicasInSync() != 2 {
		t.Fatalf("single worker: worker %d of %d, chief %v, %d replicas; want 0 of 1, chief, 2 replicas", i, n, s.Extended().IsChief(), s.NumReplicasInSync())
	}
	if !strings.Contains(log.String(), "Single-worker MultiWorkerMirroredStrategy with local_devices = ('"+cpu(0)) {
		t.Fatalf("log = %q", log)
	}
	if got := s.Reduce(ReduceMean, NewPerReplica(vec(1), vec(3)), -1); got.Item() != 2 {
		t.Fatalf("single-worker Reduce(MEAN) = %v, want 2", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestMultiWorkerTrainingMatchesOneDevice: 2 workers x 2 replicas, each worker taking its
// share of every global batch (the last one leaves worker 1 empty batches), end with the
// weights of one device, and every worker and replica holds the same values.
func TestMultiWorkerTrainingMatchesOneDevice(t *testing.T) {
	leakcheck.Check(t)
	splitCPU(t, 4)
	captureLog(t)
	ref := trainToy(t, NewOneDeviceStrategy("/cpu:0"))
	results := make([][]*MirroredVariable, 2)
	runWorkers(t, 2, func(w int) []string { return []string{cpu(2 * w), cpu(2*w + 1)} }, func(w int, s *MultiWorkerMirroredStrategy) {
		if s.NumReplicasInSync() != 4 || s.Extended().IsChief() != (w == 0) {
			t.Errorf("worker %d: %d replicas in sync, chief %v", w, s.NumReplicasInSync(), s.Extended().IsChief())
		}
		results[w] = trainToy(t, s)
	})
	for w, vars := range results {
		for i, v := range vars {
			for r, c := range v.Values() {
				if !closeData(c.Value().Data(), ref[i].Value().Data(), 1e-5) {
					t.Errorf("worker %d replica %d: %s = %v, one device gives %v", w, r, v.Name(), c.Value().Data(), ref[i].Value().Data())
				}
			}
		}
	}
}

func TestMultiWorkerBroadcastAndShard(t *testing.T) {
	leakcheck.Check(t)
	splitCPU(t, 2)
	captureLog(t)
	labels := make([]string, 2)
	runWorkers(t, 2, func(w int) []string { return []string{cpu(w)} }, func(w int, s *MultiWorkerMirroredStrategy) {
		v := NewMirroredVariable(s, "v", vec(float32(10*w+1), 2), true)
		if got := v.Value().Data(); !equalData(got, []float32{1, 2}) {
			t.Errorf("worker %d: variable starts at %v, want the chief's [1 2]", w, got)
		}
		got, err := BroadcastFromChief(s, []*tensor.Tensor{vec(float32(w + 5))})
		if err != nil || got[0].Item() != 5 {
			t.Errorf("worker %d: BroadcastFromChief = %v, %v; want [5]", w, got, err)
		}
		if err := s.Barrier(); err != nil {
			t.Errorf("worker %d: Barrier: %v", w, err)
		}
		ids := labelsOf(t, s.ExperimentalDistributeDataset(rangeDataset(7).Batch(4, false)))
		off := labelsOf(t, s.ExperimentalDistributeDataset(rangeDataset(3).Batch(2, false).WithOptions(data.Options{AutoShardPolicy: data.AutoShardOff})))
		var ctx *InputContext
		s.DistributeDatasetsFromFunction(func(c *InputContext) *data.Dataset {
			ctx = c
			return rangeDataset(4).Shard(c.NumInputPipelines, c.InputPipelineID).Batch(c.GetPerReplicaBatchSize(2), false)
		})
		labels[w] = fmt.Sprint(ids, off, *ctx)
	})
	want := []string{
		"[[[0 1]] [[4 5]]] [[[0 1]] [[2]]] {2 0 2}",
		"[[[2 3]] [[6]]] [[[0 1]] [[2]]] {2 1 2}",
	}
	for w := range want {
		if labels[w] != want[w] {
			t.Errorf("worker %d: labels/contexts %s, want %s", w, labels[w], want[w])
		}
	}
}

func TestMultiWorkerClusterErrors(t *testing.T) {
	splitCPU(t, 1)
	captureLog(t)
	spec := func(jobs map[string][]string) cluster.ClusterSpec {
		s, err := cluster.NewClusterSpec(jobs)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	two := spec(map[string][]string{"worker": {"localhost:1", "localhost:2"}})
	tests := []struct {
		name    string
		spec    cluster.ClusterSpec
		task    string
		id      int
		mention string
	}{
		{"ps in cluster", spec(map[string][]string{"worker": {"localhost:1"}, "ps": {"localhost:2"}}), "worker", 0, "ps"},
		{"evaluator", two, "evaluator", 0, "not a chief or worker"},
		{"no token", two, "worker", 1, "token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("GODIST_CLUSTER_TOKEN", "")
			r, err := cluster.NewSimpleClusterResolver(tt.spec, tt.task, tt.id, "grpc")
			if err != nil {
				t.Fatal(err)
			}
			err = recoverErr(func() { NewMultiWorkerMirroredStrategy(WithClusterResolver(r)) })
			if err == nil || !strings.Contains(err.Error(), tt.mention) {
				t.Fatalf("NewMultiWorkerMirroredStrategy panicked with %v; want an error mentioning %q", err, tt.mention)
			}
		})
	}
	var cerr error = ErrCluster
	if !errors.Is(fmt.Errorf("x: %w", cerr), ErrCluster) {
		t.Fatal("ErrCluster does not unwrap")
	}
}

// TestMultiWorkerGRPC runs two workers in one process over real gRPC on loopback, from a
// TF_CONFIG-style cluster, and checks one cross-worker reduction and the chief.
func TestMultiWorkerGRPC(t *testing.T) {
	leakcheck.Check(t)
	splitCPU(t, 1)
	captureLog(t)
	addrs := loopbackAddrs(t, 2)
	spec, err := cluster.NewClusterSpec(map[string][]string{"worker": addrs})
	if err != nil {
		t.Fatal(err)
	}
	got := make([]string, 2)
	withTimeout(t, 30*time.Second, func() {
		var wg sync.WaitGroup
		for w := 0; w < 2; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				defer func() {
					if p := recover(); p != nil {
						t.Errorf("worker %d panicked: %v", w, p)
					}
				}()
				r, err := cluster.NewSimpleClusterResolver(spec, "worker", w, "grpc")
				if err != nil {
					t.Error(err)
					return
				}
				s := NewMultiWorkerMirroredStrategy(WithClusterResolver(r), WithClusterToken("test-token"),
					WithCommunicationTimeout(10*time.Second))
				defer s.Close()
				sum := s.Reduce(ReduceSum, NewPerReplica(vec(float32(w+1), 10)), -1)
				got[w] = fmt.Sprint(sum.Data(), s.Extended().IsChief(), s.NumReplicasInSync())
				if err := s.Barrier(); err != nil { // keep both servers up until both are done
					t.Errorf("worker %d: Barrier: %v", w, err)
				}
			}(w)
		}
		wg.Wait()
	})
	if got[0] != "[3 20] true 2" || got[1] != "[3 20] false 2" {
		t.Fatalf("workers got %q; want [3 20] on both, worker 0 chief, 2 replicas", got)
	}
}

// TestMultiWorkerApplyGradientsThroughBuckets: ApplyGradients inside Run on 2 workers of
// one replica each, sharing memory, hands apply the rank-order sums of the workers'
// gradients, step after step (the first steps take the ring, later ones read each other's
// buckets where they lie); a nil gradient stays nil; gradients of other sizes get a bucketer
// of their own; gradients the replica function reduced itself are not summed again.
func TestMultiWorkerApplyGradientsThroughBuckets(t *testing.T) {
	leakcheck.Check(t)
	splitCPU(t, 2)
	captureLog(t)
	// Worker w's gradient i, value j at step k; the big one (40,000 values) lies in a bucket
	// of its own, in shared memory once placed.
	grad := func(w, k, i, n int) *tensor.Tensor {
		d := make([]float32, n)
		for j := range d {
			d[j] = float32((w+1)*(j%7+1)) + float32(k)/8 + float32(i)/16
		}
		return tensor.MustNew([]int{n}, d)
	}
	sizes := []int{40_000, 3}
	const steps = 5
	runSharedWorkers(t, 2, func(w int) []string { return []string{cpu(w)} }, func(w int, s *MultiWorkerMirroredStrategy) {
		// sum returns the workers' gradients i of step k, of n values, summed in rank order.
		sum := func(k, i, n int) []float32 {
			a, b := grad(0, k, i, n).Data(), grad(1, k, i, n).Data()
			for j := range a {
				a[j] += b[j]
			}
			return a
		}
		check := func(k int, what string, grads []*tensor.Tensor, want [][]float32) {
			var got []*tensor.Tensor
			s.Run(func(ctx *ReplicaContext, _ data.Element) *tensor.Tensor {
				in := grads
				if what == "reduced" {
					in = ctx.AllReduceList(ReduceSum, grads)
				}
				inRun, err := s.Extended().(ReplicaGradientApplier).ApplyGradients(device.Current(), in, func(gs []*tensor.Tensor) error {
					got = gs
					return nil
				})
				if !inRun || err != nil {
					t.Errorf("worker %d step %d (%s): ApplyGradients = %v, %v", w, k, what, inRun, err)
				}
				return nil
			}, nil)
			for i, g := range got {
				if grads[i] == nil {
					if g != nil {
						t.Errorf("worker %d step %d (%s): gradient %d was nil, apply got %v", w, k, what, i, g)
					}
					continue
				}
				if g == nil || g.Size() != len(want[i]) {
					t.Errorf("worker %d step %d (%s): gradient %d = %v, want %d values", w, k, what, i, g, len(want[i]))
					return
				}
				for j, v := range g.Data() {
					if v != want[i][j] {
						t.Errorf("worker %d step %d (%s): gradient %d [%d] = %v, want %v", w, k, what, i, j, v, want[i][j])
						return
					}
				}
			}
		}
		for k := range steps {
			grads := []*tensor.Tensor{grad(w, k, 0, sizes[0]), nil, grad(w, k, 2, sizes[1])}
			check(k, "buckets", grads, [][]float32{sum(k, 0, sizes[0]), nil, sum(k, 2, sizes[1])})
		}
		// Two lists in turn (a GAN's two optimizers) keep a bucketer each.
		for k := steps; k < steps+3; k++ {
			other := []*tensor.Tensor{grad(w, k, 0, 70_000)}
			check(k, "other sizes", other, [][]float32{sum(k, 0, 70_000)})
			grads := []*tensor.Tensor{grad(w, k, 0, sizes[0]), nil, grad(w, k, 2, sizes[1])}
			check(k, "buckets again", grads, [][]float32{sum(k, 0, sizes[0]), nil, sum(k, 2, sizes[1])})
		}
		// As terms (keras' optimizers): each worker's gradients where they lie (one
		// bucket holds both), by rank.
		k := steps + 3
		grads := []*tensor.Tensor{grad(w, k, 0, sizes[0]), nil, grad(w, k, 2, sizes[1])}
		var terms [][][]float32
		s.Run(func(*ReplicaContext, data.Element) *tensor.Tensor {
			inRun, err := s.Extended().(GradientTermsApplier).ApplyGradientTerms(device.Current(), grads, func(ts [][][]float32) error {
				terms = make([][][]float32, len(ts))
				for i, t := range ts {
					for _, term := range t {
						terms[i] = append(terms[i], append([]float32(nil), term...))
					}
				}
				return nil
			})
			if !inRun || err != nil {
				t.Errorf("worker %d: ApplyGradientTerms = %v, %v", w, inRun, err)
			}
			return nil
		}, nil)
		if len(terms) != 3 || len(terms[0]) != 2 || terms[1] != nil || len(terms[2]) != 2 {
			t.Errorf("worker %d: terms of %d gradients, %d, %d, %d terms; want 3 gradients of 2, 0 and 2 terms", w, len(terms), len(terms[0]), len(terms[1]), len(terms[2]))
		} else {
			for r := range 2 {
				for _, i := range []int{0, 2} {
					if g := grad(r, k, i, sizes[i/2]).Data(); !equalData(terms[i][r], g) {
						t.Errorf("worker %d: term %d of gradient %d is not worker %d's gradient", w, r, i, r)
					}
				}
			}
		}
		if len(s.kept) != 2 {
			t.Errorf("worker %d keeps %d bucketers for two lists of gradients, want 2", w, len(s.kept))
		}
		small := []*tensor.Tensor{grad(w, 10, 0, 5)}
		check(steps+4, "reduced", small, [][]float32{sum(10, 0, 5)})
	})
}

// TestMultiWorkerApplyGradientsShapesDiffer: workers whose gradients differ in shape both
// fail at once, saying so, rather than one of them waiting out the communication timeout
// for buckets the other never sends.
func TestMultiWorkerApplyGradientsShapesDiffer(t *testing.T) {
	leakcheck.Check(t)
	splitCPU(t, 2)
	captureLog(t)
	errs := make([]error, 2)
	start := time.Now()
	runSharedWorkers(t, 2, func(w int) []string { return []string{cpu(w)} }, func(w int, s *MultiWorkerMirroredStrategy) {
		grads := []*tensor.Tensor{tensor.Zeros(40_000 + 70_000*w), tensor.Zeros(3)}
		s.Run(func(*ReplicaContext, data.Element) *tensor.Tensor {
			_, errs[w] = s.Extended().(ReplicaGradientApplier).ApplyGradients(device.Current(), grads, func([]*tensor.Tensor) error { return nil })
			return nil
		}, nil)
	})
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the workers took %v to fail, want at once (their timeout is 10s)", d)
	}
	for w, err := range errs {
		if !errors.Is(err, collective.ErrBadArgument) || !strings.Contains(err.Error(), "same shapes") || !strings.Contains(err.Error(), "differ") {
			t.Errorf("worker %d: %v, want an error saying the workers' gradients differ and must have the same shapes", w, err)
		}
	}
}
