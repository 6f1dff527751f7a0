package interp

import (
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"strings"

	"github.com/traefik/yaegi/stdlib"

	"godist/interp/symbols"
)

// This file runs a cell's final expression: how many values it has (a call's result
// count, from the declarations, the symbol tables or the value) and how it is shown.

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
