package interp

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/scanner"
	"go/token"
	"strings"
)

// chunkKind classifies one top-level piece of a cell.
type chunkKind int

const (
	chunkImport chunkKind = iota // import declaration
	chunkDecl                    // type, func, method, const or var declaration
	chunkStmt                    // statement (including a final expression)
)

func (k chunkKind) String() string {
	switch k {
	case chunkImport:
		return "import"
	case chunkDecl:
		return "declaration"
	default:
		return "statement"
	}
}

// importSpec is one imported package: its local name ("" for the default) and path.
type importSpec struct {
	Name, Path string
}

// source returns the spec as Go source.
func (s importSpec) source() string {
	if s.Name == "" {
		return fmt.Sprintf("import %q", s.Path)
	}
	return fmt.Sprintf("import %s %q", s.Name, s.Path)
}

// localName returns the name the package is known by in the cell.
func (s importSpec) localName() string {
	if s.Name != "" {
		return s.Name
	}
	return pathBase(majorBase(s.Path)) // "math/rand/v2" is package rand
}

func pathBase(p string) string {
	if i := strings.LastIndex(p, "/"); i >= 0 {
		return p[i+1:]
	}
	return p
}

// chunk is one top-level statement or declaration of a cell.
type chunk struct {
	Kind chunkKind
	Text string // source text, from the first token to the end of the last one
	Off  int    // byte offset of Text in the cell
	Line int    // 1-based line of Text's start in the cell
	Col  int    // 1-based byte column of Text's start in the cell

	// Declarations: DeclKind is "type", "func", "method", "const" or "var"; Names are the
	// declared names (methods as "Recv.Method").
	DeclKind string
	Names    []string
	// Imports of an import chunk.
	Imports []importSpec
	// Expr reports whether a statement chunk is a single expression statement.
	Expr bool
}

// key returns the registry keys of a declaration chunk: kind-qualified names, so that a
// function and a variable of the same name are told apart.
func (c *chunk) keys() []string {
	ks := make([]string, len(c.Names))
	for i, n := range c.Names {
		ks[i] = c.DeclKind + " " + n
	}
	return ks
}

// splitCell cuts Go source into top-level chunks and classifies each: imports,
// declarations and statements, in order. The chunks keep their positions in the cell so
// that errors can name the cell's lines.
func splitCell(src string) ([]*chunk, error) {
	fset := token.NewFileSet()
	file := fset.AddFile("cell", -1, len(src))
	var errs scanner.ErrorList
	var sc scanner.Scanner
	sc.Init(file, []byte(src), func(pos token.Position, msg string) { errs.Add(pos, msg) }, 0)

	type tok struct {
		pos token.Pos
		tok token.Token
		lit string
	}
	var chunks []*chunk
	var cur []tok
	depth := 0
	// header: the chunk is a for/if/switch/select whose body has not closed yet; the
	// semicolons of its header ("for i := 0; i < n; i++ {") do not end it.
	header := false
	flush := func(endOff int) error {
		if len(cur) == 0 {
			return nil
		}
		start := file.Offset(cur[0].pos)
		c := &chunk{Text: strings.TrimRight(src[start:endOff], " \t\r\n;"), Off: start}
		p := file.Position(cur[0].pos)
		c.Line, c.Col = p.Line, p.Column
		c.Kind = classify(cur[0].tok, func(i int) (token.Token, string) {
			if i < len(cur) {
				return cur[i].tok, cur[i].lit
			}
			return token.EOF, ""
		}, len(cur))
		if err := c.analyze(); err != nil {
			return &chunkError{c: c, err: err}
		}
		chunks = append(chunks, c)
		cur = cur[:0]
		return nil
	}
	for {
		pos, t, lit := sc.Scan()
		if t == token.EOF {
			if err := flush(len(src)); err != nil {
				return nil, err
			}
			break
		}
		isHeader := t == token.FOR || t == token.IF || t == token.SWITCH || t == token.SELECT
		if len(cur) == 0 || len(cur) == 2 && cur[0].tok == token.IDENT && cur[1].tok == token.COLON {
			header = isHeader // a labeled statement's header too ("outer: for ...")
		}
		switch t {
		case token.LPAREN, token.LBRACE, token.LBRACK:
			depth++
		case token.RPAREN, token.RBRACE, token.RBRACK:
			depth--
			if t == token.RBRACE && depth == 0 {
				header = false
			}
		}
		if t == token.SEMICOLON && depth <= 0 && !(header && lit == ";") {
			if err := flush(file.Offset(pos)); err != nil {
				return nil, err
			}
			continue
		}
		cur = append(cur, tok{pos, t, lit})
	}
	if len(errs) > 0 {
		errs.Sort()
		return nil, errs
	}
	if depth != 0 {
		return nil, fmt.Errorf("cell: unbalanced brackets")
	}
	return chunks, nil
}

// classify decides the kind of a chunk from its first tokens. A `func` followed by a name
// or by a receiver and a name is a declaration; `func(...) {...}()` is a statement.
func classify(first token.Token, at func(int) (token.Token, string), n int) chunkKind {
	switch first {
	case token.IMPORT:
		return chunkImport
	case token.TYPE, token.CONST, token.VAR:
		return chunkDecl
	case token.FUNC:
		t1, _ := at(1)
		if t1 == token.IDENT {
			return chunkDecl
		}
		if t1 != token.LPAREN {
			return chunkStmt
		}
		depth := 0
		for i := 1; i < n; i++ {
			t, _ := at(i)
			switch t {
			case token.LPAREN:
				depth++
			case token.RPAREN:
				depth--
				if depth == 0 {
					a, _ := at(i + 1)
					b, _ := at(i + 2)
					if a == token.IDENT && (b == token.LPAREN || b == token.LBRACK) {
						return chunkDecl
					}
					return chunkStmt
				}
			}
		}
		return chunkStmt
	}
	return chunkStmt
}

// analyze parses a chunk on its own to learn its declared names, imports or whether it is
// an expression. Syntax errors are reported with the cell's line numbers.
func (c *chunk) analyze() error {
	fset := token.NewFileSet()
	switch c.Kind {
	case chunkImport, chunkDecl:
		f, err := parser.ParseFile(fset, "cell", c.padded("package p;"), parser.SkipObjectResolution)
		if err != nil {
			return shiftLines(err, -1)
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.ImportSpec:
						spec := importSpec{Path: strings.Trim(s.Path.Value, "\"`")}
						if s.Name != nil {
							spec.Name = s.Name.Name
						}
						c.Imports = append(c.Imports, spec)
					case *ast.TypeSpec:
						c.DeclKind = "type"
						c.Names = append(c.Names, s.Name.Name)
					case *ast.ValueSpec:
						c.DeclKind = d.Tok.String()
						for _, n := range s.Names {
							c.Names = append(c.Names, n.Name)
						}
					}
				}
			case *ast.FuncDecl:
				if d.Recv != nil && len(d.Recv.List) > 0 {
					c.DeclKind = "method"
					c.Names = append(c.Names, recvName(d.Recv.List[0].Type)+"."+d.Name.Name)
				} else {
					c.DeclKind = "func"
					c.Names = append(c.Names, d.Name.Name)
				}
			}
		}
	case chunkStmt:
		f, err := parser.ParseFile(fset, "cell", c.padded("package p;func _(){"), parser.SkipObjectResolution)
		if err != nil {
			return shiftLines(err, -1)
		}
		body := f.Decls[0].(*ast.FuncDecl).Body.List
		if len(body) == 1 {
			_, c.Expr = body[0].(*ast.ExprStmt)
		}
	}
	return nil
}

// padded returns the chunk's text placed at its cell position after a one-line prefix:
// line L of the cell is line L+1 of the result, columns unchanged. Statement wrappers get
// their closing brace.
func (c *chunk) padded(prefix string) string {
	var b strings.Builder
	b.WriteString(prefix)
	b.WriteString(strings.Repeat("\n", c.Line))
	b.WriteString(strings.Repeat(" ", c.Col-1))
	b.WriteString(c.Text)
	if strings.HasSuffix(prefix, "{") {
		b.WriteString("\n}")
	}
	return b.String()
}

// recvName returns the base type name of a method receiver: T for T, *T, T[K] and *T[K].
func recvName(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.ParenExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return "?"
		}
	}
}

// shiftLines moves the positions of a parser error list by delta lines.
// chunkError is a parse error of one chunk, with the chunk (for gc's message).
type chunkError struct {
	c   *chunk
	err error
}

func (e *chunkError) Error() string { return e.err.Error() }
func (e *chunkError) Unwrap() error { return e.err }

func shiftLines(err error, delta int) error {
	list, ok := err.(scanner.ErrorList)
	if !ok {
		return err
	}
	out := make(scanner.ErrorList, len(list))
	for i, e := range list {
		c := *e
		c.Pos.Line += delta
		out[i] = &c
	}
	return out
}
