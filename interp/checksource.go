package interp

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"reflect"
	"sort"
	"strings"
)

// This file writes the check's Go source (see check.go): the session's imports,
// declarations and variables, then the cell.

// lineDirective places what follows at a cell position.
func lineDirective(file string, line, col int) string {
	return fmt.Sprintf("/*line %s:%d:%d*/", file, line, col)
}

// checkSource writes the session and the cell as one Go file (see check.go).
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
