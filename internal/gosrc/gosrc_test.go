package gosrc

import (
	"go/token"
	"os"
	"path/filepath"
	"testing"
)

// TestParseDir: the non-test files by package, the names sorted, a broken file left out
// with its error.
func TestParseDir(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"a.go":      "// Package p is p.\npackage p\n\nfunc A() {}\n",
		"b.go":      "package p\n\nfunc B() {}\n",
		"a_test.go": "package p\n\nfunc T() {}\n",
		"main.go":   "package main\n\nfunc main() {}\n",
		"bad.go":    "package p\n\nfunc {\n",
		"notes.txt": "not go",
	}
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pkgs, names, err := ParseDir(token.NewFileSet(), dir)
	if err == nil {
		t.Error("no error for bad.go")
	}
	if len(names) != 2 || names[0] != "main" || names[1] != "p" {
		t.Errorf("names %v, want [main p]", names)
	}
	if len(pkgs["p"]) != 2 || len(pkgs["main"]) != 1 {
		t.Errorf("files: p %d, main %d; want 2 and 1", len(pkgs["p"]), len(pkgs["main"]))
	}
	if _, _, err := ParseDir(token.NewFileSet(), filepath.Join(dir, "missing")); err == nil {
		t.Error("no error for a missing directory")
	}
}
