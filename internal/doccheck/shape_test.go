package doccheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// maxFileLines bounds a hand-written Go file: a file past it holds several concepts.
const maxFileLines = 800

// copiedTrees are directories of code copied from elsewhere unmodified, which keep their
// upstream shape: Go's own syntax package (the gc parser's error messages).
var copiedTrees = []string{"interp/internal/syntax/"}

// projectGoFiles returns the repository's non-test Go files (relative paths) outside
// third_party, except generated ones.
func projectGoFiles(t *testing.T) map[string][]byte {
	t.Helper()
	root := repoRoot(t)
	out := map[string][]byte{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "third_party" || strings.HasPrefix(d.Name(), ".") && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if generated.Match(src) {
			return nil
		}
		out[rel] = src
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var generated = regexp.MustCompile(`(?m)^// Code generated .* DO NOT EDIT\.$`)

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// TestFilesOfOneConcept: no hand-written, non-test Go file over maxFileLines lines.
func TestFilesOfOneConcept(t *testing.T) {
	for rel, src := range projectGoFiles(t) {
		if copied(rel) {
			continue
		}
		if n := strings.Count(string(src), "\n"); n > maxFileLines {
			t.Errorf("%s has %d lines (at most %d): split it along its concepts", rel, n, maxFileLines)
		}
	}
}

func copied(rel string) bool {
	for _, dir := range copiedTrees {
		if strings.HasPrefix(rel, dir) {
			return true
		}
	}
	return false
}

// A comment narrates a measurement when it carries a date or a figure beside a pointer to
// bench/RESULTS.md; the figures live in RESULTS.md, which a comment may name.
var (
	commentDate   = regexp.MustCompile(`\b20[0-9]{2}-[01][0-9]-[0-3][0-9]\b`)
	commentFigure = regexp.MustCompile(`\d(\.\d+)?\s*(%|x\b|×|ns\b|µs\b|us\b|ms\b|GB/s|MB/s|Gflop|samples/s)`)
)

// TestCommentsSayWhatAndWhy: no comment in non-test code carries a date, and none that
// points to bench/RESULTS.md quotes a figure from it.
func TestCommentsSayWhatAndWhy(t *testing.T) {
	for rel, src := range projectGoFiles(t) {
		if copied(rel) {
			continue
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, rel, src, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, cg := range f.Comments {
			text := cg.Text()
			line := fset.Position(cg.Pos()).Line
			if m := commentDate.FindString(text); m != "" {
				t.Errorf("%s:%d: a comment carries the date %s: measurements and their dates belong in bench/RESULTS.md", rel, line, m)
			}
			if strings.Contains(text, "RESULTS.md") {
				if m := commentFigure.FindString(text); m != "" {
					t.Errorf("%s:%d: a comment quotes %q beside bench/RESULTS.md: name the section, leave the figure there", rel, line, m)
				}
			}
		}
	}
}

// TestKerasAsksTheStoreAndTrainer: in keras, only the variable store, the trainers and the
// files of the parameter-server and mesh paths ask what a strategy can do (a type assertion
// to one of distribute's interfaces) or name the parameter-server store or the mesh engine;
// the rest of the model asks the store (store.go) or is handed what trainerFor chose.
func TestKerasAsksTheStoreAndTrainer(t *testing.T) {
	allowed := map[string]bool{
		"store.go": true, "trainer.go": true, "cellwrap.go": true,
		"ps_fit.go": true, "ps_remote.go": true, "mesh_hook.go": true,
	}
	for rel, src := range projectGoFiles(t) {
		dir, file := filepath.Split(rel)
		if dir != "distlib/keras/" || allowed[file] {
			continue
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, rel, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		report := func(n ast.Node, what string) {
			t.Errorf("%s:%d: %s outside the store and trainer files: ask m.store, or take what trainerFor chose", rel, fset.Position(n.Pos()).Line, what)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.TypeAssertExpr:
				if sel, ok := x.Type.(*ast.SelectorExpr); ok {
					if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "distribute" {
						report(n, "a capability check (.(distribute."+sel.Sel.Name+"))")
					}
				}
			case *ast.SelectorExpr:
				switch x.Sel.Name {
				case "Coordinated", "engine":
					report(n, x.Sel.Name)
				}
			case *ast.Ident:
				switch x.Name {
				case "psModel", "meshStore":
					report(n, x.Name)
				}
			}
			return true
		})
	}
}
