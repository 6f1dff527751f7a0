package distribute

import (
	"context"
	"fmt"
	"time"

	"godist/distlib/cell"
	"godist/distlib/collective"
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
