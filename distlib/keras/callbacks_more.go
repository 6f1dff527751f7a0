package keras

import (
	"bufio"
	"encoding/csv"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
)

// ReduceLROnPlateauCallback is the callback ReduceLROnPlateau returns. Its fields are
// Keras' other arguments, with Keras' defaults.
type ReduceLROnPlateauCallback struct {
	BaseCallback
	monitor  string
	factor   float64
	patience int
	// MinDelta is the least change that counts as an improvement (Keras' min_delta, 1e-4).
	MinDelta float64
	// Cooldown is the number of epochs to wait after a reduction before counting again.
	Cooldown int
	// MinLR is the learning rate below which it never reduces (Keras' min_lr, 0).
	MinLR float64
	// Mode is "auto" (default: "max" when the monitored key contains "acc"), "min" or "max".
	Mode string
	// Verbose 1 prints "Epoch N: ReduceLROnPlateau reducing learning rate to X." at each
	// reduction.
	Verbose int

	best                  float64
	sign                  int
	wait, cooldownCounter int
}

// ReduceLROnPlateau multiplies the optimizer's learning rate by factor when monitor (such
// as "val_loss") has not improved for patience epochs, like
// tf.keras.callbacks.ReduceLROnPlateau(monitor, factor, patience); set MinDelta, Cooldown,
// MinLR, Mode and Verbose on the result for Keras' other arguments:
//
//	reduceLR := keras.ReduceLROnPlateau("val_loss", 0.2, 5)
//	reduceLR.MinLR = 0.001
//
// It records the epoch's learning rate in the logs as "learning_rate", as Keras does.
func ReduceLROnPlateau(monitor string, factor float64, patience int) *ReduceLROnPlateauCallback {
	if monitor == "" {
		panic(fmt.Errorf("%w: ReduceLROnPlateau: name the log key to monitor, such as \"val_loss\"", ErrInvalidArgument))
	}
	if factor >= 1 || factor < 0 || math.IsNaN(factor) {
		panic(fmt.Errorf("%w: ReduceLROnPlateau does not support a factor >= 1.0 or < 0 (got %g): the new rate is lr * factor, "+
			"so use a factor such as 0.1 (Keras' default) or 0.5", ErrInvalidArgument, factor))
	}
	if patience < 0 {
		panic(fmt.Errorf("%w: ReduceLROnPlateau: patience %d; want >= 0 epochs (Keras' default is 10)", ErrInvalidArgument, patience))
	}
	return &ReduceLROnPlateauCallback{monitor: monitor, factor: factor, patience: patience, MinDelta: 1e-4, Mode: "auto"}
}

// TrainBegin implements Callback.
func (c *ReduceLROnPlateauCallback) TrainBegin(Logs) {
	sign, err := monitorMode(c.Mode, c.monitor)
	if err != nil {
		panic(fmt.Errorf("%w: ReduceLROnPlateau: %v", ErrInvalidArgument, err))
	}
	if c.MinLR < 0 || c.Cooldown < 0 || c.MinDelta < 0 {
		panic(fmt.Errorf("%w: ReduceLROnPlateau: MinLR %g, Cooldown %d, MinDelta %g; want each >= 0", ErrInvalidArgument, c.MinLR, c.Cooldown, c.MinDelta))
	}
	c.sign, c.best, c.wait, c.cooldownCounter = sign, math.Inf(-sign), 0, 0
}

// EpochEnd implements Callback: Keras' on_epoch_end, step for step.
func (c *ReduceLROnPlateauCallback) EpochEnd(epoch int, logs Logs) {
	m := c.Model()
	opt := m.Optimizer()
	if opt == nil {
		return
	}
	logs["learning_rate"] = opt.LearningRate()
	current, ok := logs[c.monitor]
	if !ok {
		fmt.Fprintf(m.out(), "WARNING: Learning rate reduction is conditioned on metric %q which is not available. Available metrics are: %s\n",
			c.monitor, strings.Join(sortedKeys(logs), ","))
		return
	}
	if c.cooldownCounter > 0 {
		c.cooldownCounter--
		c.wait = 0
	}
	improved := current < c.best-c.MinDelta
	if c.sign > 0 {
		improved = current > c.best+c.MinDelta
	}
	switch {
	case improved:
		c.best, c.wait = current, 0
	case c.cooldownCounter <= 0:
		c.wait++
		if c.wait < c.patience {
			return
		}
		old := opt.LearningRate()
		if old <= float64(float32(c.MinLR)) {
			return
		}
		if opt.hasSchedule() {
			panic(fmt.Errorf("%w: ReduceLROnPlateau: the optimizer's learning rate is a schedule, which it cannot set "+
				"(Keras refuses too): give the optimizer a constant rate, such as keras.Adam(1e-3)", ErrInvalidArgument))
		}
		lr := max(old*c.factor, c.MinLR)
		opt.SetLearningRate(lr)
		if c.Verbose > 0 {
			fmt.Fprintf(m.out(), "\nEpoch %d: ReduceLROnPlateau reducing learning rate to %s.\n", epoch+1, pyFloat(lr))
		}
		c.cooldownCounter, c.wait = c.Cooldown, 0
	}
}

// hasSchedule reports whether the learning rate comes from a schedule.
func (o *Optimizer) hasSchedule() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.schedule != nil
}

// CSVLoggerCallback is the callback CSVLogger returns.
type CSVLoggerCallback struct {
	BaseCallback
	filename string
	// Separator separates the columns (Keras' separator, ",").
	Separator string
	// Append adds the rows to an existing file (writing the header only when the file is
	// empty or new) instead of overwriting it.
	Append bool

	file         *os.File
	w            *csv.Writer
	keys         []string
	appendHeader bool
}

// CSVLogger writes every epoch's logs to a CSV file, like
// tf.keras.callbacks.CSVLogger(filename): a header "epoch" and the log keys sorted (with a
// "val_" column for each key when the first epoch has no validation logs, as Keras does),
// then one row per epoch, epochs counted from 0, "NA" for a missing value. Set Separator
// and Append on the result for Keras' other arguments.
func CSVLogger(filename string) *CSVLoggerCallback {
	if filename == "" {
		panic(fmt.Errorf("%w: CSVLogger needs a file name, such as \"training.log\"", ErrInvalidArgument))
	}
	return &CSVLoggerCallback{filename: filename, Separator: ","}
}

// TrainBegin implements Callback: it opens the file, panicking with the reason when it
// cannot.
func (c *CSVLoggerCallback) TrainBegin(Logs) {
	if len([]rune(c.Separator)) != 1 {
		panic(fmt.Errorf("%w: CSVLogger separator %q: want one character, such as \",\" or \";\"", ErrInvalidArgument, c.Separator))
	}
	flags := os.O_CREATE | os.O_WRONLY | os.O_TRUNC
	c.appendHeader = true
	if c.Append {
		flags = os.O_CREATE | os.O_WRONLY | os.O_APPEND
		if f, err := os.Open(c.filename); err == nil {
			line, _ := bufio.NewReader(f).ReadString('\n')
			f.Close()
			c.appendHeader = len(line) == 0
		}
	}
	f, err := os.OpenFile(c.filename, flags, 0o644)
	if err != nil {
		panic(fmt.Errorf("keras: CSVLogger: %w", err))
	}
	c.file, c.w, c.keys = f, nil, nil
}

// EpochEnd implements Callback.
func (c *CSVLoggerCallback) EpochEnd(epoch int, logs Logs) {
	if c.file == nil {
		return
	}
	if c.keys == nil {
		c.keys = sortedKeys(logs)
		val := false
		for _, k := range c.keys {
			val = val || strings.HasPrefix(k, "val_")
		}
		if !val {
			for _, k := range c.keys[:len(c.keys):len(c.keys)] {
				c.keys = append(c.keys, "val_"+k)
			}
		}
	}
	if c.w == nil {
		c.w = csv.NewWriter(c.file)
		c.w.Comma = []rune(c.Separator)[0]
		c.w.UseCRLF = true // Python's csv module ends rows with \r\n
		if c.appendHeader {
			c.w.Write(append([]string{"epoch"}, c.keys...))
		}
	}
	row := []string{strconv.Itoa(epoch)}
	for _, k := range c.keys {
		if v, ok := logs[k]; ok {
			row = append(row, pyFloat(v))
		} else {
			row = append(row, "NA")
		}
	}
	c.w.Write(row)
	c.w.Flush()
	if err := c.w.Error(); err != nil {
		panic(fmt.Errorf("keras: CSVLogger: writing %s: %w", c.filename, err))
	}
}

// TrainEnd implements Callback: it closes the file.
func (c *CSVLoggerCallback) TrainEnd(Logs) {
	if c.file != nil {
		c.file.Close()
		c.file, c.w = nil, nil
	}
}

// pyFloat writes v as Python's repr of a float does (what Keras' CSV rows hold): the
// shortest digits, "2.0" for an integral value, exponents below 1e-4 and from 1e16.
func pyFloat(v float64) string {
	switch {
	case math.IsNaN(v):
		return "nan"
	case math.IsInf(v, 1):
		return "inf"
	case math.IsInf(v, -1):
		return "-inf"
	}
	if a := math.Abs(v); a != 0 && (a < 1e-4 || a >= 1e16) {
		return strconv.FormatFloat(v, 'e', -1, 64)
	}
	s := strconv.FormatFloat(v, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

// sortedKeys returns the logs' keys in sorted order (Python's sorted(logs.keys())).
func sortedKeys(logs Logs) []string {
	keys := make([]string, 0, len(logs))
	for k := range logs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
