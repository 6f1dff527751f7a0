// Command ps measures Keras Fit under ParameterServerStrategy as it runs on a cluster:
// the ps task and the worker tasks are separate processes (this binary run again in a
// role, each worker with GOMAXPROCS=1), the coordinator is this process. It reports the
// training throughput with 2 workers against 1 (wall examples per second over timed
// windows of one long epoch after a warm-up, counted from the ps's applied updates; every
// worker trains batches of -batch examples and the rate counts all workers' examples) and
// the bytes each training step moves to and from the ps (the ps's transport counters), in
// gRPC messages and through the workers' shared memory (GODIST_SHARED_MEMORY=0 sends
// every value in the messages).
//
//	go run ./bench/ps -data ../shared/data/mnist -windows 5 -window 3s [-pipeline=true]
//
// With -profile DIR every process writes a CPU profile of the measured windows to DIR
// (ps-N.pprof, worker-N-I.pprof, coordinator-N.pprof for N workers); the ps and the workers
// also write the time spent waiting for mutexes (ps-N.mutex.pprof, ...).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"godist/bench/internal/peer"
	"godist/distlib/cluster"
	"godist/distlib/data"
	"godist/distlib/datasets"
	"godist/distlib/distribute"
	"godist/distlib/keras"
	"godist/distlib/keras/layers"
	"godist/distlib/tensor"
	"godist/distlib/transport"

	"godist/internal/testdata"
)

const (
	token   = "bench-ps"
	roleEnv = "GODIST_BENCH_PS_ROLE" // "ps", or "worker <i> <jobs json>"
	profEnv = "GODIST_BENCH_PS_PROFILE"
)

var (
	model  = flag.String("model", "cnn", "cnn: the peer's MNIST CNN (Conv2D 32 3x3, MaxPool 2, Dense 64, Dense 10); dense: 784-hidden-10")
	hidden = flag.Int("hidden", 128, "units of the hidden layer (dense model)")
	pipe   = flag.Bool("pipeline", false, "keras.PSPipeline: overlap each push with the next step (stale reads, at most 1 step)")
	tail   = flag.Duration("tail", 2*time.Second, "training after the last window (so that a job run beside this one times its windows against it)")
)

func main() {
	dir := flag.String("data", testdata.MNISTDir(), "directory with the MNIST t10k files (default $GODIST_DATA_DIR, else ../shared/data/mnist beside the repository)")
	batch := flag.Int("batch", 64, "examples per batch (per worker step)")
	spe := flag.Int("steps-per-execution", 4, "batches per scheduled function")
	windows := flag.Int("windows", 5, "timed windows per configuration")
	window := flag.Duration("window", 3*time.Second, "length of a timed window")
	warmup := flag.Int("warmup-steps", 16, "training steps before the timed windows")
	workerList := flag.String("workers", "1,2", "worker counts to measure")
	profile := flag.String("profile", "", "directory for CPU profiles of every process (measured windows)")
	flag.Parse()
	if role := os.Getenv(roleEnv); role != "" {
		if err := serveRole(role); err != nil {
			fmt.Println("ERROR", err)
			os.Exit(2)
		}
		return
	}
	tr, te, err := datasets.LoadMNIST(datasets.Dir(*dir), datasets.Split(8000))
	must(err)
	scale := func(el data.Element) data.Element { return data.Element{tensor.Scale(el[0], 1.0/255), el[1]} }
	train := tr.Dataset().Map(scale).Cache().Batch(*batch, true)
	test := te.Dataset().Map(scale).Batch(500, false)
	if *profile != "" {
		must(os.MkdirAll(*profile, 0o755))
	}
	fmt.Printf("MNIST %s model, batch %d per worker step, steps_per_execution %d, %d windows of %v after %d warm-up steps and 1 s; ps and workers as processes (workers GOMAXPROCS=1), coordinator GOMAXPROCS=%d, %d CPUs, pipeline %v\n",
		*model, *batch, *spe, *windows, *window, *warmup, runtime.GOMAXPROCS(0), runtime.NumCPU(), *pipe)
	var base float64
	for _, f := range strings.Split(*workerList, ",") {
		workers, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || workers < 1 {
			must(fmt.Errorf("-workers %q: want a list of positive counts", *workerList))
		}
		prof := ""
		if *profile != "" {
			prof = filepath.Join(*profile, fmt.Sprintf("%%s-%d.pprof", workers))
		}
		r := measure(workers, *batch, *spe, *windows, *window, *warmup, prof, train, test)
		if base == 0 {
			base = r.median
		}
		fmt.Printf("workers %d: median %.0f examples/s (%.2fx), windows %s, test accuracy %.3f, %d params, %d B/step in messages (%d to the ps + %d from it) and %d through shared memory (%d + %d), %.1f ps reads and %.1f updates per step\n",
			workers, r.median, r.median/base, r.windows, r.acc, r.params, r.bytesIn+r.bytesOut, r.bytesIn, r.bytesOut,
			r.sharedIn+r.sharedOut, r.sharedIn, r.sharedOut, r.reads, r.updates)
	}
}

type result struct {
	median            float64
	windows           string
	acc               float64
	params            int
	bytesIn, bytesOut int64
	sharedIn          int64
	sharedOut         int64
	reads, updates    float64
}

// measure starts a ps process and n worker processes and trains through them.
func measure(n, batch, spe, windows int, window time.Duration, warmup int, prof string, train, test *data.Dataset) result {
	profOf := func(name string) string {
		if prof == "" {
			return ""
		}
		return fmt.Sprintf(prof, name)
	}
	psAddr, stopPS := startRole("ps", profOf("ps"), false)
	defer stopPS()
	jobs := map[string][]string{"chief": {"127.0.0.1:1"}, "ps": {psAddr}}
	for i := 0; i < n; i++ {
		jobs["worker"] = append(jobs["worker"], fmt.Sprintf("127.0.0.1:%d", 2+i))
	}
	for i := 0; i < n; i++ {
		b, _ := json.Marshal(jobs)
		addr, stop := startRole(fmt.Sprintf("worker %d %s", i, b), profOf(fmt.Sprintf("worker%d", i)), true)
		defer stop()
		jobs["worker"][i] = addr
	}
	spec, err := cluster.NewClusterSpec(jobs)
	must(err)
	r, err := cluster.NewSimpleClusterResolver(spec, "chief", 0, "grpc")
	must(err)
	s := distribute.NewParameterServerStrategy(r, distribute.WithClusterToken(token), distribute.WithRemoteWorkers())
	defer s.Close()
	var m *keras.Model
	s.Scope(func() { m = build() })
	ps, err := transport.DialPS(psAddr, transport.PSClientOptions{Token: token, Caller: 0})
	must(err)
	defer ps.Close()

	stats := func() transport.PSStats {
		st, err := ps.Stats(context.Background())
		must(err)
		return st
	}
	m.Fit(train, keras.Epochs(1), keras.Verbose(0), keras.StepsPerEpoch(warmup), keras.StepsPerExecution(spe), keras.PSPipeline(*pipe))
	warm := stats()
	perStep := warm.Applied / int64(warmup) // updates per training step (one per trainable variable)
	// One long epoch that a callback stops once the windows are timed and the tail has
	// passed; the windows are timed from the ps's counters while it runs, so no epoch end (a
	// barrier) falls inside. The tail keeps this job training while a job run beside it (the
	// co-located pairs of run.sh, which start a fraction of a second apart) times its own
	// last window: a job that stopped first would leave the other's last window the whole
	// machine. (An epoch sized from the warm-up's rate, as before, ended early in the pairs:
	// 1 or 2 windows of 3, the later ones with the partner gone.)
	const steps = 1 << 20
	var stopNow atomic.Bool
	stopper := &keras.LambdaCallback{OnTrainBatchEnd: func(int, keras.Logs) {
		if stopNow.Load() {
			m.StopTraining = true
		}
	}}
	var stopProf func()
	if prof != "" {
		f, err := os.Create(profOf("coordinator"))
		must(err)
		must(pprof.StartCPUProfile(f))
		stopProf = func() { pprof.StopCPUProfile(); f.Close() }
	}
	type sample struct {
		at time.Time
		st transport.PSStats
	}
	samples := make(chan []sample, 1)
	fitDone := make(chan struct{})
	go func() {
		var ss []sample
		defer func() { samples <- ss }()
		select {
		case <-time.After(time.Second): // ramp up: every worker busy
		case <-fitDone:
			return
		}
		ss = append(ss, sample{time.Now(), stats()})
		for len(ss) <= windows {
			select {
			case <-time.After(window):
				ss = append(ss, sample{time.Now(), stats()})
			case <-fitDone:
				return
			}
		}
		select {
		case <-time.After(*tail):
		case <-fitDone:
		}
		stopNow.Store(true)
	}()
	m.Fit(train, keras.Epochs(1), keras.Verbose(0), keras.StepsPerEpoch(steps), keras.StepsPerExecution(spe), keras.PSPipeline(*pipe), keras.Callbacks(stopper))
	close(fitDone)
	ss := <-samples
	if stopProf != nil {
		stopProf()
	}
	if len(ss) < 2 {
		must(fmt.Errorf("%d workers: training of %d steps ended before the first window", n, steps))
	}
	var rates []float64
	var parts []string
	for i := 1; i < len(ss); i++ {
		done := float64(ss[i].st.Applied-ss[i-1].st.Applied) / float64(perStep)
		r := done * float64(batch) / ss[i].at.Sub(ss[i-1].at).Seconds()
		rates = append(rates, r)
		parts = append(parts, fmt.Sprintf("%.0f", r))
	}
	sort.Float64s(rates)
	median := rates[len(rates)/2]
	if len(rates)%2 == 0 {
		median = (rates[len(rates)/2-1] + median) / 2
	}
	first, last := ss[0].st, ss[len(ss)-1].st
	measured := (last.Applied - first.Applied) / perStep
	return result{median: median, windows: strings.Join(parts, " "),
		acc: m.Evaluate(test, keras.Verbose(0))["accuracy"], params: m.CountParams(),
		bytesIn: (last.BytesIn - first.BytesIn) / measured, bytesOut: (last.BytesOut - first.BytesOut) / measured,
		sharedIn: (last.SharedIn - first.SharedIn) / measured, sharedOut: (last.SharedOut - first.SharedOut) / measured,
		reads: float64(last.Reads-first.Reads) / float64(measured), updates: float64(last.Applied-first.Applied) / float64(measured)}
}

// build makes the model, with the same names in every process.
func build() *keras.Model {
	keras.ClearSession()
	keras.SetRandomSeed(1)
	var m *keras.Model
	if *model == "dense" {
		m = keras.Sequential(layers.Flatten(layers.InputShape(28, 28, 1)), layers.Dense(*hidden, layers.ReLU), layers.Dense(10))
	} else {
		m = peer.CNN()
	}
	m.Compile(keras.Adam(1e-3), keras.SparseCategoricalCrossentropy(true), "accuracy")
	return m
}

// startRole runs this binary in role and returns the address it serves on and a
// function that stops it (closing its stdin ends it after it wrote its profile).
func startRole(role, prof string, oneCPU bool) (string, func()) {
	cmd := exec.Command(os.Args[0], os.Args[1:]...)
	cmd.Env = append(os.Environ(), roleEnv+"="+role, profEnv+"="+prof)
	if oneCPU {
		cmd.Env = append(cmd.Env, "GOMAXPROCS=1")
	}
	stdin, err := cmd.StdinPipe()
	must(err)
	out, err := cmd.StdoutPipe()
	must(err)
	cmd.Stderr = os.Stderr
	must(cmd.Start())
	stop := func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if l := sc.Text(); strings.HasPrefix(l, "ADDR ") || strings.HasPrefix(l, "ERROR ") {
				lines <- l
			}
		}
	}()
	select {
	case l := <-lines:
		if !strings.HasPrefix(l, "ADDR ") {
			stop()
			must(fmt.Errorf("role %q: %s", role, l))
		}
		return strings.TrimPrefix(l, "ADDR "), stop
	case <-time.After(30 * time.Second):
		stop()
		must(fmt.Errorf("role %q: no address within 30s", role))
	}
	return "", nil
}

// serveRole serves a ps or worker task until stdin closes.
func serveRole(role string) error {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	f := strings.SplitN(role, " ", 3)
	switch f[0] {
	case "ps":
		spec, _ := cluster.NewClusterSpec(map[string][]string{"ps": {lis.Addr().String()}})
		r, _ := cluster.NewSimpleClusterResolver(spec, "ps", 0, "grpc")
		srv, err := distribute.ServeParameterServer(r, lis, distribute.WithClusterToken(token))
		if err != nil {
			return err
		}
		defer srv.Close()
	case "worker":
		var jobs map[string][]string
		if len(f) != 3 {
			return fmt.Errorf("role %q: want worker <index> <jobs>", role)
		}
		if err := json.Unmarshal([]byte(f[2]), &jobs); err != nil {
			return err
		}
		i, _ := strconv.Atoi(f[1])
		spec, err := cluster.NewClusterSpec(jobs)
		if err != nil {
			return err
		}
		r, err := cluster.NewSimpleClusterResolver(spec, "worker", i, "grpc")
		if err != nil {
			return err
		}
		build().RegisterPSTrainStep()
		t, err := distribute.ServeWorker(r, lis, distribute.WithClusterToken(token))
		if err != nil {
			return err
		}
		defer t.Close()
	default:
		return fmt.Errorf("unknown role %q", role)
	}
	if p := os.Getenv(profEnv); p != "" {
		f, err := os.Create(p)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
		// The time calls waited for a variable's lock (and other mutexes), beside it.
		runtime.SetMutexProfileFraction(1)
		defer func() {
			if m, err := os.Create(strings.TrimSuffix(p, ".pprof") + ".mutex.pprof"); err == nil {
				pprof.Lookup("mutex").WriteTo(m, 0)
				m.Close()
			}
		}()
	}
	fmt.Println("ADDR", lis.Addr().String())
	io.Copy(io.Discard, os.Stdin) // until the coordinator closes it
	return nil
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench/ps:", err)
		os.Exit(1)
	}
}
