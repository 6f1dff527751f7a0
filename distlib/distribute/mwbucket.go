package distribute

import (
	"context"
	"fmt"
	"slices"
	"time"

	"godist/distlib/cell"
	"godist/distlib/collective"
	"godist/distlib/tensor"
	"godist/internal/simd"
)

// GradientBucketer sums a fixed list of tensors across workers, packed into buckets that
// are all-reduced in the background as soon as each is complete, so that communication
// overlaps the rest of the backward pass (collective.Bucketer, made with KeepTerms; where
// the workers share memory, nothing but where each bucket lies travels, and WaitTerms sends
// that for all buckets in one message to each worker). Use it
// once per step: Add every tensor (any order), then WaitTerms, which returns for each
// tensor the terms whose sum in order is the sum over the workers: one per worker, read
// where it lies, when the workers share memory (the caller sums them as it reads them, so
// the sum is never written), else one, the sum. Read them before the next step's Adds.
// Buffer(i) is tensor i's place in its bucket: a gradient computed there and passed to Add
// is not copied again (ask for it every step: the first all-reduce may move a bucket into
// the memory the workers of one host share, and then it alternates between two buffers).
type GradientBucketer interface {
	Add(i int, grad []float32) error
	Buffer(i int) []float32
	WaitTerms(ctx context.Context) ([][][]float32, error)
	NumBuckets() int
}

// ExtendedGradientBucketer returns a GradientBucketer that sums tensors of the given sizes
// across the workers of s, in buckets of about bucketBytes (0: collective.DefaultBucketBytes),
// with every wait bounded by the communication timeout. Every worker must create its
// bucketers with the same sizes in the same order. It returns nil and no error for a single
// worker, where there is nothing to reduce across workers.
func (s *MultiWorkerMirroredStrategy) ExtendedGradientBucketer(sizes []int, bucketBytes int) (GradientBucketer, error) {
	if s.workers <= 1 || s.t == nil {
		return nil, nil
	}
	s.mu.Lock()
	if !s.joined {
		ctx := cell.Context()
		jctx, cancel := context.WithTimeout(ctx, s.timeout)
		err := s.join(jctx)
		cancel()
		if err != nil {
			s.mu.Unlock()
			return nil, s.stepError(ctx, opJoin, err)
		}
		s.joined = true
	}
	s.seq++
	id := s.seq
	s.mu.Unlock()
	b, err := collective.NewBucketer(s.t, sizes, bucketBytes, collective.Sum, collective.KeepTerms(),
		collective.Tag(fmt.Sprintf("mwms/buckets/%d", id)),
		collective.CommunicationOptions{Timeout: s.timeout})
	if err != nil {
		return nil, fmt.Errorf("distribute: worker %d of %d: %w", s.worker, s.workers, err)
	}
	return &mwBucketer{s: s, b: b}, nil
}

// mwBucketer names the worker that a failed bucket lost (*PeerUnavailableError).
type mwBucketer struct {
	s *MultiWorkerMirroredStrategy
	b *collective.Bucketer
}

func (m *mwBucketer) Add(i int, grad []float32) error {
	if err := m.b.Add(i, grad); err != nil {
		return m.s.stepError(context.Background(), "allreduce", err)
	}
	return nil
}

func (m *mwBucketer) WaitTerms(ctx context.Context) ([][][]float32, error) {
	terms, err := m.b.WaitTerms(ctx)
	if err != nil {
		return nil, m.s.stepError(ctx, "allreduce", err)
	}
	return terms, nil
}

func (m *mwBucketer) NumBuckets() int { return m.b.NumBuckets() }

func (m *mwBucketer) Buffer(i int) []float32 { return m.b.Buffer(i) }

// ExtendedTimeout returns how long the strategy waits for another worker.
func (s *MultiWorkerMirroredStrategy) ExtendedTimeout() time.Duration { return s.timeout }

// ExtendedApplyGradients is Strategy's (see there) with, for one local replica on several
// workers, the gradients summed through a kept GradientBucketer (sumKept) rather than the
// group's all-reduce: where the workers share memory, each worker copies its gradients into
// its buckets there and reads the others' where they lie, and one round through the
// postboxes orders it (the all-reduce behind ExtendedAllReduce took the TCP ring, about 1.5
// ms a step for the peer CNN's 1.4 MB on this project's 2-core machine: bench/RESULTS.md,
// multiworker "2026-11-28 20:30-20:40Z"). Gradients already reduced in the replica function,
// several local replicas, or a call outside Run take the general path.
func (s *MultiWorkerMirroredStrategy) ExtendedApplyGradients(replicaDevice string, grads []*tensor.Tensor, apply func(grads []*tensor.Tensor) error) (inRun bool, err error) {
	g := s.running.Load()
	if g == nil || apply == nil || s.workers <= 1 || s.t == nil || len(s.devices) != 1 || replicaDevice != s.devices[0] || g.reduced(grads) {
		return s.base.ExtendedApplyGradients(replicaDevice, grads, apply)
	}
	var dense []*tensor.Tensor
	for _, t := range grads {
		if t != nil {
			dense = append(dense, t)
		}
	}
	if len(dense) == 0 {
		return true, apply(grads)
	}
	sums, err := s.sumKept(g.ctx, dense, false)
	if err != nil {
		return true, fmt.Errorf("distribute: ApplyGradients: aggregate the gradients of worker %d "+
			"(every worker must call ApplyGradients with gradients of the same shapes, nil for the same variables): %w", s.worker, err)
	}
	summed := make([]*tensor.Tensor, len(grads))
	for i, t := range grads {
		if t != nil {
			summed[i], sums = sums[0], sums[1:]
		}
	}
	return true, apply(summed)
}

// keptBucketer is a GradientBucketer sumKept keeps for tensors of its sizes.
type keptBucketer struct {
	sizes []int
	b     GradientBucketer
}

// maxKeptBucketers is how many bucketers sumKept keeps, the least recently used dropped
// first (its buffers go back to the shared memory once the bucketer is collected).
const maxKeptBucketers = 8

// sumKept returns the sums of ts over the workers (every worker passing tensors of the same
// sizes, in the same order, in the same sequence of calls), each divided by the number of
// workers when mean is set, in new tensors: through a GradientBucketer for those sizes, made
// at the first call with them and kept for the next (at most maxKeptBucketers; every worker
// keeps and drops the same ones, since they see the same calls). Each worker copies its
// values into its buckets; once the buckets lie in the workers' shared memory (after the
// first call), one round through the postboxes orders a call and each worker sums everyone's
// values where they lie, in rank order, the same on every worker.
func (s *MultiWorkerMirroredStrategy) sumKept(ctx context.Context, ts []*tensor.Tensor, mean bool) ([]*tensor.Tensor, error) {
	sizes := make([]int, len(ts))
	for i, t := range ts {
		sizes[i] = t.Size()
	}
	s.keptMu.Lock()
	defer s.keptMu.Unlock()
	var b GradientBucketer
	for i, k := range s.kept {
		if slices.Equal(k.sizes, sizes) {
			b = k.b
			s.kept = append(append(s.kept[:i:i], s.kept[i+1:]...), k) // most recently used last
			break
		}
	}
	if b == nil {
		nb, err := s.ExtendedGradientBucketer(sizes, keptBucketBytes)
		if err != nil {
			return nil, err
		}
		b = nb
		if len(s.kept) == maxKeptBucketers {
			s.kept = s.kept[1:]
		}
		s.kept = append(s.kept, keptBucketer{sizes, b})
	}
	for i, t := range ts {
		if err := b.Add(i, t.Data()); err != nil {
			_, _ = b.WaitTerms(ctx) // drain the buckets already started; the call fails anyway
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	terms, err := b.WaitTerms(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*tensor.Tensor, len(ts))
	for i, t := range ts {
		sum := make([]float32, sizes[i])
		copy(sum, terms[i][0])
		for _, term := range terms[i][1:] {
			simd.AddTo(sum, term)
		}
		if mean {
			n := float32(s.workers)
			for j := range sum {
				sum[j] /= n
			}
		}
		out[i] = newOn(t.Device(), t.Shape(), sum)
	}
	return out, nil
}

// keptBucketBytes is the bucket size of sumKept's bucketers (keras Fit's, too).
const keptBucketBytes = 256 << 10
