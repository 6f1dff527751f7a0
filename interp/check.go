package interp

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"sort"
	"strings"
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
