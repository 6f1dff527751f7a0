package interp

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestIsCompleteSyntax(t *testing.T) {
	s := newSession(t, Options{})
	tests := []struct{ code, want string }{
		{"x := := 1", "invalid"},
		{"x := 1 +* 2", "invalid"},
		{"p := &3", "invalid"},
		{"func f() {", "incomplete"},
		{"x := []int{1,\n", "incomplete"},
		{"x := 1 +", "incomplete"},
		{"s := `abc", "incomplete"},
		{"x := 1", "complete"},
		{"p := &x\ny := *p", "complete"},
		{"import \"fmt\"\nfmt.Println(1 * -2)", "complete"},
		{"%time\nx := 1", "complete"},
		{"x := 1\n%time y := 2", "complete"},
		{"for i := 0; i < 3; i++ {\n}", "complete"},
		{"}", "invalid"},
	}
	for _, tt := range tests {
		if got, _ := s.IsComplete(tt.code); got != tt.want {
			t.Errorf("IsComplete(%q) = %q, want %q", tt.code, got, tt.want)
		}
	}
}

func TestCompleteUnexecutedCell(t *testing.T) {
	s := newSession(t, Options{})
	tests := []struct {
		code string
		want string
		from int
	}{
		{"import \"fmt\"\nfmt.Printl", "Println", 17},
		{"import (\n\tstr \"strings\"\n)\nstr.ToU", "ToUpper", 30},
		{"func square(x int) int { return x * x }\nsq", "square", 40},
		{"total, count := 1, 2\ncou", "count", 21},
		{"type Point struct{}\nvar origin Point\nPoi", "Point", 37},
		{"var origin = 1\nori", "origin", 15},
		// Offsets are bytes: "日本" is two code points and six bytes.
		{"import \"strings\"\nv := \"日本\"\nstrings.ToU", "ToUpper", 39},
	}
	for _, tt := range tests {
		matches, start, end := s.Complete(tt.code, len(tt.code))
		if !contains(matches, tt.want) || start != tt.from || end != len(tt.code) {
			t.Errorf("Complete(%q) = %v, %d, %d, want %q from %d", tt.code, matches, start, end, tt.want, tt.from)
		}
	}
	// Names of a function body are not the cell's.
	if m, _, _ := s.Complete("func f() { inner := 1 }\ninn", 27); contains(m, "inner") {
		t.Errorf("Complete offers a function's local variable: %v", m)
	}
	// Warm, a completion answers fast.
	code := "import \"fmt\"\nfmt.Printl"
	s.Complete(code, len(code))
	start := time.Now()
	for i := 0; i < 10; i++ {
		s.Complete(code, len(code))
	}
	if d := time.Since(start) / 10; d > 50*time.Millisecond {
		t.Errorf("Complete took %v after warm-up, want well under 100ms", d)
	}
}

func TestInspectStdlib(t *testing.T) {
	s := newSession(t, Options{})
	tests := []struct {
		code   string
		detail int
		want   []string
		not    []string
	}{
		{"import \"strings\"\nstrings.Repeat", 0, []string{"func Repeat(s string, count int) string", "Repeat returns a new string", "func(string, int) string"}, []string{"source:"}},
		{"import \"strings\"\nstrings.Repeat", 1, []string{"func Repeat(s string, count int) string", "source:", "return"}, nil},
		{"import \"strings\"\nstrings.Builder", 0, []string{"type Builder struct", "A Builder is used"}, []string{"func (b *Builder) WriteString"}},
		{"import \"strings\"\nstrings.Builder", 1, []string{"func (b *Builder) WriteString(s string) (int, error)"}, nil},
		{"import \"math\"\nmath.Pi", 0, []string{"Pi"}, nil},
		{"import \"fmt\"\nfmt", 0, []string{"package fmt", "formatted I/O"}, nil},
	}
	for _, tt := range tests {
		data, found := s.Inspect(tt.code, len(tt.code), tt.detail)
		if !found {
			t.Errorf("Inspect(%q, %d) found nothing", tt.code, tt.detail)
			continue
		}
		text := data["text/plain"].(string)
		for _, w := range tt.want {
			if !strings.Contains(text, w) {
				t.Errorf("Inspect(%q, %d) = %q, want %q in it", tt.code, tt.detail, text, w)
			}
		}
		for _, w := range tt.not {
			if strings.Contains(text, w) {
				t.Errorf("Inspect(%q, %d) = %q, want no %q in it", tt.code, tt.detail, text, w)
			}
		}
	}
}

func TestAutoImport(t *testing.T) {
	checkLeaks(t)
	tests := []struct {
		name, code string
		stdout     string
		plain      string
		err        []string // in the error, when the cell must fail
	}{
		{name: "stdlib", code: `fmt.Println("x")`, stdout: "x\n"},
		{name: "two packages", code: `fmt.Println(strings.ToUpper("a"), math.Sqrt(4))`, stdout: "A 2\n"},
		{name: "members choose", code: `rand.Seed(1); fmt.Println(rand.Intn(1))`, stdout: "0\n"},
		{name: "new major version", code: `rand.IntN(1)`, plain: "0"},
		{name: "distlib", code: `display.Text("t")`},
		{name: "in a function", code: "func up(s string) string { return strings.ToUpper(s) }\nup(\"q\")", plain: "Q"},
		{name: "ambiguous", code: `template.New("t")`, err: []string{"template is not imported", `import "html/template"`, `import "text/template"`}},
		{name: "local shadows", code: "func f() int { strings := struct{ N int }{3}; return strings.N }\nf()", plain: "3"},
		{name: "unknown stays undefined", code: `nosuchpkg.Foo()`, err: []string{"nosuchpkg"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSession(t, Options{})
			plain, rec, err := run(t, s, tt.code)
			if tt.err != nil {
				if err == nil {
					t.Fatalf("%q ran, want an error with %q", tt.code, tt.err)
				}
				for _, w := range tt.err {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%q: error %q, want %q in it", tt.code, err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("%q: %v", tt.code, err)
			}
			if got := rec.text("stdout"); got != tt.stdout {
				t.Errorf("%q printed %q, want %q", tt.code, got, tt.stdout)
			}
			if tt.plain != "" && !strings.Contains(plain, tt.plain) {
				t.Errorf("%q = %q, want %q", tt.code, plain, tt.plain)
			}
			if got := rec.text("stderr"); got != "" {
				t.Errorf("%q wrote to stderr %q, want silence", tt.code, got)
			}
		})
	}
}

func TestPasswordInput(t *testing.T) {
	checkLeaks(t)
	s := newSession(t, Options{})
	rec := &askRecorder{recorder: &recorder{input: []string{"s3cret", "Ada"}}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	code := "import \"godist/distlib/display\"\nfmt.Print(\"first \")\nkey, err := display.Password(\"API key: \")\nname, err2 := display.Input(\"name? \")\nfmt.Sprint(len(key), name, err, err2)"
	res, err := s.Execute(ctx, code, rec)
	if err != nil || res == nil || res.Data["text/plain"] != "6Ada<nil> <nil>" {
		t.Fatalf("Execute = %+v, %v, want 6Ada<nil> <nil>", res, err)
	}
	want := []string{`"API key: " true`, `"name? " false`}
	if got := rec.asked; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("asked %q, want %q", got, want)
	}
	if rec.text("stdout") != "first " {
		t.Errorf("stdout = %q, want the text before the prompt", rec.text("stdout"))
	}
}

// askRecorder records the prompts and password flags of the input asked.
type askRecorder struct {
	*recorder
	asked []string
}

func (a *askRecorder) Input(prompt string, password bool) (string, error) {
	a.mu.Lock()
	a.asked = append(a.asked, fmt.Sprintf("%q %v", prompt, password))
	a.mu.Unlock()
	return a.recorder.Input(prompt, password)
}

func TestCompleteTyped(t *testing.T) {
	s := newSession(t, Options{})
	mustRun(t, s, "import \"strings\"\ntype Pt struct{ X, Y int }\nfunc (p Pt) Norm() int { return p.X*p.X + p.Y*p.Y }\norigin := Pt{}")
	tests := []struct {
		code string
		want []string
		not  []string
	}{
		{"var sb strings.Builder\nsb.Wri", []string{"WriteString", "WriteByte"}, nil},
		{"r := strings.NewReader(\"x\")\nr.Re", []string{"ReadRune", "Read"}, nil},
		{"p := Pt{1, 2}\np.", []string{"X", "Y", "Norm"}, nil},
		{"func f() {\n\tb := new(strings.Builder)\n\tb.Len", []string{"Len"}, nil},
		{"q := origin\nq.", []string{"X", "Y", "Norm"}, nil},
		{"pp := &origin\npp.", []string{"X", "Norm"}, nil},
		{"n := 3\nn.", nil, []string{"String"}},
	}
	for _, tt := range tests {
		matches, _, _ := s.Complete(tt.code, len(tt.code))
		for _, w := range tt.want {
			if !contains(matches, w) {
				t.Errorf("Complete(%q) = %v, want %s", tt.code, matches, w)
			}
		}
		for _, w := range tt.not {
			if contains(matches, w) {
				t.Errorf("Complete(%q) = %v, want no %s", tt.code, matches, w)
			}
		}
	}
	code := "var sb strings.Builder\nsb.Wri"
	s.Complete(code, len(code))
	start := time.Now()
	for i := 0; i < 10; i++ {
		s.Complete(code, len(code))
	}
	if d := time.Since(start) / 10; d > 50*time.Millisecond {
		t.Errorf("typed Complete took %v after warm-up, want well under 100ms", d)
	}
}

func TestInspectTyped(t *testing.T) {
	s := newSession(t, Options{})
	tests := []struct{ code, want string }{
		{"import \"strings\"\nr := strings.NewReader(\"x\")\nr", "r *strings.Reader"},
		{"type Pt struct{ X int }\np := &Pt{}\np", "p *Pt"},
		{"parts := []string{\"a\"}\nparts", "parts []string"},
	}
	// Globals of a type the notebook declared, from an earlier cell: named by that type.
	mustRun(t, s, "type Pt2 struct{ X int }\nfunc (p Pt2) Norm() int { return p.X }\norg := Pt2{}\nop := &Pt2{}")
	for _, tt := range []struct{ code, want string }{
		{"org", "org Pt2\nvalue: {0}"},
		{"q := org\nq", "q Pt2"},
		{"w := op\nw", "w *Pt2"},
	} {
		if data, found := s.Inspect(tt.code, len(tt.code), 0); !found || data["text/plain"] != tt.want {
			t.Errorf("Inspect(%q) = %v, %v, want %q", tt.code, data, found, tt.want)
		}
	}
	for _, tt := range tests {
		data, found := s.Inspect(tt.code, len(tt.code), 0)
		if !found || data["text/plain"] != tt.want {
			t.Errorf("Inspect(%q) = %v, %v, want %q", tt.code, data, found, tt.want)
		}
	}
}

// TestAutoImportKeepsVersionedImport: a cell that imports "math/rand/v2" itself uses
// package rand: auto-import adds nothing (it once added "math/rand" beside it).
func TestAutoImportKeepsVersionedImport(t *testing.T) {
	s := newSession(t, Options{})
	got, _, err := run(t, s, "import \"math/rand/v2\"\n\nr := rand.New(rand.NewPCG(7, 7))\nr.IntN(3) >= 0")
	if err != nil || got != "true" {
		t.Fatalf("cell importing math/rand/v2 = %q, %v; want true", got, err)
	}
}
