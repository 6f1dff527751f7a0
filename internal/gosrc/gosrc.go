// Package gosrc parses a directory of Go source with its comments, for the tools that read
// documentation from it (interp's inspection of the standard library, the symbol
// generator's doc tables): what go/parser.ParseDir did before it was deprecated.
package gosrc

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// ParseDir parses the non-test Go files of dir with their comments and returns them by
// package name, with the names sorted. A file that does not parse is left out; the first
// such error is returned beside what did parse.
func ParseDir(fset *token.FileSet, dir string) (pkgs map[string][]*ast.File, names []string, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	pkgs = map[string][]*ast.File{}
	var first error
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ParseComments)
		if err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		if pkgs[f.Name.Name] == nil {
			names = append(names, f.Name.Name)
		}
		pkgs[f.Name.Name] = append(pkgs[f.Name.Name], f)
	}
	sort.Strings(names)
	return pkgs, names, first
}
