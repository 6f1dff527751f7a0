package interp

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// flushDelay is how long a partial line waits before it is sent anyway.
const flushDelay = 50 * time.Millisecond

// syncTimeout bounds the wait for output written before a cell ended.
const syncTimeout = 2 * time.Second

// stream moves what is written to one pipe (the interpreter's os.Stdout or os.Stderr, and
// with Options.CaptureFDs the process's fd 1 or 2) to the running cell's Output, a line at
// a time or after flushDelay for a partial line.
type stream struct {
	name     string
	s        *Session
	r, w     *os.File
	fallback *os.File // where output goes while no cell runs
	savedFD  int      // the original descriptor, -1 unless captured
	fd       int

	mu      sync.Mutex
	seq     int
	waiters map[string]chan struct{}
	done    chan struct{}
}

var captured atomic.Bool // only one session may own fds 1 and 2

func newStream(s *Session, name string, fd int, capture bool) (*stream, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("interp: %s pipe: %w", name, err)
	}
	st := &stream{name: name, s: s, r: r, w: w, savedFD: -1, fd: fd, waiters: map[string]chan struct{}{}, done: make(chan struct{})}
	st.fallback = os.Stdout
	if fd == 2 {
		st.fallback = os.Stderr
	}
	if capture {
		saved, err := syscall.Dup(fd)
		if err != nil {
			r.Close()
			w.Close()
			return nil, fmt.Errorf("interp: dup fd %d: %w", fd, err)
		}
		if err := redirectFD(int(w.Fd()), fd); err != nil {
			syscall.Close(saved)
			r.Close()
			w.Close()
			return nil, fmt.Errorf("interp: redirect fd %d: %w", fd, err)
		}
		st.savedFD = saved
		st.fallback = os.NewFile(uintptr(saved), name+"-original")
		growPipe(r)
		if fd == 2 {
			// A fatal error's report also reaches the real stderr (the front end's log).
			_ = debug.SetCrashOutput(st.fallback, debug.CrashOptions{})
		}
	}
	go st.run()
	return st, nil
}

const markerPrefix = "\x00godist-sync:"

// run reads the pipe and forwards; it ends when the pipe's write ends are closed.
func (st *stream) run() {
	defer close(st.done)
	chunks := make(chan []byte, 16)
	go func() {
		defer close(chunks)
		buf := make([]byte, 32*1024)
		for {
			n, err := st.r.Read(buf)
			if n > 0 {
				chunks <- append([]byte(nil), buf[:n]...)
			}
			if err != nil {
				return
			}
		}
	}()
	var pending []byte
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case b, ok := <-chunks:
			if !ok {
				st.forward(pending)
				return
			}
			pending = append(pending, b...)
			pending = st.markers(pending)
			if i := bytes.LastIndexByte(pending, '\n'); i >= 0 {
				st.forward(pending[:i+1])
				pending = append(pending[:0], pending[i+1:]...)
			}
			if len(pending) > 0 {
				timer.Reset(flushDelay)
			}
		case <-timer.C:
			cut := len(pending)
			if i := bytes.IndexByte(pending, 0); i >= 0 {
				cut = i // maybe the start of a marker still arriving
			}
			st.forward(pending[:cut])
			pending = append(pending[:0], pending[cut:]...)
		}
	}
}

// markers removes complete sync markers from p, forwarding what precedes each one and
// waking its waiter.
func (st *stream) markers(p []byte) []byte {
	for {
		i := bytes.Index(p, []byte(markerPrefix))
		if i < 0 {
			return p
		}
		j := bytes.IndexByte(p[i+1:], 0)
		if j < 0 {
			return p
		}
		id := string(p[i+len(markerPrefix) : i+1+j])
		st.forward(p[:i])
		p = append(p[:0:0], p[i+j+2:]...)
		st.mu.Lock()
		if ch, ok := st.waiters[id]; ok {
			close(ch)
			delete(st.waiters, id)
		}
		st.mu.Unlock()
	}
}

func (st *stream) forward(p []byte) {
	if len(p) == 0 {
		return
	}
	if out := st.s.output(); out != nil {
		out.Stream(st.name, string(p))
		return
	}
	_, _ = st.fallback.Write(p)
}

// sync returns once everything written to the stream before the call has been forwarded,
// or after syncTimeout.
func (st *stream) sync() {
	st.mu.Lock()
	st.seq++
	id := fmt.Sprint(st.seq)
	ch := make(chan struct{})
	st.waiters[id] = ch
	st.mu.Unlock()
	if _, err := st.w.Write([]byte(markerPrefix + id + "\x00")); err != nil {
		return
	}
	t := time.NewTimer(syncTimeout)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	case <-st.done:
	}
}

// close restores a captured descriptor, closes the pipe and waits for the forwarder.
func (st *stream) close() {
	if st.savedFD >= 0 {
		if st.fd == 2 {
			_ = debug.SetCrashOutput(nil, debug.CrashOptions{})
		}
		_ = redirectFD(st.savedFD, st.fd)
	}
	_ = st.w.Close()
	select {
	case <-st.done:
	case <-time.After(syncTimeout):
	}
	_ = st.r.Close()
	if st.savedFD >= 0 {
		_ = st.fallback.Close()
	}
}

// panicLine matches the lines yaegi writes to its stderr while a panic unwinds interpreted
// frames ("12:5: panic: main.f(...)").
var panicLine = regexp.MustCompile(`^(?:[^\s:]*:)?(\d+):(\d+): panic: (.*)\n?$`)

// stderrFilter is the interpreter's Stderr: panic trace lines become the cell's traceback,
// anything else goes to the stderr stream.
type stderrFilter struct{ s *Session }

func (f stderrFilter) Write(p []byte) (int, error) {
	if m := panicLine.FindSubmatch(p); m != nil {
		f.s.addPanicFrame(string(m[1]), string(m[2]), string(m[3]))
		return len(p), nil
	}
	return f.s.osStderr.Write(p)
}
