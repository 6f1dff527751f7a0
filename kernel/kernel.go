// Package kernel implements the Jupyter messaging protocol (version 5.3) over ZeroMQ: the
// connection file, the five sockets (shell, control, stdin, iopub, heartbeat), HMAC-SHA256
// signatures, bounded frame parsing, busy/idle status, execution counting, history, comms
// and interrupts. It runs cells through an Executor and knows nothing of how cells are
// interpreted.
//
// A kernel is built with New, which binds the sockets, and served with Run:
//
//	k, err := kernel.New(kernel.Config{Connection: ci, Executor: ex})
//	...
//	err = k.Run(ctx) // returns after a shutdown_request or when ctx ends
package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/go-zeromq/zmq4"
)

// HelpLink is an entry of the front end's help menu.
type HelpLink struct {
	Text string `json:"text"`
	URL  string `json:"url"`
}

// Info describes the kernel in kernel_info_reply.
type Info struct {
	Implementation        string // default "godist"
	ImplementationVersion string
	LanguageVersion       string // default: the Go version the kernel was built with
	Banner                string
	HelpLinks             []HelpLink
}

// Config configures a Kernel.
type Config struct {
	// Connection gives the ports, transport and key. Ports of 0 are chosen by the system
	// and written back.
	Connection *ConnectionInfo
	// Executor runs the cells; the kernel closes it when Run returns.
	Executor Executor
	// Info is what kernel_info_reply says about the kernel.
	Info Info
	// History stores executed cells; nil keeps them in memory only.
	History *History
	// Log receives the kernel's own diagnostics; nil logs to standard error. Never
	// standard output: cells' output is captured there.
	Log *log.Logger
	// Limits bound incoming frames; the zero value means DefaultLimits.
	Limits Limits
	// ShutdownGrace is how long Run waits for a running cell to return after a shutdown
	// (default 2s).
	ShutdownGrace time.Duration
}

// Kernel serves the Jupyter protocol on its five sockets.
type Kernel struct {
	cfg     Config
	key     []byte
	session string
	user    string
	log     *log.Logger
	hist    *History
	limits  Limits

	shell, control, stdin, iopub, hb zmq4.Socket
	shellMu, controlMu, stdinMu      sync.Mutex
	iopubMu                          sync.Mutex

	ctx    context.Context // the kernel's life
	cancel context.CancelFunc

	execMu     sync.Mutex
	execCancel context.CancelFunc // the running cell's, nil when idle
	execCell   *cellOutput        // the running cell's output, nil when idle (comm.go)

	// Owned by the shell goroutine.
	execCount   int
	abortBefore time.Time

	inputMu sync.Mutex
	inputCh chan *Message

	commMu        sync.Mutex
	targets       map[string]CommTarget
	comms         map[string]*Comm
	execObservers []func(metadata map[string]any) // see each execute_request's metadata

	restart bool
	started time.Time // when Run began serving
}

// inbound is a shell request with the time it arrived.
type inbound struct {
	msg     *Message
	arrived time.Time
}

// New checks cfg, binds the five sockets and returns the kernel, ready to Run.
func New(cfg Config) (*Kernel, error) {
	if cfg.Connection == nil {
		return nil, errors.New("kernel: Config.Connection is nil")
	}
	if cfg.Executor == nil {
		return nil, errors.New("kernel: Config.Executor is nil")
	}
	if err := cfg.Connection.Validate(); err != nil {
		return nil, fmt.Errorf("kernel: connection: %w", err)
	}
	if cfg.Limits == (Limits{}) {
		cfg.Limits = DefaultLimits
	}
	if cfg.Log == nil {
		cfg.Log = log.New(os.Stderr, "godist kernel: ", log.LstdFlags)
	}
	if cfg.Info.Implementation == "" {
		cfg.Info.Implementation = "godist"
	}
	if cfg.Info.LanguageVersion == "" {
		cfg.Info.LanguageVersion = strings.TrimPrefix(runtime.Version(), "go")
	}
	if cfg.ShutdownGrace <= 0 {
		cfg.ShutdownGrace = 2 * time.Second
	}
	hist := cfg.History
	if hist == nil {
		hist, _ = NewHistory("")
	}
	user := os.Getenv("USER")
	if user == "" {
		user = "kernel"
	}
	ctx, cancel := context.WithCancel(context.Background())
	k := &Kernel{
		cfg:     cfg,
		key:     []byte(cfg.Connection.Key),
		session: newID(),
		user:    user,
		log:     cfg.Log,
		hist:    hist,
		limits:  cfg.Limits,
		ctx:     ctx,
		cancel:  cancel,
		inputCh: make(chan *Message, 1),
		targets: map[string]CommTarget{},
		comms:   map[string]*Comm{},
	}
	// A send to a ROUTER with no peer blocks until the timeout: keep it short so that a
	// front end that went away cannot stall the kernel for long.
	opt, logOpt := zmq4.WithTimeout(10*time.Second), zmq4.WithLogger(cfg.Log)
	ci := cfg.Connection
	k.shell = zmq4.NewRouter(ctx, opt, logOpt)
	k.control = zmq4.NewRouter(ctx, opt, logOpt)
	k.stdin = zmq4.NewRouter(ctx, opt, logOpt)
	k.iopub = zmq4.NewPub(ctx, opt, logOpt)
	k.hb = zmq4.NewRouter(ctx, opt, logOpt)
	binds := []struct {
		name string
		sck  zmq4.Socket
		port *int
	}{
		{"shell", k.shell, &ci.ShellPort}, {"control", k.control, &ci.ControlPort},
		{"stdin", k.stdin, &ci.StdinPort}, {"iopub", k.iopub, &ci.IOPubPort}, {"hb", k.hb, &ci.HBPort},
	}
	for _, b := range binds {
		if err := b.sck.Listen(ci.listenEndpoint(*b.port)); err != nil {
			k.closeSockets()
			cancel()
			return nil, fmt.Errorf("kernel: bind %s socket to %s: %w", b.name, ci.endpoint(*b.port), err)
		}
		if *b.port == 0 {
			if a, ok := b.sck.Addr().(*net.TCPAddr); ok {
				*b.port = a.Port
			}
		}
	}
	return k, nil
}

// Connection returns the connection information with the ports actually bound.
func (k *Kernel) Connection() ConnectionInfo { return *k.cfg.Connection }

// Session returns the kernel's session id, which its message headers carry.
func (k *Kernel) Session() string { return k.session }

// Restart reports whether the shutdown that ended Run asked for a restart.
func (k *Kernel) Restart() bool { return k.restart }

func (k *Kernel) closeSockets() {
	for _, s := range []zmq4.Socket{k.shell, k.control, k.stdin, k.iopub, k.hb} {
		if s != nil {
			_ = s.Close()
		}
	}
}

// Run serves requests until a shutdown_request arrives, Shutdown is called or ctx ends.
// It then interrupts the running cell, waits for it up to the shutdown grace, closes the
// sockets and the executor.
func (k *Kernel) Run(ctx context.Context) error {
	k.started = time.Now()
	var wg sync.WaitGroup
	shellQ := make(chan inbound, 64)
	start := func(f func()) {
		wg.Add(1)
		go func() { defer wg.Done(); f() }()
	}
	start(func() { k.heartbeat() })
	start(func() {
		k.readLoop("shell", k.shell, func(m *Message) {
			// Urgent comms are served now while a cell runs; between cells, in order with
			// busy/idle as every request.
			if k.runningCell() != nil && (m.Header.MsgType == "comm_msg" && k.urgentCommMsg(m) ||
				m.Header.MsgType == "comm_open" && k.urgentCommOpen(m)) {
				return // handled now, beside the running cell
			}
			select {
			case shellQ <- inbound{m, time.Now()}:
			case <-k.ctx.Done():
			}
		})
	})
	start(func() { k.readLoop("control", k.control, k.handleControl) })
	start(func() { k.readLoop("stdin", k.stdin, k.handleStdin) })
	shellDone := make(chan struct{})
	go func() {
		defer close(shellDone)
		for {
			select {
			case <-k.ctx.Done():
				return
			case in := <-shellQ:
				k.handleShell(in)
			}
		}
	}()

	select {
	case <-ctx.Done():
	case <-k.ctx.Done():
	}
	k.cancel()
	k.Interrupt()
	select {
	case <-shellDone:
	case <-time.After(k.cfg.ShutdownGrace):
		k.log.Printf("a cell did not stop within %v of the shutdown; exiting anyway", k.cfg.ShutdownGrace)
	}
	// Let the publisher send what is queued (the final idle, shutdown_reply).
	time.Sleep(20 * time.Millisecond)
	k.closeSockets()
	wg.Wait()
	if err := k.cfg.Executor.Close(); err != nil {
		return fmt.Errorf("kernel: close executor: %w", err)
	}
	return nil
}

// staleWindow is how long after Run starts a request dated before the start is taken for
// one queued for the kernel this one replaces (a restart reuses the ports, and a front
// end's sockets deliver what they queued while no kernel listened). Past it, an earlier
// date only means a front end's clock lags ours.
const staleWindow = 10 * time.Second

// forEarlierKernel reports whether m was sent before this kernel started serving, within
// staleWindow of the start.
func (k *Kernel) forEarlierKernel(m *Message) bool {
	sent, err := time.Parse(time.RFC3339Nano, m.Header.Date)
	return err == nil && sent.Before(k.started) && time.Since(k.started) < staleWindow
}

// Shutdown stops Run as a shutdown_request would.
func (k *Kernel) Shutdown() { k.cancel() }

// Interrupt cancels the running cell, if any. It is safe from any goroutine and from a
// signal handler's goroutine.
func (k *Kernel) Interrupt() {
	k.execMu.Lock()
	defer k.execMu.Unlock()
	if k.execCancel != nil {
		k.execCancel()
	}
}

// readLoop receives messages on sck, drops (and logs) those that fail to parse or verify,
// and hands the others to handle, until the socket closes.
func (k *Kernel) readLoop(name string, sck zmq4.Socket, handle func(*Message)) {
	for {
		raw, err := sck.Recv()
		if err != nil {
			if k.ctx.Err() == nil {
				k.log.Printf("%s: receive: %v", name, err)
				if errors.Is(err, context.Canceled) {
					return
				}
				continue
			}
			return
		}
		m, err := ParseFrames(raw.Frames, k.key, k.limits)
		if err != nil {
			k.log.Printf("%s: dropped message: %v", name, err)
			continue
		}
		handle(m)
	}
}

// heartbeat echoes every message back to its sender (a ROUTER serving REQ clients).
func (k *Kernel) heartbeat() {
	for {
		msg, err := k.hb.Recv()
		if err != nil {
			if k.ctx.Err() != nil || errors.Is(err, context.Canceled) {
				return
			}
			continue
		}
		if len(msg.Frames) > k.limits.MaxFrames {
			continue
		}
		if err := k.hb.SendMulti(zmq4.NewMsgFrom(msg.Frames...)); err != nil && k.ctx.Err() == nil {
			k.log.Printf("heartbeat: send: %v", err)
		}
	}
}

// send builds a message and sends it on a ROUTER socket to parent's identities.
func (k *Kernel) send(sck zmq4.Socket, mu *sync.Mutex, parent *Message, msgType string, content any) {
	m, err := NewMessage(msgType, parent, k.session, k.user, content)
	if err != nil {
		k.log.Printf("%v", err)
		return
	}
	mu.Lock()
	defer mu.Unlock()
	if err := sck.SendMulti(zmq4.NewMsgFrom(m.Encode(k.key)...)); err != nil && k.ctx.Err() == nil {
		k.log.Printf("send %s: %v", msgType, err)
	}
}

// publish sends a message on iopub.
func (k *Kernel) publish(parent *Message, msgType string, content any, buffers ...[]byte) {
	k.publishMeta(parent, msgType, content, nil, buffers...)
}

// publishMeta is publish with the message's metadata (nil: {}).
func (k *Kernel) publishMeta(parent *Message, msgType string, content any, metadata map[string]any, buffers ...[]byte) {
	m, err := NewMessage(msgType, parent, k.session, k.user, content)
	if err != nil {
		k.log.Printf("%v", err)
		return
	}
	if len(metadata) > 0 {
		raw, err := json.Marshal(metadata)
		if err != nil {
			k.log.Printf("publish %s: metadata: %v", msgType, err)
			return
		}
		m.Metadata = raw
	}
	topic := "kernel." + k.session + "." + msgType
	if c, ok := content.(streamContent); ok {
		topic = "stream." + c.Name
	}
	m.Identities = [][]byte{[]byte(topic)}
	m.Buffers = buffers
	k.iopubMu.Lock()
	defer k.iopubMu.Unlock()
	if err := k.iopub.SendMulti(zmq4.NewMsgFrom(m.Encode(k.key)...)); err != nil && k.ctx.Err() == nil {
		k.log.Printf("publish %s: %v", msgType, err)
	}
}

// status publishes the kernel's execution state ("busy", "idle") for parent.
func (k *Kernel) status(parent *Message, state string) {
	k.publish(parent, "status", statusContent{ExecutionState: state})
}

// zmqMsg makes a ZeroMQ message of frames.
func zmqMsg(frames [][]byte) zmq4.Msg { return zmq4.NewMsgFrom(frames...) }
