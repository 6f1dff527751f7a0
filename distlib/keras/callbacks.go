package keras

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"godist/distlib/keras/internal/tfevents"
)

// Callback is called by Fit, Evaluate and Predict at the points Keras calls a
// tf.keras.callbacks.Callback. Embed BaseCallback to implement only some methods. Epoch
// and batch numbers are 0-based. The method names drop Keras' "on_" prefix; notebook cells,
// which cannot easily implement compiled interfaces, use LambdaCallback, whose fields keep
// the On names.
type Callback interface {
	SetModel(m *Model)
	TrainBegin(logs Logs)
	TrainEnd(logs Logs)
	EpochBegin(epoch int, logs Logs)
	EpochEnd(epoch int, logs Logs)
	TrainBatchBegin(batch int, logs Logs)
	TrainBatchEnd(batch int, logs Logs)
	TestBegin(logs Logs)
	TestEnd(logs Logs)
	TestBatchBegin(batch int, logs Logs)
	TestBatchEnd(batch int, logs Logs)
	PredictBegin(logs Logs)
	PredictEnd(logs Logs)
}

// BaseCallback implements every Callback method as a no-op and keeps the model; embed it.
type BaseCallback struct{ model *Model }

// SetModel implements Callback.
func (b *BaseCallback) SetModel(m *Model) { b.model = m }

// Model returns the model SetModel gave.
func (b *BaseCallback) Model() *Model { return b.model }

// TrainBegin implements Callback.
func (b *BaseCallback) TrainBegin(Logs) {}

// TrainEnd implements Callback.
func (b *BaseCallback) TrainEnd(Logs) {}

// EpochBegin implements Callback.
func (b *BaseCallback) EpochBegin(int, Logs) {}

// EpochEnd implements Callback.
func (b *BaseCallback) EpochEnd(int, Logs) {}

// TrainBatchBegin implements Callback.
func (b *BaseCallback) TrainBatchBegin(int, Logs) {}

// TrainBatchEnd implements Callback.
func (b *BaseCallback) TrainBatchEnd(int, Logs) {}

// TestBegin implements Callback.
func (b *BaseCallback) TestBegin(Logs) {}

// TestEnd implements Callback.
func (b *BaseCallback) TestEnd(Logs) {}

// TestBatchBegin implements Callback.
func (b *BaseCallback) TestBatchBegin(int, Logs) {}

// TestBatchEnd implements Callback.
func (b *BaseCallback) TestBatchEnd(int, Logs) {}

// PredictBegin implements Callback.
func (b *BaseCallback) PredictBegin(Logs) {}

// PredictEnd implements Callback.
func (b *BaseCallback) PredictEnd(Logs) {}

// LambdaCallback is a Callback made of optional functions, like
// tf.keras.callbacks.LambdaCallback; what a notebook cell writes:
//
//	keras.LambdaCallback{OnEpochEnd: func(epoch int, logs keras.Logs) { fmt.Println(epoch, logs["loss"]) }}
type LambdaCallback struct {
	OnTrainBegin      func(logs Logs)
	OnTrainEnd        func(logs Logs)
	OnEpochBegin      func(epoch int, logs Logs)
	OnEpochEnd        func(epoch int, logs Logs)
	OnTrainBatchBegin func(batch int, logs Logs)
	OnTrainBatchEnd   func(batch int, logs Logs)
	OnTestBegin       func(logs Logs)
	OnTestEnd         func(logs Logs)
	OnTestBatchBegin  func(batch int, logs Logs)
	OnTestBatchEnd    func(batch int, logs Logs)
	OnPredictBegin    func(logs Logs)
	OnPredictEnd      func(logs Logs)
}

// SetModel implements Callback (closures reach the model themselves).
func (l LambdaCallback) SetModel(*Model) {}

// TrainBegin implements Callback.
func (l LambdaCallback) TrainBegin(logs Logs) { callLogs(l.OnTrainBegin, logs) }

// TrainEnd implements Callback.
func (l LambdaCallback) TrainEnd(logs Logs) { callLogs(l.OnTrainEnd, logs) }

// EpochBegin implements Callback.
func (l LambdaCallback) EpochBegin(e int, logs Logs) { callIndexed(l.OnEpochBegin, e, logs) }

// EpochEnd implements Callback.
func (l LambdaCallback) EpochEnd(e int, logs Logs) { callIndexed(l.OnEpochEnd, e, logs) }

// TrainBatchBegin implements Callback.
func (l LambdaCallback) TrainBatchBegin(b int, logs Logs) { callIndexed(l.OnTrainBatchBegin, b, logs) }

// TrainBatchEnd implements Callback.
func (l LambdaCallback) TrainBatchEnd(b int, logs Logs) { callIndexed(l.OnTrainBatchEnd, b, logs) }

// TestBegin implements Callback.
func (l LambdaCallback) TestBegin(logs Logs) { callLogs(l.OnTestBegin, logs) }

// TestEnd implements Callback.
func (l LambdaCallback) TestEnd(logs Logs) { callLogs(l.OnTestEnd, logs) }

// TestBatchBegin implements Callback.
func (l LambdaCallback) TestBatchBegin(b int, logs Logs) { callIndexed(l.OnTestBatchBegin, b, logs) }

// TestBatchEnd implements Callback.
func (l LambdaCallback) TestBatchEnd(b int, logs Logs) { callIndexed(l.OnTestBatchEnd, b, logs) }

// PredictBegin implements Callback.
func (l LambdaCallback) PredictBegin(logs Logs) { callLogs(l.OnPredictBegin, logs) }

// PredictEnd implements Callback.
func (l LambdaCallback) PredictEnd(logs Logs) { callLogs(l.OnPredictEnd, logs) }

// callLogs calls f, a LambdaCallback field, when it is set.
func callLogs(f func(Logs), logs Logs) {
	if f != nil {
		f(logs)
	}
}

// callIndexed calls f, a LambdaCallback field taking an epoch or batch, when it is set.
func callIndexed(f func(int, Logs), i int, logs Logs) {
	if f != nil {
		f(i, logs)
	}
}

// historyCallback records epoch logs into a History; Fit adds it last.
type historyCallback struct {
	BaseCallback
	h *History
}

// EpochEnd implements Callback.
func (c *historyCallback) EpochEnd(e int, logs Logs) { c.h.record(e, logs) }

// monitorMode returns +1 when larger values of key are better ("accuracy"), -1 otherwise.
func monitorMode(mode, key string) (int, error) {
	switch mode {
	case "max":
		return 1, nil
	case "min":
		return -1, nil
	case "auto", "":
		if strings.Contains(key, "acc") {
			return 1, nil
		}
		return -1, nil
	}
	return 0, fmt.Errorf("mode %q: use \"auto\", \"min\" or \"max\"", mode)
}

// CheckpointOption sets an optional argument of ModelCheckpoint.
type CheckpointOption interface {
	applyCheckpoint(*ModelCheckpointCallback) error
}

type checkpointOption func(*ModelCheckpointCallback) error

func (f checkpointOption) applyCheckpoint(c *ModelCheckpointCallback) error { return f(c) }

// Monitor sets the log key ModelCheckpoint watches with SaveBestOnly (default "val_loss").
func Monitor(key string) CheckpointOption {
	return checkpointOption(func(c *ModelCheckpointCallback) error {
		if key == "" {
			return fmt.Errorf("Monitor(\"\"): name a log key such as \"val_loss\"")
		}
		c.monitor = key
		return nil
	})
}

// Mode sets whether the monitored value should be "min"imized, "max"imized, or "auto"
// (max for accuracies, min otherwise).
func Mode(mode string) CheckpointOption {
	return checkpointOption(func(c *ModelCheckpointCallback) error {
		if _, err := monitorMode(mode, ""); err != nil {
			return err
		}
		c.mode = mode
		return nil
	})
}

// SaveBestOnly makes ModelCheckpoint save only when the monitored value improves.
func SaveBestOnly(on bool) CheckpointOption {
	return checkpointOption(func(c *ModelCheckpointCallback) error { c.saveBestOnly = on; return nil })
}

// SaveWeightsOnly is accepted for Keras compatibility: ModelCheckpoint writes the weights
// file of SaveWeights (the architecture is the code that builds the model), except to a
// path ending in .keras, where it saves the whole model as Keras 3 does unless this is set
// (then the .keras name is refused, as Keras refuses it).
func SaveWeightsOnly(on bool) CheckpointOption {
	return checkpointOption(func(c *ModelCheckpointCallback) error { c.saveWeightsOnly = on; return nil })
}

// ModelCheckpointCallback is the callback ModelCheckpoint returns.
type ModelCheckpointCallback struct {
	BaseCallback
	pattern         string
	monitor, mode   string
	saveBestOnly    bool
	saveWeightsOnly bool
	best            float64
	// Saved lists the files written, in order.
	Saved []string
}

// ModelCheckpoint saves the model's weights (SaveWeights format) at the end of every epoch
// to path, where {epoch} (1-based, or {epoch:02d}) and {key} / {key:.2f} for log keys are
// replaced, like tf.keras.callbacks.ModelCheckpoint(filepath="ckpt_{epoch}"); a path ending
// in .keras saves the whole model (Save). Only the chief worker writes. It panics on a bad
// option, and on a path ending in .h5 (godist does not write HDF5), saying what to write.
func ModelCheckpoint(path string, opts ...CheckpointOption) *ModelCheckpointCallback {
	if path == "" {
		panic(fmt.Errorf("%w: ModelCheckpoint needs a file path such as \"ckpt/ckpt_{epoch}\"", ErrInvalidArgument))
	}
	c := &ModelCheckpointCallback{pattern: path, monitor: "val_loss", mode: "auto"}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.applyCheckpoint(c); err != nil {
			panic(fmt.Errorf("%w: ModelCheckpoint: %v", ErrInvalidArgument, err))
		}
	}
	if strings.ToLower(filepath.Ext(path)) != modelExt || c.saveWeightsOnly {
		if err := checkWeightsPath("ModelCheckpoint", path); err != nil {
			panic(err)
		}
	}
	return c
}

// TrainBegin implements Callback.
func (c *ModelCheckpointCallback) TrainBegin(Logs) {
	sign, _ := monitorMode(c.mode, c.monitor)
	c.best = math.Inf(-sign)
}

// EpochEnd implements Callback: it saves the weights, panicking when writing fails.
func (c *ModelCheckpointCallback) EpochEnd(epoch int, logs Logs) {
	m := c.Model()
	if m == nil || !m.strategy.Extended().IsChief() {
		return
	}
	if c.saveBestOnly {
		v, ok := logs[c.monitor]
		if !ok {
			fmt.Fprintf(m.out(), "WARNING: ModelCheckpoint: monitored %q is not in the logs (have %v); skipping\n", c.monitor, logKeys(logs))
			return
		}
		sign, _ := monitorMode(c.mode, c.monitor)
		if float64(sign)*(v-c.best) <= 0 {
			return
		}
		c.best = v
	}
	path, err := formatPath(c.pattern, epoch, logs)
	if err != nil {
		panic(fmt.Errorf("keras: ModelCheckpoint: %w", err))
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			panic(fmt.Errorf("keras: ModelCheckpoint: %w", err))
		}
	}
	save := m.SaveWeights
	if strings.ToLower(filepath.Ext(path)) == modelExt && !c.saveWeightsOnly {
		save = m.Save // Keras 3: a .keras file path saves the whole model
	}
	if err := save(path); err != nil {
		panic(fmt.Errorf("keras: ModelCheckpoint: %w", err))
	}
	c.Saved = append(c.Saved, path)
}

var placeholder = regexp.MustCompile(`\{([A-Za-z_][A-Za-z0-9_]*)(?::([^}]*))?\}`)

// formatPath fills {epoch}, {epoch:02d}, {val_loss:.2f} ... in a checkpoint pattern.
func formatPath(pattern string, epoch int, logs Logs) (string, error) {
	var err error
	out := placeholder.ReplaceAllStringFunc(pattern, func(s string) string {
		m := placeholder.FindStringSubmatch(s)
		key, spec := m[1], m[2]
		var v any
		if key == "epoch" {
			v = epoch + 1
		} else if x, ok := logs[key]; ok {
			v = x
		} else {
			err = fmt.Errorf("%w: path %q names {%s}, which is not epoch or a log key (have %v)", ErrInvalidArgument, pattern, key, logKeys(logs))
			return s
		}
		if spec == "" {
			return fmt.Sprint(v)
		}
		if !regexp.MustCompile(`^0?\d*(\.\d+)?[dfeg]$`).MatchString(spec) {
			err = fmt.Errorf("%w: path %q: format %q not supported (use forms like 02d or .4f)", ErrInvalidArgument, pattern, spec)
			return s
		}
		if spec[len(spec)-1] == 'd' {
			if f, ok := v.(float64); ok {
				v = int(f)
			}
		} else if i, ok := v.(int); ok {
			v = float64(i)
		}
		return fmt.Sprintf("%"+spec, v)
	})
	return out, err
}

// LearningRateSchedulerCallback is the callback LearningRateScheduler returns.
type LearningRateSchedulerCallback struct {
	BaseCallback
	schedule func(epoch int, lr float64) float64
}

// LearningRateScheduler sets the optimizer's learning rate at the start of every epoch to
// schedule(epoch, current lr), like tf.keras.callbacks.LearningRateScheduler, and records
// it in the logs as "learning_rate".
func LearningRateScheduler(schedule func(epoch int, lr float64) float64) *LearningRateSchedulerCallback {
	if schedule == nil {
		panic(fmt.Errorf("%w: LearningRateScheduler(nil)", ErrInvalidArgument))
	}
	return &LearningRateSchedulerCallback{schedule: schedule}
}

// EpochBegin implements Callback.
func (c *LearningRateSchedulerCallback) EpochBegin(epoch int, _ Logs) {
	opt := c.Model().Optimizer()
	lr := c.schedule(epoch, opt.LearningRate())
	if lr < 0 || math.IsNaN(lr) || math.IsInf(lr, 0) {
		panic(fmt.Errorf("%w: LearningRateScheduler returned %g for epoch %d; want a finite rate >= 0", ErrInvalidArgument, lr, epoch))
	}
	opt.SetLearningRate(lr)
}

// EpochEnd implements Callback.
func (c *LearningRateSchedulerCallback) EpochEnd(_ int, logs Logs) {
	logs["learning_rate"] = c.Model().Optimizer().LearningRate()
}

// EarlyStoppingCallback is the callback EarlyStopping returns.
type EarlyStoppingCallback struct {
	BaseCallback
	monitor     string
	patience    int
	restoreBest bool
	// MinDelta is the smallest change that counts as an improvement (default 0).
	MinDelta float64
	// Mode is "auto" (default), "min" or "max".
	Mode string

	best        float64
	bestWeights [][]float32
	wait        int
	// StoppedEpoch is the 0-based epoch training stopped at, or -1.
	StoppedEpoch int
}

// EarlyStopping stops training when monitor (such as "val_loss") has not improved for
// patience epochs, like tf.keras.callbacks.EarlyStopping; with restoreBestWeights the
// weights of the best epoch are put back when it stops.
func EarlyStopping(monitor string, patience int, restoreBestWeights bool) *EarlyStoppingCallback {
	if monitor == "" || patience < 0 {
		panic(fmt.Errorf("%w: EarlyStopping(%q, %d): name a log key and a patience >= 0", ErrInvalidArgument, monitor, patience))
	}
	return &EarlyStoppingCallback{monitor: monitor, patience: patience, restoreBest: restoreBestWeights, Mode: "auto", StoppedEpoch: -1}
}

// TrainBegin implements Callback.
func (c *EarlyStoppingCallback) TrainBegin(Logs) {
	sign, err := monitorMode(c.Mode, c.monitor)
	if err != nil {
		panic(fmt.Errorf("%w: EarlyStopping: %v", ErrInvalidArgument, err))
	}
	c.best, c.wait, c.bestWeights, c.StoppedEpoch = math.Inf(-sign), 0, nil, -1
}

// EpochEnd implements Callback.
func (c *EarlyStoppingCallback) EpochEnd(epoch int, logs Logs) {
	m := c.Model()
	v, ok := logs[c.monitor]
	if !ok {
		fmt.Fprintf(m.out(), "WARNING: EarlyStopping: monitored %q is not in the logs (have %v)\n", c.monitor, logKeys(logs))
		return
	}
	sign, _ := monitorMode(c.Mode, c.monitor)
	if float64(sign)*(v-c.best) > c.MinDelta {
		c.best, c.wait = v, 0
		if c.restoreBest {
			c.bestWeights = m.weightData()
		}
		return
	}
	c.wait++
	if c.wait > c.patience {
		c.StoppedEpoch = epoch
		m.StopTraining = true
		if c.restoreBest && c.bestWeights != nil {
			ws := c.bestWeights
			m.assignAll(func(i int) []float32 { return ws[i] })
		}
	}
}

// TerminateOnNaNCallback is the callback TerminateOnNaN returns.
type TerminateOnNaNCallback struct {
	BaseCallback
	// StoppedBatch is the 0-based batch (of its epoch) whose loss was NaN or infinite, or -1.
	StoppedBatch int
}

// TerminateOnNaN stops training as soon as a batch's loss is NaN or infinite, like
// tf.keras.callbacks.TerminateOnNaN, printing "Batch N: Invalid loss, terminating training"
// (a NaN in the inputs or a learning rate that diverges would otherwise train every epoch
// into NaN weights).
func TerminateOnNaN() *TerminateOnNaNCallback { return &TerminateOnNaNCallback{StoppedBatch: -1} }

// TrainBegin implements Callback.
func (c *TerminateOnNaNCallback) TrainBegin(Logs) { c.StoppedBatch = -1 }

// TrainBatchEnd implements Callback.
func (c *TerminateOnNaNCallback) TrainBatchEnd(batch int, logs Logs) {
	loss, ok := logs["loss"]
	if !ok || !(math.IsNaN(loss) || math.IsInf(loss, 0)) {
		return
	}
	m := c.Model()
	c.StoppedBatch = batch
	fmt.Fprintf(m.out(), "Batch %d: Invalid loss, terminating training\n", batch)
	m.StopTraining = true
}

// weightData copies the values of the first copy of every variable.
func (m *Model) weightData() [][]float32 {
	vs := m.Variables()
	out := make([][]float32, len(vs))
	for i, v := range vs {
		out[i] = append([]float32(nil), v.Value().Data()...)
	}
	return out
}

// TensorBoardCallback is the callback TensorBoard returns.
type TensorBoardCallback struct {
	BaseCallback
	logDir       string
	train, valid *tfevents.Writer
}

// TensorBoard writes the epoch logs as TensorBoard scalars ("epoch_loss",
// "epoch_accuracy", "epoch_learning_rate", ...) to event files in logDir/train and
// logDir/validation, like tf.keras.callbacks.TensorBoard(log_dir). Only the chief writes.
// View them with `tensorboard --logdir logDir`.
func TensorBoard(logDir string) *TensorBoardCallback {
	if logDir == "" {
		panic(fmt.Errorf("%w: TensorBoard needs a log directory", ErrInvalidArgument))
	}
	return &TensorBoardCallback{logDir: logDir}
}

// TrainBegin implements Callback: it opens the event files, panicking when it cannot.
func (c *TensorBoardCallback) TrainBegin(Logs) {
	if !c.Model().strategy.Extended().IsChief() {
		return
	}
	var err error
	if c.train, err = tfevents.NewWriter(filepath.Join(c.logDir, "train")); err != nil {
		panic(fmt.Errorf("keras: TensorBoard: %w", err))
	}
	if c.valid, err = tfevents.NewWriter(filepath.Join(c.logDir, "validation")); err != nil {
		panic(fmt.Errorf("keras: TensorBoard: %w", err))
	}
}

// EpochEnd implements Callback.
func (c *TensorBoardCallback) EpochEnd(epoch int, logs Logs) {
	if c.train == nil {
		return
	}
	tr, va := map[string]float32{}, map[string]float32{}
	for k, v := range logs {
		if strings.HasPrefix(k, "val_") {
			va["epoch_"+strings.TrimPrefix(k, "val_")] = float32(v)
		} else {
			tr["epoch_"+k] = float32(v)
		}
	}
	if opt := c.Model().Optimizer(); opt != nil {
		tr["epoch_learning_rate"] = float32(opt.LearningRate())
	}
	for _, w := range []struct {
		w *tfevents.Writer
		v map[string]float32
	}{{c.train, tr}, {c.valid, va}} {
		if len(w.v) == 0 {
			continue
		}
		if err := w.w.WriteScalars(int64(epoch), w.v); err != nil {
			panic(fmt.Errorf("keras: TensorBoard: %w", err))
		}
		if err := w.w.Flush(); err != nil {
			panic(fmt.Errorf("keras: TensorBoard: %w", err))
		}
	}
}

// TrainEnd implements Callback: it closes the event files.
func (c *TensorBoardCallback) TrainEnd(Logs) {
	for _, w := range []*tfevents.Writer{c.train, c.valid} {
		if w != nil {
			if err := w.Close(); err != nil {
				panic(fmt.Errorf("keras: TensorBoard: %w", err))
			}
		}
	}
	c.train, c.valid = nil, nil
}

// LogDir returns the callback's log directory.
func (c *TensorBoardCallback) LogDir() string { return c.logDir }
