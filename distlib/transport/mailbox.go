package transport

import (
	"context"
	"sync"
)

// mailbox queues incoming messages per (sender, tag), FIFO, without bound, so that a sender
// never waits for the receiving application: only for the wire. A sender marked lost fails
// the gets that find no message of it queued.
type mailbox struct {
	mu     sync.Mutex
	queues map[key]*queue
	closed error
	lost   map[int]error // senders whose link was lost, and why
}

type key struct {
	from int
	tag  string
}

type queue struct {
	msgs  [][]byte
	ready chan struct{} // closed and replaced when a message arrives
}

func newMailbox() *mailbox { return &mailbox{queues: map[key]*queue{}, lost: map[int]error{}} }

func (m *mailbox) queue(k key) *queue {
	q := m.queues[k]
	if q == nil {
		q = &queue{ready: make(chan struct{})}
		m.queues[k] = q
	}
	return q
}

func (m *mailbox) put(from int, tag string, b []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed != nil {
		return
	}
	q := m.queue(key{from, tag})
	q.msgs = append(q.msgs, b)
	close(q.ready)
	q.ready = make(chan struct{})
}

func (m *mailbox) get(ctx context.Context, from int, tag string) ([]byte, error) {
	k := key{from, tag}
	for {
		m.mu.Lock()
		if m.closed != nil {
			m.mu.Unlock()
			return nil, m.closed
		}
		q := m.queue(k)
		if len(q.msgs) > 0 {
			b := q.msgs[0]
			q.msgs[0] = nil
			q.msgs = q.msgs[1:]
			if len(q.msgs) == 0 {
				delete(m.queues, k)
				close(q.ready) // wake other waiters so they re-read the map
			}
			m.mu.Unlock()
			return b, nil
		}
		if err := m.lost[from]; err != nil {
			delete(m.queues, k)
			m.mu.Unlock()
			return nil, err
		}
		ready := q.ready
		m.mu.Unlock()
		select {
		case <-ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// markLost records that the link from sender from was lost (err says how, wrapping
// ErrPeerLost): its queued messages are still delivered, then gets from it fail with err.
func (m *mailbox) markLost(from int, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed != nil || m.lost[from] != nil {
		return
	}
	m.lost[from] = err
	for k, q := range m.queues {
		if k.from == from {
			close(q.ready)
			q.ready = make(chan struct{})
		}
	}
}

// found clears a lost mark: sender from connected again. It reports whether from was lost.
func (m *mailbox) found(from int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, was := m.lost[from]
	delete(m.lost, from)
	return was
}

// lostErr returns why the link from sender from was lost, or nil.
func (m *mailbox) lostErr(from int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lost[from]
}

// close fails every present and future get with err.
func (m *mailbox) close(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed != nil {
		return
	}
	m.closed = err
	for _, q := range m.queues {
		close(q.ready)
	}
	m.queues = nil
}
