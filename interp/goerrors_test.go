package interp

import (
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
)

// wantError runs a cell that must fail and returns its error.
func wantError(t *testing.T, s *Session, code string) *EvalError {
	t.Helper()
	_, rec, err := run(t, s, code)
	if err == nil {
		t.Fatalf("Execute(%q) succeeded (stdout %q), want an error", code, rec.text("stdout"))
	}
	return evalError(t, err)
}

// TestRangeOverInt covers Go 1.22's range over an integer: at top level with a variable
// of the same cell ("nil type" before, with a stray log line), in functions, over typed
// integers, and in functions replayed by a rebuild.
func TestRangeOverInt(t *testing.T) {
	s := newSession(t, Options{})
	_, rec := mustRun(t, s, "n := 3\nfor i := range n { fmt.Println(i) }")
	if got := rec.text("stdout"); got != "0\n1\n2\n" {
		t.Errorf("range over n printed %q, want 0 1 2", got)
	}
	if strings.Contains(rec.text("stdout")+rec.text("stderr"), "nil type") {
		t.Errorf("the cell logged %q %q", rec.text("stdout"), rec.text("stderr"))
	}
	runCells(t, s, []cellCase{
		{"k := 2\nfor range k { fmt.Print(\"x\") }", "", "xx"},
		{"for i := range 3 { i += 10; fmt.Print(i, \" \") }", "", "10 11 12 "},
		{"import \"time\"\nvar d time.Duration = 2\nfor i := range d { fmt.Print(i, \" \") }", "", "0s 1ns "},
		{"type Count uint8\nvar c Count = 2\nvar last Count\nfor i := range c { last = i }\nfmt.Println(last)", "", "1\n"},
		{"var fs []func() int\nfor i := range 3 { fs = append(fs, func() int { return i }) }\nfmt.Println(fs[0](), fs[2]())", "", "0 2\n"},
		{"for i := range len(\"ab\") { fmt.Print(i) }", "", "01"},
		// A function over a global, and one over its parameter, declared in a cell that
		// ranges at top level too.
		{"m := 4\nfor range m {}\nfunc overM() int { c := 0; for range m { c++ }; return c }\nfunc twice(k int) int { t := 0; for range k { t += 2 }; return t }", "", ""},
		{"overM() + twice(3)", "10", ""},
	})
	// Redefining twice rebuilds the interpreter, replaying overM.
	_, rec = mustRun(t, s, "func twice(k int) int { t := 0; for i := range k { t += 2 * i }; return t }")
	if !strings.Contains(rec.text("stderr"), "rebuilt") {
		t.Errorf("redefinition did not rebuild: stderr %q", rec.text("stderr"))
	}
	runCells(t, s, []cellCase{{"overM() + twice(3)", "10", ""}})
}

// TestRangeOverFunc covers Go 1.23's range over a function: it runs as a call of the
// function with the body as its yield function, at top level, in functions and after a
// rebuild, with break and continue; a body that returns, defers or jumps out is refused
// before anything in the cell runs, with the call to write instead.
func TestRangeOverFunc(t *testing.T) {
	s := newSession(t, Options{})
	runCells(t, s, []cellCase{
		{"seq := func(yield func(int) bool) {\n\tfor i := range 5 {\n\t\tif !yield(i) {\n\t\t\treturn\n\t\t}\n\t}\n}\nfor x := range seq {\n\tif x == 1 {\n\t\tcontinue\n\t}\n\tif x == 3 {\n\t\tbreak\n\t}\n\tfmt.Print(x, \" \")\n}", "", "0 2 "},
		{"func pairs(yield func(string, int) bool) {\n\t_ = yield(\"a\", 1) && yield(\"b\", 2)\n}\nfor k, v := range pairs {\n\tfmt.Print(k, v, \" \")\n}", "", "a1 b2 "},
		{"for k := range pairs {\n\tfor i := range 3 {\n\t\tif i == 1 {\n\t\t\tbreak\n\t\t}\n\t\tfmt.Print(k, i, \" \")\n\t}\n}", "", "a0 b0 "},
		{"var fs []func() int\nfor x := range seq {\n\tfs = append(fs, func() int { return x })\n}\nfmt.Println(len(fs), fs[0](), fs[4]())", "", "5 0 4\n"},
		{"func total() int {\n\tt := 0\n\tfor _, v := range pairs {\n\t\tt += v\n\t}\n\treturn t\n}\ntotal()", "3", ""},
		{"for range pairs {\n\tfmt.Print(\".\")\n}", "", ".."},
	})
	// total is replayed by a rebuild (pairs changes), and still ranges.
	_, rec := mustRun(t, s, "func pairs(yield func(string, int) bool) {\n\t_ = yield(\"c\", 10) && yield(\"d\", 20)\n}")
	if !strings.Contains(rec.text("stderr"), "rebuilt") {
		t.Errorf("redefinition did not rebuild: stderr %q", rec.text("stderr"))
	}
	runCells(t, s, []cellCase{{"total()", "30", ""}})

	mustRun(t, s, "ran := 0")
	ee := wantError(t, s, "ran = 1\nfunc first() int {\n\tfor x := range seq {\n\t\treturn x\n\t}\n\treturn -1\n}")
	want := "cell line 3: cannot range over seq (value of type func(func(int) bool)): the interpreter runs a range-over-func loop (Go 1.23) only without a return in its body\n" +
		"call the iterator with the loop body as its yield function: seq(func(v int) bool { ...; return true }) (return false to break)"
	if ee.Value != want {
		t.Errorf("a return in the body: %q, want %q", ee.Value, want)
	}
	runCells(t, s, []cellCase{{"ran", "0", ""}})
}

// TestGoFeaturesRefused covers a Go 1.24 form the interpreter cannot run, refused before
// anything in the cell runs with the Go form that runs, and Go 1.26's new of a value, which
// runs.
func TestGoFeaturesRefused(t *testing.T) {
	s := newSession(t, Options{})
	mustRun(t, s, "ran := 0")
	tests := []struct{ code, want string }{
		{"ran = 1\ntype Vec[T any] = []T", "cell line 2: generic type alias Vec: the interpreter does not run generic type aliases (Go 1.24)\ndeclare a generic type instead: type Vec[T any] []T"},
	}
	for _, tt := range tests {
		ee := wantError(t, s, tt.code)
		if ee.Name != "CompileError" || !strings.HasPrefix(ee.Value, tt.want) {
			t.Errorf("Execute(%q) = %s: %q, want a CompileError starting %q", tt.code, ee.Name, ee.Value, tt.want)
		}
	}
	runCells(t, s, []cellCase{
		{"ran", "0", ""},
		// min, max and clear in several statements of one cell (their hoisted temporaries
		// had one name per statement).
		{"a := min(3, 1, 2)\nb := max(2.5, 1)\nm := map[int]int{1: 1}\nclear(m)\nfmt.Println(a, b, len(m))", "", "1 2.5 0\n"},
		// An alias that is not generic runs; min, max and clear in a function survive a
		// rebuild (the type T changes below), and a type named T no longer breaks min and
		// max in functions (the prelude's type parameter was T too).
		{"type Ints = []int\nvar is Ints = []int{3, 1}\nlen(is)", "2", ""},
		{"type T struct{ A int }\nfunc lo(xs []int) int {\n\tm := map[int]bool{1: true}\n\tclear(m)\n\treturn min(xs[0], xs[1]) + max(len(m), 10)\n}\nlo(is)", "11", ""},
		{"type T struct{ A, B int }\nlo(is)", "11", ""},
		// new of a value (Go 1.26): yaegi took 42 for a type and gave a pointer to 0.
		{"p := new(42)\nq := new(a + 1)\ntype Pt struct{ X int }\nr := new(Pt{X: 3})\nfmt.Println(*p, *q, r.X)", "", "42 2 3\n"},
		{"func ptr(s string) *string { return new(s + \"!\") }\n*ptr(\"hi\")", "hi!", ""},
	})
}

// TestArgumentCountErrors: "not enough arguments in call to " named no function; gc names
// it and shows what the call has and what the function wants.
func TestArgumentCountErrors(t *testing.T) {
	s := newSession(t, Options{})
	mustRun(t, s, "import \"godist/distlib/tensor\"\nfunc add(a, b int) int { return a + b }\nx := tensor.Zeros(2, 2)")
	tests := []struct{ code, want string }{
		{"add(1)", "cell line 1: not enough arguments in call to add\n\thave (number)\n\twant (int, int)"},
		{"y := 2\nadd(1, y, 3)", "cell line 2: too many arguments in call to add\n\thave (number, int, number)\n\twant (int, int)"},
		{"strings.Repeat(\"a\")", "cell line 1: not enough arguments in call to strings.Repeat\n\thave (string)\n\twant (string, int)"},
		{"tensor.MatMul(x, x)", "cell line 1: not enough arguments in call to tensor.MatMul\n\thave (*tensor.Tensor, *tensor.Tensor)\n\twant (*tensor.Tensor, *tensor.Tensor, bool, bool)"},
		{"x.Reshape()", "cell line 1: x.Reshape undefined"},
	}
	for _, tt := range tests {
		ee := wantError(t, s, tt.code)
		if ee.Name != "CompileError" || !strings.HasPrefix(ee.Value, tt.want) {
			t.Errorf("Execute(%q) = %s: %q, want %q", tt.code, ee.Name, ee.Value, tt.want)
		}
	}
	// A redefinition that breaks a call in an earlier cell's function: the rebuild's
	// message (the interpreter's) names the method and the types too.
	mustRun(t, s, "type T struct{}\nfunc (T) M(a int) {}")
	mustRun(t, s, "func use() {\n\tvar x T\n\tx.M(1)\n}")
	ee := wantError(t, s, "func (T) M(a int, b string) {}")
	want := "not enough arguments in call to x.M\n\thave (number)\n\twant (int, string)"
	if !strings.Contains(ee.Value, "func use") || !strings.Contains(ee.Value, want) {
		t.Errorf("breaking redefinition: %q, want it to name func use and %q", ee.Value, want)
	}
}

// TestLayerCalledAsFunction: the functional API written as in Python.
func TestLayerCalledAsFunction(t *testing.T) {
	s := newSession(t, Options{})
	mustRun(t, s, "import \"godist/distlib/keras\"\nimport \"godist/distlib/keras/layers\"\ninputs := keras.Input(28, 28)")
	ee := wantError(t, s, "x := 1\ny := layers.Flatten()(inputs)")
	want := "cannot call layers.Flatten() (a *layers.FlattenLayer, not a function): write layers.Flatten().Call(inputs)"
	if ee.Name != "CompileError" || !strings.HasPrefix(ee.Value, "cell line 2: ") || !strings.Contains(ee.Value, want) {
		t.Errorf("calling a layer: %s: %q, want cell line 2 and %q", ee.Name, ee.Value, want)
	}
	if strings.Contains(ee.Value, "reflect") || strings.Contains(ee.Value, "CFG") {
		t.Errorf("calling a layer: %q shows the interpreter's insides", ee.Value)
	}
	// The Go form runs.
	mustRun(t, s, "y := layers.Flatten().Call(inputs)")
}

// TestAssignToMethod: `layer.Trainable = false`, a Python attribute, is a method in Go.
func TestAssignToMethod(t *testing.T) {
	s := newSession(t, Options{})
	mustRun(t, s, "import \"godist/distlib/keras/layers\"\nc := layers.Conv2D(3, 3)")
	ee := wantError(t, s, "c.Trainable = false")
	want := "cell line 1: cannot assign to c.Trainable (neither addressable nor a map index expression)\n" +
		"Trainable is a method of *layers.Conv2DLayer, not a field: write c.SetTrainable(false)"
	if ee.Value != want {
		t.Errorf("assigning a method: %q, want %q", ee.Value, want)
	}
	runCells(t, s, []cellCase{{"c.SetTrainable(false)\nc.Trainable()", "false", ""}})
}

// TestSliceOutOfRange: slicing past the end panicked in reflect's words.
func TestSliceOutOfRange(t *testing.T) {
	s := newSession(t, Options{})
	mustRun(t, s, "var physicalDevices []string\nxs := []int{1, 2, 3}\nstr := \"hey\"\nlo, hi := 2, 1\nneg := -1")
	tests := []struct{ code, value, frame string }{
		{"a := 1\nfirst := physicalDevices[0:1]", "runtime error: slice bounds out of range [:1] with capacity 0", "  in the cell, line 2:1"},
		{"ys := xs[lo:hi]", "runtime error: slice bounds out of range [2:1]", "  in the cell, line 1:1"},
		{"ys := xs[:2:9]", "runtime error: slice bounds out of range [::9] with capacity 3", ""},
		{"s := str[1:9]", "runtime error: slice bounds out of range [:9] with length 3", ""},
		{"ys := xs[4:]", "runtime error: slice bounds out of range [4:3]", ""},
		{"zs := make([]int, neg)", "runtime error: makeslice: len out of range", ""},
	}
	for _, tt := range tests {
		ee := wantError(t, s, tt.code)
		if ee.Name != "panic" || ee.Value != tt.value {
			t.Errorf("Execute(%q) = %s: %q, want panic: %q", tt.code, ee.Name, ee.Value, tt.value)
		}
		if tt.frame != "" && (len(ee.Traceback) < 2 || ee.Traceback[1] != tt.frame) {
			t.Errorf("Execute(%q) traceback = %q, want %q", tt.code, ee.Traceback, tt.frame)
		}
	}
}

// TestAssertToCellType: a cell's type behind a distlib interface asserted back, which
// yaegi refused as an "impossible type assertion".
func TestAssertToCellType(t *testing.T) {
	s := newSession(t, Options{})
	mustRun(t, s, "import \"godist/distlib/keras\"\ntype EpochCounter struct {\n\tkeras.BaseCallback\n\tN int\n}\ntype Other struct{ keras.BaseCallback }\nvar cb keras.Callback = &EpochCounter{N: 4}")
	runCells(t, s, []cellCase{
		{"cb.(*EpochCounter).N", "4", ""},
		{"cb.(*EpochCounter).N++\ncb.(*EpochCounter).N", "5", ""},
		{"e, ok := cb.(*EpochCounter)\nfmt.Println(e.N, ok)", "", "5 true\n"},
		{"_, isOther := cb.(*Other)\nisOther", "false", ""},
		// A conversion to the interface (it panicked in reflect.Set at top level).
		{"cb2 := keras.Callback(&EpochCounter{N: 9})\ncb2.(*EpochCounter).N", "9", ""},
		{"switch v := cb.(type) {\ncase *Other:\n\tfmt.Println(\"other\")\ncase *EpochCounter:\n\tfmt.Println(\"counter\", v.N)\n}", "", "counter 5\n"},
		{"func kind(c keras.Callback) string {\n\tswitch c.(type) {\n\tcase *EpochCounter:\n\t\treturn \"counter\"\n\t}\n\treturn \"?\"\n}\nkind(cb)", "counter", ""},
	})
	// A failed assertion panics in Go's words, the notebook's types by their names.
	ee := wantError(t, s, "x := 1\no := cb.(*Other)")
	if want := "interface conversion: keras.Callback is *main.EpochCounter, not *main.Other"; ee.Name != "panic" || ee.Value != want {
		t.Errorf("failed assertion: %s: %q, want panic: %q", ee.Name, ee.Value, want)
	}
}

// TestNilDereference: a nil pointer (or nil function, nil interface) read reflect's words.
func TestNilDereference(t *testing.T) {
	s := newSession(t, Options{})
	mustRun(t, s, "type P struct{ X int }\nvar p *P\nvar ps map[string]*P")
	for _, code := range []string{"a := 1\np.X", "x := ps[\"a\"].X", "p.X = 3", "var f func()\nf()", "var e error\ne.Error()", "var pp **int\n*pp = nil"} {
		ee := wantError(t, s, code)
		if ee.Name != "panic" || ee.Value != "runtime error: invalid memory address or nil pointer dereference" {
			t.Errorf("Execute(%q) = %s: %q, want Go's nil pointer dereference", code, ee.Name, ee.Value)
		}
		if !regexp.MustCompile(`line \d+:\d+`).MatchString(strings.Join(ee.Traceback, "\n")) {
			t.Errorf("Execute(%q) traceback %q names no line", code, ee.Traceback)
		}
	}
}

// TestMakeTooLarge: a make larger than the memory the process may use killed the kernel
// with the runtime's fatal "out of memory"; it is a MemoryError, and the session lives.
func TestMakeTooLarge(t *testing.T) {
	old := debug.SetMemoryLimit(1 << 30)
	t.Cleanup(func() { debug.SetMemoryLimit(old) })
	s := newSession(t, Options{})
	mustRun(t, s, "keep := 41\nsmall := make([]float32, 1000)")
	for _, code := range []string{"big := make([]float32, 10<<30)", "buf := make([]byte, 0, 1<<40)", "func alloc(n int) []float64 { return make([]float64, n) }\nalloc(1 << 28)",
		"ch := make(chan [1024]byte, 1<<24)", "m := make(map[int64][64]byte, 1<<28)"} {
		ee := wantError(t, s, code)
		if ee.Name != "MemoryError" || !strings.Contains(ee.Value, "GOMEMLIMIT") || !strings.Contains(ee.Value, "make(") {
			t.Errorf("Execute(%q) = %s: %q, want a MemoryError naming the make and GOMEMLIMIT", code, ee.Name, ee.Value)
		}
	}
	ee := wantError(t, s, "big := make([]float32, 10<<30)")
	if !strings.Contains(ee.Value, "40.00 GiB") {
		t.Errorf("the error %q does not name the size, 40.00 GiB", ee.Value)
	}
	// Arrays are refused before the cell runs (the interpreter would allocate them as it
	// compiles the variable's frame).
	for _, code := range []string{"keep = 0\nvar grid [1 << 34]float32", "keep = 0\np := new([1 << 40]byte)", "keep = 0\ng := [1 << 33]int64{}"} {
		ee := wantError(t, s, code)
		if ee.Name != "MemoryError" || !strings.HasPrefix(ee.Value, "cell line 2: out of memory: ") || !strings.Contains(ee.Value, "GOMEMLIMIT") {
			t.Errorf("Execute(%q) = %s: %q, want a MemoryError at cell line 2 naming GOMEMLIMIT", code, ee.Name, ee.Value)
		}
	}
	runCells(t, s, []cellCase{{"keep + 1 + len(small)", "1042", ""}})
}

// TestBrokenCellsReadAsGo runs cells with the mistakes students make (Python habits, type
// errors, undefined names, wrong argument counts, misuse of distlib types): each error must
// read as Go's, name the cell line, and show nothing of the interpreter.
func TestBrokenCellsReadAsGo(t *testing.T) {
	s := newSession(t, Options{})
	mustRun(t, s, `import (
	"fmt"

	"godist/distlib/data"
	"godist/distlib/keras"
	"godist/distlib/keras/layers"
	"godist/distlib/tensor"
)

type EpochCounter struct {
	keras.BaseCallback
	Epochs int
}

func add(a, b int) int { return a + b }

model := keras.Sequential(layers.Dense(10))
t := tensor.Zeros(2, 3)
xs := []int{1, 2, 3}
n := 3
counts := map[string]int{"a": 1}
var ec EpochCounter`)
	cells := []struct {
		code string
		line int
		want string // a substring of the error
	}{
		{"x := None", 1, "undefined: None\nGo writes Python's None as nil"},
		{"ok := True", 1, "undefined: True"},
		{"done := False", 1, "undefined: False"},
		{"self.units = 4", 1, "undefined: self"},
		{"z := np.zeros(3)", 1, "undefined: np"},
		{"c := tf.constant(1)", 1, "undefined: tf"},
		{"var f float = 1.0", 1, "undefined: float"},
		{"model.fit(t, t)", 1, "model.fit undefined (type *keras.Model has no field or method fit, but does have method Fit)"},
		{"model.Predict(t, keras.Epochs(3))", 1, "cannot use type keras.FitOption as type keras.PredictOption\nthat option is not one of Predict's: Predict takes keras.Steps, keras.Callbacks, keras.Verbose, keras.BatchSize"},
		{"model.Evaluate(t, t, keras.Epochs(3))", 1, "Evaluate does not take keras.Epochs(3): it is an option of Fit"},
		{"t.shape", 1, "t.shape undefined (type *tensor.Tensor has no field or method shape, but does have method Shape)"},
		{"len(t)", 1, "write t.Shape()[0]"},
		{"a := 1\ny := layers.Dense(10)(t)", 2, "cannot call layers.Dense(10) (a *layers.DenseLayer, not a function)"},
		{"l := layers.Dense(4)\nl.Trainable = false", 2, "write l.SetTrainable(false)"},
		{"add(1)", 1, "not enough arguments in call to add"},
		{"add(1, 2, 3)", 1, "too many arguments in call to add"},
		{"add(\"a\", 2)", 1, "cannot use \"a\" (untyped string constant) as int value in argument to add"},
		{"var s string = 5", 1, "cannot use 5 (untyped int constant) as string value in variable declaration"},
		{"undefinedThing + 1", 1, "undefined: undefinedThing"},
		{"modle.Summary()", 1, "undefined: modle\ndid you mean model?"},
		{"fmt.Printn(1)", 1, "undefined: fmt.Printn"},
		{"xs.append(4)", 1, "xs.append undefined (type []int has no field or method append)\nGo appends with a builtin: xs = append(xs, v)"},
		{"vals := t.numpy()", 1, "t.numpy undefined (type *tensor.Tensor has no field or method numpy)\na tensor's values are t.Data() (a []float32), a scalar's t.Item()"},
		{"for k, v := range counts.items() {\n}", 1, "Go ranges over a map: for k, v := range counts { ... }"},
		{"n()", 1, "cannot call n (variable of type int): int is not a function"},
		{"x := t + t", 1, "operator + not defined on t (variable of type *tensor.Tensor)"},
		{"x := \"a\" + 1", 1, "mismatched types untyped string and untyped int"},
		{"x := 1 / 0", 1, "invalid operation: division by zero"},
		{"if n {\n}", 1, "non-boolean condition in if statement"},
		{"for i := 0; i < 3; i++ {\n\tundefinedVar++\n}", 2, "undefined: undefinedVar"},
		{"func g() int {\n}", 2, "missing return"},
		{"a, b := add(1, 2)", 1, "assignment mismatch: 2 variables but add returns 1 value"},
		{"parts := strings.Split(\"a,b\")", 1, "not enough arguments in call to strings.Split"},
		{"m2 := keras.Sequential(layers.Dense(1))\nm2.Compile(\"adam\", \"mse\")", 2, "cannot use \"adam\" (untyped string constant) as *keras.Optimizer value in argument to m2.Compile"},
		{"u := tensor.Add(t, 1)", 1, "cannot use 1 (untyped int constant) as *tensor.Tensor value in argument to tensor.Add"},
		{"v := tensor.MatMul(t, t)", 1, "not enough arguments in call to tensor.MatMul"},
		{"var l layers.Layer = 5", 1, "cannot use 5 (constant of type int) as layers.Layer value in variable declaration"},
		{"var cb keras.Callback = ec", 1, "cannot use ec (variable of struct type EpochCounter) as keras.Callback value in variable declaration"},
		{"ds := data.FromTensorSlices(t).Batch(2)", 1, "not enough arguments in call to data.FromTensorSlices(t).Batch"},
		{"ec.Epochs += \"x\"", 1, "invalid operation: ec.Epochs += \"x\" (mismatched types int and untyped string)"},
		{"ec.Missing()", 1, "ec.Missing undefined (type EpochCounter has no field or method Missing)"},
		// The course notes' own typos.
		{"model.Complie(keras.Adam(0), keras.SparseCategoricalCrossentropy(true))", 1, "model.Complie undefined (type *keras.Model has no field or method Complie)\ndid you mean model.Compile?"},
		{"loss := keras.SparseCategoricalCrossetropy(true)", 1, "undefined: keras.SparseCategoricalCrossetropy\ndid you mean keras.SparseCategoricalCrossentropy?"},
		{"mm := map[string]int{}\nmm.get(\"a\")", 2, "mm.get undefined (type map[string]int has no field or method get)"},
		{"str := \"abc\"\nstr.upper()", 2, "str.upper undefined (type string has no field or method upper)\nGo's string functions are in package strings: strings.ToUpper(str)"},
		{"model.Fit(t, t, epochs=5)", 1, "syntax error: unexpected = in argument list; possibly missing comma or )\nGo has no keyword arguments"},
		{"layers.Dense(units=10)", 1, "Go has no keyword arguments"},
		{"for i in range(3) {\n}", 1, "syntax error: unexpected name in, expected {\nGo loops with range"},
		{"def f(x):\n\treturn x", 1, "Go declares a function with func"},
		{"l := [1, 2, 3]", 1, "syntax error: unexpected comma; expected ]\nGo writes a list as a slice literal with its type: []float32{1, 2, 3}"},
		{"d := {\"a\": 1}", 1, "syntax error: unexpected {, expected expression\nGo writes a dict as a map literal"},
		{"print x", 1, "syntax error: unexpected name x at end of statement\nGo prints with a call: fmt.Println(x)"},
		{"x := 1\nif x > 0:\n\tx = 2", 2, "syntax error: unexpected :, expected {\nGo puts a block in braces"},
		{"ok := n > 2 and n < 5", 1, "Go's boolean operators are &&, || and !"},
		{"y := n ** 2", 1, "Go has no ** operator: math.Pow(x, y)"},
		{"total = 0", 1, "undefined: total\nGo defines a new variable with := (x := v, or var x T): total := 0"},
		{"loss := 0.25\nmsg := \"loss: \" + loss", 2, "(mismatched types untyped string and float64)\nGo does not turn values into strings by itself"},
		{"ratio := 0.5 * n", 1, "0.5 (untyped float constant) truncated to int\nGo converts between number types only when asked: float64(n)"},
		{"f := 0.5\nratio := f * n", 2, "(mismatched types float64 and int)\nGo converts between number types only when asked: float64(x) or int(y)"},
		{"ds := data.FromTensorSlices(t)\nlen(ds)", 2, "write ds.Cardinality()"},
		{"z := tensor.Zeros([2, 3])", 1, "Go writes a list as a slice literal with its type"},
		{"import numpy as np", 1, "syntax error: missing import path\nGo imports a package by its path"},
		{"import (\n\t\"math\"\n\t\"numpy\"\n)", 3, "could not import numpy (the kernel has the standard library and godist's packages, not this one)\nnumpy is Python's; in Go use godist/distlib/tensor"},
		{"import \"github.com/some/module\"", 1, "could not import github.com/some/module"},
		{"import \"syscall\"\npid := syscall.Getpid()", 2, "undefined: syscall.Getpid"},
		// Runtime failures: Go's runtime error, the line in the trace.
		{"var p *EpochCounter\np.Epochs", 2, "runtime error: invalid memory address or nil pointer dereference"},
		{"i := 5\nxs[i]", 2, "runtime error: index out of range [5] with length 3"},
		{"var empty []string\nfirst := empty[0:1]", 2, "runtime error: slice bounds out of range [:1] with capacity 0"},
		{"zero := 0\nw := 1 / zero", 2, "runtime error: integer divide by zero"},
	}
	if len(cells) < 40 {
		t.Fatalf("the corpus has %d cells, want at least 40", len(cells))
	}
	// Names of the interpreter and of Go's internals that no message may show.
	internal := regexp.MustCompile(`reflect\.|CFG|panic:|yaegi|interp\.|_godist|valueInterface|symbols\.|main\.|\bnode\b|itype|nil type|cannot compile`)
	for _, c := range cells {
		_, _, err := run(t, s, c.code)
		if err == nil {
			t.Errorf("Execute(%q) succeeded, want an error", c.code)
			continue
		}
		ee := evalError(t, err)
		if !strings.Contains(ee.Value, c.want) {
			t.Errorf("Execute(%q) = %s: %q, want it to contain %q", c.code, ee.Name, ee.Value, c.want)
		}
		if m := internal.FindString(ee.Value); m != "" {
			t.Errorf("Execute(%q) = %q shows %q", c.code, ee.Value, m)
		}
		named := strings.HasPrefix(ee.Value, "cell line "+strconv.Itoa(c.line)+": ")
		if ee.Name == "panic" {
			named = regexp.MustCompile(`line ` + strconv.Itoa(c.line) + `:\d+`).MatchString(strings.Join(ee.Traceback[1:], "\n"))
		}
		if !named {
			t.Errorf("Execute(%q) = %s: %q (trace %q) does not name cell line %d", c.code, ee.Name, ee.Value, ee.Traceback, c.line)
		}
	}
	// The session is intact after them all.
	runCells(t, s, []cellCase{{"add(n, len(xs))", "6", ""}})
}

// TestValidGoTheInterpreterCannotRun: Go the check accepts but yaegi cannot compile (a
// generic variadic function here) says so at the cell line instead of "the interpreter
// cannot compile this code (nil reflect type)", yaegi's words going to the traceback.
func TestValidGoTheInterpreterCannotRun(t *testing.T) {
	s := newSession(t, Options{})
	mustRun(t, s, "type Num interface{ ~int | ~float64 }\nfunc Sum[T Num](xs ...T) T {\n\tvar s T\n\tfor _, x := range xs {\n\t\ts += x\n\t}\n\treturn s\n}")
	ee := wantError(t, s, "a := 1\nSum(a, 2, 3)")
	want := "cell line 2: Go accepts this code but the interpreter cannot run it"
	if ee.Name != "CompileError" || !strings.HasPrefix(ee.Value, want) {
		t.Errorf("got %s: %q, want %q", ee.Name, ee.Value, want)
	}
	if m := regexp.MustCompile(`reflect|CFG|nil type`).FindString(ee.Value); m != "" {
		t.Errorf("%q shows %q", ee.Value, m)
	}
}

// TestCheckFollowsTheSession: cells the interpreter runs are not refused by the check: a
// variable named like an imported package hides it, as in the interpreter; a cell of
// comments only; a variable that changes its type.
func TestCheckFollowsTheSession(t *testing.T) {
	s := newSession(t, Options{})
	runCells(t, s, []cellCase{
		{"import \"godist/distlib/data\"\nimport \"strings\"", "", ""},
		{"data := 5\ndata + 1", "6", ""},
		{"data * 2", "10", ""},
		{"strings := []string{\"a\", \"b\"}\nlen(strings)", "2", ""},
		{"// a comment only", "", ""},
		{"x := 1", "", ""},
		{"x := \"now a string\"\nx", "now a string", ""},
		// Variables of the notebook's types, in slices and maps, are typed for the check.
		{"type P struct{ X int }\nps := []P{{1}}\nm := map[string]*P{\"a\": {2}}", "", ""},
		{"m[\"a\"].X + ps[0].X", "3", ""},
	})
	ee := wantError(t, s, "ps[0].Y")
	if want := "cell line 1: ps[0].Y undefined (type P has no field or method Y)"; ee.Value != want {
		t.Errorf("a notebook type's missing field: %q, want %q", ee.Value, want)
	}
}

// TestRedefinitionBreaksEarlierCell: a type redefined without a field an earlier cell's
// function uses is refused before the rebuild, in gc's words, naming that function; the
// session keeps the old definitions.
func TestRedefinitionBreaksEarlierCell(t *testing.T) {
	s := newSession(t, Options{})
	mustRun(t, s, "type P struct{ X int }")
	mustRun(t, s, "func getX(p P) int {\n\treturn p.X\n}")
	ee := wantError(t, s, "a := 1\ntype P struct{ Y int }")
	want := "cell line 2: the new definitions break func getX, declared in an earlier cell: p.X undefined (type P has no field or method X) (re-run that cell with a fix, or %reset)"
	if ee.Value != want {
		t.Errorf("breaking redefinition: %q, want %q", ee.Value, want)
	}
	runCells(t, s, []cellCase{{"getX(P{X: 7})", "7", ""}})
	// A redefinition that keeps the field rebuilds as before.
	_, rec := mustRun(t, s, "type P struct {\n\tX int\n\tY int\n}")
	if !strings.Contains(rec.text("stderr"), "rebuilt") {
		t.Errorf("redefinition did not rebuild: stderr %q", rec.text("stderr"))
	}
	runCells(t, s, []cellCase{{"getX(P{X: 8, Y: 1})", "8", ""}})
}
