package interp

import (
	"fmt"
	"go/ast"
	"go/constant"
	"go/parser"
	"go/scanner"
	"go/token"
	"go/types"
	"reflect"
	"sort"
	"strings"
	"sync"

	"github.com/traefik/yaegi/stdlib"

	"godist/interp/symbols"
)

// This file gives completion and inspection the types (go/types) of what a cell declares
// before it runs. Packages are imported from the yaegi symbol tables the session already
// has (the standard library and distlib), converted from reflect once per package and
// cached: go/importer's source mode would type-check GOROOT's sources, far too slow for a
// keystroke.

// symbolImporter is a types.Importer over the yaegi symbol tables.
type symbolImporter struct {
	mu    sync.Mutex
	pkgs  map[string]*types.Package
	named map[reflect.Type]*types.Named
	done  map[string]bool // packages whose symbols are converted
}

var symImporter = &symbolImporter{
	pkgs:  map[string]*types.Package{},
	named: map[reflect.Type]*types.Named{},
	done:  map[string]bool{},
}

// packageName returns the name of the package at path ("rand" for math/rand/v2).
func packageName(path string) string {
	for _, table := range []map[string]map[string]reflect.Value{symbols.Symbols, stdlib.Symbols} {
		for key := range table {
			if i := strings.LastIndex(key, "/"); i >= 0 && key[:i] == path {
				return key[i+1:]
			}
		}
	}
	return pathBase(majorBase(path))
}

// Import implements types.Importer.
func (im *symbolImporter) Import(path string) (*types.Package, error) {
	im.mu.Lock()
	defer im.mu.Unlock()
	pkg := im.pkg(path)
	if im.done[path] {
		return pkg, nil
	}
	syms := packageSymbols(path)
	if syms == nil {
		return nil, fmt.Errorf("interp: package %q is not available to the interpreter", path)
	}
	im.done[path] = true
	names := make([]string, 0, len(syms))
	for n := range syms {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		if strings.HasPrefix(name, "_") || pkg.Scope().Lookup(name) != nil {
			continue
		}
		if obj := im.object(pkg, name, syms[name]); obj != nil {
			pkg.Scope().Insert(obj)
		}
	}
	pkg.MarkComplete()
	return pkg, nil
}

func (im *symbolImporter) pkg(path string) *types.Package {
	p, ok := im.pkgs[path]
	if !ok {
		p = types.NewPackage(path, packageName(path))
		im.pkgs[path] = p
	}
	return p
}

// object converts one symbol: yaegi writes a type T as (*T)(nil), a variable as
// addressable, an untyped constant as a constant.Value.
func (im *symbolImporter) object(pkg *types.Package, name string, v reflect.Value) types.Object {
	if !v.IsValid() {
		return nil
	}
	switch {
	case v.Kind() == reflect.Pointer && v.IsNil() && !v.CanAddr():
		t := v.Type().Elem()
		if t.Name() == name && t.PkgPath() != "" {
			if n, ok := im.typeOf(t).(*types.Named); ok {
				return n.Obj()
			}
		}
		return types.NewTypeName(token.NoPos, pkg, name, im.typeOf(t))
	case v.Kind() == reflect.Func && !v.CanAddr():
		sig, _ := im.typeOf(v.Type()).(*types.Signature)
		if sig == nil {
			return nil
		}
		return types.NewFunc(token.NoPos, pkg, name, sig)
	case v.CanAddr():
		return types.NewVar(token.NoPos, pkg, name, im.typeOf(v.Type()))
	}
	if c, ok := v.Interface().(constant.Value); ok {
		kinds := map[constant.Kind]types.BasicKind{constant.Bool: types.UntypedBool, constant.String: types.UntypedString,
			constant.Int: types.UntypedInt, constant.Float: types.UntypedFloat, constant.Complex: types.UntypedComplex}
		if k, ok := kinds[c.Kind()]; ok {
			return types.NewConst(token.NoPos, pkg, name, types.Typ[k], c)
		}
	}
	t := im.typeOf(v.Type())
	var c constant.Value
	switch v.Kind() {
	case reflect.Bool:
		c = constant.MakeBool(v.Bool())
	case reflect.String:
		c = constant.MakeString(v.String())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		c = constant.MakeInt64(v.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		c = constant.MakeUint64(v.Uint())
	case reflect.Float32, reflect.Float64:
		c = constant.MakeFloat64(v.Float())
	default:
		return types.NewVar(token.NoPos, pkg, name, t)
	}
	return types.NewConst(token.NoPos, pkg, name, t, c)
}

var basicKinds = map[reflect.Kind]types.BasicKind{
	reflect.Bool: types.Bool, reflect.Int: types.Int, reflect.Int8: types.Int8, reflect.Int16: types.Int16,
	reflect.Int32: types.Int32, reflect.Int64: types.Int64, reflect.Uint: types.Uint, reflect.Uint8: types.Uint8,
	reflect.Uint16: types.Uint16, reflect.Uint32: types.Uint32, reflect.Uint64: types.Uint64,
	reflect.Uintptr: types.Uintptr, reflect.Float32: types.Float32, reflect.Float64: types.Float64,
	reflect.Complex64: types.Complex64, reflect.Complex128: types.Complex128, reflect.String: types.String,
	reflect.UnsafePointer: types.UnsafePointer,
}

var errorType = reflect.TypeOf((*error)(nil)).Elem()

// typeOf converts a reflect type; named types keep their names and methods.
func (im *symbolImporter) typeOf(t reflect.Type) types.Type {
	if t == errorType {
		return types.Universe.Lookup("error").Type()
	}
	if t.Name() != "" && t.PkgPath() != "" {
		if n, ok := im.named[t]; ok {
			return n
		}
		pkg := im.pkg(t.PkgPath())
		obj := types.NewTypeName(token.NoPos, pkg, t.Name(), nil)
		n := types.NewNamed(obj, nil, nil)
		im.named[t] = n
		n.SetUnderlying(im.structure(t))
		if t.Kind() != reflect.Interface {
			im.addMethods(n, t)
		}
		return n
	}
	return im.structure(t)
}

// addMethods gives n the methods of t and *t.
func (im *symbolImporter) addMethods(n *types.Named, t reflect.Type) {
	seen := map[string]bool{}
	for _, rt := range []reflect.Type{t, reflect.PointerTo(t)} {
		for i := 0; i < rt.NumMethod(); i++ {
			m := rt.Method(i)
			if seen[m.Name] || !m.IsExported() {
				continue
			}
			seen[m.Name] = true
			var recvType types.Type = n
			if rt.Kind() == reflect.Pointer {
				recvType = types.NewPointer(n)
			}
			recv := types.NewVar(token.NoPos, n.Obj().Pkg(), "", recvType)
			params, results, variadic := im.funcParts(m.Type, 1)
			sig := types.NewSignatureType(recv, nil, nil, params, results, variadic)
			n.AddMethod(types.NewFunc(token.NoPos, n.Obj().Pkg(), m.Name, sig))
		}
	}
}

func (im *symbolImporter) funcParts(t reflect.Type, skip int) (params, results *types.Tuple, variadic bool) {
	var ps, rs []*types.Var
	for i := skip; i < t.NumIn(); i++ {
		ps = append(ps, types.NewVar(token.NoPos, nil, "", im.typeOf(t.In(i))))
	}
	for i := 0; i < t.NumOut(); i++ {
		rs = append(rs, types.NewVar(token.NoPos, nil, "", im.typeOf(t.Out(i))))
	}
	return types.NewTuple(ps...), types.NewTuple(rs...), t.IsVariadic()
}

// structure converts the structure of t, ignoring its name.
func (im *symbolImporter) structure(t reflect.Type) types.Type {
	if k, ok := basicKinds[t.Kind()]; ok {
		return types.Typ[k]
	}
	switch t.Kind() {
	case reflect.Pointer:
		return types.NewPointer(im.typeOf(t.Elem()))
	case reflect.Slice:
		return types.NewSlice(im.typeOf(t.Elem()))
	case reflect.Array:
		return types.NewArray(im.typeOf(t.Elem()), int64(t.Len()))
	case reflect.Map:
		return types.NewMap(im.typeOf(t.Key()), im.typeOf(t.Elem()))
	case reflect.Chan:
		dir := types.SendRecv
		switch t.ChanDir() {
		case reflect.SendDir:
			dir = types.SendOnly
		case reflect.RecvDir:
			dir = types.RecvOnly
		}
		return types.NewChan(dir, im.typeOf(t.Elem()))
	case reflect.Func:
		params, results, variadic := im.funcParts(t, 0)
		return types.NewSignatureType(nil, nil, nil, params, results, variadic)
	case reflect.Interface:
		var methods []*types.Func
		for i := 0; i < t.NumMethod(); i++ {
			m := t.Method(i)
			if !m.IsExported() {
				// reflect lists a concrete type's exported methods only: with the unexported
				// method here, no package type would implement the interface (layers.Option).
				continue
			}
			params, results, variadic := im.funcParts(m.Type, 0)
			var pkg *types.Package
			methods = append(methods, types.NewFunc(token.NoPos, pkg, m.Name,
				types.NewSignatureType(nil, nil, nil, params, results, variadic)))
		}
		it := types.NewInterfaceType(methods, nil)
		it.Complete()
		return it
	case reflect.Struct:
		var fields []*types.Var
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			var pkg *types.Package
			if !f.IsExported() {
				pkg = im.pkg(f.PkgPath)
			}
			fields = append(fields, types.NewField(token.NoPos, pkg, f.Name, im.typeOf(f.Type), f.Anonymous))
		}
		return types.NewStruct(fields, nil)
	}
	return types.Typ[types.Invalid]
}

// cellTypeAt type-checks the session's declarations and the cell's code up to pos (a byte
// offset just after an expression) and returns the type of that expression, or nil.
func (s *Session) cellTypeAt(code string, exprStart, exprEnd int) types.Type {
	// Close what is open at the expression so that the text before it parses.
	src := code[:exprEnd]
	var sc scanner.Scanner
	fset := token.NewFileSet()
	sc.Init(fset.AddFile("", -1, len(src)), []byte(src), func(token.Position, string) {}, 0)
	var open []token.Token
	for {
		_, t, _ := sc.Scan()
		if t == token.EOF {
			break
		}
		switch t {
		case token.LPAREN, token.LBRACE, token.LBRACK:
			open = append(open, t)
		case token.RPAREN, token.RBRACE, token.RBRACK:
			if len(open) > 0 {
				open = open[:len(open)-1]
			}
		}
	}
	closed := src
	for i := len(open) - 1; i >= 0; i-- {
		closed += map[token.Token]string{token.LPAREN: ")", token.LBRACE: "\n}", token.LBRACK: "]"}[open[i]]
	}
	chunks, err := splitCell(blankMagics(closed))
	if err != nil {
		return nil
	}
	var decls []string
	var imports []importSpec
	target := -1 // byte offset of the expression in the generated file
	s.mu.Lock()
	imports = append(imports, s.imports...)
	declared := map[string]bool{}
	for _, d := range s.decls {
		decls = append(decls, d.text)
		for _, n := range d.names {
			declared[n] = true
		}
	}
	s.mu.Unlock()
	for _, c := range chunks {
		imports = append(imports, c.Imports...)
	}
	var b strings.Builder
	b.WriteString("package main\n")
	seenImport := map[string]bool{}
	for _, im := range imports {
		if !seenImport[im.localName()] {
			seenImport[im.localName()] = true
			b.WriteString(im.source() + "\n")
		}
	}
	for _, d := range decls {
		b.WriteString(d + "\n")
	}
	// Globals of a type the notebook declared are declared with that type (so their
	// methods are seen); the others get their types from their values, below.
	globals := s.currentGlobals()
	named := s.notebookTypeNames()
	for name, v := range globals {
		if declared[name] || strings.HasPrefix(name, "_") || !v.IsValid() {
			continue
		}
		if tn := named[v.Type()]; tn != "" {
			fmt.Fprintf(&b, "var %s %s\n", name, tn)
			declared[name] = true
		} else if v.Kind() == reflect.Pointer {
			if tn := named[v.Type().Elem()]; tn != "" {
				fmt.Fprintf(&b, "var %s *%s\n", name, tn)
				declared[name] = true
			}
		}
	}
	for _, c := range chunks {
		if c.Kind == chunkDecl {
			if c.Off <= exprStart && exprStart < c.Off+len(c.Text) {
				target = b.Len() + exprStart - c.Off
			}
			b.WriteString(c.Text + "\n")
		}
	}
	b.WriteString("func _() {\n")
	for _, c := range chunks {
		if c.Kind == chunkStmt {
			if c.Off <= exprStart && exprStart < c.Off+len(c.Text) {
				target = b.Len() + exprStart - c.Off
			}
			b.WriteString(c.Text + "\n")
		}
	}
	b.WriteString("}\n")
	if target < 0 {
		return nil
	}
	fset = token.NewFileSet()
	f, err := parser.ParseFile(fset, "cell.go", b.String(), parser.SkipObjectResolution)
	if f == nil {
		return nil
	}
	_ = err // a partial file still has types for what parsed
	pkg := types.NewPackage("main", "main")
	for name, v := range globals {
		if declared[name] || strings.HasPrefix(name, "_") || !v.IsValid() {
			continue
		}
		pkg.Scope().Insert(types.NewVar(token.NoPos, pkg, name, importerType(v.Type())))
	}
	info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}}
	conf := types.Config{Importer: symImporter, Error: func(error) {}, FakeImportC: true}
	_ = types.NewChecker(&conf, fset, pkg, info).Files([]*ast.File{f})
	var found types.Type
	file := fset.File(f.Pos())
	want := file.Pos(target)
	end := file.Pos(target + exprEnd - exprStart)
	for e, tv := range info.Types {
		if e.Pos() == want && e.End() == end && tv.Type != nil {
			found = tv.Type
		}
	}
	return found
}

// typeMembers lists the fields and methods reachable from a value of type t.
func typeMembers(t types.Type) []string {
	var out []string
	ms := types.NewMethodSet(t)
	if _, isPtr := t.Underlying().(*types.Pointer); !isPtr && !types.IsInterface(t) {
		ms = types.NewMethodSet(types.NewPointer(t))
	}
	for i := 0; i < ms.Len(); i++ {
		out = append(out, ms.At(i).Obj().Name())
	}
	var fields func(t types.Type, depth int)
	fields = func(t types.Type, depth int) {
		if p, ok := t.Underlying().(*types.Pointer); ok {
			t = p.Elem()
		}
		st, ok := t.Underlying().(*types.Struct)
		if !ok || depth > 3 {
			return
		}
		for i := 0; i < st.NumFields(); i++ {
			f := st.Field(i)
			if f.Exported() || f.Pkg() != nil && f.Pkg().Path() == "main" {
				out = append(out, f.Name())
			}
			if f.Embedded() {
				fields(f.Type(), depth+1)
			}
		}
	}
	fields(t, 0)
	return out
}

// notebookTypeNames maps the interpreter's reflect type of each type the notebook declared
// (non-generic) to its name, so that completion can type a global of that type by name.
// It asks the interpreter (*new(T) for each name) only between cells, and keeps the
// answer until the declarations change.
func (s *Session) notebookTypeNames() map[reflect.Type]string {
	s.mu.Lock()
	var texts []string
	for _, d := range s.decls {
		if d.kind == "type" {
			texts = append(texts, d.text)
		}
	}
	key := strings.Join(texts, "\x00") // a type declared again differently is a new type
	if s.typeNames != nil && s.typeNamesKey == key {
		m := s.typeNames
		s.mu.Unlock()
		return m
	}
	s.mu.Unlock()
	if !s.execMu.TryLock() {
		return nil // a cell runs: no interpreter call now
	}
	defer s.execMu.Unlock()
	return s.notebookTypeNamesLocked()
}

// notebookTypeNamesLocked is notebookTypeNames for a caller that holds execMu (Execute,
// between the evaluations of a cell).
func (s *Session) notebookTypeNamesLocked() map[reflect.Type]string {
	s.mu.Lock()
	var names, texts []string
	for _, d := range s.decls {
		if d.kind == "type" {
			names = append(names, d.names...)
			texts = append(texts, d.text)
		}
	}
	key := strings.Join(texts, "\x00")
	if s.typeNames != nil && s.typeNamesKey == key {
		m := s.typeNames
		s.mu.Unlock()
		return m
	}
	s.mu.Unlock()
	yi := s.interpreter()
	m := map[reflect.Type]string{}
	for _, n := range names {
		func() {
			defer func() { _ = recover() }()
			v, err := yi.Eval("*new(" + n + ")")
			if err == nil && v.IsValid() {
				m[v.Type()] = n
			}
		}()
	}
	s.mu.Lock()
	s.typeNames, s.typeNamesKey = m, key
	s.mu.Unlock()
	return m
}
