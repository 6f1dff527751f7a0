package layers

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
)

// Config is the part of a layer a saved model keeps to make it again: its constructor's
// arguments, like the dict Keras' layer.get_config() returns. Keys are Keras' argument
// names ("units", "activation", "kernel_size", ...), plus "name" and "trainable"; a layer
// declared with an input shape has "batch_input_shape" (Input: "batch_shape"), with null
// (nil) for the batch dimension as in Keras.
type Config map[string]any

// Configurable is a layer that can describe itself with a Config: every layer of this
// package. keras' Model.Save needs it of every layer.
type Configurable interface {
	Layer
	// GetConfig returns the layer's config, like layer.get_config().
	GetConfig() Config
}

// FromConfig makes a new layer of Keras class class ("Dense", "Conv2D", ...) from cfg, as
// GetConfig returned it or as it comes back from JSON, like
// keras.layers.deserialize({"class_name": class, "config": cfg}). It returns an error
// naming the class and the key that is missing or wrong; unknown keys are errors too, so
// that a config this godist cannot honor is never loaded as something else.
func FromConfig(class string, cfg Config) (l Layer, err error) {
	mk, ok := fromConfig[class]
	if !ok {
		known := make([]string, 0, len(fromConfig))
		for k := range fromConfig {
			known = append(known, k)
		}
		sort.Strings(known)
		return nil, fmt.Errorf("%w: layer class %q is not one godist knows (%s)", ErrInvalidArgument, class, strings.Join(known, ", "))
	}
	r := &configReader{class: class, cfg: cfg, used: map[string]bool{}}
	defer func() {
		if p := recover(); p != nil {
			e, isErr := p.(error)
			if !isErr {
				panic(p)
			}
			l, err = nil, fmt.Errorf("%s config: %w", class, e)
		}
	}()
	var opts []Option
	if name := r.str("name", ""); name != "" {
		opts = append(opts, Name(name))
	}
	if class != "InputLayer" {
		if s := r.batchShape("batch_input_shape"); s != nil {
			opts = append(opts, InputShape(s...))
		}
	}
	trainable := r.boolean("trainable", true)
	r.str("dtype", "float32") // the only dtype: checked below
	if dt, _ := cfg["dtype"].(string); dt != "" && dt != "float32" {
		return nil, fmt.Errorf("%w: %s config: dtype %q: godist layers compute in float32", ErrInvalidArgument, class, dt)
	}
	l = mk(r, opts)
	for k := range cfg {
		if !r.used[k] {
			return nil, fmt.Errorf("%w: %s config: unknown key %q", ErrInvalidArgument, class, k)
		}
	}
	if t, ok := l.(TrainableLayer); ok {
		t.SetTrainable(trainable)
	}
	return l, nil
}

var fromConfig = map[string]func(r *configReader, opts []Option) Layer{
	"InputLayer": func(r *configReader, opts []Option) Layer {
		shape := r.batchShape("batch_shape")
		if shape == nil {
			panic(fmt.Errorf("%w: batch_shape is missing", ErrInvalidArgument))
		}
		in := Input(shape...)
		if name, _ := r.cfg["name"].(string); name != "" {
			in.name = name
		}
		return in
	},
	"Reshape": func(r *configReader, opts []Option) Layer {
		return Reshape(r.ints("target_shape"), opts...)
	},
	"Flatten":                func(r *configReader, opts []Option) Layer { return Flatten(opts...) },
	"GlobalAveragePooling1D": func(r *configReader, opts []Option) Layer { return GlobalAveragePooling1D(opts...) },
	"GlobalAveragePooling2D": func(r *configReader, opts []Option) Layer { return GlobalAveragePooling2D(opts...) },
	"Dense": func(r *configReader, opts []Option) Layer {
		opts = append(opts, r.activation(), UseBias(r.boolean("use_bias", true)))
		if reg := r.regularizer("kernel_regularizer"); reg != nil {
			opts = append(opts, KernelRegularizer(reg))
		}
		return Dense(r.integer("units"), opts...)
	},
	"Dropout": func(r *configReader, opts []Option) Layer { return Dropout(r.number("rate"), opts...) },
	"Conv2D": func(r *configReader, opts []Option) Layer {
		opts = append(opts, r.activation(), UseBias(r.boolean("use_bias", true)),
			Strides(r.square("strides")), Padding(r.str("padding", "valid")))
		if reg := r.regularizer("kernel_regularizer"); reg != nil {
			opts = append(opts, KernelRegularizer(reg))
		}
		return Conv2D(r.integer("filters"), r.square("kernel_size"), opts...)
	},
	"MaxPooling2D": func(r *configReader, opts []Option) Layer {
		opts = append(opts, Strides(r.square("strides")), Padding(r.str("padding", "valid")))
		return MaxPooling2D(r.square("pool_size"), opts...)
	},
	"Embedding": func(r *configReader, opts []Option) Layer {
		if reg := r.regularizer("embeddings_regularizer"); reg != nil {
			opts = append(opts, KernelRegularizer(reg))
		}
		return Embedding(r.integer("input_dim"), r.integer("output_dim"), opts...)
	},
}

// common is the config every layer has.
func (b *base) common() Config {
	c := Config{"name": b.name, "trainable": b.Trainable(), "dtype": "float32"}
	if b.inputShape != nil {
		c["batch_input_shape"] = batchShapeOf(b.inputShape)
	}
	return c
}

func batchShapeOf(shape []int) []any {
	s := []any{nil}
	for _, d := range shape {
		s = append(s, d)
	}
	return s
}

func regularizerConfig(r Regularizer) any {
	if r == nil {
		return nil
	}
	x, ok := r.(l1l2)
	if !ok {
		return map[string]any{"class_name": fmt.Sprintf("%T", r)}
	}
	switch {
	case x.l1 == 0:
		return map[string]any{"class_name": "L2", "config": map[string]any{"l2": float64(x.l2)}}
	case x.l2 == 0:
		return map[string]any{"class_name": "L1", "config": map[string]any{"l1": float64(x.l1)}}
	}
	return map[string]any{"class_name": "L1L2", "config": map[string]any{"l1": float64(x.l1), "l2": float64(x.l2)}}
}

// GetConfig implements Configurable: {"batch_shape": [null, 28, 28], "name": ...}.
func (l *InputLayer) GetConfig() Config {
	c := l.common()
	delete(c, "batch_input_shape")
	c["batch_shape"] = batchShapeOf(l.inputShape)
	return c
}

// GetConfig implements Configurable: {"target_shape": [28, 28, 1], ...}.
func (l *ReshapeLayer) GetConfig() Config {
	c := l.common()
	c["target_shape"] = append([]int(nil), l.target...)
	return c
}

// GetConfig implements Configurable.
func (l *FlattenLayer) GetConfig() Config { return l.common() }

// GetConfig implements Configurable: {"units", "activation", "use_bias",
// "kernel_regularizer", ...}.
func (l *DenseLayer) GetConfig() Config {
	c := l.common()
	c["units"], c["activation"], c["use_bias"] = l.units, string(l.Activation()), l.useBias
	c["kernel_regularizer"] = regularizerConfig(l.reg)
	return c
}

// GetConfig implements Configurable: {"rate", ...}.
func (l *DropoutLayer) GetConfig() Config {
	c := l.common()
	c["rate"] = float64(l.rate)
	return c
}

// GetConfig implements Configurable: {"filters", "kernel_size", "strides", "padding",
// "activation", "use_bias", "kernel_regularizer", ...}.
func (l *Conv2DLayer) GetConfig() Config {
	c := l.common()
	act := l.activation
	if act == "" {
		act = Linear
	}
	c["filters"], c["kernel_size"], c["strides"] = l.filters, []int{l.kernel, l.kernel}, []int{l.strides, l.strides}
	c["padding"], c["activation"], c["use_bias"] = l.padding, string(act), l.useBias
	c["kernel_regularizer"] = regularizerConfig(l.reg)
	return c
}

// GetConfig implements Configurable: {"pool_size", "strides", "padding", ...}.
func (l *MaxPooling2DLayer) GetConfig() Config {
	c := l.common()
	c["pool_size"], c["strides"], c["padding"] = []int{l.pool, l.pool}, []int{l.strides, l.strides}, l.padding
	return c
}

// GetConfig implements Configurable: {"input_dim", "output_dim", "embeddings_regularizer",
// ...}.
func (l *EmbeddingLayer) GetConfig() Config {
	c := l.common()
	c["input_dim"], c["output_dim"] = l.inputDim, l.outputDim
	c["embeddings_regularizer"] = regularizerConfig(l.reg)
	return c
}

// configReader reads typed values out of a Config that may have come through JSON
// (numbers as float64, lists as []any); a missing or mistyped key panics with an error
// FromConfig returns.
type configReader struct {
	class string
	cfg   Config
	used  map[string]bool
}

func (r *configReader) get(key string) (any, bool) {
	r.used[key] = true
	v, ok := r.cfg[key]
	return v, ok && v != nil
}

func (r *configReader) bad(key string, v any, want string) {
	panic(fmt.Errorf("%w: %q is %s, want %s", ErrInvalidArgument, key, jsonOf(v), want))
}

func jsonOf(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func (r *configReader) str(key, def string) string {
	v, ok := r.get(key)
	if !ok {
		return def
	}
	s, isStr := v.(string)
	if !isStr {
		r.bad(key, v, "a string")
	}
	return s
}

func (r *configReader) boolean(key string, def bool) bool {
	v, ok := r.get(key)
	if !ok {
		return def
	}
	b, isBool := v.(bool)
	if !isBool {
		r.bad(key, v, "true or false")
	}
	return b
}

// required returns key's value, or panics saying it is missing.
func (r *configReader) required(key string) any {
	v, ok := r.get(key)
	if !ok {
		panic(fmt.Errorf("%w: %q is missing", ErrInvalidArgument, key))
	}
	return v
}

func (r *configReader) number(key string) float64 {
	v := r.required(key)
	f, isNum := toFloat(v)
	if !isNum {
		r.bad(key, v, "a number")
	}
	return f
}

func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case float32:
		return float64(x), true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	}
	return 0, false
}

func toInt(v any) (int, bool) {
	f, ok := toFloat(v)
	if !ok || f != math.Trunc(f) || math.Abs(f) > 1<<31 {
		return 0, false
	}
	return int(f), true
}

func (r *configReader) integer(key string) int {
	v := r.required(key)
	n, isInt := toInt(v)
	if !isInt {
		r.bad(key, v, "an integer")
	}
	return n
}

// list returns key's value as a list of integers, nil entries as -1.
func (r *configReader) list(key string) ([]int, bool) {
	v, ok := r.get(key)
	if !ok {
		return nil, false
	}
	var items []any
	switch x := v.(type) {
	case []any:
		items = x
	case []int:
		for _, d := range x {
			items = append(items, d)
		}
	default:
		n, isInt := toInt(v)
		if !isInt {
			r.bad(key, v, "a list of integers")
		}
		return []int{n}, true
	}
	out := make([]int, len(items))
	for i, it := range items {
		if it == nil {
			out[i] = -1
			continue
		}
		n, isInt := toInt(it)
		if !isInt {
			r.bad(key, v, "a list of integers")
		}
		out[i] = n
	}
	return out, true
}

func (r *configReader) ints(key string) []int {
	s, ok := r.list(key)
	if !ok {
		panic(fmt.Errorf("%w: %q is missing", ErrInvalidArgument, key))
	}
	return s
}

// square reads a window size or stride: one integer or a list of equal ones (godist's
// windows are square).
func (r *configReader) square(key string) int {
	s := r.ints(key)
	if len(s) == 0 {
		r.bad(key, s, "a size")
	}
	for _, d := range s[1:] {
		if d != s[0] {
			panic(fmt.Errorf("%w: %q is %v: godist's windows and strides are square (the same in every dimension)", ErrInvalidArgument, key, s))
		}
	}
	return s[0]
}

// batchShape reads a shape with a leading null batch dimension; nil when absent.
func (r *configReader) batchShape(key string) []int {
	s, ok := r.list(key)
	if !ok {
		return nil
	}
	if len(s) < 2 || s[0] != -1 {
		panic(fmt.Errorf("%w: %q is %v, want [null, d1, d2, ...] (the batch dimension unknown)", ErrInvalidArgument, key, jsonOf(r.cfg[key])))
	}
	return s[1:]
}

func (r *configReader) activation() Option {
	a := r.str("activation", string(Linear))
	return Activation(a)
}

func (r *configReader) regularizer(key string) Regularizer {
	v, ok := r.get(key)
	if !ok {
		return nil
	}
	m, isMap := v.(map[string]any)
	if !isMap {
		r.bad(key, v, `{"class_name": "L2", "config": {"l2": ...}}`)
	}
	cfg, _ := m["config"].(map[string]any)
	factor := func(k string) float64 {
		f, isNum := toFloat(cfg[k])
		if !isNum {
			r.bad(key, v, fmt.Sprintf("a config with the number %q", k))
		}
		return f
	}
	switch m["class_name"] {
	case "L2":
		return L2(factor("l2"))
	case "L1":
		return L1(factor("l1"))
	case "L1L2":
		return L1L2(factor("l1"), factor("l2"))
	}
	panic(fmt.Errorf("%w: %q has class %v: godist knows the regularizers L1, L2 and L1L2", ErrInvalidArgument, key, jsonOf(m["class_name"])))
}
