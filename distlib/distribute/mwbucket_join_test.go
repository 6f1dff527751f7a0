package distribute

import (
	"context"
	"errors"
	"testing"
	"time"

	"godist/distlib/transport"
)

// TestBucketerJoinHoldsNoLock: while a bucketer waits to join a cluster whose other worker
// never comes, it holds no lock: a barrier under another ctx waits for the same join and
// returns as soon as its own ctx ends, and the bucketer returns as soon as its ctx ends,
// each with context.Canceled, long before the communication timeout.
func TestBucketerJoinHoldsNoLock(t *testing.T) {
	mems := transport.NewMem(2)
	defer func() {
		for _, m := range mems {
			m.Close()
		}
	}()
	s := NewMultiWorkerMirroredStrategy(WithTransport(mems[0]), WithDevices("/cpu:0"), WithCommunicationTimeout(time.Minute))
	bctx, bcancel := context.WithCancel(context.Background())
	defer bcancel()
	bucketed := make(chan error, 1)
	go func() {
		_, err := s.Extended().(GradientBucketing).GradientBucketer(bctx, []int{4}, 0)
		bucketed <- err
	}()
	time.Sleep(50 * time.Millisecond) // the bucketer is joining

	ctx, cancel := context.WithCancel(context.Background())
	barrier := make(chan error, 1)
	go func() { barrier <- s.BarrierContext(ctx) }()
	time.Sleep(50 * time.Millisecond)
	cancel()
	start := time.Now()
	for _, w := range []struct {
		name string
		ch   chan error
	}{{"BarrierContext", barrier}, {"GradientBucketer", bucketed}} {
		name, ch := w.name, w.ch
		select {
		case err := <-ch:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("%s = %v, want an error wrapping context.Canceled", name, err)
			}
			if d := time.Since(start); d > time.Second {
				t.Errorf("%s returned %v after its ctx was cancelled, want under 1s", name, d)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s did not return within 10s of its ctx's cancel", name)
		}
		bcancel()
		start = time.Now()
	}
}
