package keras

import (
	"errors"
	"fmt"
	"math"
	"net"
	"strings"
	"testing"
	"time"

	"godist/distlib/cluster"
	"godist/distlib/data"
	"godist/distlib/datasets"
	"godist/distlib/distribute"
	"godist/distlib/keras/layers"
	"godist/distlib/tensor"
	"godist/distlib/transport"

	"godist/internal/testdata"
)

const psTestToken = "keras-ps-test"

// psStrategy starts nps parameter servers on loopback and returns a strategy with
// nworkers in-process workers, and the servers.
func psStrategy(t *testing.T, nps, nworkers int, opts ...distribute.PSOption) (*distribute.ParameterServerStrategy, []*transport.PSServer) {
	t.Helper()
	jobs := map[string][]string{"chief": {"127.0.0.1:1"}}
	for i := 0; i < nworkers; i++ {
		jobs["worker"] = append(jobs["worker"], fmt.Sprintf("127.0.0.1:%d", 2+i))
	}
	var servers []*transport.PSServer
	for i := 0; i < nps; i++ {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		jobs["ps"] = append(jobs["ps"], lis.Addr().String())
		spec, _ := cluster.NewClusterSpec(map[string][]string{"ps": {lis.Addr().String()}})
		r, _ := cluster.NewSimpleClusterResolver(spec, "ps", 0, "grpc")
		srv, err := distribute.ServeParameterServer(r, lis, distribute.WithClusterToken(psTestToken))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Close() })
		servers = append(servers, srv)
	}
	spec, err := cluster.NewClusterSpec(jobs)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := cluster.NewSimpleClusterResolver(spec, "chief", 0, "grpc")
	s := distribute.NewParameterServerStrategy(r, append([]distribute.PSOption{distribute.WithClusterToken(psTestToken),
		distribute.WithPSTimeout(time.Second)}, opts...)...)
	t.Cleanup(func() { s.Close() })
	return s, servers
}

func mnistSmall(t *testing.T) (train, test *data.Dataset) {
	t.Helper()
	train, test, err := mnistData()
	if err != nil {
		t.Skipf("MNIST not available: %v", err)
	}
	return train, test
}

// mnistData is the first 8000 t10k examples (batches of 64) and the last 2000.
func mnistData() (train, test *data.Dataset, err error) {
	tr, te, err := datasets.LoadMNIST(datasets.Dir(testdata.MNISTDir()), datasets.Split(8000))
	if err != nil {
		return nil, nil, err
	}
	scale := func(el data.Element) data.Element { return data.Element{tensor.Scale(el[0], 1.0/255), el[1]} }
	return tr.Dataset().Map(scale).Batch(64, false), te.Dataset().Map(scale).Batch(500, false), nil
}

func mnistModel() *Model {
	m := Sequential(layers.Flatten(layers.InputShape(28, 28, 1)), layers.Dense(32, layers.ReLU), layers.Dense(10))
	m.Compile(Adam(2e-3), SparseCategoricalCrossentropy(true), "accuracy")
	return m
}

// 1 ps + 2 workers train the MNIST model to the accuracy of one process.
func TestPSFitMNIST(t *testing.T) {
	train, test := mnistSmall(t)
	SetRandomSeed(1)
	local := mnistModel()
	local.Fit(train, Epochs(1), Verbose(0))
	want := local.Evaluate(test, Verbose(0))["accuracy"]

	s, servers := psStrategy(t, 2, 2, distribute.WithVariablePartitioner(distribute.NewFixedShardsPartitioner(2)))
	SetRandomSeed(1)
	var m *Model
	s.Scope(func() { m = mnistModel() })
	h := m.Fit(train, Epochs(1), Verbose(0), StepsPerExecution(4))
	got := m.Evaluate(test, Verbose(0))["accuracy"]
	t.Logf("accuracy: one process %.3f, 1 ps + 2 workers %.3f; history %v", want, got, h.History)
	if got < 0.8 || math.Abs(got-want) > 0.05 {
		t.Errorf("accuracy under ParameterServerStrategy = %.3f, want >= 0.8 and within 0.05 of one process's %.3f", got, want)
	}
	// The variables live on both ps tasks (partitioned), and every step pushed its gradients.
	for i, srv := range servers {
		if st := srv.Stats(); st.Variables == 0 || st.Applied == 0 {
			t.Errorf("ps %d stats %+v, want variables and applied updates", i, st)
		}
	}
	if hl := h.History["loss"]; len(hl) != 1 || hl[0] <= 0 || math.IsNaN(hl[0]) {
		t.Errorf("history loss = %v, want one positive value", hl)
	}
}

func TestPSFitErrors(t *testing.T) {
	x := tensor.RandomNormal([]int{32, 3}, 0, 1, 1)
	y := tensor.Zeros(32)
	ds := data.FromTensorSlices(x, y).Batch(8, false)
	tests := []struct {
		name string
		opt  *Optimizer
		opts []distribute.PSOption
		want string
	}{
		{"schedule", SGD(0, Schedule(ExponentialDecay(0.1, 100, 0.9, false))), nil, "learning-rate schedule cannot run on parameter servers"},
		{"adam schedule", Adam(0, Schedule(InverseTimeDecay(0.01, 10, 0.5, false))), nil, "give Adam a constant learning rate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := psStrategy(t, 1, 2, tt.opts...)
			var m *Model
			s.Scope(func() {
				m = Sequential(layers.Dense(2, layers.InputShape(3)))
				m.Compile(tt.opt, SparseCategoricalCrossentropy(true))
			})
			err := psRecover(func() { m.Fit(ds, Verbose(0)) })
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Fit = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// A ps that dies during Fit: Fit fails within the timeout with an error naming the ps.
func TestPSFitKilledPS(t *testing.T) {
	s, servers := psStrategy(t, 1, 2)
	x := tensor.RandomNormal([]int{4096, 8}, 0, 1, 1)
	y := tensor.Zeros(4096)
	ds := data.FromTensorSlices(x, y).Batch(8, false).Repeat(-1)
	var m *Model
	s.Scope(func() {
		m = Sequential(layers.Dense(4, layers.InputShape(8)))
		m.Compile(SGD(0.01), SparseCategoricalCrossentropy(true))
	})
	m.Fit(ds, Verbose(0), StepsPerEpoch(5)) // the variables exist on the ps
	go func() {
		time.Sleep(100 * time.Millisecond)
		servers[0].Close()
	}()
	start := time.Now()
	err := psRecover(func() { m.Fit(ds, Verbose(0), StepsPerEpoch(1000000)) })
	var pf *distribute.PSFailureError
	if !errors.As(err, &pf) || pf.Task != 0 || !strings.Contains(err.Error(), "ps 0 at "+servers[0].Addr().String()) {
		t.Fatalf("Fit with the ps killed = %v, want a *PSFailureError naming ps 0", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the failure took %v to report, want about the 1 s timeout", d)
	}
}

// psRecover runs fn and returns the error it panicked with (nil if none).
func psRecover(fn func()) (err error) {
	defer func() {
		if p := recover(); p != nil {
			e, ok := p.(error)
			if !ok {
				e = fmt.Errorf("%v", p)
			}
			err = e
		}
	}()
	fn()
	return nil
}

// psBatchLog records the batch-level callbacks of a Fit: per call, the epoch and batch.
type psBatchLog struct {
	epoch       int
	begins      [][2]int
	ends        [][2]int
	badLogs     []string // batch-end logs that are neither empty nor hold a finite loss
	stopAtBatch int      // m.StopTraining after the end of this batch (-1: never)
	m           *Model
}

func (r *psBatchLog) callback() LambdaCallback {
	return LambdaCallback{
		OnEpochBegin:      func(e int, _ Logs) { r.epoch = e },
		OnTrainBatchBegin: func(b int, _ Logs) { r.begins = append(r.begins, [2]int{r.epoch, b}) },
		OnTrainBatchEnd: func(b int, l Logs) {
			r.ends = append(r.ends, [2]int{r.epoch, b})
			if loss, ok := l["loss"]; len(l) > 0 && (!ok || math.IsNaN(loss) || loss <= 0) {
				r.badLogs = append(r.badLogs, fmt.Sprint(l))
			}
			if b == r.stopAtBatch {
				r.m.StopTraining = true
			}
		},
	}
}

// psWantBatches returns the (epoch, batch) pairs of the batch-level callbacks of epochs
// epochs of steps steps with spe steps per execution: the first batch of each scheduled
// function (begin) and its last (end).
func psWantBatches(epochs, steps, spe int) (begins, ends [][2]int) {
	for e := range epochs {
		for b := 0; b < steps; b += spe {
			begins = append(begins, [2]int{e, b})
			ends = append(ends, [2]int{e, min(b+spe, steps) - 1})
		}
	}
	return begins, ends
}

// Batch-level callbacks run once per scheduled function (every StepsPerExecution
// batches), with the index of its first batch (begin) and last batch (end), as in Keras;
// StopTraining set there stops the Fit.
func TestPSFitBatchCallbacks(t *testing.T) {
	x := tensor.RandomNormal([]int{256, 8}, 0, 1, 1)
	y := tensor.Zeros(256)
	ds := data.FromTensorSlices(x, y).Batch(8, false) // 32 batches
	tests := []struct {
		name                     string
		epochs, steps, spe, stop int
		wantEpochs               int // epochs the History holds
	}{
		{"spe 1", 2, 8, 1, -1, 2},
		{"spe 4", 2, 16, 4, -1, 2},
		{"spe 4 of 10 steps", 2, 10, 4, -1, 2},
		{"stop at batch 7", 3, 16, 4, 7, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := psStrategy(t, 1, 2)
			var m *Model
			s.Scope(func() {
				m = Sequential(layers.Dense(4, layers.InputShape(8)))
				m.Compile(SGD(0.01), SparseCategoricalCrossentropy(true))
			})
			rec := &psBatchLog{stopAtBatch: tt.stop, m: m}
			h := m.Fit(ds, Verbose(0), Epochs(tt.epochs), StepsPerEpoch(tt.steps), StepsPerExecution(tt.spe), Callbacks(rec.callback()))
			begins, ends := psWantBatches(tt.epochs, tt.steps, tt.spe)
			if tt.stop >= 0 {
				n := (tt.stop + 1) / tt.spe
				begins, ends = begins[:n], ends[:n]
			}
			if fmt.Sprint(rec.begins) != fmt.Sprint(begins) {
				t.Errorf("TrainBatchBegin (epoch, batch) = %v, want %v", rec.begins, begins)
			}
			if fmt.Sprint(rec.ends) != fmt.Sprint(ends) {
				t.Errorf("TrainBatchEnd (epoch, batch) = %v, want %v", rec.ends, ends)
			}
			if len(rec.badLogs) > 0 {
				t.Errorf("TrainBatchEnd logs %v, want empty or a positive loss", rec.badLogs)
			}
			if got := len(h.History["loss"]); got != tt.wantEpochs {
				t.Errorf("History holds %d epochs, want %d", got, tt.wantEpochs)
			}
			if got, want := m.Optimizer().Iterations(), int64(tt.epochs*tt.steps); tt.stop < 0 && got != want {
				t.Errorf("optimizer.Iterations() = %d after Fit, want %d (one per batch)", got, want)
			}
		})
	}
}
