package transport

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The worker service: a worker task of a parameter-server cluster runs the functions the
// coordinator schedules on it. A function travels as its registered name, the step id of
// the scheduled call and an opaque payload (its arguments, encoded by the caller); the
// answer is an opaque payload too. The transport does not interpret either: the handler
// (distribute's function registry) does. Every call is checked against the cluster token
// by the transport's own interceptor.

const workerServiceName = "godist.transport.Worker"

// ErrWorkerUnavailable is wrapped by WorkerClient errors that come from the connection
// (the worker did not answer, the connection broke, the call timed out), not from the
// function: the call may be run again on another worker.
var ErrWorkerUnavailable = errors.New("transport: worker unavailable")

// WorkerHandler runs function name for step with the encoded arguments and returns the
// encoded result. An error is sent back to the caller as the function's failure.
type WorkerHandler func(ctx context.Context, name string, step uint64, payload []byte) ([]byte, error)

// WorkerServerOptions configures NewWorkerServer.
type WorkerServerOptions struct {
	// Token is the cluster token (required), checked on every call.
	Token string
	// Task is this worker task's index, used in messages.
	Task int
}

// WorkerServer is a worker task's function service served over gRPC.
type WorkerServer struct {
	task    int
	handler WorkerHandler
	ts      taskServer
	runs    atomic.Int64
}

// NewWorkerServer serves h on lis (which it closes on Close).
func NewWorkerServer(lis net.Listener, h WorkerHandler, opts WorkerServerOptions) (*WorkerServer, error) {
	if lis == nil {
		return nil, errors.New("transport: worker: nil listener")
	}
	if h == nil {
		return nil, errors.New("transport: worker: nil handler")
	}
	if opts.Token == "" {
		return nil, errors.New("transport: worker: empty cluster token: set GODIST_CLUSTER_TOKEN (the same on every task) or WorkerServerOptions.Token")
	}
	s := &WorkerServer{task: opts.Task, handler: h}
	s.ts.start(lis, opts.Token, opts.Task, &workerServiceDesc, s)
	return s, nil
}

// Addr is the address the server listens on.
func (s *WorkerServer) Addr() net.Addr { return s.ts.lis.Addr() }

// Runs returns how many functions the server has run.
func (s *WorkerServer) Runs() int64 { return s.runs.Load() }

// Close stops serving at once, cutting open connections and the calls in flight.
func (s *WorkerServer) Close() error {
	s.ts.close()
	return nil
}

func (s *WorkerServer) run(ctx context.Context, name string, d *psDecoder) ([]byte, error) {
	step := d.u64()
	payload := d.bytes()
	if err := d.done(); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	s.runs.Add(1)
	out, err := s.handler(ctx, name, step, payload)
	if err != nil {
		if errors.Is(err, ErrPSUnavailable) {
			// The worker lost a ps: the caller decides whether the ps is gone.
			return nil, status.Errorf(codes.Unavailable, "worker %d: %v", s.task, err)
		}
		// FailedPrecondition: the function failed, the worker is fine.
		return nil, status.Errorf(codes.FailedPrecondition, "worker %d: %v", s.task, err)
	}
	return out, nil
}

type workerServer interface{ isWorkerServer() }

func (s *WorkerServer) isWorkerServer() {}

func workerMethod(name string, h func(s *WorkerServer, ctx context.Context, key string, d *psDecoder) ([]byte, error)) grpc.MethodDesc {
	return taskMethod(workerServiceName, name, h)
}

var workerServiceDesc = grpc.ServiceDesc{
	ServiceName: workerServiceName,
	HandlerType: (*workerServer)(nil),
	Methods: []grpc.MethodDesc{
		workerMethod("Run", (*WorkerServer).run),
		workerMethod("Ping", func(*WorkerServer, context.Context, string, *psDecoder) ([]byte, error) { return nil, nil }),
	},
}

// WorkerClientOptions configures DialWorker.
type WorkerClientOptions struct {
	// Token is the cluster token (required).
	Token string
	// Caller is the caller's rank in the cluster (0 to 4095), sent with every call.
	Caller int
	// Timeout bounds every call whose context has no deadline (default 60 s).
	Timeout time.Duration
}

// WorkerClient calls one worker task's function service.
type WorkerClient struct {
	taskClient
}

// DialWorker returns a client of the worker at addr ("host:port"); it connects lazily.
func DialWorker(addr string, opts WorkerClientOptions) (*WorkerClient, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = 60 * time.Second
	}
	c := &WorkerClient{}
	if err := c.init(addr, workerServiceName, "worker", ErrWorkerUnavailable, opts.Token, opts.Caller, opts.Timeout, "worker client", "WorkerClientOptions"); err != nil {
		return nil, err
	}
	return c, nil
}

// Addr is the worker's address.
func (c *WorkerClient) Addr() string { return c.addr }

// BytesSent returns the payload bytes this client has sent (arguments and names).
func (c *WorkerClient) BytesSent() int64 { return c.sent.Load() }

// BytesReceived returns the payload bytes this client has received (results).
func (c *WorkerClient) BytesReceived() int64 { return c.recv.Load() }

// Close closes the connection; calls in flight and later calls fail with
// ErrWorkerUnavailable.
func (c *WorkerClient) Close() error { return c.close() }

// WaitReady waits until the worker answers or ctx ends (a connection that breaks
// meanwhile is made again).
func (c *WorkerClient) WaitReady(ctx context.Context) error {
	return c.waitReady(ctx)
}

// Run runs the worker's function name for step with the encoded arguments payload and
// returns the encoded result.
func (c *WorkerClient) Run(ctx context.Context, name string, step uint64, payload []byte) ([]byte, error) {
	if name == "" {
		return nil, errors.New("transport: worker client: Run: empty function name")
	}
	var e psEncoder
	e.u64(step)
	e.bytes(payload)
	return c.invoke(ctx, "Run", name, e.b, false)
}

// bytes appends a length-prefixed byte string.
func (e *psEncoder) bytes(b []byte) {
	e.u32(uint32(len(b)))
	e.b = append(e.b, b...)
}

// bytes reads what psEncoder.bytes wrote.
func (d *psDecoder) bytes() []byte {
	n := d.count(1)
	b := d.take(n)
	if b == nil {
		return nil
	}
	return append([]byte(nil), b...)
}
