package distribute

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"godist/distlib/cluster"
	"godist/distlib/psched"
	"godist/distlib/tensor"
	"godist/distlib/transport"
)

// psWorker runs scheduled functions for one worker task.
type psWorker struct {
	c     *ClusterCoordinator
	index int
	slots int           // functions in flight (psched.Config.Slots)
	runs  chan *closure // functions the scheduler placed on this worker

	mu      sync.Mutex
	clients []*transport.PSClient
	remote  *transport.WorkerClient // the worker task's function service (remote workers)
	lastErr error                   // the last connection error
	killed  bool
	restart chan struct{}
	ran     atomic.Int64
}

// loop connects the worker, reports it up, runs the functions placed on it until it fails,
// and reconnects (rejoins) before taking more work.
func (w *psWorker) loop() {
	defer w.c.wg.Done()
	for {
		if !w.connect() {
			return
		}
		w.drain()
		w.c.step(func(sm *psched.Scheduler) { sm.WorkerUp(w.index) })
		if !w.serve() {
			return // the coordinator stopped
		}
		w.closeClients()
	}
}

// drain drops functions placed on this worker before it went down (the scheduler placed
// them again elsewhere).
func (w *psWorker) drain() {
	for {
		select {
		case <-w.runs:
		default:
			return
		}
	}
}

// serve runs the worker's functions, slots at a time, and reports whether it stopped
// because the worker failed (false: the coordinator stopped).
func (w *psWorker) serve() bool {
	down := make(chan struct{})
	var once sync.Once
	var g sync.WaitGroup
	for range w.slots {
		g.Add(1)
		go func() {
			defer g.Done()
			for {
				select {
				case <-down:
					return
				case <-w.c.ctx.Done():
					return
				case cl := <-w.runs:
					select {
					case <-down:
						return // placed again elsewhere when the worker went down
					default:
					}
					if w.execute(cl) {
						once.Do(func() { close(down) })
						return
					}
				}
			}
		}()
	}
	g.Wait()
	if w.c.ctx.Err() != nil {
		return false
	}
	select {
	case <-down:
		return true
	default:
		return false
	}
}

// execute runs cl and reports its outcome to the scheduler; it returns true when the
// worker failed.
func (w *psWorker) execute(cl *closure) (workerFailed bool) {
	var val *tensor.Tensor
	err := context.Cause(cl.ctx)
	if err == nil {
		val, err = w.run(cl)
	}
	o := psched.OK
	switch {
	case err == nil:
		w.ran.Add(1)
	case cl.ctx.Err() != nil:
		o = psched.Cancelled
		err = fmt.Errorf("%w: step %d stopped: %w", ErrClosureCancelled, cl.step, context.Cause(cl.ctx))
	case isWorkerFailure(err) && w.c.ctx.Err() == nil:
		// A ps that does not answer the coordinator either is fatal; otherwise the worker
		// is lost and the function runs again elsewhere.
		if perr := w.c.s.checkPS(); perr != nil {
			logf("ERROR", "%v", perr)
			w.c.step(func(sm *psched.Scheduler) {
				sm.Fail(perr)
				sm.ClosureDone(w.index, cl.step, psched.WorkerFailure, err)
			})
			return false
		}
		o, workerFailed = psched.WorkerFailure, true
		w.setErr(err)
	default:
		o = psched.UserError
	}
	w.c.step(func(sm *psched.Scheduler) {
		if o == psched.OK {
			cl.val = val
		}
		sm.ClosureDone(w.index, cl.step, o, err)
	})
	return workerFailed
}

// err returns the worker's last connection error.
func (w *psWorker) err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastErr
}

// connect (re)opens this worker's connections and waits until every ps answers through
// them; while the worker is killed it waits for restart. It returns false when the
// coordinator stops.
func (w *psWorker) connect() bool {
	s := w.c.s
	delay := 20 * time.Millisecond
	for {
		if w.c.ctx.Err() != nil {
			return false
		}
		w.mu.Lock()
		killed := w.killed
		w.mu.Unlock()
		if killed {
			select {
			case <-w.restart:
				continue
			case <-w.c.ctx.Done():
				return false
			}
		}
		if s.remote {
			if w.connectRemote() {
				return true
			}
			select {
			case <-time.After(delay):
				delay = min(2*delay, time.Second)
				continue
			case <-w.c.ctx.Done():
				return false
			}
		}
		clients := make([]*transport.PSClient, len(s.psAddrs))
		err := error(nil)
		for i, addr := range s.psAddrs {
			if clients[i], err = transport.DialPS(addr, transport.PSClientOptions{Token: s.token,
				Caller: max(0, s.callerBase) + w.index, Timeout: s.timeout, NoSharedMemory: cluster.NoSharedMemoryFromEnv()}); err != nil {
				break
			}
			ctx, cancel := context.WithTimeout(w.c.ctx, s.timeout)
			err = clients[i].WaitReady(ctx)
			cancel()
			if err != nil {
				break
			}
		}
		if err == nil {
			w.mu.Lock()
			if !w.killed {
				w.clients = clients
				w.mu.Unlock()
				return true
			}
			w.mu.Unlock()
		} else {
			w.setErr(err)
		}
		for _, cl := range clients {
			if cl != nil {
				cl.Close()
			}
		}
		select {
		case <-time.After(delay):
			delay = min(2*delay, time.Second)
		case <-w.c.ctx.Done():
			return false
		}
	}
}

func (w *psWorker) setErr(err error) {
	w.mu.Lock()
	w.lastErr = err
	w.mu.Unlock()
}

func (w *psWorker) closeClients() {
	w.mu.Lock()
	clients := w.clients
	w.clients = nil
	if w.remote != nil {
		w.remote.Close()
		w.remote = nil
	}
	w.mu.Unlock()
	for _, cl := range clients {
		cl.Close()
	}
}

// kill tears the worker's connections down (a worker task lost); it stays down until
// restartWorker.
func (w *psWorker) kill() {
	w.mu.Lock()
	w.killed = true
	clients := w.clients
	if w.remote != nil {
		w.remote.Close()
	}
	w.mu.Unlock()
	for _, cl := range clients {
		cl.Close()
	}
}

func (w *psWorker) revive() {
	w.mu.Lock()
	w.killed = false
	w.mu.Unlock()
	select {
	case w.restart <- struct{}{}:
	default:
	}
}

func (w *psWorker) run(cl *closure) (val *tensor.Tensor, err error) {
	if w.c.s.remote {
		return w.runRemote(cl)
	}
	w.mu.Lock()
	clients, killed := w.clients, w.killed
	w.mu.Unlock()
	if killed || clients == nil {
		return nil, fmt.Errorf("%w: worker %d", errWorkerLost, w.index)
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("distribute: scheduled function panicked on worker %d: %w", w.index, panicError(p))
		}
	}()
	var op uint32
	wc := &WorkerContext{ctx: cl.ctx, index: w.index, step: cl.step, a: access{ctx: cl.ctx, clients: clients, step: cl.step, op: &op}, vars: w.c.s.varByName}
	defer inScheduled(wc)()
	if cl.fn == nil {
		fn, err := lookupFunction(cl.name)
		if err != nil {
			return nil, err
		}
		return fn(wc, cl.args)
	}
	return cl.fn(wc)
}
