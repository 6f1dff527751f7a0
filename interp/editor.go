package interp

import (
	"bytes"
	"go/ast"
	"go/build"
	"go/doc"
	"go/parser"
	"go/printer"
	"go/scanner"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"godist/internal/gosrc"
)

// This file is the editor's help that needs no execution: the syntax check of
// is_complete, the names an unexecuted cell declares and imports, and the documentation
// of standard-library symbols read from GOROOT's sources.

// blankMagics returns code with its line magics and shell lines blanked, so that the rest
// can be parsed as Go with unchanged line numbers.
func blankMagics(code string) string {
	lines := strings.Split(code, "\n")
	for i, l := range lines {
		if t := strings.TrimSpace(l); strings.HasPrefix(t, "%") || strings.HasPrefix(t, "!") {
			lines[i] = ""
		}
	}
	return strings.Join(lines, "\n")
}

// syntaxValid reports whether a cell whose brackets are balanced parses as Go, and has no
// operator applied to a literal that can never take it (`1 +* 2`: the indirection of a
// constant), which the parser alone accepts.
func syntaxValid(code string) bool {
	chunks, err := splitCell(blankMagics(code))
	if err != nil {
		return false
	}
	for _, c := range chunks {
		prefix := "package p;"
		if c.Kind == chunkStmt {
			prefix = "package p;func _(){"
		}
		f, err := parser.ParseFile(token.NewFileSet(), "cell", c.padded(prefix), parser.SkipObjectResolution)
		if err != nil {
			return false
		}
		bad := false
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.StarExpr:
				bad = bad || isLiteral(n.X)
			case *ast.UnaryExpr:
				bad = bad || n.Op == token.AND && isLiteral(n.X) || n.Op == token.ARROW && isLiteral(n.X)
			}
			return !bad
		})
		if bad {
			return false
		}
	}
	return true
}

// isLiteral reports whether e is a basic literal, possibly parenthesized or signed.
func isLiteral(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.BasicLit:
		return true
	case *ast.ParenExpr:
		return isLiteral(e.X)
	case *ast.UnaryExpr:
		return (e.Op == token.SUB || e.Op == token.ADD) && isLiteral(e.X)
	}
	return false
}

// cellNames is what an unexecuted cell declares: its imports and its top-level names.
type cellNames struct {
	imports []importSpec
	names   []string
}

// scanCell reads the imports and top-level declarations of a cell that may be incomplete
// (the editor asks while it is typed): a token scan, so that an unfinished line does not
// hide what the lines before it declare.
func scanCell(code string) cellNames {
	var out cellNames
	fset := token.NewFileSet()
	var sc scanner.Scanner
	src := []byte(blankMagics(code))
	sc.Init(fset.AddFile("", -1, len(src)), src, func(token.Position, string) {}, 0)
	type tok struct {
		t   token.Token
		lit string
	}
	var toks []tok
	for {
		_, t, lit := sc.Scan()
		if t == token.EOF {
			break
		}
		toks = append(toks, tok{t, lit})
	}
	at := func(i int) tok {
		if i < len(toks) {
			return toks[i]
		}
		return tok{token.EOF, ""}
	}
	depth := 0
	stmtStart := true
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		switch t.t {
		case token.LPAREN, token.LBRACE, token.LBRACK:
			depth++
		case token.RPAREN, token.RBRACE, token.RBRACK:
			depth--
		}
		if depth == 0 && stmtStart {
			switch t.t {
			case token.IMPORT:
				if at(i+1).t == token.LPAREN {
					for j := i + 2; j < len(toks) && toks[j].t != token.RPAREN; j++ {
						if toks[j].t == token.STRING {
							spec := importSpec{Path: strings.Trim(toks[j].lit, "\"`")}
							if toks[j-1].t == token.IDENT || toks[j-1].t == token.PERIOD {
								spec.Name = toks[j-1].lit
							}
							out.imports = append(out.imports, spec)
						}
					}
				} else if at(i+1).t == token.STRING {
					out.imports = append(out.imports, importSpec{Path: strings.Trim(at(i+1).lit, "\"`")})
				} else if at(i+1).t == token.IDENT && at(i+2).t == token.STRING {
					out.imports = append(out.imports, importSpec{Name: at(i + 1).lit, Path: strings.Trim(at(i+2).lit, "\"`")})
				}
			case token.FUNC:
				if at(i+1).t == token.IDENT {
					out.names = append(out.names, at(i+1).lit)
				}
			case token.TYPE, token.VAR, token.CONST:
				if at(i+1).t == token.IDENT {
					out.names = append(out.names, at(i+1).lit)
				} else if at(i+1).t == token.LPAREN {
					// A grouped declaration: the first identifier of each line.
					for j := i + 2; j < len(toks) && toks[j].t != token.RPAREN; j++ {
						if toks[j].t == token.IDENT && (toks[j-1].t == token.LPAREN || toks[j-1].t == token.SEMICOLON || toks[j-1].t == token.COMMA) {
							out.names = append(out.names, toks[j].lit)
						}
					}
				}
			case token.IDENT:
				// a, b := ...
				j := i
				var names []string
				for at(j).t == token.IDENT {
					names = append(names, at(j).lit)
					if at(j+1).t != token.COMMA {
						break
					}
					j += 2
				}
				if at(j+1).t == token.DEFINE {
					out.names = append(out.names, names...)
				}
			}
		}
		stmtStart = depth == 0 && (t.t == token.SEMICOLON || t.t == token.RBRACE)
	}
	return out
}

// cellPackagePath returns the import path that name stands for in the session or, not yet
// executed, in code.
func (s *Session) cellPackagePath(code, name string) string {
	if p := s.packagePath(name); p != "" {
		return p
	}
	for _, im := range scanCell(code).imports {
		if im.localName() == name {
			return im.Path
		}
	}
	return ""
}

// stdDoc is the documentation of one standard-library package, parsed once from GOROOT.
type stdDoc struct {
	once sync.Once
	fset *token.FileSet
	pkg  *doc.Package
}

var (
	stdDocsMu sync.Mutex
	stdDocs   = map[string]*stdDoc{}
)

// stdPackageDoc returns the documentation of a standard-library package from GOROOT's
// sources, or nil when they are not installed.
func stdPackageDoc(path string) (*doc.Package, *token.FileSet) {
	stdDocsMu.Lock()
	d, ok := stdDocs[path]
	if !ok {
		d = &stdDoc{}
		stdDocs[path] = d
	}
	stdDocsMu.Unlock()
	d.once.Do(func() {
		dir := filepath.Join(build.Default.GOROOT, "src", filepath.FromSlash(path))
		fset := token.NewFileSet()
		pkgs, _, err := gosrc.ParseDir(fset, dir)
		if err != nil && len(pkgs) == 0 {
			return
		}
		want := pathBase(path)
		if len(want) > 1 && want[0] == 'v' && strings.Trim(want[1:], "0123456789") == "" {
			want = pathBase(strings.TrimSuffix(path, "/"+want))
		}
		if files := pkgs[want]; len(files) > 0 {
			if p, err := doc.NewFromFiles(fset, files, path, doc.PreserveAST); err == nil {
				d.fset, d.pkg = fset, p
			}
		}
	})
	return d.pkg, d.fset
}

// stdSymbolDoc describes a standard-library package member from its source: the
// declaration with its parameter names and its documentation; detail 1 adds a function's
// source, or a type's methods and constructors.
func stdSymbolDoc(path, name string, detail int) string {
	if _, err := os.Stat(filepath.Join(build.Default.GOROOT, "src", filepath.FromSlash(path))); err != nil {
		return ""
	}
	pkg, fset := stdPackageDoc(path)
	if pkg == nil {
		return ""
	}
	node := func(n any) string {
		var b bytes.Buffer
		printer.Fprint(&b, fset, n)
		return b.String()
	}
	sig := func(f *doc.Func) string {
		decl := *f.Decl
		decl.Body, decl.Doc = nil, nil
		return node(&decl)
	}
	text := func(decl, docText string, more []string) string {
		out := decl + "\n\n" + strings.TrimSpace(docText)
		if detail > 0 && len(more) > 0 {
			out += "\n\n" + strings.Join(more, "\n")
		}
		return out
	}
	funcSource := func(f *doc.Func) []string {
		if f.Decl.Body == nil {
			return nil
		}
		return []string{"source:", node(f.Decl)}
	}
	for _, f := range pkg.Funcs {
		if f.Name == name {
			return text(sig(f), f.Doc, funcSource(f))
		}
	}
	for _, t := range pkg.Types {
		if t.Name == name {
			var more []string
			for _, f := range t.Funcs {
				more = append(more, sig(f))
			}
			for _, m := range t.Methods {
				more = append(more, sig(m))
			}
			return text(node(t.Decl), t.Doc, more)
		}
		for _, f := range t.Funcs {
			if f.Name == name {
				return text(sig(f), f.Doc, funcSource(f))
			}
		}
		for _, vs := range append(append([]*doc.Value{}, t.Consts...), t.Vars...) {
			if valueNames(vs, name) {
				return text(node(vs.Decl), vs.Doc, nil)
			}
		}
	}
	for _, vs := range append(append([]*doc.Value{}, pkg.Consts...), pkg.Vars...) {
		if valueNames(vs, name) {
			return text(node(vs.Decl), vs.Doc, nil)
		}
	}
	return ""
}

func valueNames(v *doc.Value, name string) bool {
	for _, n := range v.Names {
		if n == name {
			return true
		}
	}
	return false
}
