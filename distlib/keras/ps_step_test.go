package keras

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"unsafe"

	"godist/distlib/data"
	"godist/distlib/distribute"
	"godist/distlib/keras/layers"
	"godist/distlib/tensor"
)

// psRefCache is psWorkerCache as it was before the steps kept their memory: it keeps the
// tensors a function read.
type psRefCache struct {
	mu   sync.Mutex
	fit  uint64
	step uint64
	vals []*tensor.Tensor
}

func (c *psRefCache) get(fit uint64) []*tensor.Tensor {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fit != fit {
		return nil
	}
	return c.vals
}

func (c *psRefCache) put(fit, step uint64, vals []*tensor.Tensor) {
	c.mu.Lock()
	if c.fit != fit || step >= c.step {
		c.fit, c.step, c.vals = fit, step, vals
	}
	c.mu.Unlock()
}

// psTrainRef is the reference for psTrain: the worker's step as it was before it kept its
// memory (fresh values from every read, assigned into the local variables, read with
// Value, gradients from tape.Gradient), the same schedule of pushes and reads.
func (m *Model) psTrainRef(w *distribute.WorkerContext, svars, strain []*distribute.ShardedVariable, opt *distribute.PSOptimizer,
	vars []*tensor.Variable, pipeline bool, fit uint64, cache *psRefCache, batches []data.Element, seeds []uint64, metrics []*Metric) (*tensor.Tensor, error) {
	var train []*tensor.Variable
	for i, v := range vars {
		if m.params[i].trainable {
			train = append(train, v)
		}
	}
	sums := make([]float32, 2+2*len(metrics))
	var err error
	vals := cache.get(fit)
	if vals == nil {
		if vals, err = w.ReadAll(svars); err != nil {
			return nil, err
		}
	}
	var pending *distribute.PendingPush
	for k, el := range batches {
		for i, v := range vals {
			vars[i].Assign(v)
		}
		x, y := el[0], el[1]
		tape := tensor.NewGradientTape()
		pred := m.forwardVals(valuesOf(vars), x, true, seeds[k], nil)
		perEx := m.loss.PerExample(y, pred)
		st := m.shardStats(metrics, y, pred, perEx)
		loss := withPenalty(tensor.Scale(tensor.ReduceSum(perEx), 1/float32(x.Shape()[0])), m.regularization(valuesOf(vars)), st, x.Shape()[0])
		grads := tape.Gradient(loss, train)
		last := k == len(batches)-1
		switch {
		case pipeline:
			if pending != nil {
				if vals, err = pending.Wait(); err != nil {
					return nil, err
				}
				pending = nil
			}
			pending = w.ApplyGradientsAndReadAsync(opt, grads, strain, svars)
			if last {
				cache.put(fit, w.StepID(), vals)
				if vals, err = pending.Wait(); err == nil {
					cache.put(fit, w.StepID(), vals)
				}
			}
		case last:
			if vals, err = w.ApplyGradientsAndRead(opt, grads, strain, svars); err == nil {
				cache.put(fit, w.StepID(), vals)
			}
		default:
			vals, err = w.ApplyGradientsAndRead(opt, grads, strain, svars)
		}
		if err != nil {
			return nil, err
		}
		for i, v := range st {
			sums[i] += v
		}
	}
	return tensor.MustNew([]int{len(sums)}, sums), nil
}

// psStepModel is a model whose weights outweigh a small batch's activations many times
// over (a 784 x units kernel, 3.2 MB for 1024 units, for batches of 4), with an L2
// penalty on that kernel when penalty (then the step reads it twice, and its penalty's
// terms are kernel-sized). With conv, a convolution layer and a max pool come first (the
// course's CNN: its fused op writes into storage kept from batch to batch).
func psStepModel(units int, penalty, conv bool) *Model {
	var opts []layers.Option
	if penalty {
		opts = append(opts, layers.KernelRegularizer(layers.L2(1e-4)))
	}
	first := []layers.Layer{layers.Flatten(layers.InputShape(28, 28, 1))}
	if conv {
		first = []layers.Layer{layers.Conv2D(32, 3, layers.ReLU, layers.InputShape(28, 28, 1)), layers.MaxPooling2D(2), layers.Flatten()}
	}
	m := Sequential(append(first, layers.Dense(units, append([]layers.Option{layers.ReLU}, opts...)...), layers.Dense(10))...)
	m.Compile(Adam(1e-3), SparseCategoricalCrossentropy(true), "accuracy")
	return m
}

// psStepBatches returns n random batches of b MNIST-shaped examples (fixed seed).
func psStepBatches(n, b int) []data.Element {
	r := rand.New(rand.NewPCG(3, 4))
	out := make([]data.Element, n)
	for k := range out {
		x := make([]float32, b*28*28)
		for i := range x {
			x[i] = r.Float32()
		}
		y := make([]float32, b)
		for i := range y {
			y[i] = float32(r.IntN(10))
		}
		out[k] = data.Element{tensor.MustNew([]int{b, 28, 28, 1}, x), tensor.MustNew([]int{b}, y)}
	}
	return out
}

// psStepRig is a model placed on 2 ps tasks (each variable split in 2) with one
// in-process worker, and the scheduled functions of psTrain or psTrainRef on it.
type psStepRig struct {
	t     *testing.T
	m     *Model
	st    *psModel
	coord *distribute.ClusterCoordinator
	pool  *psStatePool
	cache *psWorkerCache
	ref   *psRefCache
	vars  []*tensor.Variable // psTrainRef's local variables
	fit   uint64
	step  uint64
}

func newPSStepRig(t *testing.T, first *tensor.Tensor, units int, penalty, conv bool) *psStepRig {
	t.Helper()
	s, _ := psStrategy(t, 2, 1, distribute.WithVariablePartitioner(distribute.NewFixedShardsPartitioner(2)))
	SetRandomSeed(7)
	var m *Model
	s.Scope(func() { m = psStepModel(units, penalty, conv) })
	m.ensureBuilt(first)
	seam, _ := psSeamOf(s)
	st, err := m.psSetup(seam)
	if err != nil {
		t.Fatal(err)
	}
	r := &psStepRig{t: t, m: m, st: st, coord: s.NewCoordinator(), pool: &psStatePool{prefix: "worker0/"},
		cache: &psWorkerCache{}, ref: &psRefCache{}, fit: psFitIDs.Add(1)}
	t.Cleanup(func() { r.coord.Close() })
	for i, v := range m.variables(0, false) {
		r.vars = append(r.vars, tensor.NewVariable("worker0/"+m.params[i].name, v.Value(), m.params[i].trainable))
	}
	return r
}

// run trains on batches as one scheduled function (psTrain, or psTrainRef when ref) and
// returns its statistics.
func (r *psStepRig) run(batches []data.Element, pipeline, ref bool) []float32 {
	r.t.Helper()
	seeds := make([]uint64, len(batches))
	for k := range seeds {
		r.step++
		seeds[k] = mix(99, r.step)
	}
	m, st := r.m, r.st
	metrics := m.compiledMetrics()
	rv := r.coord.Schedule(func(w *distribute.WorkerContext) (*tensor.Tensor, error) {
		if ref {
			return m.psTrainRef(w, st.svars, st.train, st.opt, r.vars, pipeline, r.fit, r.ref, batches, seeds, metrics)
		}
		return m.psTrain(w, st.svars, st.train, st.opt, r.pool, psTrainMode{pipeline: pipeline, fit: r.fit, cache: r.cache}, batches, seeds, metrics)
	})
	v, err := rv.Fetch()
	if err != nil {
		r.t.Fatal(err)
	}
	return append([]float32(nil), v.Data()...)
}

// pushOther pushes a gradient of 0.01 for every trainable variable from a scheduled
// function of its own: what another worker's step does between two of this worker's.
func (r *psStepRig) pushOther() {
	r.t.Helper()
	st := r.st
	rv := r.coord.Schedule(func(w *distribute.WorkerContext) (*tensor.Tensor, error) {
		grads := make([]*tensor.Tensor, len(st.train))
		for i, v := range st.train {
			grads[i] = tensor.Fill(0.01, v.Shape()...)
		}
		return nil, w.ApplyGradients(st.opt, grads, st.train)
	})
	if _, err := rv.Fetch(); err != nil {
		r.t.Fatal(err)
	}
}

// values reads the model's variables from the ps.
func (r *psStepRig) values() [][]float32 {
	var out [][]float32
	for _, v := range r.m.psRead(r.st) {
		out = append(out, append([]float32(nil), v.Data()...))
	}
	return out
}

// The worker's steps, computing in kept buffers (values, gradients, and the CNN's pooled
// output), train exactly as the reference step with fresh tensors does, for a dense model
// and for the course's CNN: the same statistics and the same ps values after every
// scheduled function, synchronous and pipelined, 3 batches per function. Between two
// functions another worker pushes: a function starts from the values its worker's last
// push read (through the worker's cache), as the reference does, not from a read of its
// own (which would see that push).
func TestPSTrainKeptBuffersMatchReference(t *testing.T) {
	batches := psStepBatches(12, 4)
	for _, tc := range []struct {
		name    string
		units   int
		penalty bool
		conv    bool
	}{{"dense 256 with L2", 256, true, false}, {"cnn", 64, false, true}} {
		for _, pipeline := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/pipeline=%v", tc.name, pipeline), func(t *testing.T) {
				rig := func() *psStepRig { return newPSStepRig(t, batches[0][0], tc.units, tc.penalty, tc.conv) }
				got, want := rig(), rig()
				if a, b := got.values(), want.values(); !sameValues(a, b) {
					t.Fatal("the two models start from different values")
				}
				for f := 0; f+3 <= len(batches); f += 3 {
					if f > 0 {
						got.pushOther()
						want.pushOther()
					}
					gs, ws := got.run(batches[f:f+3], pipeline, false), want.run(batches[f:f+3], pipeline, true)
					if fmt.Sprint(gs) != fmt.Sprint(ws) {
						t.Errorf("function %d: statistics %v, reference %v", f/3, gs, ws)
					}
					a, b := got.values(), want.values()
					if !sameValues(a, b) {
						t.Fatalf("function %d: the ps values differ from the reference's (first: %v vs %v)", f/3, a[0][:4], b[0][:4])
					}
				}
				// Training moved the variables (the comparison is not of untouched values).
				if start := rig().values(); sameValues(start, got.values()) {
					t.Error("the ps values did not change over 4 scheduled functions")
				}
			})
		}
	}
}

func sameValues(a, b [][]float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if len(a[i]) != len(b[i]) {
			return false
		}
		for j := range a[i] {
			if a[i][j] != b[i][j] {
				return false
			}
		}
	}
	return true
}

// The steps keep their memory: a scheduled function reuses the state (value and gradient
// buffers) of the one before, and a step allocates about 3 times the model's weights less
// than the reference step (fresh values per read, a copy into the local variables, fresh
// gradients). The bytes are of this whole process, the ps tasks' and the transport's
// included, the same for both.
func TestPSTrainKeepsItsBuffers(t *testing.T) {
	batches := psStepBatches(6, 4)
	for _, pipeline := range []bool{false, true} {
		t.Run(fmt.Sprintf("pipeline=%v", pipeline), func(t *testing.T) {
			r := newPSStepRig(t, batches[0][0], 1024, false, false)
			paramBytes := 0
			for _, p := range r.m.params {
				n := 4
				for _, d := range p.shape {
					n *= d
				}
				paramBytes += n
			}
			r.run(batches, pipeline, false) // makes the state
			if len(r.pool.free) != 1 {
				t.Fatalf("%d states kept after one function, want 1", len(r.pool.free))
			}
			state := r.pool.free[0]
			sets := 1
			if pipeline {
				sets = 2
			}
			addrs := state.addresses(sets)
			// The fewest bytes per step over a few rounds (the transport's buffer pools
			// make some rounds allocate more).
			perStep := func(ref bool) float64 {
				const funcs, rounds = 3, 3
				least := math.Inf(1)
				for range rounds {
					var before, after runtime.MemStats
					runtime.GC()
					runtime.ReadMemStats(&before)
					for range funcs {
						r.run(batches, pipeline, ref)
					}
					runtime.ReadMemStats(&after)
					least = min(least, float64(after.TotalAlloc-before.TotalAlloc)/float64(funcs*len(batches)))
				}
				return least
			}
			got, ref := perStep(false), perStep(true)
			t.Logf("bytes allocated per step (whole process): kept buffers %.0f, reference %.0f; weights %d", got, ref, paramBytes)
			if len(r.pool.free) != 1 || r.pool.free[0] != state {
				t.Fatalf("the functions after the first did not reuse its state (%d kept)", len(r.pool.free))
			}
			if a := state.addresses(sets); fmt.Sprint(a) != fmt.Sprint(addrs) {
				t.Errorf("the state's buffers moved: %v, were %v", a, addrs)
			}
			// The reference allocates the weights about 3 times a step more (the values
			// read, their copy into the variables, the gradients; measured 2.95 to 3.2); the
			// rest, the same for both, is the transport's (its messages) and the
			// activations. A step that allocated one set of buffers anew would save about
			// twice the weights.
			if saved := (ref - got) / float64(paramBytes); saved < 2.6 {
				t.Errorf("a step allocates %.0f bytes, the reference step %.0f: saves %.2f times the weights' %d bytes, want at least 2.6 (values, their copy and gradients: 3)", got, ref, saved, paramBytes)
			}
		})
	}
}

// addresses returns where the first sets of st's buffers lie.
func (st *psStepState) addresses(sets int) []uintptr {
	var out []uintptr
	for s := range sets {
		for _, t := range st.vals[s] {
			out = append(out, uintptr(unsafe.Pointer(unsafe.SliceData(t.Data()))))
		}
		for _, g := range st.grads[s] {
			out = append(out, uintptr(unsafe.Pointer(unsafe.SliceData(g))))
		}
	}
	return out
}
