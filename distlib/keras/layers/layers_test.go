package layers

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"godist/distlib/tensor"
)

func TestBuildShapes(t *testing.T) {
	tests := []struct {
		name   string
		l      Layer
		in     []int
		out    []int
		params []string
	}{
		{"dense", Dense(4), []int{3}, []int{4}, []string{"kernel [3 4]", "bias [4]"}},
		{"dense no bias", Dense(4, UseBias(false)), []int{3}, []int{4}, []string{"kernel [3 4]"}},
		{"conv valid", Conv2D(8, 3), []int{28, 28, 1}, []int{26, 26, 8}, []string{"kernel [3 3 1 8]", "bias [8]"}},
		{"conv same stride 2", Conv2D(4, 3, Padding("same"), Strides(2)), []int{7, 7, 2}, []int{4, 4, 4}, []string{"kernel [3 3 2 4]", "bias [4]"}},
		{"pool", MaxPooling2D(2), []int{26, 26, 8}, []int{13, 13, 8}, nil},
		{"pool stride 1", MaxPooling2D(2, Strides(1)), []int{4, 4, 1}, []int{3, 3, 1}, nil},
		{"flatten", Flatten(), []int{13, 13, 8}, []int{1352}, nil},
		{"reshape", Reshape([]int{28, 28, 1}), []int{28, 28}, []int{28, 28, 1}, nil},
		{"reshape -1", Reshape([]int{-1, 2}), []int{3, 4}, []int{6, 2}, nil},
		{"dropout", Dropout(0.2), []int{5}, []int{5}, nil},
		{"input", Input(28, 28), []int{28, 28}, []int{28, 28}, nil},
	}
	for _, tc := range tests {
		out, ps, err := tc.l.Build(tc.in, 1)
		if err != nil {
			t.Errorf("%s: Build(%v): %v", tc.name, tc.in, err)
			continue
		}
		if !sameShape(out, tc.out) {
			t.Errorf("%s: Build(%v) = %v, want %v", tc.name, tc.in, out, tc.out)
		}
		var got []string
		for _, p := range ps {
			got = append(got, fmt.Sprint(p.Name, " ", p.Init.Shape()))
		}
		if strings.Join(got, ",") != strings.Join(tc.params, ",") {
			t.Errorf("%s: params %v, want %v", tc.name, got, tc.params)
		}
	}
}

func TestBuildErrors(t *testing.T) {
	tests := []struct {
		name string
		l    Layer
		in   []int
		want string
	}{
		{"dense rank", Dense(2), []int{3, 3}, "Flatten"},
		{"conv rank", Conv2D(2, 3), []int{5, 5}, "rank 4"},
		{"conv too small", Conv2D(2, 5), []int{3, 3, 1}, "smaller than the window"},
		{"reshape size", Reshape([]int{5}), []int{2, 3}, "cannot reshape"},
		{"input mismatch", Input(4), []int{5}, "declares input shape"},
	}
	for _, tc := range tests {
		_, _, err := tc.l.Build(tc.in, 1)
		if !errors.Is(err, ErrShape) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want ErrShape containing %q", tc.name, err, tc.want)
		}
	}
}

func TestConstructorPanics(t *testing.T) {
	tests := []struct {
		name string
		fn   func()
		want string
	}{
		{"dense units", func() { Dense(0) }, "units 0"},
		{"strides on dense", func() { Dense(2, Strides(2)) }, "Dense does not take the strides option"},
		{"bad padding", func() { Conv2D(2, 3, Padding("full")) }, `Padding("full")`},
		{"bad activation", func() { Dense(2, Activation("gelu")) }, `unknown activation "gelu"`},
		{"dropout rate", func() { Dropout(1) }, "rate 1"},
		{"nil option", func() { Flatten(nil) }, "option 0 is nil"},
		{"input shape", func() { Input(0) }, "dimension 0 is 0"},
		{"reshape two -1", func() { Reshape([]int{-1, -1}) }, "at most one -1"},
	}
	for _, tc := range tests {
		func() {
			defer func() {
				err, _ := recover().(error)
				if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("%s: panic %v, want ErrInvalidArgument containing %q", tc.name, err, tc.want)
				}
			}()
			tc.fn()
		}()
	}
}

func TestNamesAndDropout(t *testing.T) {
	ResetNames()
	a, b, c := Dense(1), Dense(1), Dense(1, Name("head"))
	if a.Name() != "dense" || b.Name() != "dense_1" || c.Name() != "head" {
		t.Errorf("names = %s, %s, %s; want dense, dense_1, head", a.Name(), b.Name(), c.Name())
	}
	d := Dropout(0.5)
	x := tensor.Ones(4, 100)
	if got := d.Forward(x, nil, false, 1); got != x {
		t.Errorf("Dropout at inference changed its input")
	}
	y := d.Forward(x, nil, true, 1).Data()
	zeros := 0
	for _, v := range y {
		if v == 0 {
			zeros++
		} else if v != 2 {
			t.Fatalf("kept value %v, want 1/(1-0.5) = 2", v)
		}
	}
	if zeros < 150 || zeros > 250 {
		t.Errorf("dropout zeroed %d of 400, want about 200", zeros)
	}
}

// TestFusedForwardMatchesOps checks that Dense and Conv2D, which use the fused tensor ops,
// compute what the separate ops (MatMul or Conv2D, BiasAdd, activation) compute.
func TestFusedForwardMatchesOps(t *testing.T) {
	rnd := func(seed uint64, shape ...int) *tensor.Tensor { return tensor.RandomNormal(shape, 0, 1, seed) }
	dense := func(act Activation, bias bool) func(x *tensor.Tensor, p []*tensor.Tensor) *tensor.Tensor {
		return func(x *tensor.Tensor, p []*tensor.Tensor) *tensor.Tensor {
			y := tensor.MatMul(x, p[0], false, false)
			if bias {
				y = tensor.BiasAdd(y, p[1])
			}
			return act.Apply(y)
		}
	}
	conv := func(act Activation, bias bool, stride int, padding string) func(x *tensor.Tensor, p []*tensor.Tensor) *tensor.Tensor {
		return func(x *tensor.Tensor, p []*tensor.Tensor) *tensor.Tensor {
			y := tensor.Conv2D(x, p[0], stride, padding)
			if bias {
				y = tensor.BiasAdd(y, p[1])
			}
			return act.Apply(y)
		}
	}
	tests := []struct {
		name string
		l    Layer
		in   []int
		want func(x *tensor.Tensor, p []*tensor.Tensor) *tensor.Tensor
	}{
		{"dense linear", Dense(5), []int{4}, dense(Linear, true)},
		{"dense relu", Dense(5, ReLU), []int{4}, dense(ReLU, true)},
		{"dense relu no bias", Dense(5, ReLU, UseBias(false)), []int{4}, dense(ReLU, false)},
		{"dense sigmoid", Dense(5, Sigmoid), []int{4}, dense(Sigmoid, true)},
		{"conv relu", Conv2D(3, 3, ReLU), []int{6, 6, 2}, conv(ReLU, true, 1, "valid")},
		{"conv linear same stride 2", Conv2D(3, 3, Padding("same"), Strides(2)), []int{5, 6, 1}, conv(Linear, true, 2, "same")},
		{"conv tanh no bias", Conv2D(2, 2, Tanh, UseBias(false)), []int{4, 4, 3}, conv(Tanh, false, 1, "valid")},
	}
	for i, tc := range tests {
		_, params, err := tc.l.Build(tc.in, uint64(i+1))
		if err != nil {
			t.Fatalf("%s: Build(%v): %v", tc.name, tc.in, err)
		}
		x := rnd(uint64(10+i), append([]int{3}, tc.in...)...)
		var p []*tensor.Tensor
		for j, pr := range params {
			p = append(p, rnd(uint64(100*i+j), pr.Init.Shape()...))
		}
		got, want := tc.l.Forward(x, p, true, 0), tc.want(x, p)
		if !sameShape(got.Shape(), want.Shape()) {
			t.Fatalf("%s: Forward shape = %v, want %v", tc.name, got.Shape(), want.Shape())
		}
		for k, g := range got.Data() {
			if w := want.Data()[k]; g-w > 1e-4 || w-g > 1e-4 {
				t.Errorf("%s: Forward value %d = %g, want %g", tc.name, k, g, w)
				break
			}
		}
	}
}

// TestOutputReusable: a layer's output may live in storage the next training step
// overwrites only when the layer that reads it (through views) is one that keeps nothing.
func TestOutputReusable(t *testing.T) {
	conv, pool, flat, dense := Conv2D(4, 3, ReLU), MaxPooling2D(2), Flatten(), Dense(3)
	tests := []struct {
		name string
		ls   []Layer
		i    int
		want bool
	}{
		{"pool then flatten then dense", []Layer{conv, pool, flat, dense}, 1, true},
		{"pool then conv", []Layer{conv, pool, Conv2D(2, 3), flat, dense}, 1, true},
		{"pool then reshape then dense", []Layer{conv, pool, Reshape([]int{-1}), dense}, 1, true},
		{"the model's output", []Layer{conv, pool}, 1, false},
		{"flattened model output", []Layer{conv, pool, flat}, 1, false},
		{"dropout may return its input", []Layer{conv, pool, Dropout(0.5), flat, dense}, 1, false},
		{"a user layer may keep it", []Layer{conv, pool, keeper{}, dense}, 1, false},
	}
	for _, tc := range tests {
		if got := OutputReusable(tc.ls, tc.i); got != tc.want {
			t.Errorf("%s: OutputReusable = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// keeper stands for a layer written by a user, which might keep its input.
type keeper struct{ Layer }
