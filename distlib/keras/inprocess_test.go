package keras

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"godist/distlib/distribute"
	"godist/distlib/transport"
)

// inProcessScopes serializes the strategy scopes of in-process workers.
var inProcessScopes sync.Mutex

// memWorkers runs fn on n MultiWorkerMirroredStrategy workers in this process, joined by
// transport.NewMem, worker w on device /cpu:w with the given communication timeout, and
// waits for all of them (at most 60 s); a worker's panic fails the test, naming the worker.
func memWorkers(t *testing.T, n int, timeout time.Duration, fn func(w int, s *distribute.MultiWorkerMirroredStrategy)) {
	t.Helper()
	mems := transport.NewMem(n)
	defer func() {
		for _, m := range mems {
			m.Close()
		}
	}()
	var wg sync.WaitGroup
	for w := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("worker %d panicked: %v", w, p)
				}
			}()
			s := distribute.NewMultiWorkerMirroredStrategy(distribute.WithTransport(mems[w]),
				distribute.WithDevices(fmt.Sprintf("/cpu:%d", w)), distribute.WithCommunicationTimeout(timeout))
			fn(w, s)
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("the %d workers did not finish within 60s", n)
	}
}
