package keras

import (
	"fmt"
	"sync"

	"godist/distlib/tensor"
)

type metricKind int

const (
	metricMean metricKind = iota
	metricSparseCategoricalAccuracy
	metricBinaryAccuracy
	metricAccuracy
	metricAutoAccuracy // Compile's "accuracy": chosen by the shapes, as Keras does
	metricCategoricalAccuracy
	metricMSE
	metricMAE
)

// Metric accumulates a value over batches, like a tf.keras.metrics.Metric: UpdateState
// adds a batch, Result returns the mean over every example seen, ResetState starts over.
// It is safe for use by several replicas at once.
type Metric struct {
	name      string
	kind      metricKind
	threshold float32

	mu           sync.Mutex
	total, count float64
}

// Mean returns a metric that averages the values it is given, like tf.keras.metrics.Mean.
func Mean(name string) *Metric { return &Metric{name: name, kind: metricMean} }

// SparseCategoricalAccuracy returns the fraction of examples whose highest-scoring class
// is the integer label, like tf.keras.metrics.SparseCategoricalAccuracy.
func SparseCategoricalAccuracy(name string) *Metric {
	return &Metric{name: name, kind: metricSparseCategoricalAccuracy}
}

// BinaryAccuracy returns the fraction of predictions on the same side of threshold as the
// 0/1 label, like tf.keras.metrics.BinaryAccuracy (threshold 0.5 for probabilities, 0 for
// logits).
func BinaryAccuracy(name string, threshold float64) *Metric {
	return &Metric{name: name, kind: metricBinaryAccuracy, threshold: float32(threshold)}
}

// Accuracy returns the fraction of predictions equal to their label, like
// tf.keras.metrics.Accuracy.
func Accuracy(name string) *Metric { return &Metric{name: name, kind: metricAccuracy} }

// CategoricalAccuracy returns the fraction of examples whose highest-scoring class is the
// one-hot label's, like tf.keras.metrics.CategoricalAccuracy.
func CategoricalAccuracy(name string) *Metric {
	return &Metric{name: name, kind: metricCategoricalAccuracy}
}

// Name returns the metric's name.
func (m *Metric) Name() string { return m.name }

// UpdateState adds a batch. Accuracy metrics take (labels, predictions); Mean takes the
// values to average alone, as Keras' mean.update_state(values) (a second argument is
// ignored).
func (m *Metric) UpdateState(yTrue *tensor.Tensor, yPred ...*tensor.Tensor) {
	if len(yPred) > 1 {
		panic(fmt.Errorf("%w: metric %s: UpdateState(labels, predictions) takes one predictions tensor, got %d "+
			"(sample weights are not supported)", ErrInvalidArgument, m.name, len(yPred)))
	}
	var p *tensor.Tensor
	if len(yPred) == 1 {
		p = yPred[0]
	}
	s, n := m.batchStats(yTrue, p)
	m.add(s, n)
}

// UpdateValues adds values to a Mean metric, each with weight 1.
func (m *Metric) UpdateValues(values *tensor.Tensor) { m.UpdateState(values, nil) }

func (m *Metric) add(s, n float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.total += s
	m.count += n
}

// Result returns the mean over everything seen since the last reset (0 when nothing).
func (m *Metric) Result() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.count == 0 {
		return 0
	}
	return m.total / m.count
}

// ResetStates is ResetState under tf.keras 2's name (metric.reset_states()).
func (m *Metric) ResetStates() { m.ResetState() }

// ResetState forgets everything seen.
func (m *Metric) ResetState() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.total, m.count = 0, 0
}

// String returns "name: result".
func (m *Metric) String() string { return fmt.Sprintf("%s: %.4f", m.name, m.Result()) }

// batchStats returns the sum of the metric over a batch and the number of examples.
func (m *Metric) batchStats(yTrue, yPred *tensor.Tensor) (sum, n float64) {
	if m.kind == metricMean {
		if yTrue == nil {
			panic(fmt.Errorf("%w: metric %s: values are nil", ErrInvalidArgument, m.name))
		}
		for _, v := range yTrue.Data() {
			sum += float64(v)
		}
		return sum, float64(yTrue.Size())
	}
	if yTrue == nil || yPred == nil {
		panic(fmt.Errorf("%w: metric %s: labels or predictions are nil", ErrInvalidArgument, m.name))
	}
	kind := m.kind
	if kind == metricAutoAccuracy {
		kind = accuracyFor(yTrue.Shape(), yPred.Shape())
	}
	y, p := yTrue.Data(), yPred.Data()
	switch kind {
	case metricCategoricalAccuracy:
		ps, ts := yPred.Shape(), yTrue.Shape()
		if len(ps) < 1 || !sameInts(ts, ps) || ps[len(ps)-1] == 0 {
			panic(fmt.Errorf("%w: metric %s: labels %v and predictions %v; want one-hot labels of the predictions' shape "+
				"(integer labels: SparseCategoricalAccuracy)", ErrShape, m.name, ts, ps))
		}
		c := ps[len(ps)-1]
		rows := len(p) / c
		for i := 0; i < rows; i++ {
			if argmax(p[i*c:(i+1)*c]) == argmax(y[i*c:(i+1)*c]) {
				sum++
			}
		}
		return perExampleShare(sum, rows, ps)
	case metricMSE, metricMAE:
		yy := matchShape(m.name, yTrue, yPred)
		d := tensor.Sub(yPred, yy)
		if kind == metricMSE {
			d = tensor.Square(d)
		} else {
			d = tensor.Abs(d)
		}
		for _, v := range d.Data() {
			sum += float64(v)
		}
		// The mean over the last axis per example, summed: the per-example values' sum.
		ps := d.Shape()
		batch := 1
		if len(ps) > 0 {
			batch = ps[0]
		}
		if batch == 0 || len(ps) == 0 {
			return sum, float64(batch)
		}
		return sum / float64(d.Size()/batch), float64(batch)
	case metricSparseCategoricalAccuracy:
		ps := yPred.Shape()
		if len(ps) != 2 || len(y) != ps[0] {
			panic(fmt.Errorf("%w: metric %s: labels %v and predictions %v; want (batch) labels and (batch, classes) scores",
				ErrShape, m.name, yTrue.Shape(), ps))
		}
		c := ps[1]
		for i := 0; i < ps[0]; i++ {
			row := p[i*c : (i+1)*c]
			best := 0
			for j := 1; j < c; j++ {
				if row[j] > row[best] {
					best = j
				}
			}
			if float32(best) == y[i] {
				sum++
			}
		}
		return sum, float64(ps[0])
	case metricBinaryAccuracy, metricAccuracy:
		if len(y) != len(p) {
			panic(fmt.Errorf("%w: metric %s: labels %v and predictions %v differ in size", ErrShape, m.name, yTrue.Shape(), yPred.Shape()))
		}
		for i := range y {
			var hit bool
			if m.kind == metricAccuracy {
				hit = y[i] == p[i]
			} else {
				hit = (p[i] > m.threshold) == (y[i] > 0.5)
			}
			if hit {
				sum++
			}
		}
		// Examples, not values: for (batch, k) predictions each example counts 1/k per value.
		batch := 1
		if s := yPred.Shape(); len(s) > 0 {
			batch = s[0]
		}
		if len(p) > 0 && batch > 0 {
			k := float64(len(p) / batch)
			return sum / k, float64(batch)
		}
		return 0, 0
	}
	panic(fmt.Errorf("%w: unknown metric %q", ErrInvalidArgument, m.name))
}

// accuracyFor is Keras' choice of accuracy for "accuracy" in compile, by the shapes of the
// labels and predictions (compile_utils' is_binary / is_sparse_categorical): binary when
// the predictions' last axis is 1, sparse categorical when the labels have a lower rank or
// a last axis of 1 against several classes, categorical (one-hot labels) otherwise.
func accuracyFor(ts, ps []int) metricKind {
	last := func(s []int) int {
		if len(s) == 0 {
			return 1
		}
		return s[len(s)-1]
	}
	switch {
	case last(ps) == 1:
		return metricBinaryAccuracy
	case len(ts) < len(ps) || last(ts) == 1 && last(ps) > 1:
		return metricSparseCategoricalAccuracy
	}
	return metricCategoricalAccuracy
}

func argmax(row []float32) int {
	best := 0
	for j := 1; j < len(row); j++ {
		if row[j] > row[best] {
			best = j
		}
	}
	return best
}

// perExampleShare turns hits over rows (of an example's leading axes) into the examples'
// share: an example of shape (batch, t, k) counts 1/t per row.
func perExampleShare(sum float64, rows int, ps []int) (float64, float64) {
	if len(ps) < 2 || ps[0] == 0 {
		return sum, float64(rows)
	}
	per := float64(rows / ps[0])
	return sum / per, float64(ps[0])
}

// compiledMetric resolves a metric name given to Compile for a loss, the way Keras picks
// the accuracy that fits the loss.
func compiledMetric(name string, loss *Loss) (*Metric, error) {
	th := 0.5
	if loss.fromLogits && loss.kind == lossBinaryCE {
		// Keras compares with 0.5 whatever the loss; logits are compared with 0 here, the
		// same decision as 0.5 on their probabilities.
		th = 0
	}
	switch name {
	case "accuracy", "acc":
		// As Keras: by the shapes of the labels and predictions, whatever the loss.
		return &Metric{name: "accuracy", kind: metricAutoAccuracy, threshold: float32(th)}, nil
	case "sparse_categorical_accuracy":
		return SparseCategoricalAccuracy(name), nil
	case "categorical_accuracy":
		return CategoricalAccuracy(name), nil
	case "binary_accuracy":
		return BinaryAccuracy(name, th), nil
	case "mse", "mean_squared_error":
		return &Metric{name: name, kind: metricMSE}, nil
	case "mae", "mean_absolute_error":
		return &Metric{name: name, kind: metricMAE}, nil
	}
	return nil, fmt.Errorf("%w: unknown metric %q (use \"accuracy\", \"sparse_categorical_accuracy\", \"categorical_accuracy\", "+
		"\"binary_accuracy\", \"mse\" or \"mae\")", ErrInvalidArgument, name)
}
