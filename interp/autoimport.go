package interp

import (
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"sort"
	"strings"

	"github.com/traefik/yaegi/stdlib"

	"godist/interp/symbols"
)

// autoImport adds the imports a cell uses without writing them, the way goimports does:
// for each name used as `name.Member` that nothing in the session or the cell defines, the
// standard-library or distlib package of that name having every member used is imported.
// It is silent unless the name is ambiguous, which is an error listing the imports to
// choose from.
func (s *Session) autoImport(ctx context.Context, chunks []*chunk, code string) error {
	uses, line := s.unresolvedSelectors(chunks)
	if len(uses) == 0 {
		return nil
	}
	names := make([]string, 0, len(uses))
	for n := range uses {
		names = append(names, n)
	}
	sort.Strings(names)
	var specs []importSpec
	for _, name := range names {
		cands := importCandidates(name, uses[name])
		switch len(cands) {
		case 0:
			continue // the undefined name is reported when the cell compiles
		case 1:
			spec := importSpec{Path: cands[0]}
			if majorBase(spec.Path) != spec.Path {
				spec.Name = name // import rand "math/rand/v2"
			}
			specs = append(specs, spec)
		default:
			quoted := make([]string, len(cands))
			for i, c := range cands {
				quoted[i] = fmt.Sprintf("import %q", c)
			}
			return newEvalError("ImportError", fmt.Sprintf("cell line %d: %s is not imported and could be any of: %s; add the import you mean",
				line[name], name, strings.Join(quoted, ", ")))
		}
	}
	if len(specs) == 0 {
		return nil
	}
	return s.runImports(ctx, []*chunk{{Kind: chunkImport, Imports: specs, Line: 1, Col: 1}}, code)
}

// unresolvedSelectors returns the names used as `name.Member` that neither the session
// nor the cell defines, with the members used and the first cell line of each.
func (s *Session) unresolvedSelectors(chunks []*chunk) (map[string]map[string]bool, map[string]int) {
	defined := map[string]bool{}
	for _, c := range chunks {
		for _, n := range c.Names {
			defined[strings.SplitN(n, ".", 2)[0]] = true
		}
		for _, im := range c.Imports {
			defined[im.localName()] = true
		}
	}
	var files []*ast.File
	fset := token.NewFileSet()
	for _, c := range chunks {
		if c.Kind == chunkImport {
			continue
		}
		prefix := "package p;"
		if c.Kind == chunkStmt {
			prefix = "package p;func _(){"
		}
		f, err := parser.ParseFile(fset, "cell", c.padded(prefix), 0)
		if err != nil {
			return nil, nil // the compile error is reported when the cell runs
		}
		files = append(files, f)
		if c.Kind == chunkStmt {
			// Top-level := and var of a statement chunk define the cell's globals.
			for _, st := range f.Decls[0].(*ast.FuncDecl).Body.List {
				switch st := st.(type) {
				case *ast.AssignStmt:
					if st.Tok == token.DEFINE {
						for _, l := range st.Lhs {
							if id, ok := l.(*ast.Ident); ok {
								defined[id.Name] = true
							}
						}
					}
				case *ast.DeclStmt:
					if g, ok := st.Decl.(*ast.GenDecl); ok {
						for _, sp := range g.Specs {
							switch sp := sp.(type) {
							case *ast.ValueSpec:
								for _, n := range sp.Names {
									defined[n.Name] = true
								}
							case *ast.TypeSpec:
								defined[sp.Name.Name] = true
							}
						}
					}
				}
			}
		}
	}
	uses := map[string]map[string]bool{}
	line := map[string]int{}
	var known map[string]bool
	for _, f := range files {
		unresolved := map[*ast.Ident]bool{}
		for _, id := range f.Unresolved {
			unresolved[id] = true
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			id, ok := sel.X.(*ast.Ident)
			if !ok || !unresolved[id] || defined[id.Name] {
				return true
			}
			if known == nil {
				known = map[string]bool{}
				for _, n := range s.names() {
					known[n] = true
				}
			}
			if known[id.Name] {
				return true
			}
			if uses[id.Name] == nil {
				uses[id.Name] = map[string]bool{}
				line[id.Name] = fset.Position(id.Pos()).Line - 1
			}
			uses[id.Name][sel.Sel.Name] = true
			return true
		})
	}
	return uses, line
}

// importCandidates returns the import paths of the standard-library and distlib packages
// named name that have every member in members. A package and its newer major version
// (math/rand, math/rand/v2) count once, as the older one, as goimports chooses.
func importCandidates(name string, members map[string]bool) []string {
	var out []string
	for _, table := range []map[string]map[string]reflect.Value{stdlib.Symbols, symbols.Symbols} {
		for key, syms := range table {
			i := strings.LastIndex(key, "/")
			if i < 0 || key[i+1:] != name {
				continue
			}
			path := key[:i]
			if strings.Contains(path, "internal") || strings.Contains(path, "vendor") {
				continue
			}
			all := true
			for m := range members {
				if _, ok := syms[m]; !ok {
					all = false
					break
				}
			}
			if all {
				out = append(out, path)
			}
		}
	}
	sort.Strings(out)
	var kept []string
	for _, p := range out {
		if base := majorBase(p); base != p && containsString(out, base) {
			continue
		}
		kept = append(kept, p)
	}
	return kept
}

// majorBase returns path without a trailing major version element ("/v2").
func majorBase(path string) string {
	last := pathBase(path)
	if len(last) > 1 && last[0] == 'v' && strings.Trim(last[1:], "0123456789") == "" {
		return strings.TrimSuffix(path, "/"+last)
	}
	return path
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
