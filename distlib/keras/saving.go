package keras

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"godist/distlib/keras/layers"
)

// ErrModelFile reports a .keras file that LoadModel cannot use: not a godist model archive,
// damaged, or describing a model this godist cannot make.
var ErrModelFile = errors.New("keras: model file")

// The .keras archive: a zip holding these three entries (see the package doc, FORMAT).
const (
	modelExt           = ".keras"
	modelFormat        = "godist.keras/1"
	modelMetadataEntry = "metadata.json"
	modelConfigEntry   = "config.json"
	modelWeightsEntry  = "model.weights.gdck"
)

type modelMetadata struct {
	KerasVersion string `json:"keras_version"`
	Format       string `json:"format,omitempty"`
	DateSaved    string `json:"date_saved"`
}

type modelFileConfig struct {
	ClassName     string         `json:"class_name"` // "Sequential" or "Functional"
	Config        modelConfig    `json:"config"`
	BuildConfig   *buildConfig   `json:"build_config"`
	CompileConfig *compileConfig `json:"compile_config"`
}

type modelConfig struct {
	Name      string        `json:"name"`
	Trainable bool          `json:"trainable"`
	Seed      uint64        `json:"seed"`
	Layers    []layerConfig `json:"layers"`
}

type layerConfig struct {
	ClassName string        `json:"class_name"`
	Config    layers.Config `json:"config"`
}

type buildConfig struct {
	InputShape []any `json:"input_shape"` // [null, 28, 28, 1]
}

type compileConfig struct {
	Optimizer classConfig `json:"optimizer"`
	Loss      classConfig `json:"loss"`
	Metrics   []string    `json:"metrics"`
}

type classConfig struct {
	ClassName string         `json:"class_name"`
	Config    map[string]any `json:"config"`
}

// Save writes the whole model to path, a file ending in ".keras", like Keras 3's
// model.save("model.keras"): the architecture (every layer's config), the compile
// arguments (optimizer with its hyperparameters and learning-rate schedule, loss,
// metrics), the weights and the optimizer's state (iterations, slots), so that
// keras.LoadModel gives a model that predicts the same and, fitted further, trains exactly
// as this one would have. The format is described in the package doc (FORMAT); it is
// godist's, not readable by Python's Keras (whose weights are HDF5).
//
// TensorFlow 2's model.save("dir") (a SavedModel directory) and ".h5" files are not
// written: Save says what to write instead. Under a multi-worker strategy every worker
// calls Save and the chief alone writes. Under a ParameterServerStrategy the file holds the
// variables' values and the optimizer's state read from the parameter servers (as for
// Checkpoint). The file is written to a temporary name and renamed; missing parent
// directories are made.
func (m *Model) Save(path string) (err error) {
	defer recoverErr("Save", &err)
	if err := checkModelPath(path); err != nil {
		return err
	}
	if !m.Built() {
		return fmt.Errorf("%w: Save: model %s is not built yet; fit it, call it on a batch or give its first layer an input shape", ErrInvalidArgument, m.name)
	}
	fc, err := m.fileConfig()
	if err != nil {
		return err
	}
	if !m.strategy.Extended().IsChief() {
		return nil
	}
	cj, err := json.MarshalIndent(fc, "", " ")
	if err != nil {
		return fmt.Errorf("keras: Save %s: %w", path, err)
	}
	mj, _ := json.MarshalIndent(modelMetadata{KerasVersion: "godist", Format: modelFormat, DateSaved: time.Now().UTC().Format("2006-01-02@15:04:05")}, "", " ")
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range []struct {
		name   string
		data   []byte
		method uint16
	}{
		{modelMetadataEntry, mj, zip.Deflate},
		{modelConfigEntry, cj, zip.Deflate},
		{modelWeightsEntry, m.encodeState(m.optimizer, 0, 0), zip.Store},
	} {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: e.name, Method: e.method, Modified: time.Now()})
		if err != nil {
			return fmt.Errorf("keras: Save %s: %w", path, err)
		}
		if _, err := w.Write(e.data); err != nil {
			return fmt.Errorf("keras: Save %s: %w", path, err)
		}
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("keras: Save %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("keras: Save: %w", err)
	}
	if err := writeFileAtomic(path, buf.Bytes()); err != nil {
		return fmt.Errorf("keras: Save %s: %w", path, err)
	}
	return nil
}

// checkModelPath accepts "name.keras" and says what to write for TF 2's SavedModel
// directories and HDF5 files.
func checkModelPath(path string) error {
	ext := filepath.Ext(path)
	switch {
	case path == "":
		return fmt.Errorf("%w: Save needs a file name ending in .keras, such as \"model.keras\"", ErrInvalidArgument)
	case ext == modelExt:
		return nil
	case ext == ".h5" || ext == ".hdf5":
		return fmt.Errorf("%w: %s: godist does not write HDF5; save the whole model with Save(%q), or the weights alone with SaveWeights",
			ErrInvalidArgument, path, strings.TrimSuffix(path, ext)+modelExt)
	}
	return fmt.Errorf("%w: %s: a model is saved to one file ending in .keras (Keras 3's format), not to a SavedModel directory (TF 2's model.save(dir)): write Save(%q)",
		ErrInvalidArgument, path, strings.TrimSuffix(path, string(filepath.Separator))+modelExt)
}

// fileConfig describes the model for config.json; every layer's config is checked to
// make the same layer again, so that a file Save writes is one LoadModel reads.
func (m *Model) fileConfig() (*modelFileConfig, error) {
	class := "Sequential"
	if strings.HasPrefix(m.name, "functional") {
		class = "Functional"
	}
	fc := &modelFileConfig{ClassName: class, Config: modelConfig{Name: m.name, Trainable: m.Trainable(), Seed: m.seed}}
	for i, l := range m.layers {
		c, ok := l.(layers.Configurable)
		if !ok {
			return nil, fmt.Errorf("%w: Save: layer %d (%s, %T) has no GetConfig, so a file cannot make it again; save the weights with SaveWeights and build the model in code",
				ErrInvalidArgument, i, l.Name(), l)
		}
		cfg := c.GetConfig()
		if _, err := layers.FromConfig(l.Class(), roundTrip(cfg)); err != nil {
			return nil, fmt.Errorf("%w: Save: layer %d (%s) cannot be saved: %v", ErrInvalidArgument, i, l.Name(), err)
		}
		fc.Config.Layers = append(fc.Config.Layers, layerConfig{ClassName: l.Class(), Config: cfg})
	}
	m.mu.Lock()
	in := append([]any{nil}, intsToAny(m.inputShape)...)
	m.mu.Unlock()
	fc.BuildConfig = &buildConfig{InputShape: in}
	if m.optimizer != nil && m.loss != nil {
		oc, err := m.optimizer.config()
		if err != nil {
			return nil, err
		}
		fc.CompileConfig = &compileConfig{Optimizer: oc, Loss: m.loss.config(), Metrics: append([]string{}, m.metrics...)}
	}
	return fc, nil
}

// roundTrip passes a config through JSON, as a file would.
func roundTrip(c layers.Config) layers.Config {
	b, err := json.Marshal(c)
	if err != nil {
		panic(fmt.Errorf("%w: layer config %v: %v", ErrInvalidArgument, c, err))
	}
	var out layers.Config
	if err := json.Unmarshal(b, &out); err != nil {
		panic(err)
	}
	return out
}

func intsToAny(s []int) []any {
	out := make([]any, len(s))
	for i, d := range s {
		out[i] = d
	}
	return out
}

// config describes the optimizer as Keras' optimizer.get_config() does.
func (o *Optimizer) config() (classConfig, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	c := map[string]any{"name": o.name}
	switch s := o.schedule.(type) {
	case nil:
		c["learning_rate"] = o.lr
	case *ExponentialDecaySchedule:
		c["learning_rate"] = map[string]any{"class_name": "ExponentialDecay", "config": map[string]any{
			"initial_learning_rate": s.Initial, "decay_steps": s.DecaySteps, "decay_rate": s.DecayRate, "staircase": s.Staircase}}
	case *InverseTimeDecaySchedule:
		c["learning_rate"] = map[string]any{"class_name": "InverseTimeDecay", "config": map[string]any{
			"initial_learning_rate": s.Initial, "decay_steps": s.DecaySteps, "decay_rate": s.DecayRate, "staircase": s.Staircase}}
	case *PiecewiseConstantDecaySchedule:
		c["learning_rate"] = map[string]any{"class_name": "PiecewiseConstantDecay", "config": map[string]any{
			"boundaries": s.Boundaries, "values": s.Values}}
	default:
		return classConfig{}, fmt.Errorf("%w: Save: the optimizer's learning-rate schedule %T cannot be saved (Save knows ExponentialDecay, InverseTimeDecay and PiecewiseConstantDecay); save the weights with SaveWeights",
			ErrInvalidArgument, s)
	}
	switch o.name {
	case "SGD":
		c["momentum"], c["nesterov"] = o.hp.momentum, o.hp.nesterov
	case "Adam":
		c["beta_1"], c["beta_2"], c["epsilon"] = o.hp.beta1, o.hp.beta2, o.hp.epsilon
	case "RMSprop":
		c["rho"], c["momentum"], c["epsilon"] = o.hp.rho, o.hp.momentum, o.hp.epsilon
	}
	return classConfig{ClassName: o.name, Config: c}, nil
}

// config describes the loss as Keras' loss.get_config() does.
func (l *Loss) config() classConfig {
	class := map[lossKind]string{lossSparseCCE: "SparseCategoricalCrossentropy", lossBinaryCE: "BinaryCrossentropy",
		lossMSE: "MeanSquaredError", lossMAE: "MeanAbsoluteError", lossCustom: "LossFunc"}[l.kind]
	c := map[string]any{"name": l.name, "reduction": l.reduction.String()}
	if l.kind == lossSparseCCE || l.kind == lossBinaryCE {
		c["from_logits"] = l.fromLogits
	}
	return classConfig{ClassName: class, Config: c}
}

// LoadOption changes what LoadModel does; see WithCustomLoss and WithoutCompile.
type LoadOption interface{ applyLoad(*loadOptions) }

type loadOptions struct {
	custom    map[string]*Loss
	noCompile bool
}

type loadOption func(*loadOptions)

func (f loadOption) applyLoad(o *loadOptions) { f(o) }

// WithCustomLoss gives LoadModel the loss a model was compiled with when it is a LossFunc
// (a Go function a file cannot hold), matched by its name, like Keras'
// load_model(path, custom_objects={...}).
func WithCustomLoss(l *Loss) LoadOption {
	return loadOption(func(o *loadOptions) {
		if l != nil {
			o.custom[l.name] = l
		}
	})
}

// WithoutCompile loads the architecture and weights only, like load_model(path,
// compile=False): the model must be compiled before Fit.
func WithoutCompile() LoadOption {
	return loadOption(func(o *loadOptions) { o.noCompile = true })
}

// LoadModel reads a model Save wrote, like keras.models.load_model("model.keras"): it makes
// the layers again, builds the model under the current strategy (call it inside
// strategy.Scope to load a model that trains on that strategy's replicas), compiles it with
// the saved optimizer, loss and metrics, and restores the weights and the optimizer's
// state, so that Fit continues where the saved model stopped. A missing, damaged or
// foreign file is an error naming it.
func LoadModel(path string, opts ...LoadOption) (m *Model, err error) {
	defer recoverErr("LoadModel", &err)
	lo := &loadOptions{custom: map[string]*Loss{}}
	for _, o := range opts {
		if o != nil {
			o.applyLoad(lo)
		}
	}
	fc, weights, err := readModelFile(path)
	if err != nil {
		return nil, err
	}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s: "+format, append([]any{ErrModelFile, path}, a...)...)
	}
	if fc.ClassName != "Sequential" && fc.ClassName != "Functional" {
		return nil, bad("model class %q: godist loads Sequential and Functional models", fc.ClassName)
	}
	var ls []layers.Layer
	for i, lc := range fc.Config.Layers {
		l, err := layers.FromConfig(lc.ClassName, lc.Config)
		if err != nil {
			return nil, bad("layer %d: %v", i, err)
		}
		ls = append(ls, l)
	}
	st, err := decodeBackup(weights, path+"/"+modelWeightsEntry)
	if err != nil {
		return nil, err
	}
	m = Sequential(ls...)
	m.name = fc.Config.Name
	m.seed = fc.Config.Seed
	if !fc.Config.Trainable {
		m.SetTrainable(false)
	}
	var opt *Optimizer
	if fc.CompileConfig != nil && !lo.noCompile {
		opt, err = optimizerFromConfig(fc.CompileConfig.Optimizer)
		if err != nil {
			return nil, bad("%v", err)
		}
		loss, err := lossFromConfig(fc.CompileConfig.Loss, lo.custom)
		if err != nil {
			return nil, bad("%v", err)
		}
		m.Compile(opt, loss, fc.CompileConfig.Metrics...)
	}
	if err := m.restoreState(opt, path, st); err != nil {
		return nil, err
	}
	return m, nil
}

// readModelFile opens a .keras archive and returns its config and weights entry.
func readModelFile(path string) (*modelFileConfig, []byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			if fi, serr := os.Stat(strings.TrimSuffix(path, modelExt)); serr == nil && fi.IsDir() {
				return nil, nil, fmt.Errorf("keras: LoadModel: no file %s; %s is a directory (a TF SavedModel?): godist loads the .keras files Save writes", path, fi.Name())
			}
		}
		return nil, nil, fmt.Errorf("keras: LoadModel: %w", err)
	}
	zr, err := zip.NewReader(bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s is not a .keras archive (%v); make one with model.Save(%q)", ErrModelFile, path, err, path)
	}
	entry := func(name string) ([]byte, error) {
		f, err := zr.Open(name)
		if err != nil {
			return nil, fmt.Errorf("%w: %s has no %s (%v)", ErrModelFile, path, name, err)
		}
		defer f.Close()
		b, err := io.ReadAll(f)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %s is damaged: %v", ErrModelFile, path, name, err)
		}
		return b, nil
	}
	jsonEntry := func(name string, v any) error {
		b, err := entry(name)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, v); err != nil {
			return fmt.Errorf("%w: %s: %s: %v", ErrModelFile, path, name, err)
		}
		return nil
	}
	var md modelMetadata
	if err := jsonEntry(modelMetadataEntry, &md); err != nil {
		return nil, nil, err
	}
	if md.Format != modelFormat {
		if md.Format == "" && md.KerasVersion != "" {
			return nil, nil, fmt.Errorf("%w: %s was saved by Keras %s (weights in HDF5), which godist does not read; in Python, save its weights as NumPy arrays and set them with model.SetWeights",
				ErrModelFile, path, md.KerasVersion)
		}
		return nil, nil, fmt.Errorf("%w: %s has format %q, this godist reads %q", ErrModelFile, path, md.Format, modelFormat)
	}
	var fc modelFileConfig
	if err := jsonEntry(modelConfigEntry, &fc); err != nil {
		return nil, nil, err
	}
	wb, err := entry(modelWeightsEntry)
	if err != nil {
		return nil, nil, err
	}
	return &fc, wb, nil
}

func optimizerFromConfig(c classConfig) (o *Optimizer, err error) {
	defer recoverErr("optimizer "+c.ClassName, &err)
	opts := []OptimizerOption{}
	lr := 0.0
	switch v := c.Config["learning_rate"].(type) {
	case float64:
		lr = v
	case map[string]any:
		s, err := scheduleFromConfig(v)
		if err != nil {
			return nil, fmt.Errorf("optimizer %s: learning_rate: %v", c.ClassName, err)
		}
		opts = append(opts, Schedule(s))
	default:
		return nil, fmt.Errorf("optimizer %s: learning_rate is %v, want a number or a schedule", c.ClassName, c.Config["learning_rate"])
	}
	// The hyperparameters each optimizer's config holds, and the option that sets each.
	hps := map[string][]struct {
		key string
		opt func(float64) OptimizerOption
	}{
		"SGD":     {{"momentum", Momentum}},
		"Adam":    {{"beta_1", Beta1}, {"beta_2", Beta2}, {"epsilon", Epsilon}},
		"RMSprop": {{"rho", Rho}, {"momentum", Momentum}, {"epsilon", Epsilon}},
	}
	mk := map[string]func(float64, ...OptimizerOption) *Optimizer{"SGD": SGD, "Adam": Adam, "RMSprop": RMSprop}[c.ClassName]
	if mk == nil {
		return nil, fmt.Errorf("optimizer class %q: godist has SGD, Adam and RMSprop", c.ClassName)
	}
	for _, h := range hps[c.ClassName] {
		f, ok := c.Config[h.key].(float64)
		if !ok {
			return nil, fmt.Errorf("optimizer %s: %q is %v, want a number", c.ClassName, h.key, c.Config[h.key])
		}
		opts = append(opts, h.opt(f))
	}
	if nesterov, _ := c.Config["nesterov"].(bool); c.ClassName == "SGD" && nesterov {
		opts = append(opts, Nesterov(true))
	}
	return mk(lr, opts...), nil
}

func scheduleFromConfig(v map[string]any) (LearningRateSchedule, error) {
	cfg, _ := v["config"].(map[string]any)
	f := func(k string) float64 { x, _ := cfg[k].(float64); return x }
	switch v["class_name"] {
	case "ExponentialDecay":
		st, _ := cfg["staircase"].(bool)
		return &ExponentialDecaySchedule{f("initial_learning_rate"), f("decay_steps"), f("decay_rate"), st}, nil
	case "InverseTimeDecay":
		st, _ := cfg["staircase"].(bool)
		return &InverseTimeDecaySchedule{f("initial_learning_rate"), f("decay_steps"), f("decay_rate"), st}, nil
	case "PiecewiseConstantDecay":
		bs, _ := cfg["boundaries"].([]any)
		vs, _ := cfg["values"].([]any)
		s := &PiecewiseConstantDecaySchedule{}
		for _, b := range bs {
			x, _ := b.(float64)
			s.Boundaries = append(s.Boundaries, int64(x))
		}
		for _, b := range vs {
			x, _ := b.(float64)
			s.Values = append(s.Values, x)
		}
		if len(s.Values) != len(s.Boundaries)+1 {
			return nil, fmt.Errorf("PiecewiseConstantDecay with %d boundaries and %d values", len(s.Boundaries), len(s.Values))
		}
		return s, nil
	}
	return nil, fmt.Errorf("schedule class %v: godist has ExponentialDecay, InverseTimeDecay and PiecewiseConstantDecay", v["class_name"])
}

func lossFromConfig(c classConfig, custom map[string]*Loss) (*Loss, error) {
	name, _ := c.Config["name"].(string)
	fromLogits, _ := c.Config["from_logits"].(bool)
	red := ReductionSumOverBatchSize
	if r, ok := c.Config["reduction"].(string); ok {
		found := false
		for _, x := range []Reduction{ReductionSumOverBatchSize, ReductionNone, ReductionSum} {
			if x.String() == r {
				red, found = x, true
			}
		}
		if !found {
			return nil, fmt.Errorf("loss %s: reduction %q is not one godist knows", c.ClassName, r)
		}
	}
	switch c.ClassName {
	case "SparseCategoricalCrossentropy":
		return SparseCategoricalCrossentropy(fromLogits, WithReduction(red)), nil
	case "BinaryCrossentropy":
		return BinaryCrossentropy(fromLogits, WithReduction(red)), nil
	case "MeanSquaredError":
		return MeanSquaredError(WithReduction(red)), nil
	case "MeanAbsoluteError":
		return MeanAbsoluteError(WithReduction(red)), nil
	case "LossFunc":
		if l := custom[name]; l != nil {
			return l, nil
		}
		return nil, fmt.Errorf("the model was compiled with the custom loss %q (keras.LossFunc), which a file cannot hold: pass it, LoadModel(path, keras.WithCustomLoss(keras.LossFunc(%q, fn))), or load with keras.WithoutCompile() and Compile again", name, name)
	}
	return nil, fmt.Errorf("loss class %q is not one godist knows", c.ClassName)
}
