package distribute

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"godist/distlib/tensor"
)

// RemoteValue is the result of a scheduled function (tf's RemoteValue): Fetch waits for it.
type RemoteValue struct {
	done   chan struct{}
	once   sync.Once
	val    *tensor.Tensor
	err    error
	worker int
}

func (r *RemoteValue) finish(val *tensor.Tensor, err error, worker int) {
	r.once.Do(func() {
		r.val, r.err, r.worker = val, err, worker
		close(r.done)
	})
}

// FetchContext is Fetch bounded by ctx: when ctx ends first it returns an error wrapping
// ctx's cause (the function itself goes on; cancel its Schedule ctx or Join's to stop it).
func (r *RemoteValue) FetchContext(ctx context.Context) (*tensor.Tensor, error) {
	if ctx == nil {
		return nil, errors.New("distribute: FetchContext: nil context (pass context.Background() or the cell's context)")
	}
	select {
	case <-r.done:
		return r.val, r.err
	case <-ctx.Done():
		select {
		case <-r.done: // both ready: the result wins
			return r.val, r.err
		default:
		}
		return nil, fmt.Errorf("distribute: fetch: %w", context.Cause(ctx))
	}
}

// Done reports whether the function has finished.
func (r *RemoteValue) Done() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// Worker returns the index of the worker that ran the function (-1 if none did).
func (r *RemoteValue) Worker() int {
	<-r.done
	return r.worker
}
