package interp

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// recorder is an Output that keeps everything with arrival times.
type recorder struct {
	input    []string // lines Input returns, in order
	mu       sync.Mutex
	streams  []streamEvent
	displays []displayEvent
	clears   int
}

type streamEvent struct {
	name, text string
	at         time.Time
}

type displayEvent struct {
	data   map[string]any
	id     string
	update bool
}

func (r *recorder) Stream(name, text string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.streams = append(r.streams, streamEvent{name, text, time.Now()})
}

func (r *recorder) Display(data, md map[string]any, id string, update bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.displays = append(r.displays, displayEvent{data, id, update})
}

func (r *recorder) ClearOutput(bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.clears++
}

func (r *recorder) Input(string, bool) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.input) == 0 {
		return "", fmt.Errorf("no input")
	}
	line := r.input[0]
	r.input = r.input[1:]
	return line, nil
}

func (r *recorder) text(name string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, e := range r.streams {
		if e.name == name {
			b.WriteString(e.text)
		}
	}
	return b.String()
}

func newSession(t *testing.T, opts Options) *Session {
	t.Helper()
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// run executes a cell with a bounded wait and returns the result's text/plain, the
// recorder and the error.
func run(t *testing.T, s *Session, code string) (string, *recorder, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rec := &recorder{}
	res, err := s.Execute(ctx, code, rec)
	plain := ""
	if res != nil {
		plain, _ = res.Data["text/plain"].(string)
	}
	return plain, rec, err
}

// checkLeaks fails the test when goroutines started during it outlive it.
func checkLeaks(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(3 * time.Second)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > before {
			buf := make([]byte, 1<<16)
			t.Errorf("goroutines leaked: %d before, %d after\n%s", before, n, buf[:runtime.Stack(buf, true)])
		}
	})
}

func mustRun(t *testing.T, s *Session, code string) (string, *recorder) {
	t.Helper()
	plain, rec, err := run(t, s, code)
	if err != nil {
		t.Fatalf("Execute(%q): %v", code, err)
	}
	return plain, rec
}

// cellCase is one cell of a session test: its code, the value it shows (plain text) and
// what it prints.
type cellCase struct{ code, result, stdout string }

// runCells runs the cells in order in s and checks each one's value and output.
func runCells(t *testing.T, s *Session, cells []cellCase) {
	t.Helper()
	for _, c := range cells {
		plain, rec := mustRun(t, s, c.code)
		if plain != c.result || rec.text("stdout") != c.stdout {
			t.Errorf("Execute(%q) = %q, stdout %q, want %q, stdout %q", c.code, plain, rec.text("stdout"), c.result, c.stdout)
		}
	}
}

func evalError(t *testing.T, err error) *EvalError {
	t.Helper()
	var ee *EvalError
	if !errors.As(err, &ee) {
		t.Fatalf("error = %v (%T), want *EvalError", err, err)
	}
	return ee
}

func TestCells(t *testing.T) {
	checkLeaks(t)
	s := newSession(t, Options{})
	steps := []struct {
		code, result, stdout string
	}{
		{"import \"fmt\"\nx := 3\nfmt.Println(\"x is\", x)\nx * 2", "6", "x is 3\n"},
		{"import \"fmt\"\nimport \"strings\"\nstrings.ToUpper(\"re-import is skipped\")", "RE-IMPORT IS SKIPPED", ""},
		{"func double(n int) int { return 2 * n }\ny := double(x)\nfunc triple(n int) int { return 3 * n }\ntriple(y)", "18", ""},
		{"for i := range 3 {\n\tfmt.Print(i)\n}\nfmt.Println()\nmin(x, 1)*10 + max(4, x)", "14", "012\n"},
		{"m := map[string]int{\"a\": 1}\nclear(m)\nlen(m)", "0", ""},
		{"fmt.Println(\"no result for a call without one\")", "", "no result for a call without one\n"},
		{"s := []int{3, 1, 2}\ns", "[3 1 2]", ""},
		{"import \"os\"\nfmt.Fprintln(os.Stdout, \"to os.Stdout\")\nfmt.Fprintln(os.Stderr, \"to os.Stderr\")", "", "to os.Stdout\n"},
		{"var counter int\nfunc inc() int { counter++; return counter }\ninc()\ninc()", "2", ""},
		{"counter := 10\ninc()", "11", ""},
	}
	for _, st := range steps {
		plain, rec := mustRun(t, s, st.code)
		if plain != st.result {
			t.Errorf("Execute(%q) result = %q, want %q", st.code, plain, st.result)
		}
		if got := rec.text("stdout"); got != st.stdout {
			t.Errorf("Execute(%q) stdout = %q, want %q", st.code, got, st.stdout)
		}
	}
	_, rec := mustRun(t, s, "fmt.Fprintln(os.Stderr, \"err line\")")
	if got := rec.text("stderr"); got != "err line\n" {
		t.Errorf("stderr = %q, want %q", got, "err line\n")
	}
}

func TestRedefinition(t *testing.T) {
	checkLeaks(t)
	s := newSession(t, Options{})
	steps := []struct{ code, result string }{
		{"import \"fmt\"\ntype Point struct{ X, Y int }\nfunc (p Point) String() string { return fmt.Sprintf(\"(%d,%d)\", p.X, p.Y) }\np := Point{X: 1, Y: 2}\np.String()", "(1,2)"},
		// A field added: the type takes effect; p is recomputed from the cell that made it.
		{"type Point struct{ X, Y, Z int }\nq := Point{1, 2, 3}\nq.Z", "3"},
		{"p.X", "1"},
		// A method changed.
		{"func (p Point) String() string { return fmt.Sprintf(\"<%d %d %d>\", p.X, p.Y, p.Z) }\nq.String()", "<1 2 3>"},
		// A function other functions call.
		{"func base() int { return 1 }\nfunc user() int { return base() * 10 }\nuser()", "10"},
		{"func base() int { return 2 }\nuser()", "20"},
		// Compiled-typed variables keep their values across a rebuild.
		{"data := []float64{1, 2, 3}\nfunc base() int { return 3 }\nlen(data) + user()", "33"},
		// A changed import path under the same name.
		{"import r \"math/rand\"\nfmt.Sprintf(\"%T\", r.New)", "func(rand.Source) *rand.Rand"},
		{"import r \"strings\"\nr.Repeat(\"ab\", 2)", "abab"},
		// Same source again: nothing happens, state stays.
		{"func base() int { return 3 }\nuser()", "30"},
	}
	for _, st := range steps {
		plain, _ := mustRun(t, s, st.code)
		if plain != st.result {
			t.Errorf("Execute(%q) = %q, want %q", st.code, plain, st.result)
		}
	}
}

func TestErrors(t *testing.T) {
	checkLeaks(t)
	s := newSession(t, Options{})
	mustRun(t, s, "import \"fmt\"\nimport \"os\"\nimport \"log\"")
	tests := []struct {
		name, code, ename, value string
		trace                    string // a substring of the traceback
	}{
		{"compile error line", "x := 1\n\ny := undefinedThing + x", "CompileError", "cell line 3: undefined: undefinedThing", "   3 | y := undefinedThing + x"},
		{"syntax error line", "a := 1\nb := (2", "CompileError", "cell line 2", ""},
		{"type error line", "func f() {\n\treturn 1\n}", "CompileError", "cell line 2", ""},
		{"panic", "fmt.Println(\"before\")\npanic(\"boom\")", "panic", "boom", "panic: boom"},
		{"runtime panic", "var xs []int\n_ = xs[3]", "panic", "index out of range", ""},
		{"goroutine panic", "done := make(chan bool)\ngo func() {\n\tpanic(\"in goroutine\")\n}()\n<-done", "panic", "in goroutine (in a goroutine)", ""},
		{"goroutine panic in named func", "func bad(n int) { panic(fmt.Sprint(\"bad \", n)) }\nwait := make(chan bool)\ngo bad(7)\n<-wait", "panic", "bad 7 (in a goroutine)", ""},
		{"os.Exit", "os.Exit(3)", "ExitError", "os.Exit(3) called: the kernel keeps running", ""},
		{"log.Fatal", "log.Fatal(\"fatal\")", "ExitError", "os.Exit(1) called: the kernel keeps running", ""},
		{"range over func", "for x := range func(yield func(int) bool) {} {\n\treturn\n}", "CompileError", "cell line 1: cannot range over func literal (value of type func(yield func(int) bool)): the interpreter runs a range-over-func loop (Go 1.23) only without a return in its body", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := run(t, s, tt.code)
			ee := evalError(t, err)
			if ee.Name != tt.ename || !strings.Contains(ee.Value, tt.value) {
				t.Errorf("Execute(%q) error = %s: %s, want %s containing %q", tt.code, ee.Name, ee.Value, tt.ename, tt.value)
			}
			if tt.trace != "" && !strings.Contains(strings.Join(ee.Traceback, "\n"), tt.trace) {
				t.Errorf("traceback %q does not contain %q", ee.Traceback, tt.trace)
			}
			if want := map[string]int{"os.Exit": 3, "log.Fatal": 1}[tt.name]; ee.ExitCode != want {
				t.Errorf("Execute(%q) exit code %d, want %d", tt.code, ee.ExitCode, want)
			}
		})
	}
	// The session lives on.
	if plain, _ := mustRun(t, s, "1 + 1"); plain != "2" {
		t.Errorf("after errors: 1 + 1 = %q, want 2", plain)
	}
}

func TestInterrupt(t *testing.T) {
	checkLeaks(t)
	s := newSession(t, Options{})
	mustRun(t, s, "import \"fmt\"\nimport \"time\"\nch := make(chan int)")
	tests := []struct{ name, code string }{
		{"sleeping loop", "for {\n\ttime.Sleep(time.Hour)\n}"},
		{"busy loop", "n := 0\nfor {\n\tn++\n}"},
		{"goroutine blocked on a channel", "go func() {\n\t<-ch\n\tfmt.Println(\"must not print\")\n}()\n<-ch"},
		{"goroutine sleeping", "go func() {\n\ttime.Sleep(time.Hour)\n\tfmt.Println(\"must not print\")\n}()\nselect {}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			rec := &recorder{}
			done := make(chan error, 1)
			go func() {
				_, err := s.Execute(ctx, tt.code, rec)
				done <- err
			}()
			time.Sleep(150 * time.Millisecond)
			start := time.Now()
			cancel()
			select {
			case err := <-done:
				if d := time.Since(start); d > time.Second {
					t.Errorf("interrupt took %v, want under 1s", d)
				}
				if ee := evalError(t, err); ee.Name != "Interrupted" {
					t.Errorf("error = %v, want Interrupted", ee)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Execute did not return within 5s of the interrupt")
			}
		})
	}
	// Nothing the interrupted goroutines would print reaches a later cell (were one still
	// waiting on ch, the send would wake it; none is, so the send gives up).
	_, rec := mustRun(t, s, "go func() {\n\tselect {\n\tcase ch <- 1:\n\tcase <-time.After(50 * time.Millisecond):\n\t}\n}()\ntime.Sleep(100 * time.Millisecond)\n\"alive\"")
	if strings.Contains(rec.text("stdout"), "must not print") {
		t.Errorf("an interrupted goroutine kept running: %q", rec.text("stdout"))
	}
}

func TestStreaming(t *testing.T) {
	checkLeaks(t)
	s := newSession(t, Options{})
	start := time.Now()
	_, rec := mustRun(t, s, "import \"fmt\"\nimport \"time\"\nfor i := range 5 {\n\tfmt.Println(\"tick\", i)\n\ttime.Sleep(100 * time.Millisecond)\n}")
	var ticks []time.Duration
	for _, e := range rec.streams {
		for range strings.Count(e.text, "tick") {
			ticks = append(ticks, e.at.Sub(start))
		}
	}
	if len(ticks) != 5 {
		t.Fatalf("got %d ticks (%q), want 5", len(ticks), rec.text("stdout"))
	}
	if spread := ticks[4] - ticks[0]; spread < 300*time.Millisecond {
		t.Errorf("ticks arrived within %v of each other (%v), want them spread over ~400ms", spread, ticks)
	}
	// Goroutine output streams too, and is all delivered before Execute returns.
	_, rec = mustRun(t, s, "done := make(chan bool)\ngo func() {\n\tfor i := range 3 {\n\t\tfmt.Print(\"g\", i, \" \")\n\t}\n\tdone <- true\n}()\n<-done")
	if got := rec.text("stdout"); got != "g0 g1 g2 " {
		t.Errorf("goroutine output = %q, want %q", got, "g0 g1 g2 ")
	}
}

func TestCaptureFDs(t *testing.T) {
	s := newSession(t, Options{CaptureFDs: true})
	if _, err := New(Options{CaptureFDs: true}); err == nil {
		t.Error("a second capturing session was allowed")
	}
	// display's plain-text fallback is compiled code printing to the real os.Stdout.
	_, rec := mustRun(t, s, "import \"godist/distlib/display\"\ndisplay.SetPublisher(nil)\ndisplay.Text(\"from compiled code\")")
	if got := rec.text("stdout"); got != "from compiled code\n" {
		t.Errorf("captured stdout = %q, want %q", got, "from compiled code\n")
	}
}

func TestDisplay(t *testing.T) {
	checkLeaks(t)
	s := newSession(t, Options{})
	_, rec := mustRun(t, s, `import "godist/distlib/display"
import "fmt"
fmt.Println("first")
display.HTML("<b>bold</b>")
h := display.NewHandle()
for i := range 3 {
	h.UpdateHTML(fmt.Sprintf("<i>%d</i>", i), fmt.Sprint(i))
}
display.Markdown("# title")`)
	if len(rec.displays) != 5 {
		t.Fatalf("got %d displays, want 5: %+v", len(rec.displays), rec.displays)
	}
	if rec.displays[0].data["text/html"] != "<b>bold</b>" {
		t.Errorf("display 0 = %v, want the HTML", rec.displays[0].data)
	}
	if rec.displays[1].update || !rec.displays[2].update || rec.displays[1].id == "" || rec.displays[2].id != rec.displays[1].id {
		t.Errorf("handle displays = %+v, want one display then updates of the same id", rec.displays[1:4])
	}
	if rec.displays[4].data["text/markdown"] != "# title" {
		t.Errorf("display 4 = %v, want the Markdown", rec.displays[4].data)
	}
	// Rich results: an image and a notebook type with an HTML method.
	res, err := s.Execute(context.Background(), `import "image"
img := image.NewGray(image.Rect(0, 0, 4, 4))
img`, &recorder{})
	if err != nil || res == nil || res.Data["image/png"] == nil {
		t.Errorf("image result = %v, %v, want image/png", res, err)
	}
	res, err = s.Execute(context.Background(), "type Table struct{ N int }\nfunc (t Table) HTML() string { return fmt.Sprintf(\"<table>%d</table>\", t.N) }\nTable{3}", &recorder{})
	if err != nil || res == nil || res.Data["text/html"] != "<table>3</table>" {
		t.Errorf("HTML result = %+v, %v, want text/html", res, err)
	}
	res, err = s.Execute(context.Background(), "type Rows [][]string\nfunc (r Rows) Markdown() string { return \"| \" + r[0][0] + \" |\" }\nRows{{\"a\"}}", &recorder{})
	if err != nil || res == nil || res.Data["text/markdown"] != "| a |" {
		t.Errorf("Markdown result of a named slice type = %+v, %v, want text/markdown", res, err)
	}
}

func TestMagics(t *testing.T) {
	checkLeaks(t)
	dir := t.TempDir()
	s := newSession(t, Options{Dir: dir})
	_, rec := mustRun(t, s, "%help")
	for _, want := range []string{"%time", "%%writefile", "%who", "!COMMAND"} {
		if !strings.Contains(rec.text("stdout"), want) {
			t.Errorf("%%help does not mention %s: %q", want, rec.text("stdout"))
		}
	}
	_, rec = mustRun(t, s, "%env GODIST_TEST_VAR=hello\n%env GODIST_TEST_VAR")
	if os.Getenv("GODIST_TEST_VAR") != "hello" || !strings.Contains(rec.text("stdout"), "hello\n") {
		t.Errorf("%%env: var %q, output %q", os.Getenv("GODIST_TEST_VAR"), rec.text("stdout"))
	}
	os.Unsetenv("GODIST_TEST_VAR")
	_, rec = mustRun(t, s, "x := 41\n%time x++\nx")
	if !strings.Contains(rec.text("stdout"), "wall time:") {
		t.Errorf("%%time output = %q", rec.text("stdout"))
	}
	plain, rec := mustRun(t, s, "%%time\ny := x + 1\ny")
	if plain != "43" || !strings.Contains(rec.text("stdout"), "wall time:") {
		t.Errorf("%%%%time = %q, output %q", plain, rec.text("stdout"))
	}
	_, rec = mustRun(t, s, "%who")
	if !strings.Contains(rec.text("stdout"), "x") || !strings.Contains(rec.text("stdout"), "int") {
		t.Errorf("%%who = %q", rec.text("stdout"))
	}
	_, rec = mustRun(t, s, "!echo hello from sh; echo oops >&2")
	if rec.text("stdout") != "hello from sh\n" || rec.text("stderr") != "oops\n" {
		t.Errorf("!echo: stdout %q stderr %q", rec.text("stdout"), rec.text("stderr"))
	}
	_, rec = mustRun(t, s, "%%writefile notes.txt\nline one\nline two")
	b, err := os.ReadFile(filepath.Join(dir, "notes.txt"))
	if err != nil || string(b) != "line one\nline two\n" || !strings.Contains(rec.text("stdout"), "Writing notes.txt") {
		t.Errorf("%%%%writefile wrote %q (%v), said %q", b, err, rec.text("stdout"))
	}
	mustRun(t, s, "%reset")
	if _, _, err := run(t, s, "x"); err == nil {
		t.Error("x still defined after %reset")
	}
	if _, _, err := run(t, s, "%nosuchmagic"); err == nil || !strings.Contains(err.Error(), "unknown line magic %nosuchmagic") {
		t.Errorf("unknown magic error = %v", err)
	}
	// A cell magic registered from outside.
	RegisterCellMagic("twice", func(ctx context.Context, m *Magic) (*Result, error) {
		if _, err := m.Run(ctx, m.Code); err != nil {
			return nil, err
		}
		return m.Run(ctx, m.Code)
	})
	plain, rec = mustRun(t, s, "%%twice\nimport \"fmt\"\nfmt.Println(\"run\")\n7")
	if plain != "7" || rec.text("stdout") != "run\nrun\n" {
		t.Errorf("%%%%twice = %q, output %q", plain, rec.text("stdout"))
	}
}

func TestCompleteInspect(t *testing.T) {
	checkLeaks(t)
	s := newSession(t, Options{})
	mustRun(t, s, "import \"strings\"\nimport \"godist/distlib/display\"\nimport \"bytes\"\nvar buf bytes.Buffer\ntype Rec struct{ Name string; Age int }\nrec := Rec{\"a\", 3}\ncounter := 1")
	tests := []struct {
		code string
		want string
		from int
	}{
		{"strings.ToU", "ToUpper", 8},
		{"display.HT", "HTML", 8},
		{"buf.Wri", "WriteString", 4},
		{"rec.Na", "Name", 4},
		{"x := coun", "counter", 5},
		{"fo", "for", 0},
	}
	for _, tt := range tests {
		matches, start, end := s.Complete(tt.code, len(tt.code))
		found := false
		for _, m := range matches {
			found = found || m == tt.want
		}
		if !found || start != tt.from || end != len(tt.code) {
			t.Errorf("Complete(%q) = %v, %d, %d, want %q in matches from %d", tt.code, matches, start, end, tt.want, tt.from)
		}
	}
	data, found := s.Inspect("display.HTML(x)", 10, 0)
	if !found || !strings.Contains(data["text/plain"].(string), "HTML displays an HTML fragment") {
		t.Errorf("Inspect(display.HTML) = %v, %v, want its documentation", data, found)
	}
	data, found = s.Inspect("counter", 3, 0)
	if !found || !strings.Contains(data["text/plain"].(string), "counter int") {
		t.Errorf("Inspect(counter) = %v, %v", data, found)
	}
	data, found = s.Inspect("strings.Repeat", 10, 0)
	if !found || !strings.Contains(data["text/plain"].(string), "func(string, int) string") {
		t.Errorf("Inspect(strings.Repeat) = %v, %v", data, found)
	}
	if _, found := s.Inspect("nothingKnown", 3, 0); found {
		t.Error("Inspect(nothingKnown) found something")
	}
}

func TestInput(t *testing.T) {
	checkLeaks(t)
	s := newSession(t, Options{})
	rec := &recorder{input: []string{"Ada 36"}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := s.Execute(ctx, "import \"fmt\"\nvar name string\nvar age int\nfmt.Print(\"name and age? \")\nfmt.Scanln(&name, &age)\nfmt.Sprint(name, \" is \", age)", rec)
	if err != nil || res == nil || res.Data["text/plain"] != "Ada is 36" {
		t.Errorf("Execute with input = %+v, %v, want Ada is 36", res, err)
	}
	if rec.text("stdout") != "name and age? " {
		t.Errorf("prompt = %q", rec.text("stdout"))
	}
}

func TestStdlibPackages(t *testing.T) {
	checkLeaks(t)
	s := newSession(t, Options{})
	tests := []struct{ code, want string }{
		{"import \"sort\"\nxs := []int{3, 1, 2}\nsort.Ints(xs)\nxs", "[1 2 3]"},
		{"import \"strconv\"\nstrconv.Itoa(42) + strconv.Quote(\"q\")", "42\"q\""},
		{"import \"encoding/json\"\nb, _ := json.Marshal(map[string]int{\"a\": 1})\nstring(b)", "{\"a\":1}"},
		{"import \"errors\"\nerrors.New(\"e\").Error()", "e"},
		{"import \"math\"\nmath.Sqrt(16)", "4"},
		{"import \"bytes\"\nvar bb bytes.Buffer\nbb.WriteString(\"xy\")\nbb.String()", "xy"},
		{"import \"sync/atomic\"\nvar c atomic.Int64\nc.Add(5)\nc.Load()", "5"},
		{"import \"time\"\ntime.Duration(1500) * time.Millisecond", "1.5s"},
		{"import \"image/color\"\ncolor.RGBA{1, 2, 3, 4}", "{1 2 3 4}"},
	}
	for _, tt := range tests {
		if got, _ := mustRun(t, s, tt.code); got != tt.want {
			t.Errorf("Execute(%q) = %q, want %q", tt.code, got, tt.want)
		}
	}
}

func TestLateGoroutinePanic(t *testing.T) {
	checkLeaks(t)
	s := newSession(t, Options{})
	mustRun(t, s, "import \"time\"\ngo func() {\n\ttime.Sleep(50 * time.Millisecond)\n\tpanic(\"late\")\n}()")
	time.Sleep(300 * time.Millisecond)
	_, rec := mustRun(t, s, "1")
	if !strings.Contains(rec.text("stderr"), "late") {
		t.Errorf("next cell's stderr = %q, want the late panic", rec.text("stderr"))
	}
}

// TestStdlibTablesMerged guards against the unrestricted table replacing whole packages:
// os.Getenv, os.ReadFile and log.Println must stay available beside os/exec.
func TestStdlibTablesMerged(t *testing.T) {
	s := newSession(t, Options{})
	t.Setenv("GODIST_MERGE_PROBE", "merged")
	out := &recorder{}
	_, err := s.Execute(context.Background(), `import ("fmt"; "os"; "log"; "os/exec")
fmt.Println(os.Getenv("GODIST_MERGE_PROBE"))
_, _ = os.ReadFile("/nonexistent")
log.SetFlags(0)
_ = exec.Command
`, out)
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	if got := out.text("stdout"); !strings.Contains(got, "merged") {
		t.Errorf("stdout = %q, want it to contain %q", got, "merged")
	}
}
