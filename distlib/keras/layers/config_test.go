package layers

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"godist/distlib/tensor"
)

// viaJSON passes a config through JSON, as a saved file does.
func viaJSON(t *testing.T, c Config) Config {
	t.Helper()
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatalf("json.Marshal(%v) = %v", c, err)
	}
	var out Config
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestConfigRoundTrip: every layer's config, through JSON and FromConfig, makes a layer
// with the same config that builds to the same output shape and parameter shapes.
func TestConfigRoundTrip(t *testing.T) {
	frozen := Dense(3, Name("frozen_dense"))
	frozen.SetTrainable(false)
	cases := []struct {
		layer Configurable
		in    []int
	}{
		{Input(28, 28), []int{28, 28}},
		{Reshape([]int{28, 28, 1}), []int{28, 28}},
		{Reshape([]int{-1, 4}), []int{8}},
		{Flatten(InputShape(4, 4, 2)), []int{4, 4, 2}},
		{Dense(10), []int{5}},
		{Dense(7, ReLU, UseBias(false), KernelRegularizer(L2(1e-4)), Name("d7")), []int{5}},
		{Dense(2, Softmax, KernelRegularizer(L1L2(0.01, 0.02))), []int{5}},
		{Dense(2, Sigmoid, KernelRegularizer(L1(0.5))), []int{5}},
		{frozen, []int{5}},
		{Dropout(0.2), []int{5}},
		{Conv2D(32, 3, ReLU, InputShape(28, 28, 1)), []int{28, 28, 1}},
		{Conv2D(4, 5, Tanh, Strides(2), Padding("same"), UseBias(false), KernelRegularizer(L2(0.1))), []int{9, 9, 3}},
		{MaxPooling2D(2), []int{6, 6, 3}},
		{MaxPooling2D(3, Strides(1), Padding("same")), []int{6, 6, 3}},
		{Embedding(100, 8, KernelRegularizer(L2(1e-3))), []int{4}},
	}
	for _, c := range cases {
		t.Run(c.layer.Class()+"/"+c.layer.Name(), func(t *testing.T) {
			cfg := c.layer.GetConfig()
			l, err := FromConfig(c.layer.Class(), viaJSON(t, cfg))
			if err != nil {
				t.Fatalf("FromConfig(%s, %v) = %v", c.layer.Class(), cfg, err)
			}
			got := viaJSON(t, l.(Configurable).GetConfig())
			if want := viaJSON(t, cfg); !reflect.DeepEqual(got, want) {
				t.Errorf("config after the round trip\n got %v\nwant %v", got, want)
			}
			if l.Name() != c.layer.Name() || l.Class() != c.layer.Class() {
				t.Errorf("made %s %s, want %s %s", l.Class(), l.Name(), c.layer.Class(), c.layer.Name())
			}
			if LayerTrainable(l) != LayerTrainable(c.layer) {
				t.Errorf("trainable %v, want %v", LayerTrainable(l), LayerTrainable(c.layer))
			}
			out1, ps1, err1 := c.layer.Build(c.in, 1)
			out2, ps2, err2 := l.Build(c.in, 1)
			if err1 != nil || err2 != nil {
				t.Fatalf("Build: %v, %v", err1, err2)
			}
			if !reflect.DeepEqual(out1, out2) || len(ps1) != len(ps2) {
				t.Fatalf("built to %v with %d params, want %v with %d", out2, len(ps2), out1, len(ps1))
			}
			for i := range ps1 {
				if ps1[i].Name != ps2[i].Name || !reflect.DeepEqual(ps1[i].Init.Shape(), ps2[i].Init.Shape()) {
					t.Errorf("param %d: %s %v, want %s %v", i, ps2[i].Name, ps2[i].Init.Shape(), ps1[i].Name, ps1[i].Init.Shape())
				}
			}
			if r1, ok := c.layer.(Regularized); ok && r1.HasRegularizer() {
				vals := []*tensor.Tensor{ps1[0].Init}
				p1 := r1.RegularizationLoss(vals).Data()[0]
				p2 := l.(Regularized).RegularizationLoss(vals).Data()[0]
				if p1 != p2 {
					t.Errorf("regularization loss %v, want %v", p2, p1)
				}
			}
		})
	}
}

// TestFromConfigErrors: a config godist cannot honor is an error naming the class and the
// key, never another layer.
func TestFromConfigErrors(t *testing.T) {
	cases := []struct {
		class string
		cfg   string
		want  string
	}{
		{"LSTM", `{"units": 4}`, `layer class "LSTM" is not one godist knows`},
		{"Dense", `{"name": "d"}`, `Dense config: layers: invalid argument: "units" is missing`},
		{"Dense", `{"units": "ten"}`, `"units" is "ten", want an integer`},
		{"Dense", `{"units": 2.5}`, `"units" is 2.5, want an integer`},
		{"Dense", `{"units": 4, "activation": "gelu"}`, `unknown activation "gelu"`},
		{"Dense", `{"units": 4, "kernel_initializer": "he_normal"}`, `unknown key "kernel_initializer"`},
		{"Dense", `{"units": 4, "dtype": "float16"}`, `dtype "float16": godist layers compute in float32`},
		{"Dense", `{"units": 4, "kernel_regularizer": {"class_name": "OrthogonalRegularizer"}}`, `godist knows the regularizers L1, L2 and L1L2`},
		{"Conv2D", `{"filters": 4, "kernel_size": [3, 5], "strides": [1, 1]}`, `"kernel_size" is [3 5]: godist's windows and strides are square`},
		{"MaxPooling2D", `{"pool_size": [], "strides": [2, 2]}`, `"pool_size" is [], want a size`},
		{"InputLayer", `{"batch_shape": [28, 28]}`, `"batch_shape" is [28,28], want [null, d1, d2, ...]`},
		{"Dense", `{"units": 4, "batch_input_shape": [null, 0]}`, `dimension 0 is 0`},
	}
	for _, c := range cases {
		var cfg Config
		if err := json.Unmarshal([]byte(c.cfg), &cfg); err != nil {
			t.Fatal(err)
		}
		l, err := FromConfig(c.class, cfg)
		if err == nil || !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("FromConfig(%s, %s) = %v, %v; want an ErrInvalidArgument containing %q", c.class, c.cfg, l, err, c.want)
		}
	}
}
