package kernels

import (
	"fmt"
	"math"
	"unsafe"
)

// DevicePtr is a device memory address (the driver API's CUdeviceptr).
type DevicePtr uintptr

// ParamKind is the type of one kernel parameter.
type ParamKind uint8

const (
	// Ptr is a device pointer (a DevicePtr; PTX .u64).
	Ptr ParamKind = iota + 1
	// F32 is a float32 (PTX .f32).
	F32
	// I32 is a non-negative int32: a size, an index or a flag (PTX .u32).
	I32
)

// String returns the kind's Go-side name: "ptr", "f32" or "i32".
func (k ParamKind) String() string {
	switch k {
	case Ptr:
		return "ptr"
	case F32:
		return "f32"
	case I32:
		return "i32"
	}
	return fmt.Sprintf("ParamKind(%d)", uint8(k))
}

// PTXType returns the type the PTX declares for a parameter of this kind.
func (k ParamKind) PTXType() string {
	switch k {
	case Ptr:
		return ".u64"
	case F32:
		return ".f32"
	case I32:
		return ".u32"
	}
	return "?"
}

// Size returns the parameter's size in bytes, which is also its alignment in the
// parameter buffer.
func (k ParamKind) Size() int {
	if k == Ptr {
		return 8
	}
	return 4
}

// Param is one kernel parameter: its name in kernels.cu, its kind, and for pointers
// whether a null pointer is allowed.
type Param struct {
	Name     string
	Kind     ParamKind
	Nullable bool
}

// Shape says which geometry helper gives a kernel's launch configuration.
type Shape uint8

const (
	// ShapeLinear kernels loop grid-stride over n elements: use Linear(n).
	ShapeLinear Shape = iota + 1
	// ShapeRowBlocks kernels take one block per row with shared memory: RowBlocks(rows, cols).
	ShapeRowBlocks
	// ShapeColumnTiles kernels take 32x8 blocks over columns: ColumnTiles(cols).
	ShapeColumnTiles
)

// Kernel describes one kernel of kernels.cu: its PTX entry name, its parameters in order,
// its launch shape and the CPU implementation it reproduces.
type Kernel struct {
	Name   string
	Params []Param
	Shape  Shape
	CPU    string
}

func p(name string) Param  { return Param{Name: name, Kind: Ptr} }
func f(name string) Param  { return Param{Name: name, Kind: F32} }
func i(name string) Param  { return Param{Name: name, Kind: I32} }
func pn(name string) Param { return Param{Name: name, Kind: Ptr, Nullable: true} }
func ps(names ...string) []Param {
	out := make([]Param, len(names))
	for j, n := range names {
		out[j] = p(n)
	}
	return out
}

func cat(lists ...[]Param) []Param {
	var out []Param
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// The geometry parameters shared by the conv and pool kernels (windowGeom's fields).
var convDims = []Param{i("n"), i("h"), i("w"), i("c"), i("kh"), i("kw"), i("stride"), i("padTop"), i("padLeft"), i("oh"), i("ow")}
var poolDims = []Param{i("n"), i("h"), i("w"), i("c"), i("size"), i("stride"), i("padTop"), i("padLeft"), i("oh"), i("ow")}

// The kernels of kernels.cu. See each kernel's comment there for its exact contract.
var (
	Fill       = &Kernel{"fill_f32", []Param{p("x"), f("v"), i("n")}, ShapeLinear, "a fill loop"}
	CastI32F32 = &Kernel{"cast_i32_f32", []Param{p("src"), p("dst"), i("n")}, ShapeLinear, "float32(v)"}
	CastF32I32 = &Kernel{"cast_f32_i32", []Param{p("src"), p("dst"), i("n")}, ShapeLinear, "int32(v)"}

	Add             = &Kernel{"add_f32", cat(ps("a", "b", "z"), []Param{i("n")}), ShapeLinear, "tensor.Add"}
	Sub             = &Kernel{"sub_f32", cat(ps("a", "b", "z"), []Param{i("n")}), ShapeLinear, "tensor.Sub"}
	Mul             = &Kernel{"mul_f32", cat(ps("a", "b", "z"), []Param{i("n")}), ShapeLinear, "tensor.Mul"}
	Scale           = &Kernel{"scale_f32", []Param{p("x"), f("s"), p("z"), i("n")}, ShapeLinear, "tensor.Scale"}
	Axpy            = &Kernel{"axpy_f32", []Param{f("a"), p("x"), p("y"), i("n")}, ShapeLinear, "y[i] += a*x[i]"}
	ReLU            = &Kernel{"relu_f32", []Param{p("x"), p("y"), i("n")}, ShapeLinear, "tensor.ReLU"}
	ReLUGrad        = &Kernel{"relu_grad_f32", cat(ps("g", "y", "dx"), []Param{i("n")}), ShapeLinear, "tensor.ReLU's gradient (reluGrad)"}
	BiasAdd         = &Kernel{"bias_add_f32", cat(ps("x", "b", "y"), []Param{i("rows"), i("cols")}), ShapeLinear, "tensor.BiasAdd"}
	BiasReLU        = &Kernel{"bias_relu_f32", cat(ps("x", "b", "y"), []Param{i("rows"), i("cols")}), ShapeLinear, "tensor.Dense(relu=true)'s epilogue"}
	BiasGrad        = &Kernel{"bias_grad_f32", cat(ps("g", "db"), []Param{i("rows"), i("cols")}), ShapeColumnTiles, "tensor.BiasAdd's gradient (sumRows)"}
	RowSum          = &Kernel{"row_sum_f32", cat(ps("x", "out"), []Param{i("rows"), i("cols")}), ShapeRowBlocks, "tensor.ReduceSum over axis 1"}
	RowMax          = &Kernel{"row_max_f32", cat(ps("x", "out"), []Param{i("rows"), i("cols")}), ShapeRowBlocks, "tensor.ReduceMax over axis 1"}
	SoftmaxXent     = &Kernel{"softmax_xent_f32", cat(ps("logits", "labels", "logp", "loss", "bad"), []Param{i("rows"), i("cols")}), ShapeRowBlocks, "tensor.SparseSoftmaxCrossEntropyWithLogits"}
	SoftmaxXentGrad = &Kernel{"softmax_xent_grad_f32", cat(ps("g", "logp", "labels", "dlogits"), []Param{i("rows"), i("cols")}), ShapeLinear, "tensor.SparseSoftmaxCrossEntropyWithLogits's gradient"}

	Im2Col       = &Kernel{"im2col_f32", cat(ps("x", "cols"), convDims), ShapeLinear, "im2col in distlib/tensor/conv.go"}
	Col2Im       = &Kernel{"col2im_f32", cat(ps("cols", "dx"), convDims), ShapeLinear, "col2im in distlib/tensor/conv.go"}
	Conv2DDirect = &Kernel{"conv2d_direct_f32", cat(ps("x", "k", "y"), []Param{i("n"), i("h"), i("w"), i("c"), i("kh"), i("kw"), i("o"), i("stride"), i("padTop"), i("padLeft"), i("oh"), i("ow")}), ShapeLinear, "tensor.Conv2D"}
	MaxPool      = &Kernel{"maxpool_f32", cat(ps("x", "y", "arg"), poolDims), ShapeLinear, "tensor.MaxPool2D (maxPoolRaw)"}
	MaxPoolGrad  = &Kernel{"maxpool_grad_f32", cat(ps("dy", "arg", "dx"), []Param{i("nout")}), ShapeLinear, "tensor.MaxPool2D's gradient"}

	SGD         = &Kernel{"sgd_f32", []Param{p("w"), p("g"), f("lr"), i("n")}, ShapeLinear, "optim.Spec.Apply (SGD, momentum 0)"}
	SGDMomentum = &Kernel{"sgd_momentum_f32", []Param{p("w"), p("g"), p("v"), f("lr"), f("m"), i("nesterov"), i("n")}, ShapeLinear, "optim.Spec.Apply (SGD with momentum, Nesterov)"}
	Adam        = &Kernel{"adam_f32", []Param{p("w"), p("g"), p("m"), p("v"), f("alpha"), f("b1"), f("b2"), f("eps"), i("n")}, ShapeLinear, "optim.Spec.Apply (Adam)"}
	RMSprop     = &Kernel{"rmsprop_f32", []Param{p("w"), p("g"), p("v"), pn("mom"), f("lr"), f("rho"), f("eps"), f("momentum"), i("n")}, ShapeLinear, "optim.Spec.Apply (RMSprop)"}
)

// All lists every kernel of kernels.cu, in the source's order.
var All = []*Kernel{
	Fill, CastI32F32, CastF32I32,
	Add, Sub, Mul, Scale, Axpy, ReLU, ReLUGrad, BiasAdd, BiasReLU, BiasGrad,
	RowSum, RowMax, SoftmaxXent, SoftmaxXentGrad,
	Im2Col, Col2Im, Conv2DDirect, MaxPool, MaxPoolGrad,
	SGD, SGDMomentum, Adam, RMSprop,
}

// Lookup returns the kernel named name (its PTX entry name, e.g. "adam_f32").
func Lookup(name string) (*Kernel, error) {
	for _, k := range All {
		if k.Name == name {
			return k, nil
		}
	}
	return nil, fmt.Errorf("gpu/kernels: no kernel named %q (see kernels.All)", name)
}

// AdamAlpha returns Adam's step size for step t (counting from 1) exactly as
// distlib/optim computes it: lr*sqrt(1-beta2^t)/(1-beta1^t) in float64, then float32.
// adam_f32 takes it with b1 = float32(1-beta1) and b2 = float32(1-beta2).
func AdamAlpha(lr, beta1, beta2 float64, t int64) (float32, error) {
	if t < 1 {
		return 0, fmt.Errorf("gpu/kernels: Adam step t = %d must count from 1", t)
	}
	tf := float64(t)
	return float32(lr * math.Sqrt(1-math.Pow(beta2, tf)) / (1 - math.Pow(beta1, tf))), nil
}

// value converts one Go argument for parameter prm into its 8-byte slot (little end used
// for 4-byte kinds, as the driver reads it).
func (k *Kernel) value(j int, prm Param, v any) (uint64, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("gpu/kernels: %s argument %d (%s %s): %s", k.Name, j, prm.Name, prm.Kind, fmt.Sprintf(format, args...))
	}
	switch prm.Kind {
	case Ptr:
		var a uintptr
		switch x := v.(type) {
		case DevicePtr:
			a = uintptr(x)
		case uintptr:
			a = x
		default:
			return 0, bad("got %T; pass a kernels.DevicePtr (device memory from the gpu package)", v)
		}
		if a == 0 && !prm.Nullable {
			return 0, bad("null device pointer; allocate the buffer first")
		}
		return uint64(a), nil
	case F32:
		var x float32
		switch y := v.(type) {
		case float32:
			x = y
		case float64:
			if !math.IsInf(y, 0) && !math.IsNaN(y) && math.Abs(y) > math.MaxFloat32 {
				return 0, bad("%g overflows float32", y)
			}
			x = float32(y)
		default:
			return 0, bad("got %T; pass a float32", v)
		}
		return uint64(math.Float32bits(x)), nil
	case I32:
		var x int64
		switch y := v.(type) {
		case int:
			x = int64(y)
		case int32:
			x = int64(y)
		case int64:
			x = y
		case bool:
			if y {
				x = 1
			}
		default:
			return 0, bad("got %T; pass an int", v)
		}
		if x < 0 || x > math.MaxInt32 {
			return 0, bad("%d is outside [0, %d]", x, math.MaxInt32)
		}
		return uint64(uint32(x)), nil
	}
	return 0, bad("unknown parameter kind")
}

func (k *Kernel) values(vals []any) ([]uint64, error) {
	if len(vals) != len(k.Params) {
		names := make([]string, len(k.Params))
		for j, prm := range k.Params {
			names[j] = prm.Name
		}
		return nil, fmt.Errorf("gpu/kernels: %s takes %d arguments (%v), got %d", k.Name, len(k.Params), names, len(vals))
	}
	out := make([]uint64, len(vals))
	for j, prm := range k.Params {
		v, err := k.value(j, prm, vals[j])
		if err != nil {
			return nil, err
		}
		out[j] = v
	}
	return out, nil
}

// Args checks vals against the kernel's parameters (count, Go type, range: pointers
// non-null unless Nullable, ints in [0, 2^31-1]) and returns the kernelParams array for
// cuLaunchKernel: one pointer per parameter, each to a copy of its value in memory that
// the returned slice keeps alive. Pointers take a DevicePtr, floats a float32 (or a
// float64 that fits), ints an int, int32, int64 or bool.
func (k *Kernel) Args(vals ...any) ([]unsafe.Pointer, error) {
	vs, err := k.values(vals)
	if err != nil {
		return nil, err
	}
	slots := make([]uint64, len(vs))
	ptrs := make([]unsafe.Pointer, len(vs))
	for j, v := range vs {
		if k.Params[j].Kind == Ptr {
			slots[j] = v
		} else {
			*(*uint32)(unsafe.Pointer(&slots[j])) = uint32(v)
		}
		ptrs[j] = unsafe.Pointer(&slots[j])
	}
	return ptrs, nil
}

// Pack checks vals as Args does and returns the parameters laid out in one buffer the way
// the PTX declares them (each at an offset aligned to its size), for cuLaunchKernel's
// CU_LAUNCH_PARAM_BUFFER_POINTER / CU_LAUNCH_PARAM_BUFFER_SIZE form.
func (k *Kernel) Pack(vals ...any) ([]byte, error) {
	vs, err := k.values(vals)
	if err != nil {
		return nil, err
	}
	var buf []byte
	for j, v := range vs {
		size := k.Params[j].Kind.Size()
		for len(buf)%size != 0 {
			buf = append(buf, 0)
		}
		for b := 0; b < size; b++ {
			buf = append(buf, byte(v>>(8*b)))
		}
	}
	return buf, nil
}
