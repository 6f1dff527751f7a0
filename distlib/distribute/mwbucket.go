package distribute

import (
	"context"
	"fmt"
	"slices"
	"time"

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

// multiWorkerExtended is MultiWorkerMirroredStrategy's extended: the in-sync replicas' and
// its workers' gradient bucketing (GradientBucketing, GradientTermsApplier).
type multiWorkerExtended struct {
	syncExtended
	s *MultiWorkerMirroredStrategy
}

// GradientBucketer is the strategy's gradientBucketer (GradientBucketing).
func (e *multiWorkerExtended) GradientBucketer(ctx context.Context, sizes []int, bucketBytes int) (GradientBucketer, error) {
	return e.s.gradientBucketer(ctx, sizes, bucketBytes)
}

// Timeout returns how long the strategy waits for another worker.
func (e *multiWorkerExtended) Timeout() time.Duration { return e.s.timeout }

// ApplyGradients is the strategy's applyGradients (ReplicaGradientApplier).
func (e *multiWorkerExtended) ApplyGradients(replicaDevice string, grads []*tensor.Tensor, apply func(grads []*tensor.Tensor) error) (inRun bool, err error) {
	return e.s.applyGradients(replicaDevice, grads, apply)
}

// ApplyGradientTerms is the strategy's applyGradientTerms (GradientTermsApplier).
func (e *multiWorkerExtended) ApplyGradientTerms(replicaDevice string, grads []*tensor.Tensor, apply func(terms [][][]float32) error) (inRun bool, err error) {
	return e.s.applyGradientTerms(replicaDevice, grads, apply)
}

// gradientBucketer returns a GradientBucketer that sums tensors of the given sizes
// across the workers of s, in buckets of about bucketBytes (0: collective.DefaultBucketBytes),
// with every wait bounded by the communication timeout. ctx (the caller's step) bounds the
// join of the cluster and the check of the sizes it makes first. Every worker must create
// its bucketers with the same sizes in the same order: a small all-reduce checks the sizes,
// and fails on every worker when they differ. It returns nil and no error for a single
// worker, where there is nothing to reduce across workers.
func (s *MultiWorkerMirroredStrategy) gradientBucketer(ctx context.Context, sizes []int, bucketBytes int) (GradientBucketer, error) {
	if s.workers <= 1 || s.t == nil {
		return nil, nil
	}
	jctx, cancel := context.WithTimeout(ctx, s.timeout)
	err := s.ensureJoined(jctx)
	cancel()
	if err != nil {
		return nil, s.stepError(ctx, opJoin, err)
	}
	// The bucketer's tag number comes in turn with the collectives', the same on every worker.
	id, err := s.takeTurn(ctx)
	if err != nil {
		return nil, s.stepError(ctx, opJoin, err)
	}
	s.endTurn()
	if err := s.checkSizes(ctx, sizes); err != nil {
		return nil, err
	}
	b, err := collective.NewBucketer(s.g, sizes, bucketBytes, collective.Sum, collective.KeepTerms(),
		collective.Tag(fmt.Sprintf("mwms/buckets/%d", id)),
		collective.CommunicationOptions{Timeout: s.timeout})
	if err != nil {
		return nil, fmt.Errorf("distribute: worker %d of %d: %w", s.worker, s.workers, err)
	}
	return &mwBucketer{s: s, b: b, gen: s.gen}, nil
}

// mwBucketer names the worker that a failed bucket lost (*PeerUnavailableError); under
// WithElastic its buckets stop when their generation ends.
type mwBucketer struct {
	s   *MultiWorkerMirroredStrategy
	b   *collective.Bucketer
	gen *generation
}

func (m *mwBucketer) Add(i int, grad []float32) error {
	if err := m.b.Add(i, grad); err != nil {
		if re := genError(context.Background(), m.gen, "allreduce", err); re != nil {
			return re
		}
		return m.s.stepError(context.Background(), "allreduce", err)
	}
	return nil
}

func (m *mwBucketer) WaitTerms(ctx context.Context) ([][][]float32, error) {
	gctx, unbind := bindGeneration(ctx, m.gen)
	defer unbind()
	terms, err := m.b.WaitTerms(gctx)
	if err != nil {
		if re := genError(ctx, m.gen, "allreduce", err); re != nil {
			return nil, re
		}
		return nil, m.s.stepError(ctx, "allreduce", err)
	}
	return terms, nil
}

func (m *mwBucketer) NumBuckets() int { return m.b.NumBuckets() }

func (m *mwBucketer) Buffer(i int) []float32 { return m.b.Buffer(i) }

// applyGradients is base's (ReplicaGradientApplier) with, for one local replica on several
// workers, the gradients summed through a kept GradientBucketer (sumKept) rather than the
// group's all-reduce: where the workers share memory, each worker copies its gradients into
// its buckets there and reads the others' where they lie, and one round through the
// postboxes orders it, where the all-reduce behind AllReduce takes the TCP ring
// (bench/RESULTS.md, multiworker, "the course's custom loop across workers"). The sums, in
// rank order, go into new tensors; applyGradientTerms hands them over as terms
// instead. Gradients already reduced in
// the replica function, several local replicas, or a call outside Run take the general path.
func (s *MultiWorkerMirroredStrategy) applyGradients(replicaDevice string, grads []*tensor.Tensor, apply func(grads []*tensor.Tensor) error) (inRun bool, err error) {
	g := s.bucketsRun(replicaDevice, grads)
	if apply == nil || g == nil {
		return s.base.applyGradients(replicaDevice, grads, apply)
	}
	return true, s.applyBuckets(g, grads, func(terms [][][]float32) error {
		summed := make([]*tensor.Tensor, len(grads))
		for i, t := range grads {
			if t != nil {
				summed[i] = newOn(t.Device(), t.Shape(), sumTerms(terms[i]))
			}
		}
		return apply(summed)
	})
}

// applyGradientTerms is applyGradients handing apply the summed gradients as
// terms (GradientTermsApplier): every worker's gradient, where it lies, when the workers
// share memory; else one term, the sum.
func (s *MultiWorkerMirroredStrategy) applyGradientTerms(replicaDevice string, grads []*tensor.Tensor, apply func(terms [][][]float32) error) (inRun bool, err error) {
	g := s.bucketsRun(replicaDevice, grads)
	if apply == nil || g == nil {
		return s.base.applyGradients(replicaDevice, grads, func(gs []*tensor.Tensor) error {
			terms := make([][][]float32, len(gs))
			for i, t := range gs {
				if t != nil {
					terms[i] = [][]float32{t.Data()}
				}
			}
			return apply(terms)
		})
	}
	return true, s.applyBuckets(g, grads, apply)
}

// bucketsRun returns the Run in progress when applyGradients sums grads through
// sumKept: inside a Run, with one local replica (replicaDevice's) on several workers, and
// grads not already reduced in the replica function; else nil.
func (s *MultiWorkerMirroredStrategy) bucketsRun(replicaDevice string, grads []*tensor.Tensor) *syncGroup {
	g := s.running.Load()
	if g == nil || s.workers <= 1 || s.t == nil || len(s.devices) != 1 || replicaDevice != s.devices[0] || g.reduced(grads) {
		return nil
	}
	return g
}

// applyBuckets sums the non-nil grads over the workers through sumKept, under g's context,
// and calls apply with their terms (none for a nil gradient).
func (s *MultiWorkerMirroredStrategy) applyBuckets(g *syncGroup, grads []*tensor.Tensor, apply func(terms [][][]float32) error) error {
	var dense []*tensor.Tensor
	for _, t := range grads {
		if t != nil {
			dense = append(dense, t)
		}
	}
	terms := make([][][]float32, len(grads))
	if len(dense) == 0 {
		return apply(terms)
	}
	var sums [][][]float32
	var err error
	select {
	case s.keptTurn <- struct{}{}:
		sums, err = s.sumKept(g.ctx, dense)
		<-s.keptTurn
	case <-g.ctx.Done():
		err = s.stepError(g.ctx, "allreduce", context.Cause(g.ctx))
	}
	if err != nil {
		return fmt.Errorf("distribute: ApplyGradients: aggregate the gradients of worker %d "+
			"(every worker must call ApplyGradients with gradients of the same shapes, nil for the same variables): %w", s.worker, err)
	}
	for i, t := range grads {
		if t != nil {
			terms[i], sums = sums[0], sums[1:]
		}
	}
	return apply(terms)
}

// sumTerms returns the sum of terms in order, in a new slice.
func sumTerms(terms [][]float32) []float32 {
	sum := append([]float32(nil), terms[0]...)
	for _, t := range terms[1:] {
		simd.AddTo(sum, t)
	}
	return sum
}

// keptBucketer is a GradientBucketer sumKept keeps for tensors of its sizes.
type keptBucketer struct {
	sizes []int
	b     GradientBucketer
}

// maxKeptBucketers is how many bucketers sumKept keeps, the least recently used dropped
// first (its buffers go back to the shared memory once the bucketer is collected).
const maxKeptBucketers = 8

// sumKept returns, for each of ts, terms whose sum in order is its sum over the workers
// (every worker passing tensors of the same sizes, in the same order, in the same sequence
// of calls), valid until the next call with the same sizes; the caller holds s.keptTurn. It
// goes through a GradientBucketer for those sizes, made at the first call with them and kept
// for the next (at most maxKeptBucketers; every worker keeps and drops the same ones, since
// they see the same calls). Each worker copies its values into its buckets; once the
// buckets lie in the workers' shared memory (after the first call), one round through the
// postboxes orders a call and the terms are every worker's values where they lie, by rank;
// else each is one term, the sum.
func (s *MultiWorkerMirroredStrategy) sumKept(ctx context.Context, ts []*tensor.Tensor) ([][][]float32, error) {
	sizes := make([]int, len(ts))
	for i, t := range ts {
		sizes[i] = t.Size()
	}
	var b GradientBucketer
	for i, k := range s.kept {
		if slices.Equal(k.sizes, sizes) {
			b = k.b
			s.kept = append(append(s.kept[:i:i], s.kept[i+1:]...), k) // most recently used last
			break
		}
	}
	if b == nil {
		nb, err := s.gradientBucketer(ctx, sizes, keptBucketBytes)
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
	return b.WaitTerms(ctx)
}

// checkSizes fails on every worker at once when the workers' tensor sizes differ, before
// gradientBucketer makes a bucketer for them: bucketers of other sizes lay out
// other buckets, and a worker would wait for buckets the others never send until the
// communication timeout (5 minutes by default), where the all-reduce of AllReduce
// says at once that the lengths differ. One small all-reduce of each worker's fingerprint
// of sizes (and its negation: their maximum and minimum) tells every worker.
func (s *MultiWorkerMirroredStrategy) checkSizes(ctx context.Context, sizes []int) error {
	total, hash := 0, 0
	for i, n := range sizes {
		total += n
		hash = (hash*31 + n*(i+1)) % (1 << 22)
	}
	// Integers under 2^24, exact as float32s.
	fp := []float32{float32(len(sizes) % (1 << 22)), float32(total % (1 << 22)), float32(total >> 22 % (1 << 22)), float32(hash)}
	buf := make([]float32, 2*len(fp))
	for i, v := range fp {
		buf[i], buf[len(fp)+i] = v, -v
	}
	if err := s.collective(ctx, "checksizes", func(ctx context.Context, opts []collective.Option) error {
		return collective.AllReduce(ctx, s.g, buf, collective.Max, opts...)
	}); err != nil {
		return err
	}
	for i := range fp {
		if buf[i] != -buf[len(fp)+i] {
			return fmt.Errorf("distribute: %w: worker %d of %d has %d tensors of %d values in all, and another worker's differ",
				collective.ErrBadArgument, s.worker, s.workers, len(sizes), total)
		}
	}
	return nil
}

// keptBucketBytes is the bucket size of sumKept's bucketers (keras Fit's, too).
const keptBucketBytes = 256 << 10
