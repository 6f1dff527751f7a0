package interp

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"reflect"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"

	"godist/internal/memlimit"
	"godist/interp/internal/syntax"
)

// This file type-checks a cell with go/types before yaegi sees it, so that a mistake is
// reported in the words of the Go compiler (gc uses the same checker), at the cell's line,
// instead of in yaegi's (reflect panics, "CFG post-order panic", wrapper type names).
//
// The checked file is the session as Go source: its imports, the declarations of earlier
// cells (under the file name "earlier"), its variables (typed from their values), then the
// cell's declarations and statements under the file name "cell", each placed with a
// /*line cell:L:C*/ directive so that positions are the cell's. Top-level `x := v` of the
// cell become package-level variables, so that the cell's functions see them as the
// session will. Only errors inside the cell count, and only those the session's view can
// vouch for: variables whose type cannot be written get go/types' invalid type, which
// silences every error about them, and failed imports are go/types' fake packages.

// checkFile is the generated source of a cell check and what the cell's checks need.
type checkFile struct {
	src        string
	finalStart cellPos // the cell's final expression, whose value is shown, not unused
	finalEnd   cellPos
	invalid    []string // session variables of types the checker cannot name
	typed      map[string]types.Type
	imports    []importSpec // the session's and the cell's
}

type cellPos struct{ line, col int }

// planKey names a construct of a cell that the check planned for the rewriter: what it is
// ("range" over a function, "new" of a value) and where it starts in the cell.
type planKey struct {
	what string
	at   cellPos
}

func (p cellPos) before(q cellPos) bool {
	return p.line < q.line || p.line == q.line && p.col < q.col
}

// checkCell type-checks the cell's chunks against the session; it returns a CompileError
// for the first error in the cell in gc's words (with a line saying the Go form where the
// mistake is a Python habit), or nil.
func (s *Session) checkCell(chunks []*chunk, code string) (err error) {
	s.mu.Lock()
	s.plans, s.checkPartial = nil, true
	s.mu.Unlock()
	defer func() {
		if recover() != nil {
			err = nil // a failure of the check itself gives no verdict: the interpreter decides
		}
	}()
	if err := missingImport(chunks, code); err != nil {
		return err
	}
	cf := s.checkSource(chunks)
	if cf == nil {
		return nil
	}
	ck := typeCheck(cf)
	if ck == nil {
		return nil // the cell parsed on its own: the generated file is at fault, not the cell
	}
	fset, f, pkg, info, errs := ck.fset, ck.f, ck.pkg, ck.info, ck.errs
	var first *types.Error
	var firstPos token.Position
	for i := range errs {
		e := &errs[i]
		p := fset.Position(e.Pos)
		if p.Filename != "cell" || e.Soft || strings.Contains(e.Msg, "could not import") {
			continue
		}
		at := cellPos{p.Line, p.Column}
		if strings.Contains(e.Msg, " is not used") && !at.before(cf.finalStart) && at.before(cf.finalEnd) {
			continue // the final expression is the cell's result
		}
		if first == nil || p.Line < firstPos.Line || p.Line == firstPos.Line && p.Column < firstPos.Column {
			first, firstPos = e, p
		}
	}
	// Whether the cell uses a variable the check could not type: then a yaegi error after a
	// clean check is not known to be a limit of the interpreter.
	partial := false
	for _, obj := range info.Uses {
		if v, ok := obj.(*types.Var); ok && v.Parent() == pkg.Scope() && v.Type() == types.Typ[types.Invalid] {
			partial = true
		}
	}
	s.mu.Lock()
	s.checkPartial = partial
	s.mu.Unlock()
	if first == nil {
		if err := s.breaksEarlier(chunks, code, ck); err != nil {
			return err
		}
		plans := map[planKey][]string{}
		if err := unsupported(f, fset, info, code, cf.imports, plans); err != nil {
			return err
		}
		s.mu.Lock()
		s.plans = plans
		s.mu.Unlock()
		return nil
	}
	msg := first.Msg // gc's checker is go/types' twin: its words
	if hint := pythonHint(first, f, fset, info, code, cf.imports, pkg); hint != "" {
		msg += "\n" + hint
	}
	return cellError(firstPos.Line, firstPos.Column, msg, code)
}

// checked is one run of go/types over a check file.
type checked struct {
	fset *token.FileSet
	f    *ast.File
	pkg  *types.Package
	info *types.Info
	errs []types.Error
}

// typeCheck runs go/types over a check file; nil when the file does not parse.
func typeCheck(cf *checkFile) *checked {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "check.go", cf.src, parser.SkipObjectResolution)
	if err != nil {
		return nil
	}
	pkg := types.NewPackage("main", "main")
	for _, n := range cf.invalid {
		pkg.Scope().Insert(types.NewVar(token.NoPos, pkg, n, types.Typ[types.Invalid]))
	}
	for n, t := range cf.typed {
		pkg.Scope().Insert(types.NewVar(token.NoPos, pkg, n, t))
	}
	ck := &checked{fset: fset, f: f, pkg: pkg, info: &types.Info{
		Types:      map[ast.Expr]types.TypeAndValue{},
		Selections: map[*ast.SelectorExpr]*types.Selection{},
		Uses:       map[*ast.Ident]types.Object{},
	}}
	conf := types.Config{
		Importer:    symImporter,
		GoVersion:   "go1.26",
		FakeImportC: true,
		Error: func(err error) {
			if te, ok := err.(types.Error); ok {
				ck.errs = append(ck.errs, te)
			}
		},
	}
	func() {
		defer func() { _ = recover() }() // a checker crash gives no verdict
		_ = types.NewChecker(&conf, fset, pkg, ck.info).Files([]*ast.File{f})
	}()
	return ck
}

// earlierErrors returns the errors of a check in the declarations of earlier cells, by
// declaration ("func use") and then position and message.
func earlierErrors(ck *checked) map[string]string {
	out := map[string]string{}
	for _, e := range ck.errs {
		p := ck.fset.Position(e.Pos)
		if e.Soft || !strings.HasPrefix(p.Filename, "earlier ") || strings.Contains(e.Msg, "could not import") {
			continue
		}
		key := fmt.Sprintf("%s:%d:%d: %s", p.Filename, p.Line, p.Column, e.Msg)
		out[key] = e.Msg
	}
	return out
}

// breaksEarlier reports, in gc's words, a redefinition in the cell that breaks a
// declaration of an earlier cell (a function using a field the new type lacks): the
// rebuild would replay it and fail. Errors the earlier declarations had before the cell
// are not the cell's.
func (s *Session) breaksEarlier(chunks []*chunk, code string, ck *checked) error {
	now := earlierErrors(ck)
	if len(now) == 0 {
		return nil
	}
	var redefining *chunk
	s.mu.Lock()
	for _, c := range chunks {
		if c.Kind != chunkDecl || redefining != nil {
			continue
		}
		for _, d := range s.decls {
			for _, k := range d.keys() {
				for _, k2 := range c.keys() {
					if k == k2 {
						redefining = c
					}
				}
			}
		}
	}
	s.mu.Unlock()
	if redefining == nil {
		return nil
	}
	before := map[string]string{}
	if cf := s.checkSource([]*chunk{{Kind: chunkStmt, Text: "_ = 0", Line: 1, Col: 1}}); cf != nil {
		if base := typeCheck(cf); base != nil {
			before = earlierErrors(base)
		}
	}
	keys := make([]string, 0, len(now))
	for k := range now {
		if _, had := before[k]; !had {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	sort.Strings(keys)
	what := strings.TrimPrefix(keys[0][:strings.Index(keys[0], ":")], "earlier ")
	return cellError(redefining.Line, redefining.Col, fmt.Sprintf("the new definitions break %s, declared in an earlier cell: %s (re-run that cell with a fix, or %%reset)", what, now[keys[0]]), code)
}

// cellError is a CompileError at a cell position, with the line and a caret.
func cellError(line, col int, msg, code string) error {
	value := fmt.Sprintf("cell line %d: %s", line, msg)
	var trace []string
	lines := strings.Split(code, "\n")
	if line >= 1 && line <= len(lines) {
		trace = append(trace, fmt.Sprintf("%4d | %s", line, lines[line-1]))
		if col > 0 {
			trace = append(trace, "     | "+strings.Repeat(" ", col-1)+"^")
		}
	}
	return newEvalError("CompileError", value, trace...)
}

// lineDirective places what follows at a cell position.
func lineDirective(file string, line, col int) string {
	return fmt.Sprintf("/*line %s:%d:%d*/", file, line, col)
}

// checkSource writes the session and the cell as one Go file (see the top of this file).
func (s *Session) checkSource(chunks []*chunk) *checkFile {
	if len(chunks) == 0 {
		return nil
	}
	cf := &checkFile{typed: map[string]types.Type{}}
	// What the cell declares or defines at top level replaces the session's.
	cellKeys := map[string]bool{}
	cellNames := map[string]bool{}
	var cellImports []importSpec
	for _, c := range chunks {
		switch c.Kind {
		case chunkImport:
			cellImports = append(cellImports, c.Imports...)
		case chunkDecl:
			for _, k := range c.keys() {
				cellKeys[k] = true
			}
			if c.DeclKind != "method" {
				for _, n := range c.Names {
					cellNames[n] = true
				}
			}
		}
	}
	type lifted struct {
		lhs  []string // the names, "_" for those an earlier definition of the cell made
		stmt *ast.AssignStmt
		off  func(token.Pos) int
	}
	liftOf := map[*chunk]*lifted{}
	assignOf := map[*chunk]*liftedStmt{} // redefinitions of the cell's own names: assignments
	liftedNames := map[string]bool{}
	for _, c := range chunks {
		if c.Kind != chunkStmt {
			continue
		}
		l := liftable(c)
		if l == nil {
			continue
		}
		lhs := lhsTexts(l.stmt)
		fresh := false
		for i, n := range lhs {
			if n == "_" {
				continue
			}
			if liftedNames[n] || cellNames[n] {
				lhs[i] = "_"
			} else {
				fresh = true
			}
		}
		if !fresh {
			assignOf[c] = l
			continue
		}
		if selfReferent(l.stmt, definedNames(c)) {
			continue // x := x + 1: a new x from the old one, a statement of its own
		}
		for _, n := range lhs {
			liftedNames[n] = n != "_"
		}
		liftOf[c] = &lifted{lhs: lhs, stmt: l.stmt, off: l.off}
	}

	s.mu.Lock()
	imports := append([]importSpec(nil), s.imports...)
	decls := append([]*declEntry(nil), s.decls...)
	s.mu.Unlock()

	// A variable or declaration of a package's name hides the package, as in the
	// interpreter (data := ... with godist/distlib/data imported).
	globals := s.currentGlobals()
	hidden := map[string]bool{}
	for n := range globals {
		hidden[n] = true
	}
	for n := range cellNames {
		hidden[n] = true
	}
	for n := range liftedNames {
		hidden[n] = liftedNames[n]
	}
	for _, d := range decls {
		if d.kind != "method" {
			for _, n := range d.names {
				hidden[n] = true
			}
		}
	}
	var b strings.Builder
	b.WriteString("package main\n")
	seen := map[string]bool{}
	for _, im := range append(cellImports, imports...) { // the cell's win
		if ln := im.localName(); !seen[ln] && !hidden[ln] {
			seen[ln] = true
			b.WriteString(im.source() + "\n")
			cf.imports = append(cf.imports, im)
		}
	}
	declared := map[string]bool{}
	for _, d := range decls {
		if d.kind != "method" {
			for _, n := range d.names {
				declared[n] = true
			}
		}
		replaced := false
		for _, k := range d.keys() {
			replaced = replaced || cellKeys[k]
		}
		if d.kind != "method" {
			for _, n := range d.names {
				replaced = replaced || cellNames[n] || liftedNames[n]
			}
		}
		if replaced {
			continue
		}
		b.WriteString(lineDirective("earlier "+d.kind+" "+strings.Join(d.names, ", "), 1, 1) + d.text + "\n")
	}
	named := s.notebookTypeNamesLocked()
	names := make([]string, 0, len(globals))
	for n := range globals {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		v := globals[name]
		if strings.HasPrefix(name, "_") || declared[name] || cellNames[name] || liftedNames[name] {
			continue
		}
		if !v.IsValid() {
			cf.invalid = append(cf.invalid, name) // known to exist, of a type the value does not say
			continue
		}
		if checkableType(v.Type(), 0) {
			cf.typed[name] = importerType(v.Type())
		} else if te, ok := typeExpr(v.Type(), named, cf.imports, 0); ok {
			fmt.Fprintf(&b, "var %s %s\n", name, te) // a type of the notebook's: []*P, map[string]P
		} else {
			cf.invalid = append(cf.invalid, name)
		}
	}
	for _, c := range chunks {
		if c.Kind == chunkDecl {
			b.WriteString(lineDirective("cell", c.Line, c.Col) + c.Text + "\n")
		}
	}
	for _, c := range chunks {
		l := liftOf[c]
		if l == nil {
			continue
		}
		// var a, b = RHS, the right-hand side at its cell position.
		rhs := l.off(l.stmt.Rhs[0].Pos())
		line, col := c.Line, c.Col
		if nl := strings.LastIndex(c.Text[:rhs], "\n"); nl >= 0 {
			line += strings.Count(c.Text[:rhs], "\n")
			col = rhs - nl
		} else {
			col += rhs
		}
		fmt.Fprintf(&b, "var %s = %s%s\n", strings.Join(l.lhs, ", "), lineDirective("cell", line, col), c.Text[rhs:])
	}
	b.WriteString("func _() {\n")
	last := chunks[len(chunks)-1]
	for _, c := range chunks {
		if c.Kind != chunkStmt || liftOf[c] != nil {
			continue
		}
		text := c.Text
		if a := assignOf[c]; a != nil {
			at := a.off(a.stmt.TokPos)
			text = text[:at] + " =" + text[at+2:] // same length: positions stay
		}
		b.WriteString(lineDirective("cell", c.Line, c.Col) + text + "\n")
		if c == last && c.Expr {
			cf.finalStart = cellPos{c.Line, c.Col}
			end := cellPos{c.Line + strings.Count(c.Text, "\n"), c.Col + len(c.Text)}
			if nl := strings.LastIndex(c.Text, "\n"); nl >= 0 {
				end.col = len(c.Text) - nl
			}
			cf.finalEnd = end
		}
	}
	b.WriteString("}\n")
	cf.src = b.String()
	return cf
}

// typeExpr writes a session variable's type as the check's source can: the notebook's
// types by name, compiled types by the imported packages' names, and pointers, slices,
// arrays, maps and channels of them; ok is false for anything else.
func typeExpr(t reflect.Type, named map[reflect.Type]string, imports []importSpec, depth int) (string, bool) {
	if n := named[t]; n != "" {
		return n, true
	}
	if depth > 8 {
		return "", false
	}
	if checkableType(t, 0) {
		return sourceTypeText(importerType(t), imports)
	}
	elem := func(prefix string) (string, bool) {
		e, ok := typeExpr(t.Elem(), named, imports, depth+1)
		return prefix + e, ok
	}
	switch t.Kind() {
	case reflect.Pointer:
		return elem("*")
	case reflect.Slice:
		return elem("[]")
	case reflect.Array:
		return elem(fmt.Sprintf("[%d]", t.Len()))
	case reflect.Chan:
		if t.ChanDir() != reflect.BothDir {
			return "", false
		}
		return elem("chan ")
	case reflect.Map:
		k, ok := typeExpr(t.Key(), named, imports, depth+1)
		if !ok {
			return "", false
		}
		return elem("map[" + k + "]")
	}
	return "", false
}

// importerType converts a compiled type with the symbol importer.
func importerType(t reflect.Type) types.Type {
	symImporter.mu.Lock()
	defer symImporter.mu.Unlock()
	return symImporter.typeOf(t)
}

// liftedStmt is a top-level definition of a statement chunk.
type liftedStmt struct {
	stmt *ast.AssignStmt
	off  func(token.Pos) int // offset in the chunk's text
}

// liftable returns the chunk's statement when it is one `a, b := v...` definition.
func liftable(c *chunk) *liftedStmt {
	prefix := "package p;func _(){"
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "cell", c.padded(prefix), parser.SkipObjectResolution)
	if err != nil {
		return nil
	}
	body := f.Decls[0].(*ast.FuncDecl).Body.List
	if len(body) != 1 {
		return nil
	}
	a, ok := body[0].(*ast.AssignStmt)
	if !ok || a.Tok != token.DEFINE {
		return nil
	}
	for _, l := range a.Lhs {
		if _, ok := l.(*ast.Ident); !ok {
			return nil
		}
	}
	tf := fset.File(f.Pos())
	base := len(prefix) + c.Line + c.Col - 1
	return &liftedStmt{stmt: a, off: func(p token.Pos) int { return tf.Offset(p) - base }}
}

func lhsTexts(a *ast.AssignStmt) []string {
	out := make([]string, len(a.Lhs))
	for i, l := range a.Lhs {
		out[i] = l.(*ast.Ident).Name
	}
	return out
}

// selfReferent reports whether the right-hand side of a definition uses a name it defines
// (`x := x + 1`, a new x from the old one): such a definition stays a statement.
func selfReferent(a *ast.AssignStmt, names []string) bool {
	found := false
	for _, r := range a.Rhs {
		ast.Inspect(r, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok {
				for _, nm := range names {
					found = found || id.Name == nm
				}
			}
			return !found
		})
	}
	return found
}

// checkableType reports whether the checker can give a session variable of type t its
// exact type: compiled types, and functions of compiled types.
func checkableType(t reflect.Type, depth int) bool {
	if t.Kind() != reflect.Func {
		return compiledType(t, depth)
	}
	if depth > 8 {
		return false
	}
	for i := 0; i < t.NumIn(); i++ {
		if !checkableType(t.In(i), depth+1) {
			return false
		}
	}
	for i := 0; i < t.NumOut(); i++ {
		if !checkableType(t.Out(i), depth+1) {
			return false
		}
	}
	return true
}

// pythonHints says the Go form of an undefined name that is Python's.
var pythonHints = map[string]string{
	"None":  "Go writes Python's None as nil",
	"True":  "Go writes Python's True as true",
	"False": "Go writes Python's False as false",
	"self":  "a Go method names its receiver in its declaration: func (m *MyLayer) Call(x ...) { ... m.units ... }",
	"str":   "Go's string type is string; fmt.Sprint(x) makes a string of a value",
	"float": "Go's float types are float64 and float32 (tensors hold float32)",
	"list":  "Go writes a list as a slice: []float32{1, 2, 3}, or make([]T, n)",
	"dict":  "Go writes a dict as a map: map[string]int{\"a\": 1}",
	"elif":  "Go writes elif as else if",
	"np":    "numpy is not a Go package: use godist/distlib/tensor (tensor.Constant, tensor.Zeros, ...)",
	"tf":    "TensorFlow's Go counterparts are the godist/distlib packages (notebooks/README.md maps them)",
}

// nearest returns the name of names closest to a misspelt name (at most two edits, or a
// different case), "" when none is that close.
func nearest(name string, names []string) string {
	best, bestDist := "", 3
	for _, n := range names {
		if n == name || !token.IsExported(n) && token.IsExported(name) {
			continue
		}
		// Python's snake_case names the same member: num_replicas_in_sync, NumReplicasInSync.
		d := editDistance(strings.ToLower(strings.ReplaceAll(name, "_", "")), strings.ToLower(n))
		if d < bestDist || d == bestDist && best != "" && n < best {
			best, bestDist = n, d
		}
	}
	if bestDist > 2 || len(name) < 4 {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance of two strings.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// mismatched finds the two types of go/types' "(mismatched types A and B)".
var mismatched = regexp.MustCompile(`\(mismatched types (.+) and (.+)\)$`)

// numericKind says whether a type name (as a message writes it) is an integer or a float.
func numericKind(t string) string {
	switch {
	case t == "int" || t == "rune" || t == "byte" || strings.HasPrefix(t, "int") || strings.HasPrefix(t, "uint"):
		return "int"
	case strings.HasPrefix(t, "float"):
		return "float"
	}
	return ""
}

// joinExprs writes expressions as source, comma-separated.
func joinExprs(es []ast.Expr) string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = types.ExprString(e)
	}
	return strings.Join(out, ", ")
}

// undefinedMember matches go/types' "x.m undefined (type T has no field or method m)".
var undefinedMember = regexp.MustCompile(`^(.+)\.(\w+) undefined \(type (.+) has no field or method \w+\)$`)

// stringFuncs are the strings functions for Python's str methods ({s} is the string).
var stringFuncs = map[string]string{
	"upper": "strings.ToUpper({s})", "lower": "strings.ToLower({s})", "strip": "strings.TrimSpace({s})",
	"split": "strings.Split({s}, sep)", "startswith": "strings.HasPrefix({s}, prefix)",
	"endswith": "strings.HasSuffix({s}, suffix)", "replace": "strings.ReplaceAll({s}, old, new)",
	"format": "fmt.Sprintf({s}, args...)", "join": "strings.Join(parts, {s})",
}

// pythonHint returns one line saying the Go form when the error is a Python habit:
// calling a value, assigning to a method, len of a tensor, an undefined Python name, a
// result count ignored.
func pythonHint(e *types.Error, f *ast.File, fset *token.FileSet, info *types.Info, code string, imports []importSpec, pkg *types.Package) string {
	msg := e.Msg
	switch {
	case strings.HasPrefix(msg, "undefined: "):
		name, _, _ := strings.Cut(strings.TrimPrefix(msg, "undefined: "), " (but have ")
		if h := pythonHints[name]; h != "" {
			return h
		}
		if pkg, member, ok := strings.Cut(name, "."); ok {
			// Python's submodules (keras.callbacks.X, keras.optimizers.X) are flat in Go.
			if h := submoduleHint(f, e.Pos, pkg, member, imports); h != "" {
				return h
			}
			// A typo of a package member: keras.SparseCategoricalCrossetropy.
			for _, im := range imports {
				if im.localName() == pkg {
					if p, err := symImporter.Import(im.Path); err == nil {
						if near := nearest(member, p.Scope().Names()); near != "" {
							return fmt.Sprintf("did you mean %s.%s?", pkg, near)
						}
					}
				}
			}
		}
		// x = 1 for a new x: Python's assignment defines, Go's does not.
		var asg *ast.AssignStmt
		ast.Inspect(f, func(n ast.Node) bool {
			if a, ok := n.(*ast.AssignStmt); ok && a.Tok == token.ASSIGN {
				for _, l := range a.Lhs {
					if id, ok := l.(*ast.Ident); ok && id.Pos() == e.Pos {
						asg = a
					}
				}
			}
			return asg == nil
		})
		if asg != nil {
			return fmt.Sprintf("Go defines a new variable with := (x := v, or var x T): %s := %s", joinExprs(asg.Lhs), joinExprs(asg.Rhs))
		}
		// A typo of a session's name: modle.Fit(...).
		if !strings.Contains(name, ".") && pkg != nil {
			if near := nearest(name, pkg.Scope().Names()); near != "" && !strings.HasPrefix(near, "_") {
				return fmt.Sprintf("did you mean %s?", near)
			}
		}
	case strings.Contains(msg, "cannot call ") && strings.HasSuffix(msg, " is not a function"):
		var call *ast.CallExpr
		ast.Inspect(f, func(n ast.Node) bool {
			if c, ok := n.(*ast.CallExpr); ok && c.Fun.Pos() == e.Pos && call == nil {
				call = c
			}
			return call == nil
		})
		if call == nil {
			return ""
		}
		t := info.Types[call.Fun].Type
		if t == nil {
			return ""
		}
		fun := types.ExprString(call.Fun)
		what := fmt.Sprintf("cannot call %s (a %s, not a function)", fun, typeText(t))
		if m := methodNamed(t, "Call"); m != nil {
			args := make([]string, len(call.Args))
			for i, a := range call.Args {
				args[i] = types.ExprString(a)
			}
			return fmt.Sprintf("%s: write %s.Call(%s)", what, fun, strings.Join(args, ", "))
		}
		return what + ": Go calls only functions and methods"
	case strings.HasPrefix(msg, "cannot assign to "):
		var sel *ast.SelectorExpr
		var asg *ast.AssignStmt
		ast.Inspect(f, func(n ast.Node) bool {
			if a, ok := n.(*ast.AssignStmt); ok && len(a.Lhs) == len(a.Rhs) {
				for i, l := range a.Lhs {
					if s, ok := ast.Unparen(l).(*ast.SelectorExpr); ok && s.Pos() == e.Pos {
						sel, asg = s, a
						asg.Rhs = a.Rhs[i : i+1]
					}
				}
			}
			return sel == nil
		})
		if sel == nil {
			return ""
		}
		selection := info.Selections[sel]
		if selection == nil || selection.Kind() != types.MethodVal {
			return ""
		}
		x, name := types.ExprString(sel.X), sel.Sel.Name
		recv := typeText(info.Types[sel.X].Type)
		if m := methodNamed(info.Types[sel.X].Type, "Set"+name); m != nil {
			return fmt.Sprintf("%s is a method of %s, not a field: write %s.Set%s(%s)", name, recv, x, name, types.ExprString(asg.Rhs[0]))
		}
		return fmt.Sprintf("%s is a method of %s, not a field: call it, %s.%s(...)", name, recv, x, name)
	case strings.HasSuffix(msg, "for built-in len") || strings.HasSuffix(msg, "for built-in cap"):
		var call *ast.CallExpr
		ast.Inspect(f, func(n ast.Node) bool {
			if c, ok := n.(*ast.CallExpr); ok && len(c.Args) == 1 && c.Args[0].Pos() == e.Pos {
				call = c
			}
			return call == nil
		})
		if call == nil {
			return ""
		}
		t := info.Types[call.Args[0]].Type
		if t == nil {
			return ""
		}
		x := types.ExprString(call.Args[0])
		if methodNamed(t, "Shape") != nil {
			hint := fmt.Sprintf("a %s has no len: write %s.Shape()[0] for its first dimension", typeText(t), x)
			if methodNamed(t, "Size") != nil {
				hint += fmt.Sprintf(", %s.Size() for its number of elements", x)
			}
			return hint
		}
		for _, m := range []string{"Len", "Cardinality", "Size", "NumElements"} {
			if methodNamed(t, m) != nil {
				return fmt.Sprintf("a %s has no len: write %s.%s()", typeText(t), x, m)
			}
		}
	case strings.Contains(msg, "(untyped float constant) truncated to "):
		// 0.5 * n with n an int: the constant takes n's type.
		var other ast.Expr
		ast.Inspect(f, func(n ast.Node) bool {
			if b, ok := n.(*ast.BinaryExpr); ok && other == nil {
				if b.X.Pos() == e.Pos {
					other = b.Y
				} else if b.Y.Pos() == e.Pos {
					other = b.X
				}
			}
			return other == nil
		})
		if other != nil {
			return fmt.Sprintf("Go converts between number types only when asked: float64(%s)", types.ExprString(other))
		}
	case strings.Contains(msg, "(mismatched types "):
		m := mismatched.FindStringSubmatch(msg)
		if m == nil {
			return ""
		}
		a, b := strings.TrimPrefix(m[1], "untyped "), strings.TrimPrefix(m[2], "untyped ")
		if a == "string" && b != "string" || b == "string" && a != "string" {
			return "Go does not turn values into strings by itself: fmt.Sprint(\"loss: \", loss), or fmt.Sprintf(\"loss: %.3f\", loss)"
		}
		if numericKind(a) != "" && numericKind(b) != "" && numericKind(a) != numericKind(b) {
			return fmt.Sprintf("Go converts between number types only when asked: %s(x) or %s(y)", a, b)
		}
	case strings.HasPrefix(msg, "assignment mismatch: ") && strings.Contains(msg, " returns "):
		return "Go returns an error (or a second value) as a further result: name each result, e.g. v, err := ..., and check err"
	case undefinedMember.MatchString(msg):
		m := undefinedMember.FindStringSubmatch(msg)
		x, member, typ := m[1], m[2], m[3]
		switch {
		case member == "append" && strings.HasPrefix(typ, "[]"):
			return fmt.Sprintf("Go appends with a builtin: %s = append(%s, v)", x, x)
		case member == "numpy" && strings.Contains(typ, "tensor.Tensor"):
			return fmt.Sprintf("a tensor's values are %s.Data() (a []float32), a scalar's %s.Item()", x, x)
		case (member == "items" || member == "keys" || member == "values") && strings.HasPrefix(typ, "map["):
			return fmt.Sprintf("Go ranges over a map: for k, v := range %s { ... }", x)
		case typ == "string" && stringFuncs[member] != "":
			return fmt.Sprintf("Go's string functions are in package strings: %s", strings.ReplaceAll(stringFuncs[member], "{s}", x))
		}
		// A typo of a method or field: model.Complie.
		var sel *ast.SelectorExpr
		ast.Inspect(f, func(n ast.Node) bool {
			if se, ok := n.(*ast.SelectorExpr); ok && se.Sel.Pos() == e.Pos && se.Sel.Name == member {
				sel = se
			}
			return sel == nil
		})
		if sel != nil && info.Types[sel.X].Type != nil && !strings.Contains(msg, "but does have") {
			if near := nearest(member, typeMembers(info.Types[sel.X].Type)); near != "" {
				return fmt.Sprintf("did you mean %s.%s?", x, near)
			}
		}
	case strings.Contains(msg, "cannot indirect"):
		// x ** 2 parses as x * (*2).
		if line := fset.Position(e.Pos).Line; line >= 1 && line <= len(strings.Split(code, "\n")) && strings.Contains(strings.Split(code, "\n")[line-1], "**") {
			return "Go has no ** operator: math.Pow(x, y) for float64"
		}
	case strings.Contains(msg, "(no value) used as value"):
		return "this call returns nothing: call it as a statement of its own"
	}
	return ""
}

// submoduleHint gives the Go form of pkg.member.Name, a Python submodule path such as
// keras.callbacks.ReduceLROnPlateau: pkg.Name where the package has Name, layers.Name for
// keras.layers; "" otherwise.
func submoduleHint(f *ast.File, pos token.Pos, pkg, member string, imports []importSpec) string {
	var outer *ast.SelectorExpr
	ast.Inspect(f, func(n ast.Node) bool {
		if se, ok := n.(*ast.SelectorExpr); ok {
			if in, ok := se.X.(*ast.SelectorExpr); ok && in.Sel.Name == member && (in.Sel.Pos() == pos || in.Pos() == pos) {
				outer = se
			}
		}
		return outer == nil
	})
	if outer == nil {
		return ""
	}
	name := outer.Sel.Name
	for _, im := range imports {
		if im.localName() != pkg {
			continue
		}
		if p, err := symImporter.Import(im.Path); err == nil && p.Scope().Lookup(name) != nil {
			return fmt.Sprintf("Go's %s has no %s: write %s.%s", pkg, member, pkg, name)
		}
		if member == "layers" {
			return fmt.Sprintf("Keras' layers are package layers in Go: write layers.%s, with import \"godist/distlib/keras/layers\"", name)
		}
	}
	return ""
}

// typeText writes t as an error message does: package names, not paths.
func typeText(t types.Type) string {
	return types.TypeString(t, func(p *types.Package) string {
		if p.Path() == "main" {
			return ""
		}
		return p.Name()
	})
}

// methodNamed returns the method of t (or *t) of that name, nil if none.
func methodNamed(t types.Type, name string) *types.Func {
	obj, _, _ := types.LookupFieldOrMethod(t, true, nil, name)
	if f, ok := obj.(*types.Func); ok {
		return f
	}
	return nil
}

// unsupported refuses, before anything runs, the valid Go that the interpreter cannot run:
// a range over a function (Go 1.23) whose body returns, defers or jumps out of it, a
// generic type alias (Go 1.24) and new of a value (Go 1.26) of a type the cell cannot name,
// each with the Go form that runs.
//
// A range over a function that can run as a call of the function with the loop body as
// its yield function is not refused: plans gets the cell position of its operand and the
// yield values' types as the cell writes them, for the rewriter.
func unsupported(f *ast.File, fset *token.FileSet, info *types.Info, code string, imports []importSpec, plans map[planKey][]string) error {
	var err error
	labeled := map[ast.Stmt]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		if l, ok := n.(*ast.LabeledStmt); ok {
			labeled[l.Stmt] = true
		}
		return true
	})
	ast.Inspect(f, func(n ast.Node) bool {
		if err != nil {
			return false
		}
		at := func(p token.Pos, msg string) {
			pos := fset.Position(p)
			if pos.Filename == "cell" {
				err = cellError(pos.Line, pos.Column, msg, code)
			}
		}
		switch n := n.(type) {
		case *ast.ValueSpec, *ast.CompositeLit:
			err = arrayTooLarge(n, fset, info, code)
		case *ast.RangeStmt:
			sig, ok := info.Types[n.X].Type.(*types.Signature)
			if !ok {
				if t := info.Types[n.X].Type; t != nil {
					sig, _ = t.Underlying().(*types.Signature)
				}
			}
			if sig == nil || sig.Params().Len() != 1 {
				return true
			}
			yield, _ := sig.Params().At(0).Type().Underlying().(*types.Signature)
			if yield == nil {
				return true
			}
			var params, typeTexts []string
			expressible := true
			for i := 0; i < yield.Params().Len(); i++ {
				name := "v"
				if i == 0 && yield.Params().Len() == 2 {
					name = "k"
				}
				pt := yield.Params().At(i).Type()
				params = append(params, name+" "+typeText(pt))
				tt, ok := sourceTypeText(pt, imports)
				expressible = expressible && ok
				typeTexts = append(typeTexts, tt)
			}
			_, _, why := rangeFuncBody(n.Body)
			switch {
			case labeled[n]:
				why = "a label"
			case n.Tok == token.ASSIGN:
				why = "variables assigned (=) rather than defined (:=)"
			case !expressible:
				why = "yield values of a type the cell cannot name"
			case yield.Results().Len() != 1:
				why = "a yield function that does not return bool"
			}
			if why == "" {
				pos := fset.Position(n.X.Pos())
				plans[planKey{"range", cellPos{pos.Line, pos.Column}}] = typeTexts
				return true
			}
			x, call := types.ExprString(n.X), types.ExprString(n.X)
			if _, lit := ast.Unparen(n.X).(*ast.FuncLit); lit {
				x, call = "func literal", "func(yield ...) { ... }"
			}
			at(n.X.Pos(), fmt.Sprintf("cannot range over %s (value of type %s): the interpreter runs a range-over-func loop (Go 1.23) only without %s\n"+
				"call the iterator with the loop body as its yield function: %s(func(%s) bool { ...; return true }) (return false to break)",
				x, typeText(info.Types[n.X].Type), why, call, strings.Join(params, ", ")))
		case *ast.TypeSpec:
			if n.Assign.IsValid() && n.TypeParams != nil && n.TypeParams.NumFields() > 0 {
				at(n.Pos(), fmt.Sprintf("generic type alias %s: the interpreter does not run generic type aliases (Go 1.24)\n"+
					"declare a generic type instead: type %s%s %s", n.Name.Name, n.Name.Name, fieldListText(n.TypeParams), types.ExprString(n.Type)))
			}
		case *ast.CallExpr:
			if id, ok := n.Fun.(*ast.Ident); ok && id.Name == "new" && len(n.Args) == 1 {
				if tv := info.Types[n.Args[0]]; tv.IsType() {
					err = sizeError(n, tv.Type, "new("+types.ExprString(n.Args[0])+")", fset, code)
				}
				if err != nil {
					return false
				}
				if obj, ok := info.Uses[id].(*types.Builtin); ok && obj.Name() == "new" && !info.Types[n.Args[0]].IsType() {
					// new of a value (Go 1.26) runs as &[]T{value}[0] where the cell can
					// name T.
					if t := info.Types[n.Args[0]].Type; t != nil {
						if text, ok := sourceTypeText(types.Default(t), imports); ok {
							pos := fset.Position(n.Pos())
							plans[planKey{"new", cellPos{pos.Line, pos.Column}}] = []string{text}
							return true
						}
					}
					v := types.ExprString(n.Args[0])
					at(n.Pos(), fmt.Sprintf("new(%s): the interpreter runs new of a value (Go 1.26) only of a type the cell can name\n"+
						"write v := %s and then &v", v, v))
				}
			}
		}
		return true
	})
	return err
}

// fieldListText writes a type parameter list: [T any, U comparable].
func fieldListText(fl *ast.FieldList) string {
	var parts []string
	for _, f := range fl.List {
		var names []string
		for _, n := range f.Names {
			names = append(names, n.Name)
		}
		parts = append(parts, strings.Join(names, ", ")+" "+types.ExprString(f.Type))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// syntaxHints give the Go form of Python syntax found on the line of a syntax error.
var syntaxHints = []struct {
	re   *regexp.Regexp
	hint string
}{
	{regexp.MustCompile(`\bdef\s+\w+\s*\(`), "Go declares a function with func: func name(x float32) float32 { ... }"},
	{regexp.MustCompile(`\bfor\s+\w+(\s*,\s*\w+)?\s+in\b`), "Go loops with range: for i := range n { ... }, or for i, x := range xs { ... }"},
	{regexp.MustCompile(`\b(import\s+\w+\s+as|from\s+[\w.]+\s+import)\b`), "Go imports a package by its path: import \"godist/distlib/keras\", or import k \"godist/distlib/keras\" to name it k"},
	{regexp.MustCompile(`\bf"`), "Go formats a string with fmt.Sprintf(\"%v\", x) (or fmt.Println(a, b))"},
	{regexp.MustCompile(`\*\*`), "Go has no ** operator: math.Pow(x, y) for float64"},
	{regexp.MustCompile(`[(,]\s*[A-Za-z_]\w*\s*=[^=]`), "Go has no keyword arguments: pass the arguments in order; distlib takes options as values, e.g. model.Fit(ds, keras.Epochs(5))"},
	{regexp.MustCompile(`(^|[^!<>=])=\s*\[|\(\s*\[`), "Go writes a list as a slice literal with its type: []float32{1, 2, 3}"},
	{regexp.MustCompile(`(^|[^!<>=])=\s*\{`), "Go writes a dict as a map literal with its type: map[string]int{\"a\": 1}"},
	{regexp.MustCompile(`^\s*print\s+[^\s(]`), "Go prints with a call: fmt.Println(x)"},
	{regexp.MustCompile(`\b(and|or|not)\b`), "Go's boolean operators are &&, || and !"},
	{regexp.MustCompile(`\b(if|for|while|else|elif)\b.*:\s*$`), "Go puts a block in braces, not after a colon: if x > 0 { ... }"},
	{regexp.MustCompile(`\bwhile\b`), "Go's while loop is for: for cond { ... }"},
	{regexp.MustCompile(`\blambda\b`), "Go writes a lambda as a function literal: func(x float32) float32 { return 2 * x }"},
}

// syntaxError reports a cell that does not parse: "syntax error: " and the parser's
// message at the cell line, and the Go form when the line holds Python syntax.
func syntaxError(err error, code string) error {
	out := compileError(err, code)
	var ee *EvalError
	if !errors.As(out, &ee) || ee.Name != "CompileError" {
		return out
	}
	var line int
	if _, serr := fmt.Sscanf(ee.Value, "cell line %d:", &line); serr != nil {
		return out
	}
	prefix := fmt.Sprintf("cell line %d: ", line)
	msg := strings.TrimPrefix(ee.Value, prefix)
	var ce *chunkError
	if errors.As(err, &ce) {
		if gl, gcol, gmsg, ok := gcSyntaxError(ce.c); ok {
			out := cellError(gl, gcol, gmsg, code).(*EvalError)
			ee, line, msg = out, gl, gmsg
			prefix = fmt.Sprintf("cell line %d: ", line)
		}
	}
	if !strings.HasPrefix(msg, "syntax error") {
		msg = "syntax error: " + msg
	}
	lines := strings.Split(code, "\n")
	if line >= 1 && line <= len(lines) {
		for _, h := range syntaxHints {
			if h.re.MatchString(lines[line-1]) {
				msg += "\n" + h.hint
				break
			}
		}
	}
	ee.Value = prefix + msg
	ee.Traceback[0] = ee.Name + ": " + ee.Value
	return ee
}

// interpreterWords are what yaegi's messages show of its insides.
var interpreterWords = regexp.MustCompile(`reflect|CFG|nil type|cannot compile this code|main\.|_godist|interp\.|valueInterface|unsupported assign|panic:`)

// interpreterLimit rewords a compile error of yaegi for code the cell check accepted with
// every name typed (so valid Go that the interpreter cannot run): it names the cell line (the group's first
// when yaegi gave none) and says what happened in words a student can act on; yaegi's own
// message stays in the traceback.
func (s *Session) interpreterLimit(err error, group []*chunk, code string) error {
	s.mu.Lock()
	partial := s.checkPartial
	s.mu.Unlock()
	var ee *EvalError
	if err == nil || partial || !errors.As(err, &ee) || ee.Name != "CompileError" || !interpreterWords.MatchString(ee.Value) ||
		strings.Contains(ee.Value, "the new definitions break") {
		return err // (a rebuild's error about an earlier cell's declaration is not this cell's)
	}
	line := group[0].Line
	fmt.Sscanf(ee.Value, "cell line %d:", &line)
	last := group[len(group)-1]
	where := fmt.Sprintf("cell line %d", line)
	if !strings.HasPrefix(ee.Value, "cell line ") {
		if end := last.Line + strings.Count(last.Text, "\n"); end > line {
			where = fmt.Sprintf("cell lines %d-%d", line, end)
		}
	}
	out := cellError(line, 0, "", code).(*EvalError)
	out.Value = where + ": Go accepts this code but the interpreter cannot run it; write it another way " +
		"(a generic function or type used more simply, or the construct in a function)"
	out.Traceback[0] = out.Name + ": " + out.Value
	out.Traceback = append(out.Traceback, "interpreter: "+ee.Value)
	return out
}

// rangeFuncBody finds, in the body of a range over a function, the break and continue
// statements of that loop (which become return false and return true when the body runs
// as the yield function); why says what keeps the body from running so: a return, a
// defer, a goto, or a break or continue of an outer statement.
func rangeFuncBody(body *ast.BlockStmt) (breaks, continues []*ast.BranchStmt, why string) {
	inner := map[string]bool{} // labels declared inside the body
	ast.Inspect(body, func(n ast.Node) bool {
		if l, ok := n.(*ast.LabeledStmt); ok {
			inner[l.Label.Name] = true
		}
		_, lit := n.(*ast.FuncLit)
		return !lit
	})
	var walk func(n ast.Node, inLoop, inBreakable bool)
	walk = func(root ast.Node, inLoop, inBreakable bool) {
		ast.Inspect(root, func(n ast.Node) bool {
			if n == root || why != "" {
				return why == ""
			}
			switch n := n.(type) {
			case *ast.FuncLit:
				return false
			case *ast.ForStmt:
				walk(n.Body, true, true)
				return false
			case *ast.RangeStmt:
				walk(n.Body, true, true)
				return false
			case *ast.SwitchStmt:
				walk(n.Body, inLoop, true)
				return false
			case *ast.TypeSwitchStmt:
				walk(n.Body, inLoop, true)
				return false
			case *ast.SelectStmt:
				walk(n.Body, inLoop, true)
				return false
			case *ast.ReturnStmt:
				why = "a return in its body"
			case *ast.DeferStmt:
				why = "a defer in its body"
			case *ast.BranchStmt:
				switch {
				case n.Tok == token.GOTO:
					why = "a goto in its body"
				case n.Label != nil:
					if !inner[n.Label.Name] {
						why = "a " + n.Tok.String() + " of an outer statement in its body"
					}
				case n.Tok == token.CONTINUE && !inLoop:
					continues = append(continues, n)
				case n.Tok == token.BREAK && !inBreakable:
					breaks = append(breaks, n)
				}
			}
			return true
		})
	}
	walk(body, false, false)
	return breaks, continues, why
}

// sourceTypeText writes t as the cell's source can: packages by the names the session
// imports them as; ok is false when a package of t is not imported.
func sourceTypeText(t types.Type, imports []importSpec) (string, bool) {
	ok := true
	text := types.TypeString(t, func(p *types.Package) string {
		if p.Path() == "main" {
			return ""
		}
		for _, im := range imports {
			if im.Path == p.Path() {
				return im.localName()
			}
		}
		ok = false
		return p.Name()
	})
	return text, ok
}

// goSizes are the sizes of types in this process.
var goSizes = types.SizesFor("gc", runtime.GOARCH)

// arrayTooLarge refuses a variable or composite literal of an array type larger than the
// memory the process may use (`var grid [1 << 34]float32`), which would end the process in
// the runtime's fatal "out of memory" when the interpreter allocates it.
func arrayTooLarge(n ast.Node, fset *token.FileSet, info *types.Info, code string) error {
	switch n := n.(type) {
	case *ast.ValueSpec:
		if n.Type != nil {
			return sizeError(n, info.Types[n.Type].Type, "var "+n.Names[0].Name+" "+types.ExprString(n.Type), fset, code)
		}
	case *ast.CompositeLit:
		if t := info.Types[n].Type; t != nil {
			return sizeError(n, t, types.ExprString(n.Type)+"{...}", fset, code)
		}
	}
	return nil
}

// sizeError returns a MemoryError at n's cell line when a value of type t does not fit in
// the memory the process may use.
func sizeError(n ast.Node, t types.Type, what string, fset *token.FileSet, code string) error {
	if t == nil {
		return nil
	}
	if _, isArray := t.Underlying().(*types.Array); !isArray {
		return nil
	}
	size := func() (s int64) {
		defer func() {
			if recover() != nil {
				s = -1 // a size overflowing int64
			}
		}()
		return goSizes.Sizeof(t)
	}()
	var err error
	if size < 0 {
		err = memlimit.CheckElems(what, -1, 1)
	} else {
		err = memlimit.Check(what, uint64(size))
	}
	if err == nil {
		return nil
	}
	pos := fset.Position(n.Pos())
	if pos.Filename != "cell" {
		return nil
	}
	out := cellError(pos.Line, pos.Column, err.Error(), code).(*EvalError)
	out.Name = "MemoryError"
	out.Traceback[0] = out.Name + ": " + out.Value
	return out
}

// pythonPackages are the Python packages a translation imports, and what to use instead.
var pythonPackages = map[string]string{
	"numpy":      "godist/distlib/tensor (tensor.Constant, tensor.Zeros, tensor.MatMul, ...)",
	"tensorflow": "the godist/distlib packages: distribute, keras, keras/layers, data, tensor (notebooks/README.md maps them)",
	"keras":      "godist/distlib/keras and godist/distlib/keras/layers",
	"torch":      "godist/distlib/tensor and godist/distlib/keras",
	"pandas":     "encoding/csv with godist/distlib/data",
	"matplotlib": "History.Plot of godist/distlib/keras, or godist/distlib/display",
}

// missingImport refuses an import of a package the kernel does not have, before the
// interpreter says that GOPATH is not set.
func missingImport(chunks []*chunk, code string) error {
	for _, c := range chunks {
		if c.Kind != chunkImport {
			continue
		}
		for _, im := range c.Imports {
			if packageAvailable(im.Path) {
				continue
			}
			line, col := c.Line, c.Col
			quoted := strconv.Quote(im.Path)
			if i := strings.Index(c.Text, quoted); i >= 0 {
				line += strings.Count(c.Text[:i], "\n")
				if nl := strings.LastIndex(c.Text[:i], "\n"); nl >= 0 {
					col = i - nl
				} else {
					col += i
				}
			}
			msg := fmt.Sprintf("could not import %s (the kernel has the standard library and godist's packages, not this one)", im.Path)
			if use := pythonPackages[strings.SplitN(im.Path, "/", 2)[0]]; use != "" {
				msg += "\n" + im.Path + " is Python's; in Go use " + use
			}
			return cellError(line, col, msg, code)
		}
	}
	return nil
}

// packageAvailable reports whether a session's interpreter can import path: a package of
// the symbol tables (unrestricted's included) or of the session's own helpers.
func packageAvailable(path string) bool {
	return packageSymbols(path) != nil || path == rtPath || path == carryPath
}

// gcSyntaxError parses a chunk that go/parser refused with gc's parser (a copy of
// cmd/compile/internal/syntax) and returns its first error: the cell line and column and
// gc's message ("syntax error: unexpected = in argument list; possibly missing comma or )").
func gcSyntaxError(c *chunk) (line, col int, msg string, ok bool) {
	prefix := "package p;"
	if c.Kind == chunkStmt {
		prefix = "package p;func _(){"
	}
	var first *syntax.Error
	_, _ = syntax.Parse(syntax.NewFileBase("cell"), strings.NewReader(c.padded(prefix)), func(err error) {
		if e, isSyntax := err.(syntax.Error); isSyntax && first == nil {
			first = &e
		}
	}, nil, 0)
	if first == nil || first.Pos.Line() < 2 {
		return 0, 0, "", false
	}
	return int(first.Pos.Line()) - 1, int(first.Pos.Col()), first.Msg, true
}
