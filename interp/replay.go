package interp

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	yaegi "github.com/traefik/yaegi/interp"
)

// This file rebuilds the interpreter after a redefinition (see "Redefinition" in the
// package documentation): the replay of imports and declarations, the carried variables,
// and the replay's errors in terms of the cell or the earlier declaration.

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
