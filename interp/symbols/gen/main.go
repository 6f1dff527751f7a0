// Command gen regenerates package symbols: the yaegi wrappers of every distlib package that
// compiles (one file per package, distlib_<name>.go) and docs.go, the documentation of their
// exported names. It runs from interp/symbols through `go generate`.
//
// A package that does not compile is reported and skipped, and its stale wrapper file is
// removed, so that the interpreter still builds while a package is being written.
package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/doc"
	"go/format"
	"go/printer"
	"go/token"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/traefik/yaegi/extract"

	"godist/internal/gosrc"
)

// packages lists the distlib packages exposed to cells, relative to godist/distlib.
// collective and transport are plumbing for distribute and cluster, not for cells.
var packages = []string{
	"display", "device", "tensor", "data", "datasets",
	"cluster", "distribute", "optim", "keras", "keras/layers", "keras/callbacks", "mesh", "widgets",
}

func main() {
	log.SetFlags(0)
	log.SetPrefix("symbols/gen: ")
	root, err := moduleRoot()
	if err != nil {
		log.Fatal(err)
	}
	docs := map[string]string{}
	for _, p := range packages {
		importPath := "godist/distlib/" + p
		file := "distlib_" + strings.ReplaceAll(p, "/", "_") + ".go"
		dir := filepath.Join(root, "distlib", filepath.FromSlash(p))
		if !hasGoFiles(dir) {
			_ = os.Remove(file)
			continue
		}
		if err := extractPackage(importPath, file); err != nil {
			log.Printf("skipping %s: %v", importPath, err)
			_ = os.Remove(file)
			continue
		}
		if err := collectDocs(importPath, dir, docs); err != nil {
			log.Printf("docs of %s: %v", importPath, err)
		}
		log.Printf("generated %s", file)
	}
	if err := writeDocs("docs.go", docs); err != nil {
		log.Fatal(err)
	}
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("not inside a module")
	}
	return filepath.Dir(mod), nil
}

func hasGoFiles(dir string) bool {
	m, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	for _, f := range m {
		if !strings.HasSuffix(f, "_test.go") {
			return true
		}
	}
	return false
}

func extractPackage(importPath, file string) error {
	// Type-check first with the go command: a clearer error than the source importer's.
	if out, err := exec.Command("go", "build", importPath).CombinedOutput(); err != nil {
		return fmt.Errorf("does not build: %s", firstLine(string(out)))
	}
	ext := extract.Extractor{Dest: "symbols"}
	var buf bytes.Buffer
	if _, err := ext.Extract(importPath, importPath, &buf); err != nil {
		return err
	}
	src, err := format.Source(buf.Bytes())
	if err != nil {
		return fmt.Errorf("format: %w", err)
	}
	return os.WriteFile(file, src, 0o644)
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	lines := strings.Split(s, "\n")
	for _, l := range lines {
		if !strings.HasPrefix(l, "#") {
			return l
		}
	}
	return s
}

// collectDocs adds "importpath" and "importpath.Name" (and "importpath.Type.Method")
// entries: the declaration's signature followed by its doc comment.
func collectDocs(importPath, dir string, docs map[string]string) error {
	fset := token.NewFileSet()
	pkgs, names, err := gosrc.ParseDir(fset, dir)
	if err != nil {
		return err
	}
	for _, pkgName := range names {
		files := pkgs[pkgName]
		d, err := doc.NewFromFiles(fset, files, importPath)
		if err != nil {
			return err
		}
		docs[importPath] = "package " + d.Name + " // import \"" + importPath + "\"\n\n" + d.Doc
		add := func(name string, decl ast.Node, text string) {
			docs[importPath+"."+name] = signature(fset, decl) + "\n\n" + text
		}
		for _, c := range d.Consts {
			for _, n := range c.Names {
				add(n, c.Decl, c.Doc)
			}
		}
		for _, v := range d.Vars {
			for _, n := range v.Names {
				add(n, v.Decl, v.Doc)
			}
		}
		for _, f := range d.Funcs {
			add(f.Name, f.Decl, f.Doc)
		}
		for _, t := range d.Types {
			add(t.Name, t.Decl, t.Doc)
			for _, f := range t.Funcs {
				add(f.Name, f.Decl, f.Doc)
			}
			for _, m := range t.Methods {
				add(t.Name+"."+m.Name, m.Decl, m.Doc)
			}
			for _, c := range t.Consts {
				for _, n := range c.Names {
					add(n, c.Decl, c.Doc)
				}
			}
			for _, v := range t.Vars {
				for _, n := range v.Names {
					add(n, v.Decl, v.Doc)
				}
			}
		}
	}
	return nil
}

// signature prints a declaration without function bodies.
func signature(fset *token.FileSet, decl ast.Node) string {
	if fd, ok := decl.(*ast.FuncDecl); ok {
		c := *fd
		c.Body = nil
		c.Doc = nil
		decl = &c
	}
	if gd, ok := decl.(*ast.GenDecl); ok {
		c := *gd
		c.Doc = nil
		decl = &c
	}
	var buf bytes.Buffer
	_ = (&printer.Config{Mode: printer.UseSpaces | printer.TabIndent, Tabwidth: 4}).Fprint(&buf, fset, decl)
	return buf.String()
}

func writeDocs(file string, docs map[string]string) error {
	keys := make([]string, 0, len(docs))
	for k := range docs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var buf bytes.Buffer
	buf.WriteString("// Code generated by interp/symbols/gen. DO NOT EDIT.\n\npackage symbols\n\n")
	buf.WriteString("// Docs maps qualified names (\"godist/distlib/display.HTML\", \"godist/distlib/tensor.Tensor.Shape\")\n")
	buf.WriteString("// and package paths to their signature and documentation.\n")
	buf.WriteString("var Docs = map[string]string{\n")
	for _, k := range keys {
		fmt.Fprintf(&buf, "\t%q: %q,\n", k, docs[k])
	}
	buf.WriteString("}\n")
	src, err := format.Source(buf.Bytes())
	if err != nil {
		return fmt.Errorf("format docs: %w", err)
	}
	return os.WriteFile(file, src, 0o644)
}
