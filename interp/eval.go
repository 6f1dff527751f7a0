package interp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/scanner"
	"go/token"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"runtime/pprof"

	yaegi "github.com/traefik/yaegi/interp"
	"github.com/traefik/yaegi/stdlib"

	"godist/interp/symbols"
)

// lastVar holds the value of a cell's final expression inside the interpreter.
const lastVar = "_godistLast"

// runGo evaluates Go source (a cell, or a cell with its magic lines blanked) and returns
// the value of its final expression.
func (s *Session) runGo(ctx context.Context, code string) (*Result, error) {
	chunks, err := splitCell(code)
	if err != nil {
		return nil, syntaxError(err, code)
	}
	if err := s.autoImport(ctx, chunks, code); err != nil {
		return nil, err
	}
	if err := s.checkCell(chunks, code); err != nil {
		return nil, err
	}
	for i := 0; i < len(chunks); {
		j := i
		for j < len(chunks) && chunks[j].Kind == chunks[i].Kind {
			j++
		}
		group := chunks[i:j]
		switch group[0].Kind {
		case chunkImport:
			err = s.runImports(ctx, group, code)
		case chunkDecl:
			err = s.runDecls(ctx, group, code)
		default:
			last := group[len(group)-1]
			if j == len(chunks) && last.Expr {
				if len(group) > 1 {
					if err = s.runStmts(ctx, group[:len(group)-1], code); err != nil {
						return nil, s.interpreterLimit(err, group, code)
					}
				}
				res, err := s.runFinal(ctx, last, code)
				return res, s.interpreterLimit(err, group[len(group)-1:], code)
			}
			err = s.runStmts(ctx, group, code)
		}
		if err != nil {
			return nil, s.interpreterLimit(err, group, code)
		}
		i = j
	}
	return nil, nil
}

// source assembles chunk texts at their cell positions after yaegi's one-line prefix: line
// L of the cell is line L+1 of the source.
func source(chunks []*chunk, texts []string) string {
	var b strings.Builder
	line, col := 1, 1
	for i, c := range chunks {
		if c.Line+1 > line {
			b.WriteString(strings.Repeat("\n", c.Line+1-line))
			line, col = c.Line+1, 1
		} else if i > 0 {
			b.WriteString("; ")
			col += 2
		}
		if c.Col > col {
			b.WriteString(strings.Repeat(" ", c.Col-col))
		}
		t := texts[i]
		b.WriteString(t)
		if n := strings.Count(t, "\n"); n > 0 {
			line += n
			col = len(t) - strings.LastIndex(t, "\n")
		} else {
			col = c.Col + len(t)
		}
	}
	return b.String()
}

func (s *Session) env() rewriteEnv {
	yi := s.interpreter()
	globals := globalsOf(yi)
	declared := map[string]bool{}
	s.mu.Lock()
	for _, d := range s.decls {
		if d.kind != "method" {
			for _, n := range d.names {
				declared[n] = true
			}
		}
	}
	plans := s.plans
	s.mu.Unlock()
	for n := range globals {
		declared[n] = true
	}
	return rewriteEnv{
		plans: plans,
		globalKind: func(name string) string {
			v, ok := globals[name]
			if !ok || !v.IsValid() {
				return ""
			}
			switch v.Kind() {
			case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
				reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
				return "int"
			case reflect.Func:
				return "func"
			}
			return ""
		},
		declared: func(name string) bool { return declared[name] },
		isGlobal: func(name string) bool { _, ok := globals[name]; return ok },
	}
}

func (s *Session) rewriteAll(chunks []*chunk, env rewriteEnv, code string) ([]string, error) {
	texts := make([]string, len(chunks))
	for i, c := range chunks {
		t, err := rewriteChunk(c, env)
		if err != nil {
			return nil, compileError(err, code)
		}
		texts[i] = t
	}
	return texts, nil
}

// compile compiles src in yi, turning a yaegi crash into an error.
func compile(yi *yaegi.Interpreter, src string) (prog *yaegi.Program, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = compilePanic(r)
		}
	}()
	return yi.Compile(src)
}

// execute runs a compiled program, stopping it when ctx is done.
//
// Top-level code runs in the interpreter's global frame, which the next run revives: after
// an interrupt, execute waits (up to a second) until the goroutines of the run, the
// interrupted one included, have seen the stop. They carry a profiler label for that.
func (s *Session) execute(ctx context.Context, yi *yaegi.Interpreter, prog *yaegi.Program) (v reflect.Value, err error) {
	s.mu.Lock()
	s.mark = 0
	s.mu.Unlock()
	label := strconv.FormatInt(runSeq.Add(1), 10)
	pprof.Do(ctx, pprof.Labels(runLabel, label), func(context.Context) {
		v, err = yi.ExecuteWithContext(ctx, prog)
	})
	if ctx.Err() != nil {
		waitStopped(label, time.Second)
	}
	if err != nil {
		var p yaegi.Panic
		if errors.As(err, &p) {
			s.mu.Lock()
			frames := append([]string(nil), s.frames...)
			s.mu.Unlock()
			return v, panicError(p.Value, "", frames)
		}
	}
	return v, err
}

// runLabel is the profiler label of goroutines running a cell's code.
const runLabel = "godist-run"

var runSeq atomic.Int64

// waitStopped waits until no goroutine carries the run's label, or until timeout.
func waitStopped(label string, timeout time.Duration) {
	needle := []byte(fmt.Sprintf("%q:%q", runLabel, label))
	deadline := time.Now().Add(timeout)
	var buf bytes.Buffer
	for {
		buf.Reset()
		if err := pprof.Lookup("goroutine").WriteTo(&buf, 1); err != nil || !bytes.Contains(buf.Bytes(), needle) {
			return
		}
		if time.Now().After(deadline) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// runImports evaluates the imports of a group that are not done yet. An import that gives
// an existing name another path rebuilds the interpreter.
func (s *Session) runImports(ctx context.Context, group []*chunk, code string) error {
	for _, c := range group {
		for _, spec := range c.Imports {
			s.mu.Lock()
			done, conflict := false, -1
			for i, have := range s.imports {
				if have == spec {
					done = true
				} else if have.localName() == spec.localName() {
					conflict = i
				}
			}
			s.mu.Unlock()
			if done {
				continue
			}
			if conflict >= 0 {
				s.mu.Lock()
				imports := append([]importSpec(nil), s.imports...)
				decls := s.decls
				s.mu.Unlock()
				imports[conflict] = spec
				if err := s.rebuild(ctx, imports, decls, nil, fmt.Sprintf("import %s now names %q", spec.localName(), spec.Path)); err != nil {
					return err
				}
				continue
			}
			one := &chunk{Kind: chunkImport, Text: spec.source(), Line: c.Line, Col: c.Col}
			yi := s.interpreter()
			prog, err := compile(yi, source([]*chunk{one}, []string{one.Text}))
			if err != nil {
				return compileError(err, code)
			}
			if _, err := s.execute(ctx, yi, prog); err != nil {
				return err
			}
			s.mu.Lock()
			s.imports = append(s.imports, spec)
			s.mu.Unlock()
		}
	}
	return nil
}

// runDecls evaluates a group of declarations: new ones are added to the interpreter,
// unchanged ones are skipped, changed ones (and re-run var declarations) rebuild it.
func (s *Session) runDecls(ctx context.Context, group []*chunk, code string) error {
	s.mu.Lock()
	decls := append([]*declEntry(nil), s.decls...)
	imports := append([]importSpec(nil), s.imports...)
	s.mu.Unlock()
	index := map[string]int{}
	for i, d := range decls {
		for _, k := range d.keys() {
			index[k] = i
		}
	}
	var fresh []*chunk
	var reasons []string
	reinit := map[*declEntry]bool{}
	rebuild := false
	for _, c := range group {
		s.mu.Lock()
		plans := s.plans
		s.mu.Unlock()
		entry := &declEntry{kind: c.DeclKind, names: c.Names, text: c.Text, line: c.Line, col: c.Col, plans: plans}
		old := -1
		for _, k := range c.keys() {
			if i, ok := index[k]; ok {
				old = i
			}
		}
		if old < 0 {
			fresh = append(fresh, c)
			decls = append(decls, entry)
			for _, k := range c.keys() {
				index[k] = len(decls) - 1
			}
			continue
		}
		if decls[old].text == c.Text && c.DeclKind != "var" {
			continue
		}
		rebuild = true
		reasons = append(reasons, c.DeclKind+" "+strings.Join(c.Names, ", "))
		if c.DeclKind == "var" {
			reinit[entry] = true
		}
		// Replace in place; drop other entries the new declaration also redefines.
		for _, k := range c.keys() {
			if i, ok := index[k]; ok && i != old {
				decls[i] = nil
			}
		}
		decls[old] = entry
		for _, k := range c.keys() {
			index[k] = old
		}
	}
	compact := decls[:0:0]
	for _, d := range decls {
		if d != nil {
			compact = append(compact, d)
		}
	}
	if rebuild {
		current := map[*declEntry]*chunk{}
		for _, c := range group {
			for _, d := range compact {
				if d.text == c.Text {
					current[d] = c
				}
			}
		}
		return s.rebuild(ctx, imports, compact, &rebuildCell{code: code, chunks: current, reinit: reinit}, strings.Join(reasons, "; ")+" changed")
	}
	if len(fresh) == 0 {
		return nil
	}
	env := s.env()
	texts, err := s.rewriteAll(fresh, env, code)
	if err != nil {
		return err
	}
	yi := s.interpreter()
	prog, err := compile(yi, source(fresh, texts))
	if err != nil {
		return compileError(err, code)
	}
	if _, err := s.execute(ctx, yi, prog); err != nil {
		return err
	}
	s.mu.Lock()
	s.decls = compact
	s.mu.Unlock()
	return nil
}

// runStmts evaluates statements. A `x := v` of an existing variable is first tried as an
// assignment, so that functions using x see the new value.
func (s *Session) runStmts(ctx context.Context, group []*chunk, code string) error {
	env := s.env()
	plain, err := s.rewriteAll(group, env, code)
	if err != nil {
		return err
	}
	env.assignExisting = true
	assign, err := s.rewriteAll(group, env, code)
	if err != nil {
		return err
	}
	yi := s.interpreter()
	src := source(group, assign)
	prog, err := compile(yi, src)
	if err != nil && !sameStrings(plain, assign) {
		src = source(group, plain)
		prog, err = compile(yi, src)
	}
	if err != nil {
		return compileError(err, code)
	}
	if _, err := s.execute(ctx, yi, prog); err != nil {
		return err
	}
	s.recordDefiners(group, src)
	return nil
}

func sameStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// recordDefiners remembers, for each variable a statement run defines at top level, the
// run's source, so that a rebuild can recompute variables it cannot carry.
func (s *Session) recordDefiners(group []*chunk, src string) {
	var names []string
	for _, c := range group {
		names = append(names, definedNames(c)...)
	}
	if len(names) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.defSeq++
	d := &definer{seq: s.defSeq, text: src}
	for _, n := range names {
		s.definers[n] = d
	}
}

// runFinal evaluates the cell's final expression and renders its value. An expression
// with one value is assigned to _godistLast (so that its methods can be probed); a call
// with no or several results runs as a statement and shows nothing.
func (s *Session) runFinal(ctx context.Context, c *chunk, code string) (*Result, error) {
	env := s.env()
	pre, text, err := rewriteParts(c, env)
	if err != nil {
		return nil, compileError(err, code)
	}
	yi := s.interpreter()
	if n := s.resultCount(c); n == 1 || n < 0 {
		prog, err := compile(yi, source([]*chunk{c}, []string{pre + lastVar + " := " + text}))
		if err == nil {
			v, err := s.execute(ctx, yi, prog)
			if err != nil {
				return nil, err
			}
			return s.render(ctx, yi, v), nil
		}
		if n == 1 {
			// yaegi cannot define a variable from some values (a generic function's
			// result: "nil reflect type"), but it can evaluate the expression itself.
			prog, perr := compile(yi, source([]*chunk{c}, []string{pre + text}))
			if perr != nil {
				return nil, compileError(err, code)
			}
			v, err := s.execute(ctx, yi, prog)
			if err != nil {
				return nil, err
			}
			return s.render(ctx, yi, v), nil
		}
	}
	if n := s.resultCount(c); n > 1 && !s.printCall(c) {
		// Several values: shown as a tuple, (12, <nil>).
		names := make([]string, n)
		for i := range names {
			names[i] = fmt.Sprintf("%s%d", tupleVar, i)
		}
		src := pre + strings.Join(names, ", ") + " := " + text + "; " + lastVar + " := []any{" + strings.Join(names, ", ") + "}"
		prog, err := compile(yi, source([]*chunk{c}, []string{src}))
		if err != nil {
			return nil, compileError(err, code)
		}
		v, err := s.execute(ctx, yi, prog)
		if err != nil {
			return nil, err
		}
		return renderTuple(v), nil
	}
	prog, err := compile(yi, source([]*chunk{c}, []string{pre + text}))
	if err != nil {
		return nil, compileError(err, code)
	}
	_, err = s.execute(ctx, yi, prog)
	return nil, err
}

// printCall reports whether the chunk calls one of fmt's print or scan functions, whose
// (count, error) results a cell does not show, or a Write method.
func (s *Session) printCall(c *chunk) bool {
	e, err := parser.ParseExpr(c.Text)
	if err != nil {
		return false
	}
	call, ok := ast.Unparen(e).(*ast.CallExpr)
	if !ok {
		return false
	}
	sel, ok := ast.Unparen(call.Fun).(*ast.SelectorExpr)
	if !ok {
		return false
	}
	if strings.HasPrefix(sel.Sel.Name, "Write") {
		return true
	}
	x, ok := sel.X.(*ast.Ident)
	if !ok {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, im := range s.imports {
		if im.localName() == x.Name && im.Path == "fmt" {
			name := strings.ToLower(sel.Sel.Name)
			return strings.Contains(name, "print") || strings.Contains(name, "scan")
		}
	}
	return false
}

// tupleVar prefixes the variables that hold the values of a final expression with several.
const tupleVar = "_godistOut"

// resultCount returns how many values the expression of a chunk has: 1 for anything but
// a call, the callee's result count where it is known, -1 when unknown.
func (s *Session) resultCount(c *chunk) int {
	e, err := parser.ParseExpr(c.Text)
	if err != nil {
		return -1
	}
	call, ok := ast.Unparen(e).(*ast.CallExpr)
	if !ok {
		return 1
	}
	switch fn := ast.Unparen(call.Fun).(type) {
	case *ast.Ident:
		switch fn.Name {
		case "panic", "print", "println", "close", "delete", "clear":
			return 0
		case "len", "cap", "min", "max", "new", "make", "append", "complex", "real", "imag", "copy", "recover":
			return 1
		}
		if intTypes[fn.Name] || fn.Name == "string" || fn.Name == "float64" || fn.Name == "float32" || fn.Name == "bool" {
			return 1
		}
		if n := s.declResults("func", fn.Name); n >= 0 {
			return n
		}
		// A variable holding a function (f := func() {...}): its value's type knows.
		if v, ok := globalsOf(s.interpreter())[fn.Name]; ok && v.IsValid() && v.Kind() == reflect.Func {
			return v.Type().NumOut()
		}
		return -1
	case *ast.SelectorExpr:
		x, ok := fn.X.(*ast.Ident)
		if !ok {
			return -1
		}
		s.mu.Lock()
		var path string
		for _, im := range s.imports {
			if im.localName() == x.Name {
				path = im.Path
			}
		}
		s.mu.Unlock()
		if path != "" {
			return symbolResults(path, fn.Sel.Name)
		}
		if v, ok := globalsOf(s.interpreter())[x.Name]; ok && v.IsValid() && compiledType(v.Type(), 0) {
			if v.Kind() == reflect.Interface {
				// A nil interface has no method values (reflect panics): its type's methods.
				if m, ok := v.Type().MethodByName(fn.Sel.Name); ok {
					return m.Type.NumOut()
				}
				return -1
			}
			m := v.MethodByName(fn.Sel.Name)
			if !m.IsValid() && v.CanAddr() {
				m = v.Addr().MethodByName(fn.Sel.Name)
			}
			if m.IsValid() {
				return m.Type().NumOut()
			}
			return -1
		}
		return s.declResults("method", "*."+fn.Sel.Name)
	case *ast.FuncLit:
		if fn.Type.Results == nil {
			return 0
		}
		return fieldCount(fn.Type.Results)
	}
	return -1
}

// declResults counts the results of a declared function, or of the methods named
// "*.M" when they all agree; -1 when unknown.
func (s *Session) declResults(kind, name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := -1
	for _, d := range s.decls {
		if d.kind != kind {
			continue
		}
		for _, dn := range d.names {
			match := dn == name
			if strings.HasPrefix(name, "*.") {
				match = strings.HasSuffix(dn, name[1:])
			}
			if !match {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), "", "package p;"+d.text, parser.SkipObjectResolution)
			if err != nil || len(f.Decls) == 0 {
				return -1
			}
			fd, ok := f.Decls[0].(*ast.FuncDecl)
			if !ok {
				return -1
			}
			c := fieldCount(fd.Type.Results)
			if n >= 0 && n != c {
				return -1
			}
			n = c
		}
	}
	return n
}

func fieldCount(fl *ast.FieldList) int {
	if fl == nil {
		return 0
	}
	n := 0
	for _, f := range fl.List {
		if len(f.Names) == 0 {
			n++
		}
		n += len(f.Names)
	}
	return n
}

// symbolResults returns the result count of a compiled package's function, 1 for a type
// conversion, -1 when unknown.
func symbolResults(path, name string) int {
	for _, table := range []map[string]map[string]reflect.Value{stdlib.Symbols, symbols.Symbols} {
		for key, syms := range table {
			if i := strings.LastIndex(key, "/"); i < 0 || key[:i] != path {
				continue
			}
			v, ok := syms[name]
			if !ok {
				return -1
			}
			if v.Kind() == reflect.Func {
				return v.Type().NumOut()
			}
			return 1 // a type: a conversion
		}
	}
	return -1
}

// rebuildCell is the part of a rebuild that comes from the running cell.
type rebuildCell struct {
	code   string
	chunks map[*declEntry]*chunk // declarations of the running cell
	reinit map[*declEntry]bool   // var declarations to initialize again
}

// rebuild replaces the interpreter by a fresh one holding imports and decls (see the
// package documentation). On failure the old interpreter stays.
func (s *Session) rebuild(ctx context.Context, imports []importSpec, decls []*declEntry, cell *rebuildCell, reason string) error {
	old := s.interpreter()
	globals := globalsOf(old)
	declared := map[string]bool{}
	for _, d := range decls {
		if d.kind != "method" {
			for _, n := range d.names {
				declared[n] = true
			}
		}
	}
	carry := map[string]reflect.Value{}
	carryDecl := func(name string) string {
		v := globals[name]
		holder := reflect.New(v.Type()).Elem()
		holder.Set(v)
		carry["V_"+name] = holder
		return fmt.Sprintf("var %s = %s.V_%s", name, carryName, name)
	}

	// The replay file: imports, then declarations (carried vars in place of their
	// initializers), then the carried variables that statements defined.
	var lines []string
	var origins []replayOrigin
	add := func(text string, o replayOrigin) {
		o.first = len(lines) + 2 // yaegi line of the text's first line
		origins = append(origins, o)
		lines = append(lines, strings.Split(text, "\n")...)
	}
	add(`import `+carryName+` "`+carryPath+`"`, replayOrigin{})
	for _, im := range imports {
		add(im.source(), replayOrigin{})
	}
	env := s.env()
	env.globalKind = func(string) string { return "" }
	for _, d := range decls {
		var c *chunk
		if cell != nil {
			c = cell.chunks[d]
		}
		if d.kind == "var" && (cell == nil || !cell.reinit[d]) && allCarryable(globals, d.names) {
			for _, n := range d.names {
				add(carryDecl(n), replayOrigin{})
			}
			continue
		}
		src := &chunk{Kind: chunkDecl, Text: d.text, Line: max(d.line, 1), Col: max(d.col, 1)}
		if c != nil {
			src = c
		}
		env.plans = d.plans
		text, err := rewriteChunk(src, env)
		if err != nil {
			if c != nil {
				return compileError(err, cell.code)
			}
			return newEvalError("CompileError", "replaying "+d.kind+" "+strings.Join(d.names, ", ")+": "+err.Error())
		}
		add(text, replayOrigin{cellLine: lineOf(c), what: d.kind + " " + strings.Join(d.names, ", ")})
	}
	var recompute []string
	names := make([]string, 0, len(globals))
	for n := range globals {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if strings.HasPrefix(n, "_godist") || declared[n] || !globals[n].IsValid() {
			continue
		}
		if carryable(globals[n]) {
			add(carryDecl(n), replayOrigin{})
		} else {
			recompute = append(recompute, n)
		}
	}

	yi, err := s.newInterpreter(yaegi.Exports{carryPath + "/carry": carry})
	if err != nil {
		return err
	}
	src := "\n" + strings.Join(lines, "\n")
	prog, err := compile(yi, src)
	if err == nil {
		_, err = s.execute(ctx, yi, prog)
	}
	if err != nil {
		return replayError(err, origins, cell)
	}

	// Recompute the variables of notebook-declared types from the statements that last
	// defined them, in their original order, silently.
	s.mu.Lock()
	var runs []*definer
	seen := map[*definer]bool{}
	for _, n := range recompute {
		if d := s.definers[n]; d != nil && !seen[d] {
			seen[d] = true
			runs = append(runs, d)
		}
	}
	s.mu.Unlock()
	sort.Slice(runs, func(i, j int) bool { return runs[i].seq < runs[j].seq })
	var dropped []string
	s.mu.Lock()
	s.quiet = true
	s.mu.Unlock()
	for _, d := range runs {
		if p, err := compile(yi, d.text); err == nil {
			_, _ = s.execute(ctx, yi, p)
		}
	}
	s.syncStreams()
	s.mu.Lock()
	s.quiet = false
	s.mu.Unlock()
	now := globalsOf(yi)
	for _, n := range recompute {
		if _, ok := now[n]; !ok {
			dropped = append(dropped, n)
		}
	}

	s.mu.Lock()
	s.yi, s.imports, s.decls = yi, imports, decls
	for _, n := range dropped {
		delete(s.definers, n)
	}
	out := s.out
	s.mu.Unlock()
	if out != nil {
		msg := "godist: " + reason + ": the interpreter was rebuilt"
		if len(recompute) > len(dropped) {
			msg += fmt.Sprintf("; recomputed %s", strings.Join(minus(recompute, dropped), ", "))
		}
		if len(dropped) > 0 {
			msg += fmt.Sprintf("; dropped %s (re-run the cells that define them)", strings.Join(dropped, ", "))
		}
		out.Stream("stderr", msg+"\n")
	}
	return nil
}

func minus(a, b []string) []string {
	var out []string
	for _, x := range a {
		found := false
		for _, y := range b {
			found = found || x == y
		}
		if !found {
			out = append(out, x)
		}
	}
	return out
}

func lineOf(c *chunk) int {
	if c == nil {
		return 0
	}
	return c.Line
}

// replayOrigin maps lines of a replay file back to what they came from.
type replayOrigin struct {
	first    int    // first yaegi line
	cellLine int    // >0: the running cell's line of the first line
	what     string // the declaration
}

// replayError reports an error of the replay file in terms of the running cell or of the
// earlier declaration it comes from.
func replayError(err error, origins []replayOrigin, cell *rebuildCell) error {
	var ee *EvalError
	if errors.As(err, &ee) {
		return ee
	}
	msg := err.Error()
	m := posRE.FindStringSubmatch(msg)
	if m == nil {
		return newEvalError("CompileError", "rebuilding the interpreter: "+msg)
	}
	line, _ := strconv.Atoi(m[1])
	rest := msg[len(m[0]):]
	var o replayOrigin
	for _, x := range origins {
		if x.first <= line {
			o = x
		}
	}
	if o.cellLine > 0 && cell != nil {
		l := o.cellLine + line - o.first
		return compileError(fmt.Errorf("%d:%s: %s", l+1, m[2], rest), cell.code)
	}
	if o.what != "" {
		return newEvalError("CompileError", fmt.Sprintf("the new definitions break %s, declared in an earlier cell: %s (re-run that cell with a fix, or %%reset)", o.what, rest))
	}
	return newEvalError("CompileError", "rebuilding the interpreter: "+rest)
}

// allCarryable reports whether every named global can be handed to a new interpreter.
func allCarryable(globals map[string]reflect.Value, names []string) bool {
	for _, n := range names {
		v, ok := globals[n]
		if !ok || !v.IsValid() || !carryable(v) {
			return false
		}
	}
	return true
}

// carryable reports whether v's type is compiled (not built by the interpreter), so that a
// new interpreter can hold the same value.
func carryable(v reflect.Value) bool {
	return compiledType(v.Type(), 0)
}

func compiledType(t reflect.Type, depth int) bool {
	if depth > 8 {
		return false
	}
	if strings.Contains(t.PkgPath(), "yaegi") {
		return false
	}
	if t.Name() != "" && t.PkgPath() != "" {
		return true // a named type of a compiled package
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Func, reflect.Interface, reflect.UnsafePointer:
		return t.Name() != "" && t.PkgPath() == "" && t.Kind() == reflect.Interface // error
	case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Chan:
		return compiledType(t.Elem(), depth+1)
	case reflect.Map:
		return compiledType(t.Key(), depth+1) && compiledType(t.Elem(), depth+1)
	}
	return true
}

// posRE finds the leading "line:col: " of a yaegi or parser error.
var posRE = regexp.MustCompile(`^(?:[^\s:]*:)?(\d+):(\d+): `)

// compileError turns a parse, rewrite or yaegi compile error into an EvalError naming the
// cell's line, with the line and a caret in the traceback. Positions in yaegi errors are
// one line below the cell's (the source prefix line).
func compileError(err error, code string) error {
	var ee *EvalError
	if errors.As(err, &ee) {
		return ee
	}
	var line, col int
	msg := err.Error()
	var list scanner.ErrorList
	if errors.As(err, &list) && len(list) > 0 {
		line, col, msg = list[0].Pos.Line, list[0].Pos.Column, list[0].Msg
	} else if m := posRE.FindStringSubmatch(msg); m != nil {
		// yaegi's column is one of the rewritten source (a line mark and wrappers come
		// first on the line): the line is the cell's, the column is not, so no caret.
		line, _ = strconv.Atoi(m[1])
		line--
		msg = msg[len(m[0]):]
	}
	msg = strings.TrimPrefix(msg, "cell: ")
	if msg == "constant definition loop" || msg == "variable definition loop" {
		msg = undefinedMsg
	}
	if line <= 0 {
		return newEvalError("CompileError", msg)
	}
	value := fmt.Sprintf("cell line %d: %s", line, msg)
	var trace []string
	lines := strings.Split(code, "\n")
	if line <= len(lines) {
		trace = append(trace, fmt.Sprintf("%4d | %s", line, lines[line-1]))
		if col > 0 {
			trace = append(trace, "     | "+strings.Repeat(" ", col-1)+"^")
		}
	}
	return newEvalError("CompileError", value, trace...)
}

// globalsOf returns the interpreter's global variables and constants. yaegi's Globals
// panics when a compiled but not executed declaration has not grown the global frame yet;
// executing an empty statement grows it.
func globalsOf(yi *yaegi.Interpreter) (g map[string]reflect.Value) {
	if g, ok := peekGlobals(yi); ok {
		return g
	}
	if prog, err := compile(yi, "_ = 0"); err == nil {
		_, _ = yi.Execute(prog)
	}
	if g, ok := peekGlobals(yi); ok {
		return g
	}
	return map[string]reflect.Value{}
}

// peekGlobals is Globals without growing the frame: safe while a cell runs (completion).
func peekGlobals(yi *yaegi.Interpreter) (g map[string]reflect.Value, ok bool) {
	get := func() (g map[string]reflect.Value, ok bool) {
		defer func() {
			if recover() != nil {
				ok = false
			}
		}()
		return yi.Globals(), true
	}
	return get()
}

// currentGlobals returns the session's globals for completion and inspection.
func (s *Session) currentGlobals() map[string]reflect.Value {
	g, _ := peekGlobals(s.interpreter())
	if g == nil {
		g = map[string]reflect.Value{}
	}
	return g
}

var innerPos = regexp.MustCompile(`(\d+):(\d+): ([^:]+(?::[^\d][^:]*)*)$`)

// compilePanic turns a panic of yaegi's compiler into an error at the innermost position
// its message names ("CFG post-order panic: 2:16: incomplete type x" -> "2:16: undefined: x").
func compilePanic(r any) error {
	msg := fmt.Sprint(r)
	if m := innerPos.FindStringSubmatch(msg); m != nil {
		text := m[3]
		if strings.HasPrefix(text, "incomplete type ") {
			text = "undefined: " + strings.TrimPrefix(text, "incomplete type ")
		}
		return fmt.Errorf("%s:%s: %s", m[1], m[2], text)
	}
	return fmt.Errorf("the interpreter cannot compile this code (%s)", msg)
}

// undefinedMsg is yaegi's "definition loop" error, which it mostly gives for an undefined
// name; Session.undefinedName names the identifier when it can.
const undefinedMsg = "undefined name (or a constant defined in terms of itself)"

// undefinedName improves a compile error about an undefined name: it names the first
// identifier on the error's line that nothing in the session or the cell defines.
func (s *Session) undefinedName(ee *EvalError, code string) *EvalError {
	if ee.Name != "CompileError" || !strings.HasSuffix(ee.Value, undefinedMsg) {
		return ee
	}
	var line int
	if _, err := fmt.Sscanf(ee.Value, "cell line %d:", &line); err != nil {
		return ee
	}
	lines := strings.Split(code, "\n")
	if line < 1 || line > len(lines) {
		return ee
	}
	known := map[string]bool{}
	for _, n := range s.names() {
		known[n] = true
	}
	// Names the cell defines anywhere (roughly: identifiers followed by := , a type, or in
	// declarations) count as known.
	var sc scanner.Scanner
	fset := token.NewFileSet()
	sc.Init(fset.AddFile("", -1, len(code)), []byte(code), nil, 0)
	var prev token.Token
	var prevLit string
	for {
		_, tok, lit := sc.Scan()
		if tok == token.EOF {
			break
		}
		if prev == token.IDENT && (tok == token.DEFINE || tok == token.IDENT || tok == token.COMMA || tok == token.LBRACK || tok == token.MUL) {
			known[prevLit] = true
		}
		if (prev == token.FUNC || prev == token.TYPE || prev == token.VAR || prev == token.CONST) && tok == token.IDENT {
			known[lit] = true
		}
		prev, prevLit = tok, lit
	}
	var lsc scanner.Scanner
	src := []byte(lines[line-1])
	lsc.Init(fset.AddFile("", -1, len(src)), src, nil, 0)
	prev = token.ILLEGAL
	for {
		pos, tok, lit := lsc.Scan()
		if tok == token.EOF {
			break
		}
		if tok == token.IDENT && prev != token.PERIOD && !known[lit] {
			col := int(pos) - fset.File(pos).Base() + 1
			out := compileError(fmt.Errorf("%d:%d: undefined: %s", line+1, col, lit), code)
			var improved *EvalError
			if errors.As(out, &improved) {
				return improved
			}
		}
		prev = tok
	}
	return ee
}
