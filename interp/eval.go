package interp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"runtime/pprof"

	yaegi "github.com/traefik/yaegi/interp"
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
