package mesh

import (
	"context"
	"math"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"godist/distlib/data"
	"godist/distlib/device"
	"godist/distlib/keras"
	"godist/distlib/keras/layers"
	"godist/distlib/tensor"
	"godist/distlib/transport"
	"godist/internal/leakcheck"
)

// splitCPU splits the CPU into n logical devices for one test and returns their names.
func splitCPU(t *testing.T, n int) []string {
	t.Helper()
	device.Reset()
	cfg := make([]device.LogicalDeviceConfiguration, n)
	if err := device.SetLogicalDeviceConfiguration(device.ListPhysicalDevices("CPU")[0], cfg); err != nil {
		t.Fatalf("SetLogicalDeviceConfiguration(%d) = %v", n, err)
	}
	t.Cleanup(device.Reset)
	return ListDevices("CPU")
}

// courseMLP is the model of the Keras 3 distribution activity.
func courseMLP(d1Bias bool, out layers.Activation) *keras.Model {
	return keras.Sequential(
		layers.Input(28, 28, 1),
		layers.Flatten(),
		layers.Dense(200, layers.UseBias(d1Bias), layers.ReLU, layers.Name("d1")),
		layers.Dropout(0.4),
		layers.Dense(10, out, layers.Name("d2")),
	)
}

func courseData(n, batch int) *data.Dataset {
	x := tensor.RandomNormal([]int{n, 28, 28, 1}, 0, 1, 11)
	y := tensor.RandomNormal([]int{n, 10}, 0, 1, 12)
	return data.FromTensorSlices(x, y).Batch(batch, false)
}

type run struct {
	losses  []float64 // running mean after every batch
	weights []*tensor.Tensor
	model   *keras.Model
}

// train builds the course MLP under dist (nil: one device), trains it and records its
// loss curve.
func train(t *testing.T, dist Distribution, d1Bias bool, out layers.Activation, ds *data.Dataset, epochs int) run {
	t.Helper()
	keras.SetRandomSeed(5)
	var m *keras.Model
	build := func() {
		m = courseMLP(d1Bias, out)
		m.Compile(keras.SGD(0.05), keras.MeanSquaredError())
	}
	if dist != nil {
		dist.Scope(build)
		if m.MeshEngine() == nil {
			t.Fatalf("model built under %s has no mesh engine", dist)
		}
	} else {
		build()
	}
	var r run
	cb := keras.LambdaCallback{OnTrainBatchEnd: func(_ int, logs keras.Logs) { r.losses = append(r.losses, logs["loss"]) }}
	m.Fit(ds, keras.Epochs(epochs), keras.Verbose(0), keras.Callbacks(&cb))
	r.weights, r.model = m.GetWeights(), m
	return r
}

func relErr(got, want float64) float64 {
	return math.Abs(got-want) / math.Max(math.Abs(want), 1e-12)
}

func TestEquivalenceToOneDevice(t *testing.T) {
	devs := splitCPU(t, 4)
	leakcheck.Check(t)
	ds := courseData(64, 16)
	mesh12 := func() *DeviceMesh { return NewDeviceMesh([]int{1, 2}, []string{"batch", "model"}, devs[:2]) }
	mp := func(m *DeviceMesh, set map[string][]string) Distribution {
		lm := NewLayoutMap(m)
		for k, axes := range set {
			lm.Set(k, Axes(axes...))
		}
		return NewModelParallel(lm, "batch")
	}
	tests := []struct {
		name   string
		dist   func() Distribution
		d1Bias bool
		out    layers.Activation
	}{
		{"DataParallel 2 devices", func() Distribution { return NewDataParallel(WithDevices(devs[:2]...)) }, false, layers.Softmax},
		{"ModelParallel d1 columns (course)", func() Distribution {
			return mp(mesh12(), map[string][]string{"d1/kernel": {"", "model"}})
		}, false, layers.Softmax},
		{"ModelParallel d1 columns, d2 rows", func() Distribution {
			return mp(mesh12(), map[string][]string{"d1/kernel": {"", "model"}, "d2/kernel": {"model", ""}})
		}, true, layers.Linear},
		{"ModelParallel rows then rows (reduce-scatter)", func() Distribution {
			return mp(mesh12(), map[string][]string{"d1/kernel": {"model", ""}, "d1/bias": {"model"}, "d2/kernel": {"model", ""}})
		}, true, layers.Linear},
		{"ModelParallel d2 columns with softmax, sharded bias", func() Distribution {
			return mp(mesh12(), map[string][]string{"d1/kernel": {"", "model"}, "d2/kernel": {"", "model"}, "d2/bias": {"model"}})
		}, false, layers.Softmax},
		{"2x2 mesh: data and model", func() Distribution {
			return mp(NewDeviceMesh([]int{2, 2}, []string{"batch", "model"}, devs), map[string][]string{"d1/kernel": {"", "model"}, "d2/kernel": {"model", ""}})
		}, false, layers.Softmax},
	}
	refs := map[[2]any]run{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := [2]any{tt.d1Bias, tt.out}
			ref, ok := refs[key]
			if !ok {
				ref = train(t, nil, tt.d1Bias, tt.out, ds, 2)
				refs[key] = ref
			}
			got := train(t, tt.dist(), tt.d1Bias, tt.out, ds, 2)
			if len(got.losses) != len(ref.losses) || len(got.losses) != 8 {
				t.Fatalf("%d batch losses, one device %d; want 8", len(got.losses), len(ref.losses))
			}
			for i := range ref.losses {
				if e := relErr(got.losses[i], ref.losses[i]); e > 1e-5 {
					t.Errorf("loss after batch %d = %.8g, one device %.8g (relative error %.2g > 1e-5)", i, got.losses[i], ref.losses[i], e)
				}
			}
			if ref.losses[0] == ref.losses[len(ref.losses)-1] {
				t.Errorf("loss did not change: %v", ref.losses)
			}
			for i, w := range ref.weights {
				if !reflect.DeepEqual(w.Shape(), got.weights[i].Shape()) {
					t.Fatalf("weight %d has shape %v, one device %v", i, got.weights[i].Shape(), w.Shape())
				}
				for j, v := range w.Data() {
					if g := got.weights[i].Data()[j]; math.Abs(float64(g-v)) > 1e-5*(1+math.Abs(float64(v))) {
						t.Fatalf("weight %d[%d] = %g, one device %g", i, j, g, v)
					}
				}
			}
		})
	}
}

func TestModelParallelHalvesParameterMemory(t *testing.T) {
	devs := splitCPU(t, 2)
	full := 4 * (784*200 + 200*10 + 10)
	m2 := NewDeviceMesh([]int{1, 2}, []string{"batch", "model"}, devs)
	lm := NewLayoutMap(m2)
	lm.Set("d1/kernel", Axes("", "model"))
	lm.Set("d2/kernel", Axes("model", ""))
	lm.Set("d2/bias", Axes("model"))
	tests := []struct {
		name string
		dist Distribution
		want int
	}{
		{"DataParallel replicates", NewDataParallel(WithDevices(devs...)), full},
		{"ModelParallel shards", NewModelParallel(lm, "batch"), full / 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m *keras.Model
			tt.dist.Scope(func() { m = courseMLP(false, layers.Softmax) })
			e := m.MeshEngine().(*Engine)
			got := e.DeviceParamBytes()
			if len(got) != 2 || got[0] != tt.want || got[1] != tt.want {
				t.Errorf("DeviceParamBytes() = %v, want [%d %d] (one device holds %d)", got, tt.want, tt.want, full)
			}
			if ws := m.GetWeights(); ws[0].Size() != 784*200 {
				t.Errorf("GetWeights()[0] has %d values, want the whole kernel 156800", ws[0].Size())
			}
		})
	}
	var m *keras.Model
	NewModelParallel(lm, "batch").Scope(func() { m = courseMLP(false, layers.Softmax) })
	dv := m.MeshEngine().DeviceVariables()
	for d, vs := range dv {
		if got := vs[0].Shape(); !reflect.DeepEqual(got, []int{784, 100}) {
			t.Errorf("device %d holds d1/kernel of shape %v, want [784 100]", d, got)
		}
		if got := vs[0].Device(); got != devs[d] {
			t.Errorf("device %d's d1/kernel lives on %s, want %s", d, got, devs[d])
		}
	}
	// The two column blocks are the halves of the global kernel.
	w := m.GetWeights()[0]
	for d, vs := range dv {
		shard := vs[0].Value().Data()
		for r := 0; r < 784; r += 97 {
			for c := 0; c < 100; c += 13 {
				if shard[r*100+c] != w.Data()[r*200+d*100+c] {
					t.Fatalf("device %d d1/kernel[%d,%d] = %g, global [%d,%d] = %g", d, r, c, shard[r*100+c], r, d*100+c, w.Data()[r*200+d*100+c])
				}
			}
		}
	}
}

func TestDataParallelSplitsBatch(t *testing.T) {
	devs := splitCPU(t, 2)
	dp := NewDataParallel(WithDevices(devs...))
	tests := []struct {
		batch int
		want  [][2]int
	}{
		{16, [][2]int{{0, 8}, {8, 16}}},
		{15, [][2]int{{0, 7}, {7, 15}}},
	}
	for _, tt := range tests {
		var m *keras.Model
		dp.Scope(func() { m = courseMLP(false, layers.Softmax) })
		x := tensor.RandomNormal([]int{tt.batch, 28, 28, 1}, 0, 1, 3)
		var ref *keras.Model
		keras.SetRandomSeed(1)
		ref = courseMLP(false, layers.Softmax)
		if err := m.SetWeights(ref.GetWeights()); err != nil {
			t.Fatal(err)
		}
		got := m.Predict(x)
		e := m.MeshEngine().(*Engine)
		if !reflect.DeepEqual(e.lastRows, tt.want) {
			t.Errorf("batch %d: rows per device = %v, want %v", tt.batch, e.lastRows, tt.want)
		}
		want := ref.Predict(x)
		if !reflect.DeepEqual(got.Shape(), want.Shape()) {
			t.Fatalf("Predict shape %v, want %v", got.Shape(), want.Shape())
		}
		for i, v := range want.Data() {
			if math.Abs(float64(got.Data()[i]-v)) > 1e-6 {
				t.Fatalf("batch %d: Predict[%d] = %g, one device %g", tt.batch, i, got.Data()[i], v)
			}
		}
	}
	// A batch smaller than the batch axis cannot be split.
	var m *keras.Model
	dp.Scope(func() { m = courseMLP(false, layers.Softmax) })
	_, err := m.MeshEngine().Forward(context.Background(), tensor.Zeros(1, 28, 28, 1), false, nil)
	if err == nil || !strings.Contains(err.Error(), "smaller than the batch axis") {
		t.Errorf("Forward(batch 1) error = %v, want one naming the batch axis", err)
	}
}

func TestLayoutMapDrivesSharding(t *testing.T) {
	devs := splitCPU(t, 2)
	m2 := NewDeviceMesh([]int{1, 2}, []string{"batch", "model"}, devs)
	tests := []struct {
		name  string
		set   map[string][]string
		split []int // per parameter (d1/kernel, d2/kernel, d2/bias)
		err   string
	}{
		{"course: d1 kernel columns", map[string][]string{"d1/kernel": {"", "model"}}, []int{1, -1, -1}, ""},
		{"regexp over every kernel", map[string][]string{".*kernel": {"model", ""}}, []int{0, 0, -1}, ""},
		{"nothing matches: replicated", map[string][]string{"conv/kernel": {"", "model"}}, []int{-1, -1, -1}, ""},
		{"batch axis on a variable", map[string][]string{"d1/kernel": {"batch", ""}}, nil, "along the batch axis"},
		{"sharded bias, replicated kernel", map[string][]string{"d2/bias": {"model"}}, nil, "the kernel is replicated"},
		{"rank mismatch", map[string][]string{"d1/kernel": {"model"}}, nil, "has 1 axes"},
		{"mixed layouts", map[string][]string{"d2/bias": {"model"}, "d2/kernel": {"", "model"}, "d1/kernel": {"", ""}}, []int{-1, 1, 0}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lm := NewLayoutMap(m2)
			for k, a := range tt.set {
				lm.Set(k, Axes(a...))
			}
			var err error
			var m *keras.Model
			NewModelParallel(lm, "").Scope(func() {
				defer func() {
					if r := recover(); r != nil {
						if err, _ = r.(error); err == nil {
							t.Fatalf("panic %v", r)
						}
					}
				}()
				m = courseMLP(false, layers.Softmax)
			})
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("build error = %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			e := m.MeshEngine().(*Engine)
			if !reflect.DeepEqual(e.split, tt.split) {
				t.Errorf("split dims = %v, want %v", e.split, tt.split)
			}
		})
	}
}

func TestReduceScatter(t *testing.T) {
	leakcheck.Check(t)
	for _, n := range []int{1, 2, 3} {
		ts := transport.NewMem(n)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		out := make([][]float32, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for r := 0; r < n; r++ {
			wg.Add(1)
			go func(r int) {
				defer wg.Done()
				buf := make([]float32, 2*n)
				for i := range buf {
					buf[i] = float32((r + 1) * (i + 1))
				}
				out[r], errs[r] = reduceScatter(ctx, ts[r], buf, "t")
			}(r)
		}
		wg.Wait()
		cancel()
		sum := float32(n * (n + 1) / 2)
		for r := 0; r < n; r++ {
			if errs[r] != nil {
				t.Fatalf("n=%d rank %d: %v", n, r, errs[r])
			}
			want := []float32{sum * float32(2*r+1), sum * float32(2*r+2)}
			if !reflect.DeepEqual(out[r], want) {
				t.Errorf("n=%d rank %d: reduceScatter = %v, want %v", n, r, out[r], want)
			}
		}
	}
}
