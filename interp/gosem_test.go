package interp

import (
	"strings"
	"testing"
)

// TestIndexOutOfRange covers an index panic worded by reflect ("reflect: slice index out
// of range"): it must read like Go's runtime error and name the cell line.
func TestIndexOutOfRange(t *testing.T) {
	checkLeaks(t)
	s := newSession(t, Options{})
	mustRun(t, s, "s := []int{1, 2, 3}\narr := [2]string{\"a\", \"b\"}\nstr := \"hey\"\ni := 7")
	tests := []struct{ code, value, frame string }{
		{"x := 1\ns[5]", "runtime error: index out of range [5] with length 3", "  in the cell, line 2:1"},
		{"y := s[i]", "runtime error: index out of range [7] with length 3", "  in the cell, line 1:1"},
		{"arr[i-9]", "runtime error: index out of range [-2]", ""},
		{"\n\ns[i] = 4", "runtime error: index out of range [7] with length 3", "  in the cell, line 3:1"},
		{"func() byte { return str[i] }()", "runtime error: index out of range [7] with length 3", ""},
		{"func() int { return s[-i+4] }()", "runtime error: index out of range [-3]", ""},
	}
	for _, tt := range tests {
		_, _, err := run(t, s, tt.code)
		if err == nil {
			t.Errorf("Execute(%q) = nil error, want %q", tt.code, tt.value)
			continue
		}
		ee := evalError(t, err)
		if ee.Name != "panic" || ee.Value != tt.value {
			t.Errorf("Execute(%q) error = %s: %s, want panic: %s", tt.code, ee.Name, ee.Value, tt.value)
		}
		if tt.frame != "" && (len(ee.Traceback) < 2 || ee.Traceback[1] != tt.frame) {
			t.Errorf("Execute(%q) traceback = %q, want %q", tt.code, ee.Traceback, tt.frame)
		}
	}
}

// TestDeferAndLoopVariables covers Go 1.22 loop variables and defer: a top-level defer ran
// again after every later cell, deferred arguments were read when the call ran, and
// closures made in a loop all saw the loop variable's last value.
func TestDeferAndLoopVariables(t *testing.T) {
	checkLeaks(t)
	s := newSession(t, Options{})
	mustRun(t, s, "import \"fmt\"")
	tests := []cellCase{
		{"defer fmt.Println(\"deferred\")\nfmt.Println(\"body\")", "", "body\ndeferred\n"},
		{"1 + 1", "2", ""},
		{"for i := 0; i < 3; i++ { defer fmt.Print(i) }", "", "210"},
		{"x := 1\ndefer fmt.Print(x)\nx = 2\nfmt.Print(x)\nx", "2", "21"},
		{"fs := []func() int{}\nfor i := 0; i < 3; i++ { fs = append(fs, func() int { return i }) }\nfs[0]()+fs[1]()*10+fs[2]()*100", "210", ""},
		{"gs := []func() int{}\nfor _, v := range []int{4, 5, 6} { gs = append(gs, func() int { return v }) }\ngs[0]()+gs[1]()*10+gs[2]()*100", "654", ""},
		{"hs := []func() int{}\nfor i := range 3 { hs = append(hs, func() int { return i }) }\nhs[0]()+hs[1]()*10+hs[2]()*100", "210", ""},
		{"func loop() (n int) {\n\tvar fs []func() int\n\tfor i := 0; i < 3; i++ {\n\t\tfs = append(fs, func() int { return i })\n\t}\n\tfor k, f := range fs {\n\t\tn += f() * []int{1, 10, 100}[k]\n\t}\n\treturn n\n}\nloop()", "210", ""},
		{"func deferLoop() { for i := 0; i < 3; i++ { defer fmt.Print(i) } }\ndeferLoop()", "", "210"},
		// A body that changes the loop variable keeps changing the loop's own variable.
		{"n := 0\nfor i := 0; i < 6; i++ { i++; func() { n += i }() }\nn", "9", ""},
		{"if true {\n\tdefer fmt.Print(\"b\")\n\tdefer fmt.Print(\"a\")\n}\nfmt.Print(\"-\")", "", "-ab"},
		{"3", "3", ""},
	}
	runCells(t, s, tests)
	// A deferred call that panics fails its cell.
	_, _, err := run(t, s, "defer panic(\"late\")\nfmt.Print(\"x\")")
	if ee := evalError(t, err); ee.Name != "panic" || !strings.Contains(ee.Value, "late") {
		t.Errorf("panicking deferred call: error = %v, want a panic naming it", ee)
	}
}

// TestFinalValues covers final expressions with several values (shown as a tuple) and
// with a nil error or interface (shown as nothing, like Python's None).
func TestFinalValues(t *testing.T) {
	checkLeaks(t)
	s := newSession(t, Options{})
	mustRun(t, s, "import (\n\t\"fmt\"\n\t\"strconv\"\n\t\"errors\"\n\t\"godist/distlib/display\"\n)\nfunc two() (string, int) { return \"a\", 2 }")
	tests := []struct {
		code, result string
		displays     int
	}{
		{"strconv.Atoi(\"12\")", "(12, <nil>)", 0},
		{"strconv.Atoi(\"x\")", "(0, strconv.Atoi: parsing \"x\": invalid syntax)", 0},
		{"two()", "(\"a\", 2)", 0},
		{"fmt.Println(\"printed\")", "", 0},
		{"display.JSON(map[string]int{\"a\": 1})", "", 1},
		{"var e error\ne", "", 0},
		{"errors.New(\"boom\")", "boom", 0},
		{"v, err := strconv.Atoi(\"3\")\nv", "3", 0},
	}
	for _, tt := range tests {
		plain, rec := mustRun(t, s, tt.code)
		if plain != tt.result || len(rec.displays) != tt.displays {
			t.Errorf("Execute(%q) = %q with %d displays, want %q with %d", tt.code, plain, len(rec.displays), tt.result, tt.displays)
		}
	}
	res, _, err := run(t, s, "display.JSON(1)")
	if err != nil || res != "" {
		t.Errorf("display.JSON as the last line = %q, %v, want no result", res, err)
	}
}

// TestFailedDeclLeavesNoName covers a declaration that fails to compile: it must not define
// its names (`var z int = "s"` then `z` gave 0).
func TestFailedDeclLeavesNoName(t *testing.T) {
	checkLeaks(t)
	s := newSession(t, Options{})
	mustRun(t, s, "y := 1")
	tests := []struct {
		code, result string
		fails        bool
	}{
		{"var z int = \"s\"", "", true},
		{"z", "", true},
		{"q := undefinedThing + 1", "", true},
		{"q", "", true},
		{"var y string = 3", "", true},
		{"y", "1", false},
		{"var z int = 4", "", false},
		{"z + y", "5", false},
	}
	for _, tt := range tests {
		plain, _, err := run(t, s, tt.code)
		if (err != nil) != tt.fails || plain != tt.result {
			t.Errorf("Execute(%q) = %q, %v; want %q, failing %v", tt.code, plain, err, tt.result, tt.fails)
		}
	}
}

// TestGenericFinalExpression covers a generic function's call as a cell's final
// expression: the kernel's `_godistLast := Id(3)` made yaegi fail with "nil reflect type".
func TestGenericFinalExpression(t *testing.T) {
	checkLeaks(t)
	s := newSession(t, Options{})
	mustRun(t, s, "func Id[T any](x T) T { return x }\nfunc Pair[K comparable, V any](k K, v V) map[K]V { return map[K]V{k: v} }")
	tests := []struct{ code, result string }{
		{"Id(3)", "3"},
		{"Id(\"s\")", "s"},
		{"Pair(\"a\", 1)", "map[a:1]"},
		{"var k3 int\nk3 = Id(4)\nk3", "4"},
	}
	for _, tt := range tests {
		if plain, _ := mustRun(t, s, tt.code); plain != tt.result {
			t.Errorf("Execute(%q) = %q, want %q", tt.code, plain, tt.result)
		}
	}
}

// TestGenericDefinitions covers definitions from a generic function's call: `k := Id(3)`
// at top level failed with "nil reflect type"; `var m int = Id(7)` (top level or in a
// function) silently left m at 0 when it was the instantiation's first call: it is now an
// error saying what to write, and what it says works.
func TestGenericDefinitions(t *testing.T) {
	checkLeaks(t)
	tests := []struct {
		code, result string
		fails        string // a part of the error, "" when it runs
	}{
		{"k := Id(3)\nk", "3", ""},
		{"a, b := Id(1), Id(\"x\")\nb", "x", ""},
		{"p := Pair(\"a\", 1)\np", "map[a:1]", ""},
		{"d := Dbl([]int{1, 2})\nd", "[1 2 1 2]", ""},
		{"m0 := Id(2.5)\nm1 := Id(m0)\nm1", "2.5", ""},
		{"var m int = Id(7)\nm", "", "define it with := instead"},
		{"var m = Id(7)\nm", "", "define it with := instead"},
		{"var m = []int{Id(7)}\nm", "", "define it with := instead"},
		{"func f() int { var q = Id(5); return q }\nf()", "", "define it with := instead"},
		{"func f() int { q := Id(5); return q }\nf()", "5", ""},
		{"var k3 int\nk3 = Id(4)\nk3", "4", ""},
		{"x := Id(7)\nvar y = Id(8)\ny", "8", ""},
		{"var g = func() int { return Id(6) }\ng()", "6", ""},
	}
	for _, tt := range tests {
		s := newSession(t, Options{})
		mustRun(t, s, "func Id[T any](x T) T { return x }\nfunc Pair[K comparable, V any](k K, v V) map[K]V { return map[K]V{k: v} }\nfunc Dbl[T any](s []T) []T { return append(s, s...) }")
		plain, _, err := run(t, s, tt.code)
		switch {
		case tt.fails == "" && (err != nil || plain != tt.result):
			t.Errorf("Execute(%q) = %q, %v; want %q", tt.code, plain, err, tt.result)
		case tt.fails != "" && (err == nil || !strings.Contains(err.Error(), tt.fails)):
			t.Errorf("Execute(%q) = %q, %v; want an error containing %q", tt.code, plain, err, tt.fails)
		case tt.fails != "":
			// The failed cell defined nothing; the way the error names works.
			if plain, _, err := run(t, s, "m := Id(7)\nm"); err != nil || plain != "7" {
				t.Errorf("after %q: m := Id(7) = %q, %v; want 7", tt.code, plain, err)
			}
		}
	}
}

// TestTopLevelIndexDefinitions covers `p := parts[0]` at top level on a value of a
// compiled type (a package call's result) or a string: yaegi left p "undefined name".
func TestTopLevelIndexDefinitions(t *testing.T) {
	checkLeaks(t)
	s := newSession(t, Options{})
	mustRun(t, s, "import \"strings\"")
	tests := []struct{ code, result string }{
		{"parts := strings.Split(\"a,b\", \",\")\np := parts[0]\np", "a"},
		{"q := strings.Fields(\"x y\")[1]\nq", "y"},
		{"n := len(parts)\nw := strings.Split(\"a,b,c\", \",\")[n]\nw", "c"},
		{"str := \"hey\"\nc := str[1]\nc", "101"},
		{"r := strings.NewReplacer(\"a\", \"b\")\nm := map[string]*strings.Replacer{\"k\": r}\nv := m[\"k\"].Replace(\"aa\")\nv", "bb"},
		{"arr := &[2]string{\"u\", \"v\"}\ne := arr[1]\ne", "v"},
	}
	for _, tt := range tests {
		if plain, _ := mustRun(t, s, tt.code); plain != tt.result {
			t.Errorf("Execute(%q) = %q, want %q", tt.code, plain, tt.result)
		}
	}
}

// TestVarFromEarlierDefinition covers `var b int = a` after a top-level `a := 1`: yaegi
// waited for a's initialization in the same file and said "variable definition loop".
func TestVarFromEarlierDefinition(t *testing.T) {
	checkLeaks(t)
	s := newSession(t, Options{})
	tests := []struct{ code, result string }{
		{"a := 1\nvar b int = a\nb", "1"},
		{"var c = b + a\nc", "2"},
		{"var x = y + 1\nvar y = 2\nx", "3"},
	}
	for _, tt := range tests {
		if plain, _ := mustRun(t, s, tt.code); plain != tt.result {
			t.Errorf("Execute(%q) = %q, want %q", tt.code, plain, tt.result)
		}
	}
}

// TestChangedStructKeepsFields covers a type gaining a field: the variable recomputed by
// the rebuild keeps the fields it was given (what re-running its definition gives in Go).
func TestChangedStructKeepsFields(t *testing.T) {
	checkLeaks(t)
	s := newSession(t, Options{})
	mustRun(t, s, "type P struct{ X, Y int }")
	mustRun(t, s, "p2 := P{X: 5, Y: 6}")
	_, rec := mustRun(t, s, "type P struct{ X, Y, Z int }")
	if !strings.Contains(rec.text("stderr"), "recomputed p2") {
		t.Errorf("changing P: stderr %q, want it to say p2 was recomputed", rec.text("stderr"))
	}
	if plain, _ := mustRun(t, s, "p2"); plain != "{5 6 0}" {
		t.Errorf("p2 after P gained Z = %q, want {5 6 0}", plain)
	}
}
