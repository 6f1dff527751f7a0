package transport

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// The gRPC plumbing that the group transport (GRPC), the parameter-server service and the
// worker service share: how a connection is dialed, how a server is configured, the
// metadata that proves the cluster token, and the unary frame-in, frame-out calls of the
// two task services.

// dialConn returns a lazily connecting client connection to addr with the raw codec, the
// large flow-control windows and I/O buffers, and a fast retry while peers come up (tasks
// start at about the same time).
func dialConn(addr string) (*grpc.ClientConn, error) {
	return grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(windowSize),
		grpc.WithInitialConnWindowSize(windowSize),
		grpc.WithWriteBufferSize(ioBufferSize),
		grpc.WithReadBufferSize(ioBufferSize),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{BaseDelay: 20 * time.Millisecond,
			Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second}, MinConnectTimeout: 5 * time.Second}),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(rawCodec{}),
			grpc.MaxCallRecvMsgSize(math.MaxInt32), grpc.MaxCallSendMsgSize(math.MaxInt32)))
}

// newServer returns a gRPC server with the raw codec, the windows and buffers dialConn
// uses, and the given interceptors.
func newServer(interceptors ...grpc.ServerOption) *grpc.Server {
	return grpc.NewServer(append([]grpc.ServerOption{
		grpc.ForceServerCodecV2(rawCodec{}),
		grpc.MaxRecvMsgSize(math.MaxInt32),
		grpc.InitialWindowSize(windowSize),
		grpc.InitialConnWindowSize(windowSize),
		grpc.WriteBufferSize(ioBufferSize),
		grpc.ReadBufferSize(ioBufferSize),
	}, interceptors...)...)
}

// callerMD is the metadata every call carries: the cluster token and the caller's rank.
func callerMD(token string, rank int) metadata.MD {
	return metadata.Pairs(tokenKey, "Bearer "+token, rankKey, strconv.Itoa(rank))
}

// taskServer serves one task service (ps or worker) on a listener, every call checked
// against the cluster token.
type taskServer struct {
	lis       net.Listener
	srv       *grpc.Server
	serveDone chan struct{}
	closeOnce sync.Once
}

// start serves impl through desc on lis. The token interceptor's group is the callers'
// ranks (coordinator, workers and evaluator use their cluster rank).
func (s *taskServer) start(lis net.Listener, token string, task int, desc *grpc.ServiceDesc, impl any) {
	auth := &GRPC{rank: task, addrs: make([]string, psMaxCallers), token: token}
	s.lis = lis
	s.serveDone = make(chan struct{})
	s.srv = newServer(grpc.UnaryInterceptor(auth.authUnary))
	s.srv.RegisterService(desc, impl)
	go func() {
		defer close(s.serveDone)
		_ = s.srv.Serve(lis)
	}()
}

// close stops serving at once, cutting open connections and the calls in flight.
func (s *taskServer) close() {
	s.closeOnce.Do(func() {
		s.srv.Stop()
		<-s.serveDone
	})
}

// taskMethod describes unary method name of service: the request frame's tag and decoded
// payload go to h, whose answer travels back as a frame's payload.
func taskMethod[S any](service, name string, h func(s S, ctx context.Context, tag string, d *psDecoder) ([]byte, error)) grpc.MethodDesc {
	full := "/" + service + "/" + name
	return grpc.MethodDesc{MethodName: name, Handler: func(srv any, ctx context.Context, dec func(any) error, in grpc.UnaryServerInterceptor) (any, error) {
		s := srv.(S)
		var req frame
		if err := dec(&req); err != nil {
			return nil, err
		}
		call := func(ctx context.Context, r any) (any, error) {
			f := r.(*frame)
			out, err := h(s, ctx, f.tag, &psDecoder{b: f.payload})
			if err != nil {
				return nil, err
			}
			return &frame{payload: out}, nil
		}
		if in == nil {
			return call(ctx, &req)
		}
		return in(ctx, &req, &grpc.UnaryServerInfo{Server: srv, FullMethod: full}, call)
	}}
}

// taskClient calls one task service (ps or worker) over a lazily dialed connection.
type taskClient struct {
	addr        string
	service     string // gRPC service name
	peer        string // "ps" or "worker", in messages
	unavailable error  // wrapped by errors that come from the connection
	md          metadata.MD
	timeout     time.Duration
	sent, recv  atomic.Int64 // payload bytes (with tags) sent, payload bytes received

	mu   sync.Mutex
	conn *grpc.ClientConn
}

// init checks the token and caller rank and dials addr. who names the client and
// optsName its options type in messages.
func (c *taskClient) init(addr, service, peer string, unavailable error, token string, caller int, timeout time.Duration, who, optsName string) error {
	if token == "" {
		return fmt.Errorf("transport: %s: empty cluster token: set GODIST_CLUSTER_TOKEN (the same on every task) or %s.Token", who, optsName)
	}
	if caller < 0 || caller >= psMaxCallers {
		return fmt.Errorf("transport: %s: caller rank %d outside [0, %d)", who, caller, psMaxCallers)
	}
	conn, err := dialConn(addr)
	if err != nil {
		return fmt.Errorf("transport: %s: address %q: %w", who, addr, err)
	}
	c.addr, c.service, c.peer, c.unavailable = addr, service, peer, unavailable
	c.md, c.timeout, c.conn = callerMD(token, caller), timeout, conn
	return nil
}

// close closes the connection; calls in flight and later calls fail with c.unavailable.
func (c *taskClient) close() error {
	c.mu.Lock()
	conn := c.conn
	c.conn = nil
	c.mu.Unlock()
	if conn == nil {
		return nil
	}
	return conn.Close()
}

// waitReady pings the server until it answers or ctx ends (c.timeout when ctx has no
// deadline). A ping sent on a connection that breaks under it (the server just went away,
// and another may be starting at its address) fails at once: the next waits for a new
// connection.
func (c *taskClient) waitReady(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	for {
		_, err := c.invoke(ctx, "Ping", "", nil, true)
		if err == nil || !errors.Is(err, c.unavailable) || c.isClosed() {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// isClosed reports whether close was called.
func (c *taskClient) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.conn == nil
}

// invoke calls method with a frame of tag and payload and returns the answer's payload,
// bounding the call by c.timeout when ctx has no deadline. wait waits for the connection.
func (c *taskClient) invoke(ctx context.Context, method, tag string, payload []byte, wait bool) ([]byte, error) {
	c.mu.Lock()
	conn := c.conn
	c.mu.Unlock()
	if conn == nil {
		return nil, fmt.Errorf("%w: %s at %s: client closed", c.unavailable, c.peer, c.addr)
	}
	parent := ctx
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	c.sent.Add(int64(len(payload) + len(tag)))
	var resp frame
	err := conn.Invoke(metadata.NewOutgoingContext(ctx, c.md), "/"+c.service+"/"+method,
		&frame{tag: tag, payload: payload}, &resp, grpc.WaitForReady(wait))
	if err != nil {
		if perr := parent.Err(); perr != nil {
			return nil, fmt.Errorf("transport: %s at %s: %s %q: %w", c.peer, c.addr, method, tag, perr)
		}
		return nil, c.wrap(method, tag, err)
	}
	c.recv.Add(int64(len(resp.payload)))
	return resp.payload, nil
}

// wrap turns a call's status into an error: ErrBadToken for a refused token,
// c.unavailable for a connection failure, else the server's message.
func (c *taskClient) wrap(method, tag string, err error) error {
	st := status.Convert(err)
	switch st.Code() {
	case codes.Unauthenticated:
		return fmt.Errorf("%w by the %s at %s (every task must have the same GODIST_CLUSTER_TOKEN): %s", ErrBadToken, c.peer, c.addr, st.Message())
	case codes.Unavailable, codes.Canceled, codes.DeadlineExceeded, codes.Aborted:
		return fmt.Errorf("%w: %s at %s: %s %q: %s", c.unavailable, c.peer, c.addr, method, tag, st.Message())
	}
	return fmt.Errorf("transport: %s at %s: %s %q: %s", c.peer, c.addr, method, tag, st.Message())
}
