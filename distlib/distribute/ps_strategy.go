package distribute

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"godist/distlib/cluster"
	"godist/distlib/tensor"
	"godist/distlib/transport"
)

// ErrPSFailed is wrapped by the error of a parameter server that stopped answering
// (a *PSFailureError): training cannot go on without it.
var ErrPSFailed = errors.New("distribute: parameter server failed")

// PSFailureError names the ps task that failed and why.
type PSFailureError struct {
	Task int    // ps task index
	Addr string // its address
	Err  error
}

func (e *PSFailureError) Error() string {
	return fmt.Sprintf("distribute: parameter server ps %d at %s failed: %v (restart it, then restart the coordinator from the last checkpoint)", e.Task, e.Addr, e.Err)
}

// Unwrap returns ErrPSFailed and the cause.
func (e *PSFailureError) Unwrap() []error { return []error{ErrPSFailed, e.Err} }

// PSOption configures NewParameterServerStrategy, ServeParameterServer and ServeWorker:
// WithRemoteWorkers, WithWorkerTimeout, WithVariablePartitioner, WithPSTimeout,
// WithClusterToken.
type PSOption interface{ applyPS(*psOptions) }

// psOption is an option of the parameter-server constructors alone.
type psOption func(*psOptions)

func (f psOption) applyPS(o *psOptions) { f(o) }

type psOptions struct {
	partitioner   Partitioner
	token         string
	tokenErr      error // why there is no token (cluster.Token)
	timeout       time.Duration
	remote        bool
	workerTimeout time.Duration
	reachTimeout  time.Duration
}

// WithRemoteWorkers makes the coordinator run scheduled functions on the worker tasks of
// the cluster, as separate processes serving ServeWorker (godist launch --ps starts them),
// instead of on executors inside the coordinator's process. Only functions registered with
// RegisterFunction can run there: schedule them with ScheduleFunction.
func WithRemoteWorkers() PSOption {
	return psOption(func(o *psOptions) { o.remote = true })
}

// WithWorkerTimeout bounds one scheduled function on a remote worker (default 60 s): a
// worker that does not answer in time counts as lost and the function runs elsewhere. A
// killed worker is noticed at once from its broken connection, not after the timeout.
//
// It also bounds how long scheduled functions wait while no worker is reachable
// (default DefaultWorkerReachTimeout, 30 s): then they fail, and Join, Fetch and Fit
// return a *WorkerUnreachableError naming the worker tasks that did not answer.
func WithWorkerTimeout(d time.Duration) PSOption {
	return psOption(func(o *psOptions) { o.workerTimeout, o.reachTimeout = d, d })
}

// DefaultWorkerReachTimeout is how long scheduled functions wait for a reachable worker
// before they fail with a *WorkerUnreachableError, when WithWorkerTimeout is not given.
const DefaultWorkerReachTimeout = 30 * time.Second

// WithVariablePartitioner shards the variables the strategy creates
// (ParameterServerStrategy(variable_partitioner=...)).
func WithVariablePartitioner(p Partitioner) PSOption {
	return psOption(func(o *psOptions) { o.partitioner = p })
}

// WithPSTimeout bounds every call to a parameter server (default 10 s): a worker whose call
// does not finish in time counts as lost and its step runs on another worker; a ps that
// does not answer the coordinator in time stops training with a *PSFailureError.
func WithPSTimeout(d time.Duration) PSOption {
	return psOption(func(o *psOptions) { o.timeout = d })
}

func applyPSOptions(opts []PSOption) *psOptions {
	o := &psOptions{timeout: 10 * time.Second}
	for _, opt := range opts {
		if opt != nil {
			opt.applyPS(o)
		}
	}
	if o.token == "" {
		o.token, o.tokenErr = cluster.Token()
	}
	if o.timeout <= 0 {
		o.timeout = 10 * time.Second
	}
	if o.workerTimeout <= 0 {
		o.workerTimeout = 60 * time.Second
	}
	if o.reachTimeout <= 0 {
		o.reachTimeout = DefaultWorkerReachTimeout
	}
	return o
}

// ParameterServerStrategy trains asynchronously with variables held by parameter-server
// tasks, like tf.distribute.experimental.ParameterServerStrategy: variables (and their
// shards, see WithVariablePartitioner) are placed round-robin on the ps tasks; a
// ClusterCoordinator schedules steps on the workers, which read the current variables and
// push their updates to the ps tasks, each at its own pace.
//
// By default the workers of the cluster run as executors of the coordinator's process,
// each with its own connections to the parameter servers; with WithRemoteWorkers they are
// the worker tasks' own processes (ServeWorker), which run functions registered by name.
type ParameterServerStrategy struct {
	base
	psAddrs     []string
	clients     []*transport.PSClient // the coordinator's own connections
	numWorkers  int
	callerBase  int // cluster rank of worker 0 (workers call the ps as themselves)
	coordRank   int
	partitioner Partitioner
	token       string
	timeout     time.Duration
	remote      bool
	workerAddrs []string
	workerTO    time.Duration
	reachTO     time.Duration // how long functions wait while no worker is reachable

	mu    sync.Mutex
	next  int // round-robin placement
	names map[string]int
	vars  []*ShardedVariable

	placed placedVars // this process's copies standing for ps variables

	resolver cluster.Resolver
}

// ClusterResolver returns the resolver the strategy was made with, like
// strategy.cluster_resolver.
func (s *ParameterServerStrategy) ClusterResolver() cluster.Resolver { return s.resolver }

// NewParameterServerStrategy connects to the cluster that r describes (a "ps" job and a
// "worker" job; this process is the coordinator, normally the "chief" task). It panics
// with an error naming the problem when the cluster cannot be used.
func NewParameterServerStrategy(r cluster.Resolver, opts ...PSOption) *ParameterServerStrategy {
	s, err := newParameterServerStrategy(r, opts)
	if err != nil {
		panic(err)
	}
	return s
}

func newParameterServerStrategy(r cluster.Resolver, opts []PSOption) (*ParameterServerStrategy, error) {
	if r == nil {
		return nil, fmt.Errorf("%w: ParameterServerStrategy needs a cluster resolver (cluster.NewTFConfigClusterResolver())", ErrCluster)
	}
	o := applyPSOptions(opts)
	spec := r.ClusterSpec()
	nps, nw := spec.NumTasks(cluster.PS), spec.NumTasks(cluster.Worker)
	if nps == 0 {
		return nil, fmt.Errorf("%w: ParameterServerStrategy needs at least one ps task, the cluster %v has none", ErrCluster, spec)
	}
	if nw == 0 {
		return nil, fmt.Errorf("%w: ParameterServerStrategy needs at least one worker task, the cluster %v has none", ErrCluster, spec)
	}
	if o.token == "" {
		return nil, fmt.Errorf("%w: %v; or use WithClusterToken", ErrCluster, o.tokenErr)
	}
	s := &ParameterServerStrategy{resolver: r, numWorkers: nw, partitioner: o.partitioner, token: o.token, timeout: o.timeout,
		remote: o.remote, workerAddrs: spec.JobTasks(cluster.Worker), workerTO: o.workerTimeout, reachTO: o.reachTimeout, names: map[string]int{}}
	devs := defaultDevices()[:1]
	s.base = base{name: "ParameterServerStrategy", devices: devs, mirror: false,
		// The variables proper live on the ps tasks (ShardedVariable); a local copy (what
		// keras builds before placing a model on the ps) sits on this process's device.
		// Extended().Worker() is the coordinator alone: the workers are not synchronous replicas
		// of its own computations (Evaluate and Predict run whole batches here).
		varDevice: devs[0], workers: 1, chief: true}
	s.self, s.ext = s, &psExtended{extended{&s.base}, s}
	s.ops = selectCrossDeviceOps(devs)
	s.callerBase = spec.Rank(cluster.Task{Type: cluster.Worker, Index: 0})
	if me := spec.Rank(cluster.Task{Type: r.TaskType(), Index: r.TaskID()}); me >= 0 {
		s.coordRank = me
	}
	for i := 0; i < nps; i++ {
		addr, err := spec.TaskAddress(cluster.PS, i)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("%w: %v", ErrCluster, err)
		}
		c, err := transport.DialPS(addr, transport.PSClientOptions{Token: o.token, Caller: s.coordRank, Timeout: o.timeout,
			NoSharedMemory: cluster.NoSharedMemoryFromEnv()})
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("distribute: ps %d: %w", i, err)
		}
		s.psAddrs = append(s.psAddrs, addr)
		s.clients = append(s.clients, c)
	}
	logf("INFO", "ParameterServerStrategy with cluster_spec = %v, %d ps tasks, %d workers, variable_partitioner = %v",
		spec, nps, nw, s.partitioner)
	return s, nil
}

// NumReplicasInSync returns the replicas of one worker (workers are not in sync with each
// other), TensorFlow's rule for this strategy.
func (s *ParameterServerStrategy) NumReplicasInSync() int { return len(s.devices) }

// NumPS returns the number of parameter-server tasks.
func (s *ParameterServerStrategy) NumPS() int { return len(s.psAddrs) }

// NumWorkers returns the number of worker tasks.
func (s *ParameterServerStrategy) NumWorkers() int { return s.numWorkers }

// Variables returns the variables created through the strategy, in creation order.
func (s *ParameterServerStrategy) Variables() []*ShardedVariable {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*ShardedVariable(nil), s.vars...)
}

// RemoteWorkers reports whether scheduled functions run in the worker tasks' processes.
func (s *ParameterServerStrategy) RemoteWorkers() bool { return s.remote }

// varByName returns the variable called name, or nil.
func (s *ParameterServerStrategy) varByName(name string) *ShardedVariable {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range s.vars {
		if v.name == name {
			return v
		}
	}
	return nil
}

// Close closes the coordinator's connections to the parameter servers.
func (s *ParameterServerStrategy) Close() error {
	for _, c := range s.clients {
		c.Close()
	}
	return nil
}

// String describes the strategy.
func (s *ParameterServerStrategy) String() string {
	return fmt.Sprintf("ParameterServerStrategy(ps=%d, workers=%d, partitioner=%v)", len(s.psAddrs), s.numWorkers, s.partitioner)
}

// WaitForPS waits until every parameter server answers, or ctx ends; the error names the
// first ps that did not.
func (s *ParameterServerStrategy) WaitForPS(ctx context.Context) error {
	for i, c := range s.clients {
		if err := c.WaitReady(ctx); err != nil {
			return &PSFailureError{Task: i, Addr: s.psAddrs[i], Err: err}
		}
	}
	return nil
}

// checkPS pings every ps with the coordinator's connections and returns the failure of
// the first that does not answer within the timeout.
func (s *ParameterServerStrategy) checkPS() error {
	for i, c := range s.clients {
		ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
		err := c.WaitReady(ctx)
		cancel()
		if err != nil {
			return &PSFailureError{Task: i, Addr: s.psAddrs[i], Err: fmt.Errorf("ping from the coordinator (timeout %v): %w", s.timeout, err)}
		}
	}
	return nil
}

// NewVariableContext creates a variable on the parameter servers with initial value init,
// split by the strategy's partitioner and placed round-robin; a name already used gets a
// suffix ("_1", ...) like TensorFlow's. If the variable already exists on the ps with the
// same shape (a restarted coordinator), its value there is kept. ctx, bounded by the
// strategy's timeout, bounds the calls that create it; the error names a ps that cannot
// be reached.
func (s *ParameterServerStrategy) NewVariableContext(ctx context.Context, name string, init *tensor.Tensor, trainable bool) (*ShardedVariable, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	return s.newVariable(ctx, name, init, trainable)
}

func (s *ParameterServerStrategy) newVariable(ctx context.Context, name string, init *tensor.Tensor, trainable bool) (*ShardedVariable, error) {
	if init == nil {
		return nil, fmt.Errorf("distribute: variable %q: nil initial value", name)
	}
	shape := init.Shape()
	n := 1
	if s.partitioner != nil && len(shape) > 0 && shape[0] > 0 {
		parts, err := s.partitioner.Partition(shape, init.Dtype())
		if err != nil {
			return nil, fmt.Errorf("distribute: variable %q: %w", name, err)
		}
		n = parts[0]
	}
	rows := []int{0}
	if len(shape) > 0 {
		var err error
		if rows, err = ShardRows(shape[0], n); err != nil {
			return nil, fmt.Errorf("distribute: variable %q: %w", name, err)
		}
	}
	s.mu.Lock()
	base := name
	if k := s.names[name]; k > 0 {
		name = fmt.Sprintf("%s_%d", name, k)
	}
	s.names[base]++
	v := &ShardedVariable{s: s, name: name, shape: shape, trainable: trainable, rowSize: 1}
	for _, d := range shape[min(1, len(shape)):] {
		v.rowSize *= d
	}
	off := 0
	for i, r := range rows {
		v.shards = append(v.shards, shard{key: fmt.Sprintf("%s/part_%d", name, i), task: s.next % len(s.clients), offset: off, rows: r})
		s.next++
		off += r
	}
	if n == 1 {
		v.shards[0].key = name
	}
	s.vars = append(s.vars, v)
	s.mu.Unlock()
	data := init.Data()
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	for _, sh := range v.shards {
		sshape := append([]int(nil), shape...)
		part := data
		if len(shape) > 0 {
			sshape[0] = sh.rows
			part = data[sh.offset*v.rowSize : (sh.offset+sh.rows)*v.rowSize]
		}
		if err := s.clients[sh.task].Create(ctx, sh.key, sshape, part, false); err != nil {
			return nil, s.psError(sh.task, fmt.Errorf("create variable %q: %w", sh.key, err))
		}
	}
	return v, nil
}

// psError turns an unavailability of ps task into a *PSFailureError.
func (s *ParameterServerStrategy) psError(task int, err error) error {
	if errors.Is(err, transport.ErrPSUnavailable) {
		return &PSFailureError{Task: task, Addr: s.psAddrs[task], Err: err}
	}
	return err
}

// ServeParameterServer starts the variable store of this ps task (the task that r
// names, of type "ps") on its cluster address, or on lis when it is not nil. The task
// serves until the returned server is closed.
func ServeParameterServer(r cluster.Resolver, lis net.Listener, opts ...PSOption) (*transport.PSServer, error) {
	o := applyPSOptions(opts)
	if r.TaskType() != cluster.PS {
		return nil, fmt.Errorf("%w: task %s %d is not a ps task", ErrCluster, r.TaskType(), r.TaskID())
	}
	if lis == nil {
		addr, err := r.ClusterSpec().TaskAddress(cluster.PS, r.TaskID())
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrCluster, err)
		}
		_, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("%w: ps %d address %q: %v", ErrCluster, r.TaskID(), addr, err)
		}
		if lis, err = net.Listen("tcp", ":"+port); err != nil {
			return nil, fmt.Errorf("distribute: ps %d: listen on port %s: %w", r.TaskID(), port, err)
		}
	}
	srv, err := transport.NewPSServer(lis, transport.PSServerOptions{Token: o.token, Task: r.TaskID(),
		NoSharedMemory: cluster.NoSharedMemoryFromEnv()})
	if err != nil {
		lis.Close()
		return nil, fmt.Errorf("distribute: ps %d: %w", r.TaskID(), err)
	}
	return srv, nil
}
