package interp

import (
	"strings"
	"testing"
)

func TestSplitCell(t *testing.T) {
	tests := []struct {
		name  string
		code  string
		kinds []chunkKind
		names [][]string
		lines []int
		expr  bool // last chunk is an expression
	}{
		{"statements", "x := 1\ny := x + 1", []chunkKind{chunkStmt, chunkStmt}, nil, []int{1, 2}, false},
		{"mixed", "import \"fmt\"\n\ntype T struct{ A int }\nfunc (t T) M() int { return t.A }\nv := T{1}\nfmt.Println(v.M())\nv.M()",
			[]chunkKind{chunkImport, chunkDecl, chunkDecl, chunkStmt, chunkStmt, chunkStmt},
			[][]string{nil, {"T"}, {"T.M"}, nil, nil, nil}, []int{1, 3, 4, 5, 6, 7}, true},
		{"func literal call is a statement", "func() { println(1) }()", []chunkKind{chunkStmt}, nil, []int{1}, true},
		{"func literal with result", "f := func(a int) int {\n\treturn a\n}", []chunkKind{chunkStmt}, nil, []int{1}, false},
		{"method with pointer receiver", "func (p *P) Set(v int) {\n\tp.v = v\n}", []chunkKind{chunkDecl}, [][]string{{"P.Set"}}, []int{1}, false},
		{"grouped const", "const (\n\tA = iota\n\tB\n)", []chunkKind{chunkDecl}, [][]string{{"A", "B"}}, []int{1}, false},
		{"semicolons on one line", "a := 1; b := 2; a + b", []chunkKind{chunkStmt, chunkStmt, chunkStmt}, nil, []int{1, 1, 1}, true},
		{"multi-line statement", "for i := 0; i < 3; i++ {\n\tprintln(i)\n}\nvar z = 3", []chunkKind{chunkStmt, chunkDecl}, [][]string{nil, {"z"}}, []int{1, 4}, false},
		{"comments are skipped", "// a comment\nx := 1 // trailing\n/* block */ x", []chunkKind{chunkStmt, chunkStmt}, nil, []int{2, 3}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			chunks, err := splitCell(tt.code)
			if err != nil {
				t.Fatalf("splitCell(%q) error: %v", tt.code, err)
			}
			if len(chunks) != len(tt.kinds) {
				t.Fatalf("splitCell(%q) = %d chunks, want %d", tt.code, len(chunks), len(tt.kinds))
			}
			for i, c := range chunks {
				if c.Kind != tt.kinds[i] {
					t.Errorf("chunk %d (%q) kind = %v, want %v", i, c.Text, c.Kind, tt.kinds[i])
				}
				if c.Line != tt.lines[i] {
					t.Errorf("chunk %d (%q) line = %d, want %d", i, c.Text, c.Line, tt.lines[i])
				}
				if tt.names != nil && strings.Join(c.Names, ",") != strings.Join(tt.names[i], ",") {
					t.Errorf("chunk %d names = %v, want %v", i, c.Names, tt.names[i])
				}
			}
			if got := chunks[len(chunks)-1].Expr; got != tt.expr {
				t.Errorf("last chunk Expr = %v, want %v", got, tt.expr)
			}
		})
	}
}

func TestSplitCellErrors(t *testing.T) {
	tests := []struct {
		code, want string
	}{
		{"x := 1\ny := (2", "cell:2"},
		{"x := 1\n\nfunc f( {", "3:"},
	}
	for _, tt := range tests {
		_, err := splitCell(tt.code)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("splitCell(%q) error = %v, want one containing %q", tt.code, err, tt.want)
		}
	}
}

func TestRewrite(t *testing.T) {
	env := rewriteEnv{
		globalKind: func(n string) string {
			switch n {
			case "n":
				return "int"
			case "seq":
				return "func"
			}
			return ""
		},
		declared: func(n string) bool { return n == "myFunc" },
		isGlobal: func(n string) bool { return n == "x" },
	}
	tests := []struct {
		name, code string
		assign     bool
		want       []string // substrings of the result
		not        []string
		err        string
	}{
		// yaegi runs a range over an integer itself (third_party/yaegi, rangeInt): left as written.
		{name: "range over literal", code: "for i := range 10 {\n\tprintln(i)\n}", want: []string{"for i := range 10 {", "{ for"}},
		{name: "range over global int", code: "for range n {}", want: []string{"for range n {}"}},
		{name: "range over local int param", code: "func f(k int) {\n\tfor j := range k {\n\t}\n}", want: []string{"for j := range k"}},
		{name: "range over slice untouched", code: "for i := range xs {}", want: []string{"for i := range xs"}},
		{name: "range over func literal", code: "for x := range func(yield func(int) bool) {} {}", err: "range over a function"},
		{name: "range over func global", code: "for x := range seq {}", err: "range over the function seq"},
		{name: "go call captures args", code: "go work(i, \"s\")", want: []string{"_godistA1_0 := i", "GoPanic", "work(_godistA1_0, \"s\")"}},
		{name: "go literal gets recover", code: "go func(v int) {\n\tprintln(v)\n}(i)", want: []string{"func(v int) { defer func()", "}(i)"}},
		{name: "min hoisted at top level", code: "m := min(3, a, b)", want: []string{" := a; _godistT", " = _godistMin(_godistT", ", 3, b); ", "m := _godistT"}},
		{name: "max inside function", code: "func f(a, b int) int { return max(a, b) }", want: []string{"return _godistMax(a, b)"}},
		{name: "clear", code: "clear(m)", want: []string{"_godist.Clear(m)"}},
		{name: "shadowed builtin", code: "myFunc(1)", want: []string{"myFunc(1)"}},
		{name: "redefinition becomes assignment", code: "x := 2", assign: true, want: []string{"x = 2"}},
		{name: "new variable stays a definition", code: "y := 2", assign: true, want: []string{"y := 2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			chunks, err := splitCell(tt.code)
			if err != nil {
				t.Fatal(err)
			}
			e := env
			e.assignExisting = tt.assign
			got, err := rewriteChunk(chunks[0], e)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("rewriteChunk(%q) error = %v, want %q", tt.code, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("rewriteChunk(%q): %v", tt.code, err)
			}
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("rewriteChunk(%q) = %q, want it to contain %q", tt.code, got, w)
				}
			}
			if strings.Count(got, "\n") != strings.Count(tt.code, "\n") {
				t.Errorf("rewriteChunk(%q) = %q changed the number of lines", tt.code, got)
			}
		})
	}
}

func TestIsComplete(t *testing.T) {
	s := newSession(t, Options{})
	tests := []struct{ code, status, indent string }{
		{"x := 1", "complete", ""},
		{"func f() {", "incomplete", "\t"},
		{"if x {\n\tfor {", "incomplete", "\t\t"},
		{"x := 1 +", "incomplete", ""},
		{"f(a,\n", "incomplete", "\t"},
		{"s := `raw", "incomplete", ""},
		{"x := 1 }", "invalid", ""},
		{"%time f()", "complete", ""},
		{"", "complete", ""},
	}
	for _, tt := range tests {
		status, indent := s.IsComplete(tt.code)
		if status != tt.status || indent != tt.indent {
			t.Errorf("IsComplete(%q) = %q, %q, want %q, %q", tt.code, status, indent, tt.status, tt.indent)
		}
	}
}
