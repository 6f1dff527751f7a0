package interp

import (
	"strings"
	"testing"
)

// TestTopLevelMultiDefine covers yaegi v0.16.1 leaving `a, b := f()` undefined in a block
// of top-level code (reported as "undefined: a"): loops, ifs, switches, selects and nested
// blocks, with top-level variables assigned inside still persisting.
func TestTopLevelMultiDefine(t *testing.T) {
	checkLeaks(t)
	s := newSession(t, Options{})
	mustRun(t, s, "import (\"fmt\"; \"strconv\")\nm := map[string]int{\"a\": 1}\ntotal := 0")
	tests := []cellCase{
		{"for _, k := range []int{1, 2} { a, _ := strconv.Atoi(\"1\"); fmt.Println(k, a) }", "", "1 1\n2 1\n"},
		{"for i := 0; i < 2; i++ {\n\tn, err := strconv.Atoi(strconv.Itoa(i))\n\tif err != nil {\n\t\tbreak\n\t}\n\ttotal += n\n}\ntotal", "1", ""},
		{"if v, ok := m[\"a\"]; ok {\n\tfmt.Println(\"found\", v)\n}", "", "found 1\n"},
		{"if true {\n\tv, ok := m[\"zz\"]\n\tfmt.Println(v, ok)\n}", "", "0 false\n"},
		{"switch n, err := strconv.Atoi(\"7\"); {\ncase err == nil:\n\ttotal += n\n}\ntotal", "8", ""},
		{"switch {\ndefault:\n\tx, err := strconv.ParseFloat(\"2.5\", 64)\n\tfmt.Println(x, err)\n}", "", "2.5 <nil>\n"},
		{"{\n\t{\n\t\tvar p, q = strconv.Atoi(\"3\")\n\t\ttotal += p\n\t\t_ = q\n\t}\n}\ntotal", "11", ""},
		{"var any1 any = 4\nfor range 2 {\n\tif n, ok := any1.(int); ok {\n\t\ttotal += n\n\t}\n}\ntotal", "19", ""},
		{"ch := make(chan int, 1)\nch <- 5\nselect {\ncase v, ok := <-ch:\n\tfmt.Println(v, ok)\n}", "", "5 true\n"},
		{"outer:\nfor i := 0; i < 3; i++ {\n\tfor j := 0; j < 3; j++ {\n\t\tn, _ := strconv.Atoi(strconv.Itoa(j))\n\t\tif n == 1 {\n\t\t\tcontinue outer\n\t\t}\n\t\ttotal += 100\n\t}\n}\ntotal", "319", ""},
		// At the top level the same definitions were fine and must stay global.
		{"a2, err2 := strconv.Atoi(\"6\")\nfmt.Println(a2, err2)", "", "6 <nil>\n"},
		{"a2 + total", "325", ""},
	}
	runCells(t, s, tests)
}

// TestBlockShadowsGlobal covers yaegi v0.16.1 taking a top-level variable for a definition
// of the same name in a block of top-level code: `for ... { strategy := other type }` after
// a global `strategy` panicked with "reflect.Set: value of type ... is not assignable" and
// left the global's symbol with the block's type, so a later top-level redefinition of the
// global with that type panicked too (the seeds' cells, notebooks/seeds_test.go).
func TestBlockShadowsGlobal(t *testing.T) {
	checkLeaks(t)
	s := newSession(t, Options{})
	tests := []cellCase{
		{"import \"fmt\"\na := 1\nfmt.Println(a)", "", "1\n"},
		{"for i := 0; i < 2; i++ {\n\ta := \"x\"\n\tfmt.Println(a, i)\n}", "", "x 0\nx 1\n"},
		{"if true {\n\ta := []int{7}\n\tfmt.Println(a)\n}", "", "[7]\n"},
		{"{\n\ta := 2.5\n\tfmt.Println(a)\n}", "", "2.5\n"},
		{"a", "1", ""}, // the global is untouched
		{"a := \"now a string\"\nfmt.Println(a)", "", "now a string\n"},
		{"func show() string { return a }\nshow()", "now a string", ""},
		{"a := \"again\"\nshow()", "again", ""},
		{"for i := 0; i < 1; i++ {\n\ta = \"assigned in a loop\"\n}\nshow()", "assigned in a loop", ""},
	}
	runCells(t, s, tests)
}

// TestRedefineWithOtherType covers two more ways a cell's `x := ...` of an existing x of
// another type panicked in reflect.Set: a multi-value definition from a call (yaegi did not
// type check `r, err = f()`, which the session tries first), and a method value of a
// variable declared as a pointer to a compiled type (yaegi typed `f := p.M` with M's
// receiver as first parameter).
func TestRedefineWithOtherType(t *testing.T) {
	checkLeaks(t)
	s := newSession(t, Options{})
	tests := []cellCase{
		{"import (\"fmt\"; \"strconv\"; \"strings\")\nn, err := strconv.Atoi(\"3\")\nfmt.Println(n, err)", "", "3 <nil>\n"},
		{"n, err := strconv.ParseFloat(\"2.5\", 64)\nfmt.Println(n, err)", "", "2.5 <nil>\n"},
		{"n, err := strconv.ParseBool(\"true\")\nfmt.Println(n, err)", "", "true <nil>\n"},
		{"var anything any\nanything, err = strconv.Atoi(\"4\")\nanything", "4", ""},
		{"var b *strings.Builder = &strings.Builder{}\nwrite := b.WriteString\nwrite(\"method \")\nwrite(\"value\")\nb.String()", "method value", ""},
		{"write := strconv.Itoa\nwrite(7)", "7", ""},
	}
	runCells(t, s, tests)
}

// TestFuncLiteralCalls covers two yaegi traps: a top-level `func() {...}()` ran again in
// every later cell, and `f()` of a variable holding a function without results panicked
// when shown as the cell's value.
func TestFuncLiteralCalls(t *testing.T) {
	checkLeaks(t)
	s := newSession(t, Options{})
	tests := []cellCase{
		{"import \"fmt\"\nfunc() { fmt.Println(\"once\") }()", "", "once\n"},
		{"x := 1\nfmt.Println(\"next\")", "", "next\n"},
		{"f := func() { fmt.Println(\"f ran\") }", "", ""},
		{"f()", "", "f ran\n"},
		{"g := func() int { return 3 }\ng()", "3", ""},
		{"func() { x++ }()\nx", "2", ""},
	}
	runCells(t, s, tests)
}

// TestPanicLine covers panics reported at the start of the top-level statement or function
// body they happened in ("in the cell, line 1:9" for a panic on line 3).
func TestPanicLine(t *testing.T) {
	checkLeaks(t)
	s := newSession(t, Options{})
	mustRun(t, s, "import \"fmt\"\nfunc f(xs []int) int {\n\tn := 0\n\treturn xs[n+5]\n}")
	tests := []struct {
		name, code string
		frames     []string // the traceback after its first line, in order
	}{
		{"in a loop", "for i := 0; i < 3; i++ {\n\tfmt.Print(i)\n\tif i == 1 {\n\t\tpanic(\"loop\")\n\t}\n}",
			[]string{"  in the cell, line 4:3"}},
		{"top level", "x := 1\nfmt.Print(x)\npanic(\"top\")", []string{"  in the cell, line 3:1"}},
		{"second statement on a line", "y := 2; fmt.Print(y); var m map[string]int; m[\"a\"] = 1",
			[]string{"  in the cell, line 1:45"}},
		{"in a declared function", "\n\nfmt.Print(f([]int{1}))", []string{"  in f, line 4:2", "  in the cell, line 3:1"}},
		{"in a switch", "switch v := 3; v {\ncase 3:\n\tvar p *struct{ N int }\n\tfmt.Print(p.N)\n}",
			[]string{"  in the cell, line 4:2"}},
		{"after a recovered panic", "func() {\n\tdefer func() { recover() }()\n\tpanic(\"recovered\")\n}()\nif true {\n\tpanic(\"real\")\n}",
			[]string{"  in the cell, line 6:2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := run(t, s, tt.code)
			ee := evalError(t, err)
			if ee.Name != "panic" || len(ee.Traceback) < 1 {
				t.Fatalf("Execute(%q) error = %v, want a panic", tt.code, ee)
			}
			got := ee.Traceback[1:]
			if len(got) != len(tt.frames) {
				t.Fatalf("Execute(%q) traceback = %q, want frames %q", tt.code, ee.Traceback, tt.frames)
			}
			for i := range got {
				if got[i] != tt.frames[i] {
					t.Errorf("Execute(%q) frame %d = %q, want %q", tt.code, i, got[i], tt.frames[i])
				}
			}
		})
	}
	// After a rebuild, a function declared in an earlier cell still names its own line.
	mustRun(t, s, "func g() int { return 1 }")
	mustRun(t, s, "func g() int { return 2 }")
	_, _, err := run(t, s, "f(nil)")
	if ee := evalError(t, err); len(ee.Traceback) < 2 || ee.Traceback[1] != "  in f, line 4:2" {
		t.Errorf("after a rebuild: traceback = %q, want f's line 4:2 first", ee.Traceback)
	}
}

// TestWhoAndCompleteAfterRebuild checks that %who and completion see the variables of a
// rebuilt interpreter: carried ones, recomputed ones of notebook types, and new ones.
func TestWhoAndCompleteAfterRebuild(t *testing.T) {
	checkLeaks(t)
	s := newSession(t, Options{})
	mustRun(t, s, "import \"strings\"\ntype Rec struct{ Name string }\nfunc (r Rec) Upper() string { return strings.ToUpper(r.Name) }\nrecord := Rec{\"ada\"}\nscores := []float64{1, 2}\ncountA := 3")
	// A changed method rebuilds the interpreter.
	_, rec := mustRun(t, s, "func (r Rec) Upper() string { return strings.ToLower(r.Name) }\nrecord.Upper()")
	if !strings.Contains(rec.text("stderr"), "rebuilt") {
		t.Fatalf("no rebuild happened: stderr %q", rec.text("stderr"))
	}
	// Right after the rebuild, before any other cell grows the new interpreter's globals.
	for _, name := range []string{"record", "scores", "countA"} {
		if m, _, _ := s.Complete(name[:4], 4); !contains(m, name) {
			t.Errorf("Complete(%q) right after a rebuild = %v, want %s", name[:4], m, name)
		}
	}
	mustRun(t, s, "countB := countA + 1")
	_, rec = mustRun(t, s, "%who")
	who := rec.text("stdout")
	for _, want := range []string{"record", "scores", "[]float64", "countA", "countB"} {
		if !strings.Contains(who, want) {
			t.Errorf("%%who after a rebuild = %q, want it to mention %s", who, want)
		}
	}
	if strings.Contains(who, "_godist") {
		t.Errorf("%%who shows internal names: %q", who)
	}
	tests := []struct {
		code, want string
		from       int
	}{
		{"reco", "record", 0},
		{"count", "countB", 0},
		{"scor", "scores", 0},
		{"record.Na", "Name", 7},
		{"record.Up", "Upper", 7},
		{"strings.ToL", "ToLower", 8},
	}
	for _, tt := range tests {
		matches, start, end := s.Complete(tt.code, len(tt.code))
		found := false
		for _, m := range matches {
			found = found || m == tt.want
			if strings.HasPrefix(m, "_godist") {
				t.Errorf("Complete(%q) offers internal name %q", tt.code, m)
			}
		}
		if !found || start != tt.from || end != len(tt.code) {
			t.Errorf("Complete(%q) after a rebuild = %v, %d, %d, want %q from %d", tt.code, matches, start, end, tt.want, tt.from)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
