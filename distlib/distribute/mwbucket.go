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
// workers, the gradients summed through a GradientBucketer rather than the group's
// all-reduce: where the workers share memory, each worker copies its gradients into its
// buckets there and reads the others' where they lie, and one round through the postboxes
// orders it (the all-reduce behind ExtendedAllReduce packs every gradient and takes the TCP
// ring, about 1.5 ms a step for the peer CNN's 1.4 MB on this project's 2-core machine:
// bench/RESULTS.md, multiworker "2026-11-28 20:40Z"). The sum is taken in rank order, the
// same on every worker, into new tensors that apply receives. Gradients already reduced in
// the replica function, several local replicas, or a call outside Run take the general
// path.
func (s *MultiWorkerMirroredStrategy) ExtendedApplyGradients(replicaDevice string, grads []*tensor.Tensor, apply func(grads []*tensor.Tensor) error) (inRun bool, err error) {
	g := s.running.Load()
	if g == nil || apply == nil || s.workers <= 1 || s.t == nil || len(s.devices) != 1 || replicaDevice != s.devices[0] || g.reduced(grads) {
		return s.base.ExtendedApplyGradients(replicaDevice, grads, apply)
	}
	sizes := make([]int, 0, len(grads))
	for _, t := range grads {
		if t != nil {
			sizes = append(sizes, t.Size())
		}
	}
	if len(sizes) == 0 {
		return true, apply(grads)
	}
	summed, err := s.sumGradients(g.ctx, grads, sizes)
	if err != nil {
		return true, fmt.Errorf("distribute: ApplyGradients: aggregate the gradients of worker %d "+
			"(every worker must call ApplyGradients with gradients of the same shapes, nil for the same variables): %w", s.worker, err)
	}
	return true, apply(summed)
}

// sumGradients sums the non-nil grads (of the given sizes, in order) over the workers
// through the strategy's gradient bucketer for those sizes, made at the first call with them.
func (s *MultiWorkerMirroredStrategy) sumGradients(ctx context.Context, grads []*tensor.Tensor, sizes []int) ([]*tensor.Tensor, error) {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	if s.apply == nil || !slices.Equal(s.applySizes, sizes) {
		b, err := s.ExtendedGradientBucketer(sizes, applyBucketBytes)
		if err != nil {
			return nil, err
		}
		s.apply, s.applySizes = b, sizes
	}
	b := s.apply
	k := 0
	for _, t := range grads {
		if t != nil {
			if err := b.Add(k, t.Data()); err != nil {
				_, _ = b.WaitTerms(ctx) // drain the buckets already started; the step fails anyway
				return nil, err
			}
			k++
		}
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	terms, err := b.WaitTerms(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*tensor.Tensor, len(grads))
	k = 0
	for i, t := range grads {
		if t == nil {
			continue
		}
		sum := make([]float32, sizes[k])
		copy(sum, terms[k][0])
		for _, term := range terms[k][1:] {
			simd.AddTo(sum, term)
		}
		out[i] = newOn(t.Device(), t.Shape(), sum)
		k++
	}
	return out, nil
}

// applyBucketBytes is the bucket size of ExtendedApplyGradients' bucketer (keras Fit's, too).
const applyBucketBytes = 256 << 10
