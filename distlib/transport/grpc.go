package transport

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"godist/distlib/collective"
)

// ErrBadToken is wrapped by errors that come from a peer refusing this process's cluster token.
var ErrBadToken = errors.New("transport: cluster token refused")

const (
	serviceName  = "godist.transport.Transport"
	helloMethod  = "/" + serviceName + "/Hello"
	streamMethod = "/" + serviceName + "/Send"
	tokenKey     = "authorization"
	rankKey      = "godist-rank"
	windowSize   = 16 << 20
	ioBufferSize = 1 << 20 // fewer syscalls than gRPC's 32 KiB for tensor-sized messages
)

// GRPCOptions configures NewGRPC.
type GRPCOptions struct {
	// Token is the cluster's shared secret; every task of the job must use the same one
	// (godist launch passes it in GODIST_CLUSTER_TOKEN). Required.
	Token string
	// Listener, if set, is where this rank serves; otherwise it listens on its own address
	// (the host and port the group's address list gives it: 127.0.0.1 in a one-machine
	// cluster), or on that port on all interfaces with BindAll.
	Listener net.Listener
	// BindAll makes a rank without Listener listen on all interfaces (0.0.0.0) rather than
	// on the host of its address, for containers whose cluster address is not an address of
	// the container itself. The data port follows the gRPC listener's host.
	BindAll bool
	// HealthCheckInterval is how often this rank checks each peer it has talked to, on a
	// connection of its own; 0 checks none. A peer that fails a check (its port refuses
	// connections, or it does not answer within HealthCheckTimeout) is lost: receives from
	// it fail with an error wrapping ErrPeerLost once its queued messages are read.
	HealthCheckInterval time.Duration
	// HealthCheckTimeout bounds one health check; 0 means 3 times HealthCheckInterval.
	HealthCheckTimeout time.Duration
	// GRPCOnly keeps bulk messages on gRPC streams instead of the raw TCP data path (for
	// networks where only the gRPC port is reachable). By default each rank also listens on a
	// TCP port the system picks, on the host of Listener, and peers send their messages there
	// after proving the cluster token; a peer that offers no data port is reached over gRPC.
	GRPCOnly bool
	// NoSharedMemory makes this rank answer no in SharedMemory's agreement (it still takes
	// part, so no peer waits for it), and with it every rank of the group: the collectives
	// then move every byte with Send and Recv, as between hosts.
	NoSharedMemory bool
	// SharedMemoryBytes is the size of this rank's region of shared memory (a file in
	// /dev/shm, created at the first SharedMemory call and removed once the group agreed),
	// rounded down to 64 bytes; 0 means 1 GiB. The file is sparse: only the buffers
	// allocated in it use memory, committed at Alloc, so that a full /dev/shm (64 MB in a
	// Docker container by default) fails an Alloc rather than a later write.
	SharedMemoryBytes int
}

// GRPC is one rank's endpoint of a group of processes that talk gRPC. Peers meet through a
// gRPC handshake; bulk messages then travel on a raw TCP connection per peer pair, opened
// only after both ends proved the cluster token (HMAC over fresh nonces), or on one gRPC
// stream per peer with GRPCOptions.GRPCOnly. Messages are raw bytes (a tag and the payload),
// never protobuf copies. Every gRPC call carries the cluster token, checked in constant time
// by the receiving server, so a process without it can neither join, read nor inject messages.
type GRPC struct {
	rank  int
	addrs []string
	token string
	box   *mailbox
	bufs  bufPool
	posts posts
	lis   net.Listener
	srv   *grpc.Server
	links []*link

	dataLis net.Listener // nil with GRPCOnly
	dataWG  sync.WaitGroup
	connMu  sync.Mutex
	conns   map[net.Conn]struct{} // accepted data connections; nil once closed

	ctl      []*grpc.ClientConn // per peer: pings and health checks, apart from bulk traffic
	seen     []chan struct{}    // per peer: closed once it answered or called this rank
	seenOnce []sync.Once
	health   healthConfig
	done     chan struct{} // closed by Close
	watchWG  sync.WaitGroup

	closeOnce sync.Once
	serveDone chan struct{}

	shm shmState
}

type healthConfig struct{ interval, timeout time.Duration }

var (
	_ collective.Transport  = (*GRPC)(nil)
	_ collective.Releaser   = (*GRPC)(nil)
	_ collective.Poster     = (*GRPC)(nil)
	_ collective.PeerWaiter = (*GRPC)(nil)
)

type link struct {
	mu     sync.Mutex // serializes connecting and sending
	conn   *grpc.ClientConn
	stream grpc.ClientStream
	cancel context.CancelFunc
	data   net.Conn // the data connection, when the peer offers one
	hdr    []byte
}

// NewGRPC starts rank's endpoint of the group whose addresses ("host:port", indexed by rank)
// are addrs. Connections to peers are made on first Send, waiting (bounded by Send's
// context) for peers that have not started yet.
func NewGRPC(rank int, addrs []string, opts GRPCOptions) (*GRPC, error) {
	if len(addrs) == 0 {
		return nil, errors.New("transport: grpc: empty address list")
	}
	if rank < 0 || rank >= len(addrs) {
		return nil, fmt.Errorf("transport: grpc: rank %d outside the %d addresses", rank, len(addrs))
	}
	if opts.SharedMemoryBytes < 0 {
		return nil, fmt.Errorf("transport: grpc: GRPCOptions.SharedMemoryBytes %d is negative (0 means 1 GiB)", opts.SharedMemoryBytes)
	}
	if opts.Token == "" {
		return nil, errors.New("transport: grpc: empty cluster token: set GODIST_CLUSTER_TOKEN (the same on every task) or GRPCOptions.Token")
	}
	for i, a := range addrs {
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			return nil, fmt.Errorf("transport: grpc: address %q of rank %d is not host:port", a, i)
		}
	}
	lis := opts.Listener
	if lis == nil {
		var err error
		if lis, err = listenOwn(addrs[rank], opts.BindAll); err != nil {
			return nil, fmt.Errorf("transport: grpc: rank %d: %w", rank, err)
		}
	}
	g := &GRPC{rank: rank, addrs: append([]string{}, addrs...), token: opts.Token, box: newMailbox(), lis: lis,
		links: make([]*link, len(addrs)), serveDone: make(chan struct{}), conns: map[net.Conn]struct{}{},
		posts: posts{queued: map[key][]*post{}, pending: map[key]int{}},
		ctl:   make([]*grpc.ClientConn, len(addrs)), seen: make([]chan struct{}, len(addrs)),
		seenOnce: make([]sync.Once, len(addrs)), done: make(chan struct{}),
		health: healthConfig{opts.HealthCheckInterval, opts.HealthCheckTimeout}}
	g.shm = shmState{sem: make(chan struct{}, 1), no: opts.NoSharedMemory, bytes: opts.SharedMemoryBytes}
	if g.shm.bytes == 0 {
		g.shm.bytes = shmDefault
	}
	if g.health.timeout <= 0 {
		g.health.timeout = 3 * g.health.interval
	}
	for i := range g.links {
		g.links[i] = &link{}
		g.seen[i] = make(chan struct{})
		if i == rank {
			continue
		}
		conn, err := dialConn(addrs[i])
		if err != nil {
			g.closeCtl()
			lis.Close()
			return nil, fmt.Errorf("transport: rank %d address %q: %w", i, addrs[i], err)
		}
		g.ctl[i] = conn
	}
	if !opts.GRPCOnly && len(addrs) > 1 {
		dl, err := listenData(lis)
		if err != nil {
			g.closeCtl()
			lis.Close()
			return nil, fmt.Errorf("transport: grpc: rank %d: listen for data: %w", rank, err)
		}
		g.dataLis = dl
		g.dataWG.Add(1)
		go g.serveData()
	}
	g.srv = newServer(grpc.UnaryInterceptor(g.authUnary), grpc.StreamInterceptor(g.authStream))
	g.srv.RegisterService(&serviceDesc, g)
	go func() {
		defer close(g.serveDone)
		_ = g.srv.Serve(lis)
	}()
	if g.health.interval > 0 {
		for i := range addrs {
			if i != rank {
				g.watchWG.Add(1)
				go g.watch(i)
			}
		}
	}
	return g, nil
}

// listenOwn listens on addr (host:port), or on its port on all interfaces with all. A host
// that is not an address of this machine gets an error that says what to do.
func listenOwn(addr string, all bool) (net.Listener, error) {
	host, port, _ := net.SplitHostPort(addr)
	if all {
		host = ""
	}
	lis, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		if host != "" {
			return nil, fmt.Errorf("listen on %s (the task's own cluster address): %w; if that host is not an address of this machine (a container behind NAT), set GODIST_BIND_ALL=1 to listen on all interfaces", addr, err)
		}
		return nil, fmt.Errorf("listen on port %s: %w", port, err)
	}
	return lis, nil
}

// Rank is this endpoint's rank.
func (g *GRPC) Rank() int { return g.rank }

// Size is the number of ranks.
func (g *GRPC) Size() int { return len(g.addrs) }

// Addr is the address this endpoint listens on.
func (g *GRPC) Addr() net.Addr { return g.lis.Addr() }

// Send delivers b to rank to under tag. The first Send to a peer connects to it, waiting
// until it serves or ctx ends; a peer that refuses the token gives an error wrapping ErrBadToken.
func (g *GRPC) Send(ctx context.Context, to int, tag string, b []byte) error {
	if to < 0 || to >= len(g.addrs) {
		return fmt.Errorf("transport: send to rank %d outside group of %d", to, len(g.addrs))
	}
	if len(tag) > math.MaxUint16 {
		return fmt.Errorf("transport: tag of %d bytes is too long", len(tag))
	}
	if to == g.rank {
		g.deliver(g.rank, tag, append(make([]byte, 0, len(b)), b...))
		return nil
	}
	if err := g.box.lostErr(to); err != nil {
		return err
	}
	l := g.links[to]
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	if l.stream == nil && l.data == nil {
		if err := g.connect(ctx, to, l); err != nil {
			return err
		}
	}
	if l.data != nil {
		if err := g.sendData(ctx, l, tag, b); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			// The link is reset: the next Send connects again, or finds the peer gone.
			return fmt.Errorf("%w: rank %d at %s: its data connection failed: %v", ErrPeerLost, to, g.addrs[to], err)
		}
		return nil
	}
	st, cancel := l.stream, l.cancel
	stop := context.AfterFunc(ctx, cancel) // a send stuck in flow control ends with ctx
	err := st.SendMsg(&frame{tag: tag, payload: b})
	if !stop() || err != nil {
		cancel()
		l.stream = nil
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, io.EOF) { // the server ended the stream: its status says why
			err = st.RecvMsg(&hello{})
		}
		return g.rpcError(to, err)
	}
	return nil
}

// Recv waits for the next message from rank from under tag.
func (g *GRPC) Recv(ctx context.Context, from int, tag string) ([]byte, error) {
	if from < 0 || from >= len(g.addrs) {
		return nil, fmt.Errorf("transport: receive from rank %d outside group of %d", from, len(g.addrs))
	}
	return g.recv(ctx, from, tag)
}

// Release hands back a slice that Recv returned once the caller is done with it, so that a
// later message can reuse its memory. The caller must not touch b afterwards.
func (g *GRPC) Release(b []byte) { g.bufs.put(b) }

// Close stops serving, closes the connections and fails pending Recv calls with ErrClosed.
// It unmaps the shared memory (slices of it must not be used afterwards) and removes this
// rank's file from /dev/shm if it is still there.
func (g *GRPC) Close() error {
	var err error
	g.closeOnce.Do(func() {
		close(g.done)
		g.box.close(ErrClosed)
		g.srv.Stop()
		<-g.serveDone
		if g.dataLis != nil {
			g.dataLis.Close()
		}
		g.connMu.Lock() // closing the data connections also ends sends stuck on them
		for c := range g.conns {
			c.Close()
		}
		g.conns = nil
		g.connMu.Unlock()
		g.dataWG.Wait()
		for _, l := range g.links {
			l.mu.Lock()
			if l.cancel != nil {
				l.cancel()
			}
			if l.conn != nil {
				_ = l.conn.Close()
			}
			l.data = nil
			l.stream, l.conn = nil, nil
			l.mu.Unlock()
		}
		g.watchWG.Wait()
		g.closeCtl()
		err = g.closeShm()
	})
	return err
}

func (g *GRPC) closeCtl() {
	for _, c := range g.ctl {
		if c != nil {
			_ = c.Close()
		}
	}
}

func (g *GRPC) connect(ctx context.Context, to int, l *link) error {
	if l.conn == nil {
		conn, err := dialConn(g.addrs[to])
		if err != nil {
			return fmt.Errorf("transport: rank %d address %q: %w", to, g.addrs[to], err)
		}
		l.conn = conn
	}
	md := callerMD(g.token, g.rank)
	var resp hello
	req := hello{rank: uint32(g.rank), size: uint32(len(g.addrs))}
	// A peer not seen yet may still be starting: wait for it. One seen before that refuses
	// now is gone: fail at once instead of waiting for the communication timeout.
	seen := g.wasSeen(to)
	if err := l.conn.Invoke(metadata.NewOutgoingContext(ctx, md), helloMethod, &req, &resp, grpc.WaitForReady(!seen)); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("transport: rank %d at %s did not answer: %w", to, g.addrs[to], ctx.Err())
		}
		if seen && status.Code(err) == codes.Unavailable {
			lost := fmt.Errorf("%w: rank %d at %s: it no longer accepts connections (%v)", ErrPeerLost, to, g.addrs[to], err)
			g.box.markLost(to, lost)
			return lost
		}
		return g.rpcError(to, err)
	}
	if int(resp.rank) != to || int(resp.size) != len(g.addrs) {
		return fmt.Errorf("transport: %s answered as rank %d of %d, want rank %d of %d: the tasks disagree on the cluster",
			g.addrs[to], resp.rank, resp.size, to, len(g.addrs))
	}
	g.markSeen(to)
	if resp.dataPort != 0 && g.dataLis != nil {
		c, err := g.dialData(ctx, to, resp.dataPort)
		if err != nil {
			return err
		}
		l.data = c
		return nil
	}
	sctx, cancel := context.WithCancel(metadata.NewOutgoingContext(context.Background(), md))
	st, err := l.conn.NewStream(sctx, &serviceDesc.Streams[0], streamMethod, grpc.WaitForReady(true))
	if err != nil {
		cancel()
		return g.rpcError(to, err)
	}
	l.stream, l.cancel = st, cancel
	return nil
}

// foundAgain clears rank from's lost mark when it connects; when it was lost (a process
// started again at its address, or a link back), this rank's connection to it is dropped
// too, so that the next Send dials the process there now rather than write into the old
// connection. The drop waits for a Send in progress, so it runs apart.
func (g *GRPC) foundAgain(from int) {
	if !g.box.found(from) || from == g.rank {
		return
	}
	go func() {
		l := g.links[from]
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.data != nil {
			g.untrackConn(l.data)
			l.data = nil
		}
		if l.stream != nil {
			l.cancel()
			l.stream = nil
		}
	}()
}

func (g *GRPC) rpcError(to int, err error) error {
	if status.Code(err) == codes.Unauthenticated {
		return fmt.Errorf("%w by rank %d at %s (every task must have the same GODIST_CLUSTER_TOKEN): %s",
			ErrBadToken, to, g.addrs[to], status.Convert(err).Message())
	}
	return fmt.Errorf("transport: rank %d at %s: %w", to, g.addrs[to], err)
}

// auth checks the bearer token in constant time and returns the caller's rank.
func (g *GRPC) auth(ctx context.Context) (int, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	var got string
	if v := md.Get(tokenKey); len(v) == 1 {
		got = v[0]
	}
	want := sha256.Sum256([]byte("Bearer " + g.token))
	have := sha256.Sum256([]byte(got))
	if subtle.ConstantTimeCompare(want[:], have[:]) != 1 {
		return 0, status.Errorf(codes.Unauthenticated, "rank %d: wrong or missing cluster token", g.rank)
	}
	var from int = -1
	if v := md.Get(rankKey); len(v) == 1 {
		if r, err := strconv.Atoi(v[0]); err == nil {
			from = r
		}
	}
	if from < 0 || from >= len(g.addrs) {
		return 0, status.Errorf(codes.InvalidArgument, "rank %d: caller rank %v outside group of %d", g.rank, md.Get(rankKey), len(g.addrs))
	}
	return from, nil
}

func (g *GRPC) authUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	from, err := g.auth(ctx)
	if err != nil {
		return nil, err
	}
	g.markSeen(from)
	return h(ctx, req)
}

func (g *GRPC) authStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	from, err := g.auth(ss.Context())
	if err != nil {
		return err
	}
	return h(srv, &rankStream{ss, from})
}

type rankStream struct {
	grpc.ServerStream
	from int
}

// server is the handler type of the hand-written service description (no protobuf).
type server interface{ isTransportServer() }

func (g *GRPC) isTransportServer() {}

var serviceDesc = grpc.ServiceDesc{
	ServiceName: serviceName,
	HandlerType: (*server)(nil),
	Methods: []grpc.MethodDesc{{MethodName: "Hello", Handler: func(srv any, ctx context.Context, dec func(any) error, in grpc.UnaryServerInterceptor) (any, error) {
		g := srv.(*GRPC)
		var req hello
		if err := dec(&req); err != nil {
			return nil, err
		}
		h := func(ctx context.Context, r any) (any, error) {
			req := r.(*hello)
			if int(req.size) != len(g.addrs) {
				return nil, status.Errorf(codes.FailedPrecondition, "rank %d is in a group of %d, the caller in one of %d", g.rank, len(g.addrs), req.size)
			}
			resp := &hello{rank: uint32(g.rank), size: uint32(len(g.addrs))}
			if g.dataLis != nil {
				resp.dataPort = uint32(g.dataLis.Addr().(*net.TCPAddr).Port)
			}
			return resp, nil
		}
		if in == nil {
			return h(ctx, &req)
		}
		return in(ctx, &req, &grpc.UnaryServerInfo{Server: srv, FullMethod: helloMethod}, h)
	}}},
	Streams: []grpc.StreamDesc{{StreamName: "Send", ClientStreams: true, Handler: func(srv any, ss grpc.ServerStream) error {
		g := srv.(*GRPC)
		rs, ok := ss.(*rankStream)
		if !ok {
			return status.Error(codes.Unauthenticated, "stream without authentication")
		}
		g.foundAgain(rs.from)
		for {
			var f frame
			if err := ss.RecvMsg(&f); err != nil {
				g.linkLost(rs.from, "its message stream ended", err)
				if errors.Is(err, io.EOF) {
					return nil
				}
				return err
			}
			g.deliver(rs.from, f.tag, f.payload)
		}
	}}},
}

// frame is one message on a Send stream: a tag and the payload, padded so that the payload
// starts 8-byte aligned in the receive buffer.
type frame struct {
	tag     string
	payload []byte
}

// hello is the handshake: the caller's rank and group size, answered with the server's and
// its data port (0: none, use the gRPC stream).
type hello struct{ rank, size, dataPort uint32 }

// rawCodec writes frames as [2-byte tag length][tag][padding][payload], hellos as 12 bytes.
type rawCodec struct{}

func (rawCodec) Name() string { return "godist-raw" }

func frameHeader(tagLen int) int { return (2 + tagLen + 7) &^ 7 }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	pool := mem.DefaultBufferPool()
	switch m := v.(type) {
	case *frame:
		h := frameHeader(len(m.tag))
		bp := pool.Get(h + len(m.payload))
		b := *bp
		binary.LittleEndian.PutUint16(b, uint16(len(m.tag)))
		copy(b[2:], m.tag)
		clear(b[2+len(m.tag) : h])
		copy(b[h:], m.payload)
		return mem.BufferSlice{mem.NewBuffer(bp, pool)}, nil
	case *hello:
		b := make([]byte, 12)
		binary.LittleEndian.PutUint32(b, m.rank)
		binary.LittleEndian.PutUint32(b[4:], m.size)
		binary.LittleEndian.PutUint32(b[8:], m.dataPort)
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	return nil, fmt.Errorf("transport: raw codec cannot marshal %T", v)
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	switch m := v.(type) {
	case *frame:
		b := data.Materialize() // one copy, into a fresh (aligned) slice the receiver owns
		if len(b) < 2 {
			return fmt.Errorf("transport: frame of %d bytes has no header", len(b))
		}
		h := frameHeader(int(binary.LittleEndian.Uint16(b)))
		if h > len(b) {
			return fmt.Errorf("transport: frame of %d bytes shorter than its %d-byte header", len(b), h)
		}
		m.tag = string(b[2 : 2+int(binary.LittleEndian.Uint16(b))])
		m.payload = b[h:]
		return nil
	case *hello:
		if data.Len() != 12 {
			return fmt.Errorf("transport: hello of %d bytes, want 12", data.Len())
		}
		b := data.Materialize()
		m.rank, m.size = binary.LittleEndian.Uint32(b), binary.LittleEndian.Uint32(b[4:])
		m.dataPort = binary.LittleEndian.Uint32(b[8:])
		return nil
	}
	return fmt.Errorf("transport: raw codec cannot unmarshal into %T", v)
}

// DataAddr is the address of this endpoint's data port, or nil with GRPCOptions.GRPCOnly
// (or a group of one).
func (g *GRPC) DataAddr() net.Addr {
	if g.dataLis == nil {
		return nil
	}
	return g.dataLis.Addr()
}
