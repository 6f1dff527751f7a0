package distribute

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"godist/distlib/cluster"
	"godist/distlib/collective"
	"godist/distlib/tensor"
	"godist/distlib/transport"
)

// CommunicationImplementation chooses how MultiWorkerMirroredStrategy talks between
// workers, like tf.distribute.experimental.CommunicationImplementation.
type CommunicationImplementation int

const (
	// CommunicationAuto lets the strategy choose (RING here: NCCL across processes needs a
	// GPU backend).
	CommunicationAuto CommunicationImplementation = iota
	// CommunicationRing is the ring all-reduce over gRPC, on CPUs and GPUs.
	CommunicationRing
	// CommunicationNCCL asks for NCCL; without GPUs it falls back to RING (logged).
	CommunicationNCCL
)

// String returns TensorFlow's name, such as "CommunicationImplementation.AUTO".
func (c CommunicationImplementation) String() string {
	switch c {
	case CommunicationAuto:
		return "CommunicationImplementation.AUTO"
	case CommunicationRing:
		return "CommunicationImplementation.RING"
	case CommunicationNCCL:
		return "CommunicationImplementation.NCCL"
	}
	return fmt.Sprintf("CommunicationImplementation(%d)", int(c))
}

// ErrCluster reports a cluster a multi-worker strategy cannot run in.
var ErrCluster = errors.New("distribute: bad cluster")

type multiOptions struct {
	resolver       cluster.Resolver
	t              collective.Transport
	comm           CommunicationImplementation
	timeout        time.Duration
	token          string
	bindAll        bool
	healthInterval time.Duration
	healthTimeout  time.Duration
	elastic        *[2]int // WithElastic's min and max
}

// WithClusterResolver sets where NewMultiWorkerMirroredStrategy learns the cluster (by
// default cluster.NewTFConfigClusterResolver, which reads TF_CONFIG).
func WithClusterResolver(r cluster.Resolver) MultiWorkerOption {
	return multiWorkerOption(func(o *options) { o.multi().resolver = r })
}

// WithTransport makes NewMultiWorkerMirroredStrategy use t between workers (its Rank is
// the worker index, its Size the number of workers) instead of starting gRPC from the
// cluster: transport.NewMem runs several workers in one process for tests.
func WithTransport(t collective.Transport) MultiWorkerOption {
	return multiWorkerOption(func(o *options) { o.multi().t = t })
}

// WithCommunication sets the cross-worker implementation
// (tf.distribute.experimental.CommunicationOptions(implementation=...)).
func WithCommunication(c CommunicationImplementation) MultiWorkerOption {
	return multiWorkerOption(func(o *options) { o.multi().comm = c })
}

// WithCommunicationTimeout bounds every wait for another worker (default 5 minutes); a
// worker that does not answer in time makes the step fail with an error naming it.
func WithCommunicationTimeout(d time.Duration) MultiWorkerOption {
	return multiWorkerOption(func(o *options) { o.multi().timeout = d })
}

// WithBindAll makes the worker listen on all interfaces (0.0.0.0) at its port instead of
// on the host TF_CONFIG names for it (127.0.0.1 in a one-machine cluster), for containers
// whose cluster address is not one of their own; GODIST_BIND_ALL=1 does the same.
func WithBindAll() MultiWorkerOption {
	return multiWorkerOption(func(o *options) { o.multi().bindAll = true })
}

// WithHealthCheck sets how often a worker checks each other worker (default
// DefaultHealthCheckInterval; negative: never) and how long it waits for an answer (default
// DefaultHealthCheckTimeout). A worker that fails a check is lost: the step fails with a
// *PeerUnavailableError naming it. A worker whose connection closes is lost at once anyway.
func WithHealthCheck(interval, timeout time.Duration) MultiWorkerOption {
	return multiWorkerOption(func(o *options) { o.multi().healthInterval, o.multi().healthTimeout = interval, timeout })
}

func (o *options) multi() *multiOptions {
	if o.mw == nil {
		o.mw = &multiOptions{}
	}
	return o.mw
}

// MultiWorkerMirroredStrategy trains synchronously on the devices of several workers
// (processes, often on several hosts), like tf.distribute.MultiWorkerMirroredStrategy:
// variables are mirrored on every replica of every worker and start from the chief's
// values; every step all-reduces the gradients across local devices and then across
// workers through a ring over the cluster's transport. Without TF_CONFIG (or another
// cluster) it is a single worker over the local devices.
type MultiWorkerMirroredStrategy struct {
	base
	t       collective.Transport // between all the cluster's workers
	g       collective.Transport // between the workers training together: t, or the generation's view (WithElastic)
	rank    int                  // this worker's rank in t
	closer  io.Closer
	timeout time.Duration
	comm    CommunicationImplementation

	peers    []peerTask       // the task of every rank (worker i of n without a cluster)
	resolver cluster.Resolver // where the cluster came from (nil over WithTransport)

	turn chan struct{} // held by the collective in flight: all workers issue them in the same order
	seq  uint64        // the tag of the last collective or bucketer (under turn)
	jn   joinState     // every worker answered once (join)

	keptTurn chan struct{}  // held by the sumKept call in flight (its bucketers serve one call at a time)
	kept     []keptBucketer // the least recently used first

	el   *elasticConfig     // WithElastic; nil: a lost worker stops the job
	gen  *generation        // the workers training together now (WithElastic; under turn)
	life context.Context    // ends at Close
	stop context.CancelFunc // ends life
}

// elasticConfig is WithElastic's.
type elasticConfig struct {
	min, max int
	wait     time.Duration // how long a regroup waits for a worker's note or state, the chief for the workers at the start

	joins    joinRequests               // the join requests of the other ranks
	cur      atomic.Pointer[generation] // s.gen, for the join watchers
	admitted *Admission                 // this worker's admission at an epoch's end, until Join returns it
	// adopting is true from this worker's admission at an epoch's end to its first
	// collective: the state Fit restores holds the variables' values, so chief broadcasts
	// (a model built meanwhile) keep the local ones; the group is not broadcasting.
	adopting bool
}

// NewMultiWorkerMirroredStrategy returns the strategy of this worker. Options:
// WithClusterResolver (default: TF_CONFIG), WithTransport (instead of gRPC), WithDevices
// (local devices; default all GPUs, else all logical CPUs), WithCommunication,
// WithCommunicationTimeout, WithClusterToken. It panics with an error naming the problem
// when the cluster cannot be used (a bad TF_CONFIG, a task that is not a worker, no token).
func NewMultiWorkerMirroredStrategy(opts ...MultiWorkerOption) *MultiWorkerMirroredStrategy {
	s, err := newMultiWorker(opts)
	if err != nil {
		panic(err)
	}
	return s
}

func newMultiWorker(opts []MultiWorkerOption) (*MultiWorkerMirroredStrategy, error) {
	o := multiWorkerOptions(opts)
	mo := o.multi()
	var devs []string
	if o.setDevs {
		devs = resolveDevices(o.devices)
	} else {
		devs = defaultDevices()
	}
	s := &MultiWorkerMirroredStrategy{timeout: mo.timeout, comm: mo.comm, turn: make(chan struct{}, 1), keptTurn: make(chan struct{}, 1)}
	if s.timeout <= 0 {
		s.timeout = 5 * time.Minute
	}
	s.life, s.stop = context.WithCancel(context.Background())
	s.base = base{name: "MultiWorkerMirroredStrategy", devices: devs, mirror: true, varDevice: devs[0],
		workers: 1, chief: true}
	s.self, s.ext = s, &multiWorkerExtended{syncExtended{extended{&s.base}}, s}
	if o.ops != nil {
		s.ops = o.ops
	} else {
		s.ops = selectCrossDeviceOps(devs)
	}
	if s.comm == CommunicationNCCL && nccl() == nil {
		logf("WARNING", "CommunicationImplementation.NCCL needs an NCCL all-reduce registered by the GPU backend, and none is; using RING.")
		s.comm = CommunicationRing
	}
	if mo.t != nil {
		s.t = mo.t
		s.rank, s.worker, s.workers, s.chief = mo.t.Rank(), mo.t.Rank(), mo.t.Size(), mo.t.Rank() == 0
		s.peers = make([]peerTask, s.workers)
		for r := range s.peers {
			s.peers[r] = peerTask{task: cluster.Task{Type: cluster.Worker, Index: r}}
		}
		logf("INFO", "MultiWorkerMirroredStrategy with worker %d of %d over %T, local_devices = (%s), communication = %v",
			s.worker, s.workers, mo.t, quoteList(devs), s.comm)
	} else {
		if err := s.joinCluster(mo); err != nil {
			return nil, err
		}
	}
	s.g = s.t
	if s.workers > 1 {
		s.remote = s
	}
	if err := s.makeElastic(mo); err != nil {
		return nil, err
	}
	return s, nil
}

// makeElastic sets up WithElastic: the first generation holds every worker of the cluster.
func (s *MultiWorkerMirroredStrategy) makeElastic(mo *multiOptions) error {
	if mo.elastic == nil {
		n, err := cluster.ElasticFromEnv()
		if err != nil {
			return fmt.Errorf("%w: %v", ErrCluster, err)
		}
		if n == 0 {
			return nil
		}
		mo.elastic = &[2]int{n, 0}
	}
	lo, hi := mo.elastic[0], mo.elastic[1]
	switch {
	case lo < 1:
		return fmt.Errorf("%w: WithElastic(%d, %d): min must be at least 1", ErrCluster, lo, hi)
	case hi != 0 && hi < lo:
		return fmt.Errorf("%w: WithElastic(%d, %d): max must be 0 (the cluster's size) or at least min", ErrCluster, lo, hi)
	case s.workers < lo:
		return fmt.Errorf("%w: WithElastic(%d, %d): the cluster has %d workers, fewer than min", ErrCluster, lo, hi, s.workers)
	case hi != 0 && s.workers > hi:
		return fmt.Errorf("%w: WithElastic(%d, %d): the cluster has %d workers, more than max", ErrCluster, lo, hi, s.workers)
	}
	wait := mo.healthTimeout
	if wait <= 0 {
		wait = DefaultHealthCheckTimeout
	}
	s.el = &elasticConfig{min: lo, max: hi, wait: min(wait, s.timeout)}
	s.ext = &elasticExtended{*s.ext.(*multiWorkerExtended)}
	if s.workers > 1 {
		logf("INFO", "elastic training: the job goes on while at least %d of its %d workers remain", lo, s.workers)
	}
	return nil // the first generation starts when the workers join (elasticJoin)
}

// joinCluster reads the cluster and, when it has more than one worker, starts gRPC.
func (s *MultiWorkerMirroredStrategy) joinCluster(mo *multiOptions) error {
	r := mo.resolver
	if r == nil {
		tr, err := cluster.NewTFConfigClusterResolver()
		if err != nil {
			return fmt.Errorf("distribute: MultiWorkerMirroredStrategy: TF_CONFIG: %w", err)
		}
		r = tr
	}
	s.resolver = r
	spec := r.ClusterSpec()
	if spec.Empty() {
		logf("INFO", "Single-worker MultiWorkerMirroredStrategy with local_devices = (%s), communication = %v",
			quoteList(s.devices), s.comm)
		return nil
	}
	if n := spec.NumTasks(cluster.PS); n > 0 {
		return fmt.Errorf("%w: the cluster has %d ps tasks; MultiWorkerMirroredStrategy uses chief and workers only (use ParameterServerStrategy)", ErrCluster, n)
	}
	me := cluster.Task{Type: r.TaskType(), Index: r.TaskID()}
	if me.Type != cluster.Chief && me.Type != cluster.Worker {
		return fmt.Errorf("%w: task %v is not a chief or worker; MultiWorkerMirroredStrategy runs on the chief and the workers", ErrCluster, me)
	}
	tasks := spec.Tasks()
	rank := spec.Rank(me)
	if rank < 0 {
		return fmt.Errorf("%w: task %v is not in the cluster %v", ErrCluster, me, spec)
	}
	s.rank, s.worker, s.workers = rank, rank, len(tasks)
	// The chief is the "chief" task, or worker 0 when the cluster has none (TensorFlow's rule).
	s.chief = me.Type == cluster.Chief || (me.Type == cluster.Worker && me.Index == 0 && spec.NumTasks(cluster.Chief) == 0)
	logf("INFO", "MultiWorkerMirroredStrategy with cluster_spec = %v, task_type = '%s', task_id = %d, num_workers = %d, local_devices = (%s), communication = %v",
		spec, me.Type, me.Index, s.workers, quoteList(s.devices), s.comm)
	if s.workers == 1 {
		return nil
	}
	addrs := make([]string, len(tasks))
	s.peers = make([]peerTask, len(tasks))
	for i, t := range tasks {
		a, err := spec.TaskAddress(t.Type, t.Index)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrCluster, err)
		}
		addrs[i] = a
		s.peers[i] = peerTask{task: t, addr: a}
	}
	token := mo.token
	if token == "" {
		var err error
		if token, err = cluster.Token(); err != nil {
			return fmt.Errorf("%w: %v; or use WithClusterToken", ErrCluster, err)
		}
	}
	hi, ht := mo.healthInterval, mo.healthTimeout
	if hi == 0 {
		hi = DefaultHealthCheckInterval
	}
	if ht <= 0 {
		ht = DefaultHealthCheckTimeout
	}
	if hi < 0 {
		hi = 0
	}
	g, err := transport.NewGRPC(rank, addrs, transport.GRPCOptions{Token: token,
		BindAll: mo.bindAll || cluster.BindAllFromEnv(), HealthCheckInterval: hi, HealthCheckTimeout: ht,
		NoSharedMemory: cluster.NoSharedMemoryFromEnv()})
	if err != nil {
		return fmt.Errorf("distribute: MultiWorkerMirroredStrategy worker %d: %w", rank, err)
	}
	s.t, s.closer = g, g
	return nil
}

// Close releases the transport the strategy started (nothing for WithTransport or a single
// worker). The strategy cannot reduce across workers afterwards.
func (s *MultiWorkerMirroredStrategy) Close() error {
	s.stop()
	if s.closer == nil {
		return nil
	}
	c := s.closer
	s.closer = nil
	return c.Close()
}

// Communication returns the cross-worker implementation.
func (s *MultiWorkerMirroredStrategy) Communication() CommunicationImplementation { return s.comm }

// collective runs fn with the caller's ctx bounded by the communication timeout and a tag
// that is the same on every worker for the same call, one collective at a time. Before the
// first collective it waits for every worker to connect (join), naming those that have not.
// A worker lost or silent during fn gives a *PeerUnavailableError; an interrupt (ctx ended,
// also while waiting for the collective before) gives ctx's error.
func (s *MultiWorkerMirroredStrategy) collective(ctx context.Context, name string, fn func(ctx context.Context, opts []collective.Option) error) error {
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if err := s.ensureJoined(cctx); err != nil {
		return s.stepError(ctx, opJoin, err)
	}
	seq, err := s.takeTurn(cctx)
	if err != nil {
		return s.stepError(ctx, name, err)
	}
	defer s.endTurn()
	if s.el != nil {
		s.el.adopting = false
	}
	opts := []collective.Option{
		collective.Tag(fmt.Sprintf("mwms/%s/%d", name, seq)),
		collective.CommunicationOptions{Timeout: s.timeout},
	}
	gctx, unbind := bindGeneration(cctx, s.gen)
	defer unbind()
	if err := fn(gctx, opts); err != nil {
		if re := genError(ctx, s.gen, name, err); re != nil {
			return re
		}
		return s.stepError(ctx, name, err)
	}
	return nil
}

// takeTurn waits until no other collective of this worker is in flight, or ctx ends, and
// returns the next tag number; endTurn lets the next one go.
func (s *MultiWorkerMirroredStrategy) takeTurn(ctx context.Context) (uint64, error) {
	select {
	case s.turn <- struct{}{}:
	case <-ctx.Done():
		return 0, context.Cause(ctx)
	}
	s.seq++
	return s.seq, nil
}

func (s *MultiWorkerMirroredStrategy) endTurn() { <-s.turn }

// joinState makes join run once (until it succeeds) without a lock held over its network
// waits: the first caller joins, the others wait for its outcome or for their own ctx.
type joinState struct {
	mu     sync.Mutex
	joined bool
	done   chan struct{} // closed when the join in flight ends; nil when none is
}

// ensureJoined joins the cluster unless a join succeeded before. A join that fails (its
// caller's ctx ended, a worker missing) is tried again by the next caller.
func (s *MultiWorkerMirroredStrategy) ensureJoined(ctx context.Context) error {
	j := &s.jn
	for {
		j.mu.Lock()
		if j.joined {
			j.mu.Unlock()
			return nil
		}
		if wait := j.done; wait != nil {
			j.mu.Unlock()
			select {
			case <-wait: // joined, or failed under its caller's ctx: look again
			case <-ctx.Done():
				return context.Cause(ctx)
			}
			continue
		}
		done := make(chan struct{})
		j.done = done
		j.mu.Unlock()
		err := s.join(ctx)
		j.mu.Lock()
		j.joined, j.done = err == nil, nil
		j.mu.Unlock()
		close(done)
		return err
	}
}

// stepError describes the failure err of op, run under the caller's ctx: ctx's own error
// when ctx ended (an interrupt), a *PeerUnavailableError when a worker was lost or silent.
func (s *MultiWorkerMirroredStrategy) stepError(ctx context.Context, op string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("distribute: worker %d of %d: %s stopped: %w", s.worker, s.workers, op, context.Cause(ctx))
	}
	var pu *PeerUnavailableError
	if errors.As(err, &pu) {
		return err
	}
	if u := s.unavailable(op, err); u != nil {
		return u
	}
	return fmt.Errorf("distribute: worker %d of %d: %s: %w", s.worker, s.workers, op, err)
}

// allReduceWorkers sums the tensors across workers in one packed ring all-reduce, under the
// caller's ctx (bounded by the communication timeout).
func (s *MultiWorkerMirroredStrategy) allReduceWorkers(ctx context.Context, op ReduceOp, ts []*tensor.Tensor) ([]*tensor.Tensor, error) {
	total := 0
	for _, t := range ts {
		total += t.Size()
	}
	buf := make([]float32, 0, total)
	for _, t := range ts {
		buf = append(buf, t.Data()...)
	}
	cop := collective.Sum
	if op.isMean() {
		cop = collective.Mean
	}
	if err := s.collective(ctx, "allreduce", func(ctx context.Context, opts []collective.Option) error {
		return collective.AllReduce(ctx, s.g, buf, cop, opts...)
	}); err != nil {
		return nil, err
	}
	out := make([]*tensor.Tensor, len(ts))
	off := 0
	for i, t := range ts {
		out[i] = newOn(t.Device(), t.Shape(), buf[off:off+t.Size()])
		off += t.Size()
	}
	return out, nil
}

// broadcastFromChiefContext returns the chief's value of t on every worker.
func (s *MultiWorkerMirroredStrategy) broadcastFromChiefContext(ctx context.Context, t *tensor.Tensor) (*tensor.Tensor, error) {
	if s.workers <= 1 {
		return t, nil
	}
	if err := s.ensureJoined(ctx); err != nil {
		return nil, s.stepError(ctx, opJoin, err)
	}
	if s.el != nil && s.el.adopting {
		return t, nil
	}
	buf := append([]float32(nil), t.Data()...)
	if err := s.collective(ctx, "broadcast", func(ctx context.Context, opts []collective.Option) error {
		return collective.Broadcast(ctx, s.g, buf, 0, opts...)
	}); err != nil {
		return nil, err
	}
	return newOn(t.Device(), t.Shape(), buf), nil
}

// BarrierContext waits until every worker reaches it or ctx ends (Barrier is BarrierContext
// under the cell's context). A worker that is lost
// or does not answer within the communication timeout gives a *PeerUnavailableError.
func (s *MultiWorkerMirroredStrategy) BarrierContext(ctx context.Context) error {
	if s.workers <= 1 {
		return nil
	}
	return s.collective(ctx, "barrier", func(ctx context.Context, opts []collective.Option) error {
		return collective.Barrier(ctx, s.g, opts...)
	})
}

// chiefBroadcaster is implemented by strategies whose workers must start from the chief's
// variable values.
type chiefBroadcaster interface {
	broadcastFromChiefContext(ctx context.Context, t *tensor.Tensor) (*tensor.Tensor, error)
}

// BroadcastFromChiefContext returns the chief worker's values of ts on every worker of s
// (ts itself for single-worker strategies), or stops when ctx ends (BroadcastFromChief is
// it under the cell's context). Every worker must call it with tensors of the same shapes in
// the same order; library code that creates variables without NewVariable calls it so that
// all workers start from the same weights.
func BroadcastFromChiefContext(ctx context.Context, s Strategy, ts []*tensor.Tensor) ([]*tensor.Tensor, error) {
	bc, ok := s.(chiefBroadcaster)
	if !ok {
		return ts, nil
	}
	out := make([]*tensor.Tensor, len(ts))
	for i, t := range ts {
		v, err := bc.broadcastFromChiefContext(ctx, t)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// String describes the strategy.
func (s *MultiWorkerMirroredStrategy) String() string {
	return fmt.Sprintf("MultiWorkerMirroredStrategy(worker=%d, num_workers=%d, local_devices=(%s), replicas_in_sync=%d)",
		s.worker, s.workers, strings.Join(s.devices, ", "), s.NumReplicasInSync())
}

var _ Strategy = (*MultiWorkerMirroredStrategy)(nil)

// ClusterResolver returns the resolver the strategy learned its cluster from, like
// strategy.cluster_resolver: its TaskType() and TaskID() are this worker's task ("" and 0
// for a single worker without TF_CONFIG, as TF's None). Over WithTransport it is task
// "worker" Rank(), with no addresses.
func (s *MultiWorkerMirroredStrategy) ClusterResolver() cluster.Resolver {
	if s.resolver != nil {
		return s.resolver
	}
	return rankResolver{rank: s.worker}
}

// rankResolver describes a worker of a group made with WithTransport: its rank, no spec.
type rankResolver struct{ rank int }

func (r rankResolver) ClusterSpec() cluster.ClusterSpec { return cluster.ClusterSpec{} }
func (r rankResolver) TaskType() string                 { return cluster.Worker }
func (r rankResolver) TaskID() int                      { return r.rank }
func (r rankResolver) RPCLayer() string                 { return "grpc" }
