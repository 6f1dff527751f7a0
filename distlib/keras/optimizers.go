package keras

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"godist/distlib/distribute"
	"godist/distlib/optim"
	"godist/distlib/tensor"
)

// Optimizer updates variables from their gradients, like tf.keras.optimizers.Optimizer.
// Make one with SGD, Adam or RMSprop. Its state (momenta, moving averages) is kept per
// variable, so every replica copy of a mirrored variable gets identical updates.
type Optimizer struct {
	name       string
	lr         float64
	schedule   LearningRateSchedule
	iterations int64
	hp         hyper
	nslots     int
	spec       optim.Spec          // the update rule (its LearningRate is o.lr; a step uses its own)
	strategy   distribute.Strategy // current when the optimizer was made (its scope's)

	mu    sync.Mutex
	slots map[*tensor.Variable]*slotState

	pairSteps atomic.Int64 // updates runMirroredPair ran, which tests read
}

// slotState is an optimizer's state for one variable: its step count and its slots
// (momenta, moving averages). Counting steps per variable lets the replicas of a custom
// loop apply their (all-reduced) gradients to their own copies concurrently.
type slotState struct {
	t     int64
	slots [][]float32
	// borrowed: slots are another replica's copy's slots, shared while the two copies are
	// updated as a mirrored pair (runMirroredPair); unshare gives the state its own again.
	borrowed bool
}

// borrow makes from's slots st's too (st's own, if any, are dropped).
func (st *slotState) borrow(from *slotState) {
	copy(st.slots, from.slots)
	st.borrowed = true
}

// unshare gives st slots of its own (a copy of the values) if it borrowed another state's.
func (st *slotState) unshare() {
	if !st.borrowed {
		return
	}
	for k, s := range st.slots {
		st.slots[k] = append([]float32(nil), s...)
	}
	st.borrowed = false
}

type hyper struct {
	momentum, beta1, beta2, epsilon, rho float64
	nesterov                             bool
}

// OptimizerOption sets an optional hyperparameter of an optimizer.
type OptimizerOption interface{ applyOptimizer(*Optimizer) error }

type optimizerOption func(*Optimizer) error

func (f optimizerOption) applyOptimizer(o *Optimizer) error { return f(o) }

// Momentum sets SGD's or RMSprop's momentum (default 0).
func Momentum(m float64) OptimizerOption {
	return optimizerOption(func(o *Optimizer) error {
		if m < 0 || m >= 1 || o.name == "Adam" {
			return fmt.Errorf("Momentum(%g): needs 0 <= momentum < 1 and SGD or RMSprop", m)
		}
		o.hp.momentum = m
		return nil
	})
}

// Nesterov turns on Nesterov momentum for SGD.
func Nesterov(on bool) OptimizerOption {
	return optimizerOption(func(o *Optimizer) error {
		if o.name != "SGD" {
			return fmt.Errorf("Nesterov is an SGD option, not a %s one", o.name)
		}
		o.hp.nesterov = on
		return nil
	})
}

// Beta1 sets Adam's first-moment decay (default 0.9).
func Beta1(b float64) OptimizerOption {
	return optimizerOption(func(o *Optimizer) error {
		if b < 0 || b >= 1 || o.name != "Adam" {
			return fmt.Errorf("Beta1(%g): needs 0 <= beta1 < 1 and Adam", b)
		}
		o.hp.beta1 = b
		return nil
	})
}

// Beta2 sets Adam's second-moment decay (default 0.999).
func Beta2(b float64) OptimizerOption {
	return optimizerOption(func(o *Optimizer) error {
		if b < 0 || b >= 1 || o.name != "Adam" {
			return fmt.Errorf("Beta2(%g): needs 0 <= beta2 < 1 and Adam", b)
		}
		o.hp.beta2 = b
		return nil
	})
}

// Rho sets RMSprop's discounting factor (default 0.9).
func Rho(r float64) OptimizerOption {
	return optimizerOption(func(o *Optimizer) error {
		if r < 0 || r >= 1 || o.name != "RMSprop" {
			return fmt.Errorf("Rho(%g): needs 0 <= rho < 1 and RMSprop", r)
		}
		o.hp.rho = r
		return nil
	})
}

// Epsilon sets the small constant Adam and RMSprop add for numerical stability (default 1e-7).
func Epsilon(e float64) OptimizerOption {
	return optimizerOption(func(o *Optimizer) error {
		if e <= 0 || o.name == "SGD" {
			return fmt.Errorf("Epsilon(%g): needs epsilon > 0 and Adam or RMSprop", e)
		}
		o.hp.epsilon = e
		return nil
	})
}

// Schedule makes the learning rate follow s (the lr argument is then ignored), like passing
// a LearningRateSchedule as Keras' learning_rate.
func Schedule(s LearningRateSchedule) OptimizerOption {
	return optimizerOption(func(o *Optimizer) error {
		if s == nil {
			return fmt.Errorf("Schedule(nil)")
		}
		o.schedule = s
		return nil
	})
}

func newOptimizer(name string, lr, defaultLR float64, opts []OptimizerOption) *Optimizer {
	o := &Optimizer{name: name, lr: lr,
		hp:       hyper{beta1: 0.9, beta2: 0.999, epsilon: 1e-7, rho: 0.9},
		slots:    map[*tensor.Variable]*slotState{},
		strategy: distribute.GetStrategy()}
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt.applyOptimizer(o); err != nil {
			panic(fmt.Errorf("%w: %s: %v", ErrInvalidArgument, name, err))
		}
	}
	switch {
	case lr < 0 || math.IsNaN(lr) || math.IsInf(lr, 0):
		panic(fmt.Errorf("%w: %s learning rate %g must be positive (0 selects the Keras default %g)", ErrInvalidArgument, name, lr, defaultLR))
	case lr == 0:
		o.lr = defaultLR
	}
	o.spec = o.specAt(o.lr)
	if err := o.spec.Validate(); err != nil {
		panic(fmt.Errorf("%w: %s: %v", ErrInvalidArgument, name, err))
	}
	o.nslots = o.spec.Slots()
	return o
}

// specAt returns the optimizer's update rule with learning rate lr.
func (o *Optimizer) specAt(lr float64) optim.Spec {
	switch o.name {
	case "SGD":
		return optim.NewSGD(lr, o.hp.momentum, o.hp.nesterov)
	case "Adam":
		return optim.NewAdam(lr, o.hp.beta1, o.hp.beta2, o.hp.epsilon)
	}
	return optim.NewRMSprop(lr, o.hp.rho, o.hp.momentum, o.hp.epsilon)
}

// SGD returns gradient descent with optional Momentum and Nesterov, like
// tf.keras.optimizers.SGD. An lr of 0 selects Keras' default 0.01.
func SGD(lr float64, opts ...OptimizerOption) *Optimizer {
	return newOptimizer("SGD", lr, 0.01, opts)
}

// Adam returns the Adam optimizer (Beta1 0.9, Beta2 0.999, Epsilon 1e-7 unless set), like
// tf.keras.optimizers.Adam. An lr of 0 selects Keras' default 0.001.
func Adam(lr float64, opts ...OptimizerOption) *Optimizer {
	return newOptimizer("Adam", lr, 0.001, opts)
}

// RMSprop returns the RMSprop optimizer (Rho 0.9, Momentum 0, Epsilon 1e-7 unless set), like
// tf.keras.optimizers.RMSprop. An lr of 0 selects Keras' default 0.001.
func RMSprop(lr float64, opts ...OptimizerOption) *Optimizer {
	return newOptimizer("RMSprop", lr, 0.001, opts)
}

// Name returns "SGD", "Adam" or "RMSprop".
func (o *Optimizer) Name() string { return o.name }

// Iterations returns the number of steps applied so far (replicas applying one step to
// their own copies of the variables count once).
func (o *Optimizer) Iterations() int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.iterations
}

// LearningRate returns the learning rate the next step will use.
func (o *Optimizer) LearningRate() float64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.currentLR()
}

func (o *Optimizer) currentLR() float64 {
	if o.schedule != nil {
		return o.schedule.At(o.iterations)
	}
	return o.lr
}

// SetLearningRate sets a constant learning rate, replacing any schedule. It panics when lr
// is negative or not finite.
func (o *Optimizer) SetLearningRate(lr float64) {
	if lr < 0 || math.IsNaN(lr) || math.IsInf(lr, 0) {
		panic(fmt.Errorf("%w: SetLearningRate(%g): the learning rate must be finite and >= 0", ErrInvalidArgument, lr))
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.lr, o.schedule = lr, nil
}

// ApplyGradients updates vars[i] with grads[i] and counts one step, like Keras'
// optimizer.apply_gradients(zip(grads, vars)). A nil gradient leaves its variable alone.
//
// Called inside strategy.Run (a custom training loop), it aggregates as TensorFlow does:
// each replica hands in the gradients of its part of the batch, the strategy sums them
// across all replicas in sync (and workers), and every copy of the variables gets the same
// update. Gradients the replica function already reduced with ctx.AllReduceList are not
// summed again.
func (o *Optimizer) ApplyGradients(grads []*tensor.Tensor, vars []*tensor.Variable) (err error) {
	defer recoverErr("ApplyGradients", &err)
	if len(grads) != len(vars) {
		return fmt.Errorf("%w: ApplyGradients got %d gradients for %d variables", ErrInvalidArgument, len(grads), len(vars))
	}
	apply := func(gs []*tensor.Tensor) error {
		return o.applyReplicas([][]*tensor.Tensor{gs}, [][]*tensor.Variable{vars})
	}
	// Inside a Run the strategy sums the replicas' gradients and calls apply per copy. The
	// strategy is the one the optimizer was made under (as in Keras), else the current one
	// (an open scope, or the strategy whose replicas run).
	s, cur := o.strategy, distribute.GetStrategy()
	if s == nil || s == distribute.Strategy(distribute.NewDefaultStrategy()) {
		s = cur
	} else if cur != s && distribute.HasStrategy() {
		return fmt.Errorf("%w: ApplyGradients under %s with an optimizer made in the scope of %s: make the optimizer inside the strategy's Scope, with the model",
			ErrInvalidArgument, cur.Name(), s.Name())
	}
	inRun, err := o.applyThrough(s, grads, vars, apply)
	if inRun {
		return err
	}
	return apply(grads)
}

// applyReplicas applies one step: grads[r][i] to vars[r][i] for every replica copy r, with
// one learning rate and one iteration count for all.
func (o *Optimizer) applyReplicas(grads [][]*tensor.Tensor, vars [][]*tensor.Variable) error {
	terms := make([][]gradTerms, len(grads))
	for r := range grads {
		terms[r] = make([]gradTerms, len(grads[r]))
		for i, g := range grads[r] {
			if g != nil {
				terms[r][i] = gradTerms{g.Data()}
			}
		}
	}
	return o.applyTerms(terms, vars)
}

// gradTerms is a variable's gradient as terms to add in order (the workers' gradients read
// where they lie: distribute.GradientBucketer.WaitTerms); one term is the gradient itself,
// none is no gradient.
type gradTerms [][]float32

// applyTerms is applyReplicas with every gradient given as its terms: the rule sums them as
// it reads them (optim.Spec.ApplyTerms).
func (o *Optimizer) applyTerms(grads [][]gradTerms, vars [][]*tensor.Variable) error {
	if len(grads) != len(vars) {
		return fmt.Errorf("%w: gradients for %d replicas, variables for %d", ErrInvalidArgument, len(grads), len(vars))
	}
	for r := range vars {
		if len(grads[r]) != len(vars[r]) {
			return fmt.Errorf("%w: ApplyGradients got %d gradients for %d variables", ErrInvalidArgument, len(grads[r]), len(vars[r]))
		}
		for i, v := range vars[r] {
			if v == nil {
				return fmt.Errorf("%w: ApplyGradients variable %d is nil", ErrInvalidArgument, i)
			}
			for _, term := range grads[r][i] {
				if n := v.Size(); len(term) != n {
					return fmt.Errorf("%w: gradient %d has %d values, variable %s has shape %v (%d values)", ErrShape, i, len(term), v.Name(), v.Shape(), n)
				}
			}
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	// Count the step and pick each variable's learning rate first; then update the replica
	// copies, each on its own goroutine when there are several (their states are disjoint).
	ups := make([][]termUpdate, len(vars))
	for r := range vars {
		ups[r] = make([]termUpdate, 0, len(vars[r]))
		for i, v := range vars[r] {
			g := grads[r][i]
			if len(g) == 0 {
				continue
			}
			st := o.slots[v]
			if st == nil {
				st = &slotState{slots: make([][]float32, o.nslots)}
				for k := range st.slots {
					st.slots[k] = make([]float32, len(g[0]))
				}
				o.slots[v] = st
			}
			lr := o.lr
			if o.schedule != nil {
				lr = o.schedule.At(st.t)
			}
			st.t++
			if st.t > o.iterations {
				o.iterations = st.t
			}
			ups[r] = append(ups[r], termUpdate{v, g, st, lr})
		}
	}
	apply := func(us []termUpdate) {
		for _, u := range us {
			// The variable's value is immutable: the update goes into its new value.
			spec := u.rule(o.spec)
			u.v.UpdateData(func(w []float32) { spec.ApplyTerms(w, u.g, u.st.slots, u.st.t) })
		}
	}
	if len(ups) == 2 && mirroredPair(ups[0], ups[1]) {
		// Two replicas' copies of the same variables, updated with the same terms from the
		// same state: each goroutine runs the rule over half of every large variable once
		// and leaves the result in both copies (optim.Spec.ApplyTermsMirrored), instead of
		// each running it over all of its own copy.
		o.pairSteps.Add(1)
		// The two copies' slots hold the same values, and the pair's update writes the same
		// values into both: the second copy of a large variable borrows the first's slots
		// (one copy of Adam's moments read and written instead of two), until a step that
		// does not update the copies as a pair gives it its own again (unshare).
		for i, u := range ups[1] {
			if u.v.Size() >= mirroredMin {
				u.st.borrow(ups[0][i].st)
			}
		}
		return runMirroredPair(len(ups[0]), func(r, i int) (*tensor.Variable, int) { return ups[r][i].v, ups[r][i].v.Size() },
			func(r, i int, w []float32) { // a small variable: each copy on its own
				u := ups[r][i]
				spec := u.rule(o.spec)
				spec.ApplyTerms(w, u.g, u.st.slots, u.st.t)
			},
			func(r, i, lo, hi int, w, other []float32) {
				u, o2 := ups[r][i], ups[1-r][i]
				spec := u.rule(o.spec)
				spec.ApplyTermsMirrored(w[lo:hi], other[lo:hi], subTerms(u.g, lo, hi), subTerms(u.st.slots, lo, hi), subTerms(o2.st.slots, lo, hi), u.st.t)
			})
	}
	for _, us := range ups {
		for _, u := range us {
			u.st.unshare()
		}
	}
	if len(ups) == 1 {
		apply(ups[0])
		return nil
	}
	var wg sync.WaitGroup
	for _, us := range ups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			apply(us)
		}()
	}
	wg.Wait()
	return nil
}

// mirroredMin is the size from which two replicas' copies of a variable share one update
// (runMirroredPair); below it, meeting costs more than the half update saves.
const mirroredMin = 4096

// termUpdate is one variable's update in a step of applyTerms: its terms, slot state and
// learning rate.
type termUpdate struct {
	v  *tensor.Variable
	g  gradTerms
	st *slotState
	lr float64
}

// rule returns the optimizer's rule with this update's learning rate (a schedule's, at the
// variable's step).
func (u termUpdate) rule(base optim.Spec) optim.Spec {
	base.LearningRate = u.lr
	return base
}

// mirroredPair reports whether two replicas' update lists are the same updates of two
// copies: the same number, and for each the same terms (the same memory), the same step and
// learning rate, copies of one size with slot states of their own.
func mirroredPair(a, b []termUpdate) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		ua, ub := a[i], b[i]
		if ua.v == ub.v || ua.st == ub.st || ua.v.Size() != ub.v.Size() || ua.st.t != ub.st.t || ua.lr != ub.lr ||
			len(ua.g) != len(ub.g) || len(ua.st.slots) != len(ub.st.slots) {
			return false
		}
		for k := range ua.g {
			if len(ua.g[k]) != len(ub.g[k]) || len(ua.g[k]) > 0 && &ua.g[k][0] != &ub.g[k][0] {
				return false
			}
		}
	}
	return true
}

// runMirroredPair updates n pairs of copies (replica 0's and replica 1's variable i) on two
// goroutines, one per replica. A variable under mirroredMin gets small(r, i, w) on each copy;
// a larger one is updated inside both copies' UpdateData at once: each goroutine, holding
// its copy's new value w, meets the other, runs half(r, i, lo, hi, w, other) over its half
// [lo, hi) of the elements (writing both copies), and meets it again before either copy
// takes its new value. A panic on one goroutine releases the other and is returned as an
// error once both have stopped.
func runMirroredPair(n int, variable func(r, i int) (*tensor.Variable, int), small func(r, i int, w []float32), half func(r, i, lo, hi int, w, other []float32)) error {
	type meeting struct {
		bufs      [2][]float32
		in, out   atomic.Int32
		inC, outC chan struct{}
	}
	ms := make([]*meeting, n)
	for i := range ms {
		ms[i] = &meeting{inC: make(chan struct{}), outC: make(chan struct{})}
	}
	abort := make(chan struct{})
	var abortOnce sync.Once
	meet := func(count *atomic.Int32, c chan struct{}) bool {
		if count.Add(1) == 2 {
			close(c)
			return true
		}
		select {
		case <-c:
			return true
		case <-abort:
			return false
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if p := recover(); p != nil {
					errs[r] = fmt.Errorf("keras: optimizer update of replica %d: %v", r, p)
					abortOnce.Do(func() { close(abort) })
				}
			}()
			for i := range n {
				v, size := variable(r, i)
				if size < mirroredMin {
					v.UpdateData(func(w []float32) { small(r, i, w) })
					continue
				}
				m := ms[i]
				v.UpdateData(func(w []float32) {
					m.bufs[r] = w
					if !meet(&m.in, m.inC) {
						return
					}
					mid := size / 2 &^ 63
					lo, hi := 0, mid
					if r == 1 {
						lo, hi = mid, size
					}
					half(r, i, lo, hi, w, m.bufs[1-r])
					meet(&m.out, m.outC)
				})
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// subTerms returns xs[k][lo:hi] for every k.
func subTerms(xs [][]float32, lo, hi int) [][]float32 {
	out := make([][]float32, len(xs))
	for k, x := range xs {
		out[k] = x[lo:hi]
	}
	return out
}
