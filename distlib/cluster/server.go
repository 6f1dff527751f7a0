package cluster

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"godist/distlib/transport"
)

// TokenEnv is the environment variable that holds the cluster's shared token; godist launch
// sets it to a fresh random value for every job.
const TokenEnv = "GODIST_CLUSTER_TOKEN"

// BindAllEnv is the environment variable that, set to 1 (or true), makes a task listen on
// all interfaces (0.0.0.0) instead of the host its cluster address names: for containers,
// where the address the cluster uses is not an address of the container itself. By default
// a task listens only on its own address's host (127.0.0.1 in a one-machine cluster).
const BindAllEnv = "GODIST_BIND_ALL"

// ElasticEnv is the environment variable that makes a task's MultiWorkerMirroredStrategy
// elastic (distribute.WithElastic(n, 0)) when its program does not say: the least number of
// workers the job goes on with. Launch sets it for an elastic job (LaunchSpec.MinWorkers).
const ElasticEnv = "GODIST_ELASTIC_MIN"

// ElasticFromEnv returns the minimum ElasticEnv sets (0: not elastic), or an error naming a
// value that is not a positive number.
func ElasticFromEnv() (int, error) {
	v := os.Getenv(ElasticEnv)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%s=%q: want the least number of workers, a number of at least 1", ElasticEnv, v)
	}
	return n, nil
}

// BindAllFromEnv reports whether GODIST_BIND_ALL asks tasks to listen on all interfaces.
func BindAllFromEnv() bool {
	v, err := strconv.ParseBool(os.Getenv(BindAllEnv))
	return err == nil && v
}

// SharedMemoryEnv is the environment variable that, set to 0 (or false, off, no), keeps the tasks of
// one host from sharing memory: their all-reduces, and the workers' pushes to and reads from
// a parameter server, then move every byte over TCP, as between hosts. By default tasks that
// find they can map each other's memory (processes of one host, with /dev/shm) read each
// other's buffers there.
const SharedMemoryEnv = "GODIST_SHARED_MEMORY"

// NoSharedMemoryFromEnv reports whether GODIST_SHARED_MEMORY turns shared memory off.
func NoSharedMemoryFromEnv() bool {
	switch strings.ToLower(strings.TrimSpace(os.Getenv(SharedMemoryEnv))) {
	case "0", "false", "off", "no":
		return true
	}
	return false
}

// ServerOptions configures NewServer.
type ServerOptions struct {
	// Token is the cluster token; "" reads GODIST_CLUSTER_TOKEN.
	Token string
	// Listener, if set, is where the server listens instead of its task address.
	Listener net.Listener
	// BindAll listens on all interfaces (0.0.0.0) at the task address's port instead of on
	// the task address itself; GODIST_BIND_ALL=1 does the same.
	BindAll bool
}

// Server is this task's endpoint in the cluster (tf.distribute.Server): for a ps task, the
// parameter server's variable store (what ParameterServerStrategy's workers and coordinator
// call); for the other tasks, a gRPC transport whose ranks are the cluster's Tasks other
// than the ps (chief, workers).
type Server struct {
	spec ClusterSpec
	task Task
	rank int
	tr   *transport.GRPC
	ps   *transport.PSServer
}

// NewServer starts the endpoint of the task r names, like tf.distribute.Server(cluster_spec,
// job_name, task_index). A ps task serves its variable store on its cluster address (as
// distribute.ServeParameterServer does), so that an in-process cluster made of servers
// (TensorFlow's create_in_process_cluster) serves ParameterServerStrategy. It fails for a
// resolver without a cluster, for the evaluator (which takes no part in the transport) and
// without a token.
func NewServer(r Resolver, opts ServerOptions) (*Server, error) {
	spec := r.ClusterSpec()
	task := Task{r.TaskType(), r.TaskID()}
	if spec.Empty() {
		return nil, errors.New("cluster: no cluster to serve: set TF_CONFIG, run under srun, or use godist launch")
	}
	if rl := r.RPCLayer(); rl != "" && rl != "grpc" {
		return nil, fmt.Errorf("cluster: rpc layer %q is not supported (want grpc)", rl)
	}
	rank := spec.Rank(task)
	if rank < 0 {
		return nil, fmt.Errorf("cluster: task %s takes no part in the cluster's transport %v", task, spec)
	}
	token := opts.Token
	if token == "" {
		var err error
		if token, err = Token(); err != nil {
			return nil, err
		}
	}
	if task.Type == PS {
		return newPSServer(spec, task, rank, token, opts)
	}
	// The ps tasks serve variable stores, not collectives: the transport's ranks are the
	// other tasks, in ClusterSpec.Tasks order.
	var addrs []string
	rank = -1
	for _, t := range spec.Tasks() {
		if t.Type == PS {
			continue
		}
		if t == task {
			rank = len(addrs)
		}
		a, _ := spec.TaskAddress(t.Type, t.Index)
		addrs = append(addrs, a)
	}
	tr, err := transport.NewGRPC(rank, addrs, transport.GRPCOptions{Token: token, Listener: opts.Listener,
		BindAll: opts.BindAll || BindAllFromEnv(), NoSharedMemory: NoSharedMemoryFromEnv()})
	if err != nil {
		return nil, fmt.Errorf("cluster: server for task %s: %w", task, err)
	}
	return &Server{spec: spec, task: task, rank: rank, tr: tr}, nil
}

// newPSServer serves the variable store of ps task on its cluster address.
func newPSServer(spec ClusterSpec, task Task, rank int, token string, opts ServerOptions) (*Server, error) {
	lis := opts.Listener
	if lis == nil {
		addr, err := spec.TaskAddress(task.Type, task.Index)
		if err != nil {
			return nil, fmt.Errorf("cluster: server for task %s: %w", task, err)
		}
		if opts.BindAll || BindAllFromEnv() {
			_, port, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, fmt.Errorf("cluster: server for task %s: address %q: %w", task, addr, err)
			}
			addr = ":" + port
		}
		if lis, err = net.Listen("tcp", addr); err != nil {
			return nil, fmt.Errorf("cluster: server for task %s: %w", task, err)
		}
	}
	ps, err := transport.NewPSServer(lis, transport.PSServerOptions{Token: token, Task: task.Index, NoSharedMemory: NoSharedMemoryFromEnv()})
	if err != nil {
		lis.Close()
		return nil, fmt.Errorf("cluster: server for task %s: %w", task, err)
	}
	return &Server{spec: spec, task: task, rank: rank, ps: ps}, nil
}

// Transport returns the endpoint; its ranks follow ClusterSpec.Tasks without the ps tasks.
// It is nil for a ps task, whose server is its variable store.
func (s *Server) Transport() *transport.GRPC { return s.tr }

// Rank returns this task's rank in the transport.
func (s *Server) Rank() int { return s.rank }

// Task returns this server's task.
func (s *Server) Task() Task { return s.task }

// ClusterSpec returns the cluster.
func (s *Server) ClusterSpec() ClusterSpec { return s.spec }

// Addr returns the address the server listens on.
func (s *Server) Addr() net.Addr {
	if s.ps != nil {
		return s.ps.Addr()
	}
	return s.tr.Addr()
}

// Close stops the endpoint.
func (s *Server) Close() error {
	if s.ps != nil {
		return s.ps.Close()
	}
	return s.tr.Close()
}
