package distribute

import (
	"context"
	"time"

	"godist/distlib/tensor"
)

// The optional capabilities a strategy offers library code beside Strategy's Extended
// methods, asked for once, where keras picks its training loop (trainerFor) or its
// variables' store. Coordinated (ps_seam.go) and GradientTermsApplier (mwbucket.go) are
// the others.

// ReplicaTermsSummer is implemented by strategies whose local replicas' gradients an
// optimizer can sum as it reads them, in replica order, instead of all-reducing them first.
type ReplicaTermsSummer interface {
	// ExtendedSumTerms hands over perReplica[r][i] (tensor i of local replica r) as
	// terms[i] (one term per replica) when the replicas' memory can be read in place (ok
	// true); ok false: the caller all-reduces as usual.
	ExtendedSumTerms(perReplica [][]*tensor.Tensor) (terms [][][]float32, ok bool, err error)
}

// GradientBucketing is implemented by strategies that reduce gradients across workers in
// buckets while the backward pass goes on.
type GradientBucketing interface {
	// ExtendedGradientBucketer returns a bucketer for tensors of the given sizes (see
	// MultiWorkerMirroredStrategy.ExtendedGradientBucketer).
	ExtendedGradientBucketer(ctx context.Context, sizes []int, bucketBytes int) (GradientBucketer, error)
	// ExtendedTimeout bounds every wait of a collective.
	ExtendedTimeout() time.Duration
}

var (
	_ ReplicaTermsSummer = (*MirroredStrategy)(nil)
	_ GradientBucketing  = (*MultiWorkerMirroredStrategy)(nil)
)
