package keras

import (
	"context"
	"fmt"
	"sync"

	"godist/distlib/keras/layers"
	"godist/distlib/tensor"
)

// MeshParam describes one parameter of a model to a MeshEngine.
type MeshParam struct {
	// Path is "layer/param", such as "d1/kernel": the path a layout map matches.
	Path string
	// Layer is the index of the layer that owns the parameter.
	Layer int
	// Init is the parameter's initial (global) value.
	Init *tensor.Tensor
	// Trainable reports whether the optimizer updates it.
	Trainable bool
}

// MeshStep is one global batch for MeshEngine.TrainStep.
type MeshStep struct {
	// X and Y are the global batch's inputs and labels.
	X, Y *tensor.Tensor
	// Seed returns the seed of layer i's random ops (Dropout) for the whole global batch,
	// the one a single device would use, so that the masks do not depend on the layout.
	Seed func(layer int) uint64
	// PerExample returns the loss of every example of a batch.
	PerExample func(y, pred *tensor.Tensor) *tensor.Tensor
	// Stats returns the sums (loss, count, metrics) of a part of the batch; the engine
	// adds those of all parts.
	Stats func(y, pred, perExample *tensor.Tensor) []float32
}

// MeshStepResult is what TrainStep computed: the gradient of the mean loss of the global
// batch for every trainable variable of every device (already synchronized between the
// devices that hold the same part), and the batch's summed statistics.
type MeshStepResult struct {
	Vars  []*tensor.Variable
	Grads []*tensor.Tensor
	Stats []float32
}

// MeshEngine runs a model whose variables a Keras 3 distribution (distlib/mesh) lays out
// over a device mesh: each device holds its part of every variable (a shard or a replica)
// and the steps run on all devices at once, exchanging what the layouts need.
type MeshEngine interface {
	// Build creates every device's part of the parameters of ls.
	Build(ls []layers.Layer, params []MeshParam) error
	// Devices returns the mesh's devices, in mesh order.
	Devices() []string
	// DeviceVariables returns, per device, the variables that device holds, in parameter order.
	DeviceVariables() [][]*tensor.Variable
	// Weights returns the global value of every parameter.
	Weights() []*tensor.Tensor
	// Assign sets parameter i from its global value.
	Assign(i int, data []float32) error
	// Gather returns the global value laid out as parameter i whose parts, one per device
	// in Devices order, are parts (an optimizer's slot for the parameter, say).
	Gather(i int, parts [][]float32) ([]float32, error)
	// Scatter returns each device's part, in Devices order, of a global value laid out as
	// parameter i.
	Scatter(i int, data []float32) ([][]float32, error)
	// Forward computes the model on a global batch (training turns Dropout on); the
	// devices' exchanges stop when ctx is done.
	Forward(ctx context.Context, x *tensor.Tensor, training bool, seed func(layer int) uint64) (*tensor.Tensor, error)
	// TrainStep computes the gradients of one global batch; the devices' exchanges stop
	// when ctx is done.
	TrainStep(ctx context.Context, step MeshStep) (MeshStepResult, error)
}

var (
	meshHookMu sync.Mutex
	meshHook   func() MeshEngine
)

// SetDistributionHook installs the function Sequential asks for a MeshEngine; distlib/mesh
// installs one that answers when a distribution is set (mesh.SetDistribution), like
// Keras 3 models consulting keras.distribution.distribution(). A nil engine leaves the
// model on its distribute.Strategy.
func SetDistributionHook(h func() MeshEngine) {
	meshHookMu.Lock()
	meshHook = h
	meshHookMu.Unlock()
}

func newMeshEngine() MeshEngine {
	meshHookMu.Lock()
	h := meshHook
	meshHookMu.Unlock()
	if h == nil {
		return nil
	}
	return h()
}

// MeshEngine returns the engine that lays the model out on a device mesh, or nil when the
// model trains through its distribute.Strategy.
func (m *Model) MeshEngine() MeshEngine { return m.engine }

// meshVariables returns variables holding the global values of the parameters (copies:
// assigning them does not change the model; use SetWeights).
func (m *Model) meshVariables(trainableOnly bool) []*tensor.Variable {
	ws := m.engine.Weights()
	var out []*tensor.Variable
	for i, w := range ws {
		if !trainableOnly || m.params[i].trainable {
			out = append(out, tensor.NewVariable(m.params[i].name, w, m.params[i].trainable))
		}
	}
	return out
}

func (m *Model) meshAssign(data func(i int) []float32) {
	for i := range m.params {
		if err := m.engine.Assign(i, data(i)); err != nil {
			panic(fmt.Errorf("keras: assign %s: %w", m.params[i].name, err))
		}
	}
}

// meshForwardContext runs the model on the mesh engine; ctx stops the devices' exchanges.
func (m *Model) meshForwardContext(ctx context.Context, x *tensor.Tensor, training bool, stepSeed uint64) *tensor.Tensor {
	out, err := m.engine.Forward(ctx, x, training, func(i int) uint64 { return mix(stepSeed, uint64(i)) })
	if err != nil {
		panic(fmt.Errorf("keras: model %s: %w", m.name, err))
	}
	return out
}

// meshTrainStep is trainStep on the mesh engine: the seeds are those of a single replica,
// the gradients come back synchronized and one optimizer step updates every device's part.
func (m *Model) meshTrainStep(ctx context.Context, x, y *tensor.Tensor, metrics []*Metric) (stats, error) {
	m.mu.Lock()
	m.step++
	seed := mix(mix(m.seed, uint64(m.step)), 0)
	m.mu.Unlock()
	res, err := m.engine.TrainStep(ctx, MeshStep{
		X: x, Y: y,
		Seed:       func(i int) uint64 { return mix(seed, uint64(i)) },
		PerExample: m.compiledPerExample,
		Stats: func(y, pred, perEx *tensor.Tensor) []float32 {
			return m.shardStats(metrics, y, pred, perEx)
		},
	})
	if err != nil {
		return stats{}, err
	}
	if err := m.optimizer.applyReplicas([][]*tensor.Tensor{res.Grads}, [][]*tensor.Variable{res.Vars}); err != nil {
		return stats{}, err
	}
	return statsFrom(res.Stats), nil
}
