package device

import (
	"sync"
	"sync/atomic"

	"godist/internal/goid"
)

// Device scopes are per goroutine, like TensorFlow's per-thread device stack: a replica
// goroutine's With does not affect another goroutine. A goroutine started inside a scope
// does not inherit it (as a thread started inside tf.device does not).

type scopeTable struct {
	active atomic.Int64 // number of open scopes in all goroutines; 0 makes Current free
	mu     sync.RWMutex // Current, on every op of every replica, only reads
	stacks map[uint64][]string
}

var scopes = &scopeTable{stacks: map[uint64][]string{}}

func (s *scopeTable) reset() {
	s.mu.Lock()
	s.stacks = map[uint64][]string{}
	s.active.Store(0)
	s.mu.Unlock()
}

func (s *scopeTable) push(name string) uint64 {
	id := goid.Get()
	s.mu.Lock()
	s.stacks[id] = append(s.stacks[id], name)
	s.mu.Unlock()
	s.active.Add(1)
	return id
}

func (s *scopeTable) pop(id uint64) {
	s.mu.Lock()
	st := s.stacks[id]
	if len(st) > 0 {
		st = st[:len(st)-1]
		s.active.Add(-1)
	}
	if len(st) == 0 {
		delete(s.stacks, id)
	} else {
		s.stacks[id] = st
	}
	s.mu.Unlock()
}

// With runs fn with the named device as the calling goroutine's device scope, like
// `with tf.device(name):`. The name may be "/CPU:0", "CPU:1", "/device:CPU:1", "/GPU:0" or a
// full name; see Resolve for soft placement. With panics with a *DeviceError when the device
// cannot be satisfied; the scope is closed even when fn panics.
func With(name string, fn func()) {
	full, err := Resolve(name)
	if err != nil {
		panic(err)
	}
	id := scopes.push(full)
	defer scopes.pop(id)
	fn()
}

// WithErr is With returning the resolution error instead of panicking.
func WithErr(name string, fn func()) error {
	full, err := Resolve(name)
	if err != nil {
		return err
	}
	id := scopes.push(full)
	defer scopes.pop(id)
	fn()
	return nil
}

// Current returns the full name of the calling goroutine's innermost device scope, or ""
// outside any scope.
func Current() string {
	if scopes.active.Load() == 0 {
		return ""
	}
	id := goid.Get()
	scopes.mu.RLock()
	defer scopes.mu.RUnlock()
	st := scopes.stacks[id]
	if len(st) == 0 {
		return ""
	}
	return st[len(st)-1]
}

// Placement returns where an op runs: the goroutine's device scope if any, else the device
// of its first input (inputDevice), else the default device. It does not initialize the
// devices: ops on the default device may run before the logical devices are configured.
func Placement(inputDevice string) string {
	if d := Current(); d != "" {
		return d
	}
	if inputDevice != "" {
		return inputDevice
	}
	return Default()
}
