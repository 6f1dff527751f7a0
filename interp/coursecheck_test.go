package interp

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckerAcceptsCourseNotebooks type-checks every Go cell of the course notebooks in
// order, without running them, the way Execute checks a cell first: the check must accept
// them all (a refusal would stop a valid cell). Variables the cells define at top level
// stand in as declarations `var x = value` for the later cells.
func TestCheckerAcceptsCourseNotebooks(t *testing.T) {
	paths, err := filepath.Glob("../notebooks/*.ipynb")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no notebooks: %v", err)
	}
	for _, path := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".ipynb"), func(t *testing.T) {
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var nb struct {
				Cells []struct {
					Type   string          `json:"cell_type"`
					Source json.RawMessage `json:"source"`
				} `json:"cells"`
			}
			if err := json.Unmarshal(raw, &nb); err != nil {
				t.Fatal(err)
			}
			s := newSession(t, Options{})
			for i, c := range nb.Cells {
				if c.Type != "code" {
					continue
				}
				var lines []string
				if err := json.Unmarshal(c.Source, &lines); err != nil {
					var one string
					_ = json.Unmarshal(c.Source, &one)
					lines = []string{one}
				}
				code := strings.Join(lines, "")
				first := strings.TrimSpace(strings.SplitN(code, "\n", 2)[0])
				if strings.HasPrefix(first, "%%") && !strings.HasPrefix(first, "%%distributed") && !strings.HasPrefix(first, "%%time") {
					continue // a cell that is not Go (%%writefile, %%bash, ...)
				}
				code = blankMagics(code)
				chunks, err := splitCell(code)
				if err != nil || len(chunks) == 0 {
					continue
				}
				if err := s.checkCell(chunks, code); err != nil {
					t.Errorf("cell %d refused: %v\n%s", i, err, code)
				}
				s.simulateCell(chunks)
			}
		})
	}
}

// simulateCell records what a cell would add to the session, for checking later cells
// without running it: imports, declarations, and top-level definitions as var declarations.
func (s *Session) simulateCell(chunks []*chunk) {
	s.mu.Lock()
	defer s.mu.Unlock()
	replace := func(e *declEntry) {
		keep := s.decls[:0:0]
		for _, d := range s.decls {
			same := false
			for _, k := range d.keys() {
				for _, k2 := range e.keys() {
					same = same || k == k2 || d.kind != "method" && e.kind != "method" && strings.SplitN(k, " ", 2)[1] == strings.SplitN(k2, " ", 2)[1]
				}
			}
			if !same {
				keep = append(keep, d)
			}
		}
		s.decls = append(keep, e)
	}
	for _, c := range chunks {
		switch c.Kind {
		case chunkImport:
			for _, im := range c.Imports {
				found := false
				for i, have := range s.imports {
					if have.localName() == im.localName() {
						s.imports[i], found = im, true
					}
				}
				if !found {
					s.imports = append(s.imports, im)
				}
			}
		case chunkDecl:
			replace(&declEntry{kind: c.DeclKind, names: c.Names, text: c.Text})
		case chunkStmt:
			l := liftable(c)
			if l == nil || selfReferent(l.stmt, definedNames(c)) {
				continue
			}
			// One declaration per name (`var a, _ = f()`), so that a later definition of
			// one of them replaces only its own.
			rhs := c.Text[l.off(l.stmt.Rhs[0].Pos()):]
			names := lhsTexts(l.stmt)
			for i, n := range names {
				if n == "_" {
					continue
				}
				lhs := make([]string, len(names))
				for j := range lhs {
					lhs[j] = "_"
				}
				lhs[i] = n
				replace(&declEntry{kind: "var", names: []string{n}, text: "var " + strings.Join(lhs, ", ") + " = " + rhs})
			}
		}
	}
}
