package keras

import (
	"context"
	"math"
	"net"
	"testing"
	"time"

	"godist/distlib/keras/layers"
	"godist/distlib/tensor"
	"godist/distlib/transport"
	"godist/internal/leakcheck"
)

// The rule a parameter server applies for a keras optimizer updates a variable as the
// optimizer does in a replica, step after step, with the optimizer's own hyperparameters.
func TestPSOptimizerMatchesKeras(t *testing.T) {
	leakcheck.Check(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := transport.NewPSServer(lis, transport.PSServerOptions{Token: psTestToken})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c, err := transport.DialPS(lis.Addr().String(), transport.PSClientOptions{Token: psTestToken, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	tests := []struct {
		name string
		opt  func() *Optimizer
	}{
		{"sgd", func() *Optimizer { return SGD(0.1) }},
		{"sgd-momentum", func() *Optimizer { return SGD(0.05, Momentum(0.9)) }},
		{"sgd-nesterov", func() *Optimizer { return SGD(0.05, Momentum(0.9), Nesterov(true)) }},
		{"adam", func() *Optimizer { return Adam(0.01) }},
		{"adam-betas", func() *Optimizer { return Adam(0.02, Beta1(0.8), Beta2(0.99), Epsilon(1e-5)) }},
		{"rmsprop", func() *Optimizer { return RMSprop(0.01) }},
		{"rmsprop-momentum", func() *Optimizer { return RMSprop(0.005, Rho(0.8), Momentum(0.5), Epsilon(1e-6)) }},
	}
	const n, steps = 37, 6
	w0 := make([]float32, n)
	for i := range w0 {
		w0[i] = float32(math.Sin(float64(i))) * 2
	}
	grad := func(step int) []float32 {
		g := make([]float32, n)
		for i := range g {
			g[i] = float32(math.Cos(float64(i*(step+3)))) * float32(1+step%3)
		}
		return g
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opt := tc.opt()
			ps, err := psOptimizer(opt)
			if err != nil {
				t.Fatalf("psOptimizer(%s) = %v", tc.name, err)
			}
			if err := c.Create(ctx, tc.name, []int{n}, w0, false); err != nil {
				t.Fatal(err)
			}
			v := tensor.NewVariable(tc.name, tensor.MustNew([]int{n}, append([]float32(nil), w0...)), true)
			for step := range steps {
				g := grad(step)
				if err := opt.ApplyGradients([]*tensor.Tensor{tensor.MustNew([]int{n}, g)}, []*tensor.Variable{v}); err != nil {
					t.Fatal(err)
				}
				u := transport.Update{ID: transport.UpdateID{Step: uint64(step + 1)}, Kind: transport.UpdateOptimizer, Rule: ps.Spec(), Value: g}
				if _, err := c.Update(ctx, tc.name, u); err != nil {
					t.Fatal(err)
				}
				_, got, err := c.Read(ctx, tc.name)
				if err != nil {
					t.Fatal(err)
				}
				want := v.Value().Data()
				for i := range want {
					if d := math.Abs(float64(got[i] - want[i])); d > 1e-6*math.Max(1e-3, math.Abs(float64(want[i]))) {
						t.Fatalf("%s step %d: ps w[%d] = %v, keras %v", ps, step+1, i, got[i], want[i])
					}
				}
			}
			if v.Value().Data()[0] == w0[0] {
				t.Fatalf("%s did not change the variable", tc.name)
			}
		})
	}
}

// Fit under ParameterServerStrategy trains with RMSprop and with SGD with Nesterov
// momentum (rules the parameter servers apply with the optimizers' hyperparameters).
func TestPSFitOptimizers(t *testing.T) {
	train, _ := mnistSmall(t)
	train = train.Take(30)
	tests := []struct {
		name string
		opt  func() *Optimizer
	}{
		{"rmsprop", func() *Optimizer { return RMSprop(1e-3) }},
		{"sgd-nesterov", func() *Optimizer { return SGD(0.05, Momentum(0.9), Nesterov(true)) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, servers := psStrategy(t, 1, 2)
			SetRandomSeed(1)
			var m *Model
			s.Scope(func() {
				m = Sequential(layers.Flatten(layers.InputShape(28, 28, 1)), layers.Dense(32, layers.ReLU), layers.Dense(10))
				m.Compile(tc.opt(), SparseCategoricalCrossentropy(true), "accuracy")
			})
			var h *History
			if err := psRecover(func() { h = m.Fit(train, Epochs(3), Verbose(0), StepsPerExecution(2)) }); err != nil {
				t.Fatalf("Fit with %s under ParameterServerStrategy: %v", tc.name, err)
			}
			loss := h.History["loss"]
			t.Logf("%s: loss per epoch %v, accuracy %v", tc.name, loss, h.History["accuracy"])
			if len(loss) != 3 || math.IsNaN(loss[2]) || !(loss[2] < 0.8*loss[0]) {
				t.Errorf("Fit with %s: loss per epoch %v, want 3 epochs with the last below 0.8 x the first", tc.name, loss)
			}
			if st := servers[0].Stats(); st.Applied == 0 {
				t.Errorf("ps stats %+v, want applied updates", st)
			}
		})
	}
}
