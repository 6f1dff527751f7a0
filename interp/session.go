// Package interp runs notebook cells: a Session interprets Go with yaegi and keeps the
// state of a notebook between cells.
//
// # Cells
//
// A cell may mix imports, declarations and statements. It is cut into top-level pieces
// (go/scanner) and each run of imports, declarations or statements is evaluated in order;
// imports already done are skipped. When the last piece is an expression, its value is the
// cell's result: text/plain, plus image/png for an image.Image, text/html, text/markdown
// or image/svg+xml for a value with an HTML, Markdown or SVG method returning a string.
// A call with several results shows them as a tuple, `(12, <nil>)`, strings quoted; a nil
// error or nil interface (display.JSON's result) shows nothing, as Python's None.
//
// Before anything in a cell runs, the session type-checks it with go/types against its
// declarations, variables and imports (check.go): a mistake is reported in the Go
// compiler's words at the cell's line, with the Go form of a Python habit, and valid Go
// that yaegi cannot run (a generic type alias) is refused in Go's terms.
//
// Before evaluation the session rewrites what yaegi cannot run: a range over a function
// (a call of it with the body as the yield function), new of a value (&[]T{v}[0], T from
// the check), `min`, `max` and `clear`, and every
// `go` statement (the goroutine recovers its panic and reports it as the cell's error). A
// top-level loop, if, switch, select or block that defines several variables from one value (`a, err := f()`, `v, ok := m[k]`, which
// yaegi leaves undefined there) runs inside a function literal; a top-level call of a
// function literal is put in a block (yaegi would run it again in every later cell).
// A `defer` of top-level code runs once, when its cell ends (last deferred first), with
// the arguments it had at the defer statement. The variables of a 3-clause or range `for`
// are per iteration, as in Go 1.22, when the body makes closures, defers or starts
// goroutines (the header gets a temporary name and the body defines the variable from it).
// Statements that may panic record their cell position first, so that a panic's
// traceback names the line that panicked. os.Exit and log.Fatal panic with an ExitError
// instead of exiting, time.Sleep wakes up when the cell is interrupted, and os.Stdout,
// os.Stderr and display output reach the running cell's Output while the cell runs.
//
// # Redefinition
//
// The session keeps the source of every top-level declaration by name. Re-running a
// declaration with the same source does nothing. When a type, function, method or constant
// changes, when a `var` declaration is run again, or when an import name changes its path,
// the session builds a fresh interpreter and replays the imports and all current
// declarations in one file (so functions that call a redefined function or use a redefined
// type see the new one). Variables survive a rebuild:
//
//   - a variable whose value has a compiled type (numbers, strings, slices and maps of them,
//     *tensor.Tensor, ...) keeps its value (the same value, not a copy);
//   - a variable whose type is declared in the notebook is recomputed by re-running,
//     silently, the statements that last defined it; if that fails it is dropped, and the
//     cell's stderr says so;
//   - a variable declared with `var` that is being re-run is initialized again.
//
// A statement `x := v` for an existing variable x assigns it when the types allow, so
// functions that use x see the new value.
//
// # Interrupts and goroutines
//
// Cancelling Execute's context stops the cell and every interpreted goroutine of the
// session within a few milliseconds, including those sleeping in time.Sleep or blocked on a
// channel; goroutines blocked in compiled code (a sync.WaitGroup) stay blocked. A goroutine
// that panics stops the cell it was started from (or, if that cell has ended, the panic is
// reported on the next cell's stderr).
package interp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	yaegi "github.com/traefik/yaegi/interp"

	"godist/distlib/cell"
	"godist/distlib/display"
	"godist/internal/memlimit"
)

// Options configures a Session.
type Options struct {
	// CaptureFDs redirects the process's file descriptors 1 and 2 into the running cell's
	// output, so that compiled code writing to os.Stdout or os.Stderr is shown too. Only one
	// session in a process may capture them; Close restores them.
	CaptureFDs bool
	// Dir is the working directory of shell commands (!cmd) and relative %%writefile paths;
	// empty means the process's working directory.
	Dir string
}

// Output receives what a cell produces while it runs. Its methods may be called from
// several goroutines, one at a time (the session serializes them).
type Output interface {
	Stream(name, text string)                                             // "stdout" | "stderr"
	Display(data, metadata map[string]any, displayID string, update bool) // display_data / update_display_data
	ClearOutput(wait bool)
	Input(prompt string, password bool) (string, error) // error if stdin is not allowed
}

// Result is the value of a cell's final expression as a MIME bundle.
type Result struct {
	Data, Metadata map[string]any
}

// EvalError is a cell's failure: a compile error, a panic (in the cell or in a goroutine
// it started), an os.Exit, or an interrupt.
type EvalError struct {
	Name      string   // "CompileError", "panic", "ExitError", "Interrupted", "MagicError"
	Value     string   // the message, with the cell's line numbers
	Traceback []string // lines to show, the first being "Name: Value"
	ExitCode  int      // an ExitError's code: what os.Exit was called with
}

// Error returns "Name: Value".
func (e *EvalError) Error() string { return e.Name + ": " + e.Value }

// ErrClosed is returned by Execute on a closed session.
var ErrClosed = errors.New("interp: session closed")

// Session is a notebook's interpreter state. Execute runs one cell at a time; Complete,
// Inspect and IsComplete may be called while a cell runs.
type Session struct {
	opts Options

	execMu sync.Mutex // held by Execute

	mu         sync.Mutex
	yi         *yaegi.Interpreter
	imports    []importSpec
	decls      []*declEntry
	definers   map[string]*definer // variable name -> statements that last defined it
	defSeq     int
	out        Output
	cellCtx    context.Context
	cancelCell context.CancelFunc
	goErr      *EvalError // first goroutine panic of the running cell
	pendingErr *EvalError // goroutine panic after its cell ended
	frames     []string   // panic trace lines of the running cell
	deferred   []func()   // calls deferred by the running cell's top-level code
	// mark is the position (line<<16 | column) of the statement instrumented code started
	// last (see rewriter.markLines); interpreted code writes it without a lock, and a
	// panic's first trace line reads and clears it.
	mark  int
	quiet bool // replaying: drop output
	// typeNames maps the interpreter's types of the notebook's declared types to their
	// names (notebookTypeNames), for the declarations named by typeNamesKey.
	typeNames    map[reflect.Type]string
	typeNamesKey string
	// plans are the running cell's constructs that its check planned for the rewriter
	// (ranges over functions run as calls, new of a value).
	plans map[planKey][]string
	// checkPartial: the running cell's check could not type some name it uses (or did not
	// run), so a yaegi error is not known to be one of valid Go.
	checkPartial bool

	osStdout, osStderr *os.File
	yaegiStderr        stderrFilter
	stdout, stderr     *stream
	closed             chan struct{}
	closeOnce          sync.Once
}

// declEntry is one top-level declaration the session keeps.
type declEntry struct {
	kind  string   // type, func, method, const, var
	names []string // declared names
	text  string   // the source as written in the cell
	line  int      // its line and column in that cell (for panic positions after a rebuild)
	col   int
	// plans are the plans of its cell's check, for rewriting it again in a rebuild.
	plans map[planKey][]string
}

func (d *declEntry) keys() []string {
	ks := make([]string, len(d.names))
	for i, n := range d.names {
		ks[i] = d.kind + " " + n
	}
	return ks
}

// definer is a statement run that defined variables, for recomputing them after a rebuild.
type definer struct {
	seq  int
	text string // rewritten source, ready to evaluate
}

// New returns a session with a fresh interpreter.
func New(opts Options) (*Session, error) {
	if opts.CaptureFDs && !captured.CompareAndSwap(false, true) {
		return nil, errors.New("interp: another session already captures file descriptors 1 and 2")
	}
	s := &Session{opts: opts, closed: make(chan struct{}), definers: map[string]*definer{}}
	s.yaegiStderr = stderrFilter{s}
	var err error
	if s.stdout, err = newStream(s, "stdout", 1, opts.CaptureFDs); err != nil {
		s.release()
		return nil, err
	}
	if s.stderr, err = newStream(s, "stderr", 2, opts.CaptureFDs); err != nil {
		s.stdout.close()
		s.release()
		return nil, err
	}
	s.osStdout, s.osStderr = s.stdout.w, s.stderr.w
	if s.yi, err = s.newInterpreter(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *Session) release() {
	if s.opts.CaptureFDs {
		captured.Store(false)
	}
}

// Close stops the session's goroutines' sleeps, restores captured descriptors and releases
// the pipes. The session cannot be used afterwards.
func (s *Session) Close() error {
	s.closeOnce.Do(func() {
		close(s.closed)
		s.mu.Lock()
		if s.cancelCell != nil {
			s.cancelCell()
		}
		s.mu.Unlock()
		if s.stdout != nil {
			s.stdout.close()
		}
		if s.stderr != nil {
			s.stderr.close()
		}
		s.release()
	})
	return nil
}

// output returns the running cell's output, nil between cells.
func (s *Session) output() Output {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.quiet {
		return discard{}
	}
	return s.out
}

// cellDone returns a channel closed when the running cell is interrupted or ends.
func (s *Session) cellDone() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cellCtx == nil {
		return nil
	}
	return s.cellCtx.Done()
}

// syncStreams waits until what was written to os.Stdout and os.Stderr has been forwarded.
func (s *Session) syncStreams() {
	s.stdout.sync()
	s.stderr.sync()
}

// Execute runs one cell and returns the value of its final expression (nil when there is
// none). Output streams to out while the cell runs, and all of it has been delivered when
// Execute returns. Failures are *EvalError; cancelling ctx interrupts the cell.
func (s *Session) Execute(ctx context.Context, code string, out Output) (*Result, error) {
	select {
	case <-s.closed:
		return nil, ErrClosed
	default:
	}
	s.execMu.Lock()
	defer s.execMu.Unlock()

	cellCtx, cancel := context.WithCancel(ctx)
	lo := &lockedOutput{out: out}
	s.mu.Lock()
	s.out, s.cellCtx, s.cancelCell, s.goErr, s.frames = lo, cellCtx, cancel, nil, nil
	pending := s.pendingErr
	s.pendingErr = nil
	s.mu.Unlock()
	prev := display.SetPublisher(publisher{s})
	restoreCtx := cell.Set(cellCtx)
	defer func() {
		s.syncStreams()
		restoreCtx()
		display.SetPublisher(prev)
		s.mu.Lock()
		s.out, s.cellCtx, s.cancelCell = nil, nil, nil
		s.mu.Unlock()
		cancel()
	}()
	if pending != nil {
		lo.Stream("stderr", "godist: a goroutine of an earlier cell failed: "+pending.Value+"\n")
	}
	res, err := s.dispatchSafe(cellCtx, code, lo)
	if derr := s.runDeferred(); derr != nil && err == nil {
		res, err = nil, derr
	}
	if err == nil {
		return res, nil
	}
	return nil, s.finalError(ctx, err, code)
}

// dispatchSafe is dispatch with a panic of the session's own code (not of the cell's,
// which the interpreter recovers) turned into the cell's error: the kernel lives on.
func (s *Session) dispatchSafe(ctx context.Context, code string, out Output) (res *Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			res, err = nil, newEvalError("InternalError", fmt.Sprintf("the kernel failed on this cell (%v); the session is intact, please report it", r))
		}
	}()
	return s.dispatch(ctx, code, out)
}

// finalError turns what stopped a cell into the one error it reports: a goroutine's panic
// wins over the interrupt it caused.
func (s *Session) finalError(ctx context.Context, err error, code string) error {
	s.mu.Lock()
	gerr := s.goErr
	s.mu.Unlock()
	if gerr != nil {
		return gerr
	}
	var ee *EvalError
	if errors.As(err, &ee) {
		if ee.Name == "panic" {
			s.goTypeNames(ee)
		}
		return s.undefinedName(ee, code)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
		return newEvalError("Interrupted", "the cell was interrupted")
	}
	return newEvalError("Error", err.Error())
}

func newEvalError(name, value string, trace ...string) *EvalError {
	return &EvalError{Name: name, Value: value, Traceback: append([]string{name + ": " + value}, trace...)}
}

// goPanic receives the panic of a goroutine started by a cell (through the rewritten go
// statement): it becomes the running cell's error and stops the cell.
func (s *Session) goPanic(r any) {
	e := panicError(r, "goroutine ", nil)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancelCell == nil {
		if s.pendingErr == nil {
			s.pendingErr = e
		}
		return
	}
	if s.goErr == nil {
		s.goErr = e
		s.cancelCell()
	}
}

// addPanicFrame records one line of yaegi's panic trace. yaegi names the start of the
// top-level statement or function body the panic went through; the innermost frame takes
// the position of the statement that was running instead (the mark instrumented code
// leaves), and starts a new trace (frames of a panic that was recovered are dropped).
func (s *Session) addPanicFrame(line, col, fn string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var l int
	fmt.Sscan(line, &l)
	l-- // yaegi's line 1 is the source prefix line
	fn = strings.TrimSuffix(fn, "(...)")
	fn = strings.TrimPrefix(fn, "main.")
	if fn == "main" {
		fn = "the cell"
	}
	if m := s.mark; m != 0 {
		s.mark = 0
		s.frames = nil
		l, col = m>>16, strconv.Itoa(m&0xffff)
	}
	s.frames = append(s.frames, fmt.Sprintf("  in %s, line %d:%s", fn, l, col))
}

// panicError describes a recovered panic value.
func panicError(r any, where string, frames []string) *EvalError {
	if rv, ok := r.(reflect.Value); ok && rv.IsValid() && rv.CanInterface() {
		r = rv.Interface()
	}
	exit, isExit := r.(ExitError)
	if e, ok := r.(error); ok && !isExit {
		isExit = errors.As(e, &exit)
	}
	if isExit {
		ee := newEvalError("ExitError", exit.Error())
		ee.ExitCode = exit.Code
		return ee
	}
	var tooLarge *memlimit.Error
	if e, ok := r.(error); ok && errors.As(e, &tooLarge) {
		return &EvalError{Name: "MemoryError", Value: tooLarge.Error(), Traceback: append([]string{"MemoryError: " + tooLarge.Error()}, elideFrames(frames)...)}
	}
	value := goPanicText(fmt.Sprint(r))
	if where != "" {
		value += " (in a " + strings.TrimSpace(where) + ")"
	}
	return &EvalError{Name: "panic", Value: value, Traceback: append([]string{"panic: " + value}, elideFrames(frames)...)}
}

// goTypeNames writes the notebook's types in a panic's message as Go's runtime does
// (main.EpochCounter, not the interpreter's struct { ... }), without the interpreter's
// position prefix (the trace names the line).
func (s *Session) goTypeNames(ee *EvalError) {
	v := yaegiPos.ReplaceAllString(ee.Value, "")
	for t, name := range s.notebookTypeNamesLocked() {
		if str := t.String(); strings.Contains(str, "struct {") || strings.Contains(str, "interface {") {
			v = strings.ReplaceAll(v, str, "main."+name)
		}
	}
	if v != ee.Value {
		ee.Value = v
		ee.Traceback[0] = ee.Name + ": " + v
	}
}

// yaegiPos is the "line:col: " yaegi puts before its runtime errors.
var yaegiPos = regexp.MustCompile(`^\d+:\d+: `)

// reflectPanics maps the panics of reflect that the interpreter lets through to what Go's
// runtime says for the same mistake.
var reflectPanics = []struct{ prefix, goText string }{
	{"reflect: call of reflect.Value.", "runtime error: invalid memory address or nil pointer dereference"},
	{"reflect: indirection through nil pointer", "runtime error: invalid memory address or nil pointer dereference"},
	{"reflect.Value.Call: call of nil function", "runtime error: invalid memory address or nil pointer dereference"},
	{"reflect: Method on nil interface value", "runtime error: invalid memory address or nil pointer dereference"},
	{"reflect.Value.Slice: slice index out of bounds", "runtime error: slice bounds out of range"},
	{"reflect: slice index out of range", "runtime error: index out of range"},
	{"reflect: array index out of range", "runtime error: index out of range"},
	{"reflect: string index out of range", "runtime error: index out of range"},
	{"reflect.MakeSlice: negative len", "runtime error: makeslice: len out of range"},
	{"reflect.MakeSlice: negative cap", "runtime error: makeslice: cap out of range"},
	{"reflect.MakeSlice: len > cap", "runtime error: makeslice: cap out of range"},
}

// goPanicText returns a panic's text as Go would print it: reflect's own wording for a nil
// dereference or a bad bound becomes the runtime's.
func goPanicText(text string) string {
	for _, p := range reflectPanics {
		if strings.HasPrefix(text, p.prefix) {
			if p.prefix == "reflect: call of reflect.Value." && !strings.HasSuffix(text, "on zero Value") {
				continue
			}
			return p.goText
		}
	}
	return text
}

// elideFrames shortens a deep trace (unbounded recursion) to its innermost and outermost
// frames.
func elideFrames(frames []string) []string {
	const inner, outer = 20, 5
	if len(frames) <= inner+outer+1 {
		return frames
	}
	out := append([]string(nil), frames[:inner]...)
	out = append(out, fmt.Sprintf("  ... %d more calls ...", len(frames)-inner-outer))
	return append(out, frames[len(frames)-outer:]...)
}

// interpreter returns the current yaegi interpreter.
func (s *Session) interpreter() *yaegi.Interpreter {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.yi
}

// Reset replaces the interpreter with a fresh one and forgets all imports, declarations
// and variables.
func (s *Session) Reset() error {
	yi, err := s.newInterpreter()
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.yi, s.imports, s.decls, s.definers = yi, nil, nil, map[string]*definer{}
	s.mu.Unlock()
	return nil
}

// Variables returns the session's variables and their values, sorted by name.
func (s *Session) Variables() []Variable {
	g := s.currentGlobals()
	vars := make([]Variable, 0, len(g))
	for name, v := range g {
		if strings.HasPrefix(name, "_") || !v.IsValid() {
			continue
		}
		vars = append(vars, Variable{Name: name, Value: v})
	}
	sort.Slice(vars, func(i, j int) bool { return vars[i].Name < vars[j].Name })
	return vars
}

// Variable is a session variable (or constant) and its value.
type Variable struct {
	Name  string
	Value reflect.Value
}

// TypeString returns the variable's type as Go source would write it where possible.
func (v Variable) TypeString() string {
	if !v.Value.IsValid() {
		return "nil"
	}
	return typeString(v.Value.Type())
}

func typeString(t reflect.Type) string {
	s := t.String()
	if strings.Contains(s, "yaegi") || strings.HasPrefix(s, "interp.") {
		return "(interpreted value)"
	}
	return s
}

// lockedOutput serializes calls to an Output.
type lockedOutput struct {
	mu  sync.Mutex
	out Output
}

func (l *lockedOutput) Stream(name, text string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.out.Stream(name, text)
}

func (l *lockedOutput) Display(data, md map[string]any, id string, update bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.out.Display(data, md, id, update)
}

func (l *lockedOutput) ClearOutput(wait bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.out.ClearOutput(wait)
}

// PlainText forwards the wrapped Output's display.PlainText answer (false when it has none).
func (l *lockedOutput) PlainText() bool {
	t, ok := l.out.(display.PlainText)
	return ok && t.PlainText()
}

// Input is not serialized: output keeps flowing while the front end waits for the user.
func (l *lockedOutput) Input(prompt string, password bool) (string, error) {
	return l.out.Input(prompt, password)
}

// stdinReader is the interpreter's standard input (fmt.Scan and friends): each line is
// asked from the front end through Output.Input.
type stdinReader struct {
	s   *Session
	buf []byte
}

func (r *stdinReader) Read(p []byte) (int, error) {
	if len(r.buf) == 0 {
		out := r.s.output()
		if out == nil {
			return 0, io.EOF
		}
		r.s.syncStreams() // the prompt the cell printed comes first
		line, err := out.Input("", false)
		if err != nil {
			return 0, fmt.Errorf("interp: reading standard input: %w", err)
		}
		r.buf = []byte(line + "\n")
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

// discard is the output of silent replays.
type discard struct{}

func (discard) Stream(string, string)                                {}
func (discard) Display(map[string]any, map[string]any, string, bool) {}
func (discard) ClearOutput(bool)                                     {}
func (discard) Input(string, bool) (string, error) {
	return "", errors.New("interp: no input while replaying")
}

// publisher forwards distlib/display to the running cell's output, after the text written
// before it so that prints and displays keep their order.
type publisher struct{ s *Session }

func (p publisher) show(data, md display.Bundle, id string, update bool) {
	p.s.syncStreams()
	if out := p.s.output(); out != nil {
		out.Display(map[string]any(data), map[string]any(md), id, update)
	}
}

// PlainText reports whether the cell's output renders displays as plain text (an Output
// with a PlainText method reporting true, such as a %%distributed worker's).
func (p publisher) PlainText() bool {
	t, ok := p.s.output().(display.PlainText)
	return ok && t.PlainText()
}

func (p publisher) Display(data, md display.Bundle, id string) { p.show(data, md, id, false) }
func (p publisher) Update(data, md display.Bundle, id string)  { p.show(data, md, id, true) }

// Sync implements display.Syncer: the cell's printed text reaches its output now.
func (p publisher) Sync() { p.s.syncStreams() }

// Input implements display.Inputter (display.Input, display.Password): the prompt and the
// password flag go to the front end in an input_request, after the text written before.
func (p publisher) Input(prompt string, password bool) (string, error) {
	p.s.syncStreams()
	out := p.s.output()
	if out == nil {
		return "", errors.New("interp: no cell is running to ask for input")
	}
	return out.Input(prompt, password)
}

func (p publisher) ClearOutput(wait bool) {
	if out := p.s.output(); out != nil {
		out.ClearOutput(wait)
	}
}

// sinceMillis formats a duration for %time.
func sinceMillis(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%d µs", d.Microseconds())
	case d < time.Second:
		return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000)
	default:
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
}
