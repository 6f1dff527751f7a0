package doccheck

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// What the documents may name without the repository holding it, each with its reason. Every
// entry is itself checked: the name must still appear in the place the reason gives, so the
// list cannot keep a name the code has dropped.
var (
	// testKnobs are environment variables only tests read (a document says which test).
	testKnobs = map[string]string{
		"GODIST_NOTEBOOK_OUT": "notebooks' tests keep the executed copies there (notebooks/notebooks_test.go)",
		"GODIST_SCREENSHOTS":  "cmd/godist's browser test saves its screenshots there",
	}
	// notEnv are upper-case names with an underscore that documents name but that are not
	// environment variables; each must still appear in the non-test Go code.
	notEnv = map[string]string{
		"PF_EXITING": "a Linux task flag in /proc/PID/stat, which cluster's launcher tests (distlib/cluster/ended_linux.go)",
	}
	// outputs are paths that builds write (ignored by git, absent from a fresh checkout):
	// the file named must still write them, that is, name them.
	outputs = map[string]string{
		"bin/":    "Makefile",
		"out/":    "Makefile",
		"gpubin/": "gpu/devicecheck.sh",
	}
	// skipDirs are not the project's documents or code: a fork of yaegi and the Go parser
	// it copies (their docs are upstream's), front-end packages, build outputs, and
	// bench/RESULTS.md (below), a dated log of runs that names the code as it was then.
	skipDirs  = []string{".git", "third_party", "node_modules", "bin", "out", "gpubin", "bench/out", "interp/internal/syntax"}
	skipFiles = []string{"bench/RESULTS.md"}
)

// Build tags that exist without a //go:build line of the project's own: the toolchain's.
var toolchainTags = map[string]bool{
	"linux": true, "darwin": true, "windows": true, "freebsd": true, "unix": true, "js": true, "wasip1": true,
	"amd64": true, "arm64": true, "386": true, "arm": true, "wasm": true, "riscv64": true,
	"cgo": true, "gc": true, "gccgo": true, "ignore": true,
}

// facts is what the repository holds, gathered once.
type facts struct {
	root        string
	tags        map[string]bool // identifiers in the project's //go:build lines
	makefile    string
	makeTargets map[string]bool
	literals    map[string]bool // string literals of non-test Go code
	testLits    map[string]bool // string literals of test Go code
	goText      strings.Builder // every non-test Go file, comments included
	subcommands map[string]bool // cmd/godist's register("name", ...)
	testFuncs   []string        // Test*, Benchmark*, Example*, Fuzz* functions
	basenames   map[string]bool // file names anywhere in the project
	modules     []string        // go.mod's module paths
	docs        []doc
	pkgDirs     map[string][]string        // package name -> directories (main excluded)
	decls       map[string]map[string]bool // directory -> its names: X, Type.Method, Type.Field
	embeds      map[string]map[string]bool // directory -> types that embed another
	checked     map[string]int             // names checked, by kind (for -v)
}

// doc is one document: a Markdown file, or a package's doc comment in a Go file.
type doc struct {
	path     string // relative to root
	dir      string // the directory its relative paths start from
	text     string
	line     int  // the line of text's first line in the file
	markdown bool // Markdown; else a Go comment
}

var (
	buildLineRe = regexp.MustCompile(`(?m)^//go:build (.*)$`)
	identRe     = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_.]*`)
	testFuncRe  = regexp.MustCompile(`(?m)^func ((?:Test|Benchmark|Example|Fuzz)\w*)\(`)
	registerRe  = regexp.MustCompile(`register\("([a-z][a-z0-9-]*)"`)
	targetRe    = regexp.MustCompile(`(?m)^([A-Za-z0-9_.-]+)[ \t]*:([^=]|$)`)
)

func gather(t *testing.T) *facts {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root := wd
	for {
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(root)
		if parent == root {
			t.Fatalf("no go.mod above %s", wd)
		}
		root = parent
	}
	f := &facts{root: root, tags: map[string]bool{}, makeTargets: map[string]bool{}, literals: map[string]bool{},
		testLits: map[string]bool{}, subcommands: map[string]bool{}, basenames: map[string]bool{}, checked: map[string]int{},
		pkgDirs: map[string][]string{}, decls: map[string]map[string]bool{}, embeds: map[string]map[string]bool{}}

	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	f.makefile = string(mk)
	for _, m := range targetRe.FindAllStringSubmatch(f.makefile, -1) {
		f.makeTargets[m[1]] = true
	}
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(gomod), "\n") {
		fields := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require"))
		if len(fields) >= 2 && strings.Contains(fields[0], ".") && strings.Contains(fields[0], "/") {
			f.modules = append(f.modules, fields[0])
		}
	}

	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || slices.Contains(skipDirs, rel) || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		f.basenames[d.Name()] = true
		switch {
		case strings.HasSuffix(p, ".md") && !slices.Contains(skipFiles, rel):
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			f.docs = append(f.docs, doc{path: rel, dir: path.Dir(rel), text: string(b), line: 1, markdown: true})
		case strings.HasSuffix(p, ".go"):
			return f.readGo(p, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(f.testFuncs)
	return f
}

func (f *facts) readGo(p, rel string) error {
	src, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	for _, m := range buildLineRe.FindAllStringSubmatch(string(src), -1) {
		for _, id := range identRe.FindAllString(m[1], -1) {
			f.tags[id] = true
		}
	}
	isTest := strings.HasSuffix(rel, "_test.go")
	lits := f.literals
	if isTest {
		lits = f.testLits
		for _, m := range testFuncRe.FindAllStringSubmatch(string(src), -1) {
			f.testFuncs = append(f.testFuncs, m[1])
		}
	} else {
		f.goText.Write(src)
		if strings.HasPrefix(rel, "cmd/godist/") {
			for _, m := range registerRe.FindAllStringSubmatch(string(src), -1) {
				f.subcommands[m[1]] = true
			}
		}
	}
	fset := token.NewFileSet()
	file := fset.AddFile(rel, -1, len(src))
	var s scanner.Scanner
	s.Init(file, src, nil, 0)
	for {
		_, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		if tok == token.STRING {
			if v, err := strconv.Unquote(lit); err == nil {
				lits[v] = true
			}
		}
	}
	if isTest {
		return nil
	}
	f.readDecls(rel, src)
	fset2 := token.NewFileSet()
	af, err := parser.ParseFile(fset2, rel, src, parser.PackageClauseOnly|parser.ParseComments)
	if err != nil || af.Doc == nil {
		return nil
	}
	var text strings.Builder
	for _, c := range af.Doc.List {
		text.WriteString(strings.TrimPrefix(strings.TrimPrefix(c.Text, "//"), " "))
		text.WriteString("\n")
	}
	f.docs = append(f.docs, doc{path: rel, dir: path.Dir(rel), text: text.String(), line: fset2.Position(af.Doc.Pos()).Line})
	return nil
}

// readDecls records the package and the exported names a non-test file declares.
func (f *facts) readDecls(rel string, src []byte) {
	if bytes.HasPrefix(src, []byte("// Code generated")) {
		return
	}
	af, err := parser.ParseFile(token.NewFileSet(), rel, src, parser.SkipObjectResolution)
	if err != nil || af.Name.Name == "main" {
		return
	}
	dir := path.Dir(rel)
	if f.decls[dir] == nil {
		f.decls[dir] = map[string]bool{}
		f.embeds[dir] = map[string]bool{}
		f.pkgDirs[af.Name.Name] = append(f.pkgDirs[af.Name.Name], dir)
	}
	names := f.decls[dir]
	for _, d := range af.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil {
				names[d.Name.Name] = true
				continue
			}
			t := d.Recv.List[0].Type
			if s, ok := t.(*ast.StarExpr); ok {
				t = s.X
			}
			if id, ok := t.(*ast.Ident); ok {
				names[id.Name+"."+d.Name.Name] = true
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					names[s.Name.Name] = true
					names["type "+s.Name.Name] = true
					var fields *ast.FieldList
					switch t := s.Type.(type) {
					case *ast.StructType:
						fields = t.Fields
					case *ast.InterfaceType:
						fields = t.Methods
					}
					if fields == nil {
						continue
					}
					for _, fl := range fields.List {
						if len(fl.Names) == 0 {
							f.embeds[dir][s.Name.Name] = true
						}
						for _, n := range fl.Names {
							names[s.Name.Name+"."+n.Name] = true
						}
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						names[n.Name] = true
					}
				}
			}
		}
	}
}

// checkIdents checks pkg.Name and pkg.Type.Member for the project's packages: the package
// declares Name, and the type (unless it embeds another, whose members it may promote)
// declares Member.
func (f *facts) checkIdents(line int, text string, report func(int, string, ...any)) {
	for _, m := range qualifiedRe.FindAllStringSubmatch(text, -1) {
		pkg, name, member := m[1], m[2], m[3]
		dirs := f.pkgDirs[pkg]
		if len(dirs) == 0 {
			continue
		}
		f.count("Go name")
		var found, typ, embeds, hasMember bool
		for _, d := range dirs {
			found = found || f.decls[d][name]
			typ = typ || f.decls[d]["type "+name]
			embeds = embeds || f.embeds[d][name]
			hasMember = hasMember || f.decls[d][name+"."+member]
		}
		if !found && strings.HasSuffix(name, "s") {
			// English plural of a type: data.Datasets.
			for _, d := range dirs {
				found = found || f.decls[d]["type "+strings.TrimSuffix(name, "s")]
			}
		}
		switch {
		case !found:
			report(line, "Go name %s.%s: package %s (%s) declares no %s", pkg, name, pkg, strings.Join(dirs, ", "), name)
		case member != "" && typ && !embeds && !hasMember:
			report(line, "Go name %s.%s.%s: %s has no method or field %s", pkg, name, member, name, member)
		}
	}
}

// frag is a piece of a document: code (a code span or a line of a fenced block) or prose.
type frag struct {
	line  int
	text  string
	code  bool
	whole bool   // a whole code span
	lang  string // a fenced block's language
}

var spanRe = regexp.MustCompile("`+([^`]+)`+")

// fragments splits a document into its code and its prose (the raw lines, code spans
// included: some phrases name a tag around a span).
func fragments(d doc) []frag {
	lines := strings.Split(d.text, "\n")
	var out []frag
	if !d.markdown {
		for i, l := range lines {
			out = append(out, frag{line: d.line + i, text: l})
		}
		return out
	}
	inFence, lang := false, ""
	var quoted map[int]bool // columns of the current table that quote TensorFlow or Python
	var carry string
	carryLine := 0
	flush := func() {
		if carry == "" {
			return
		}
		out = append(out, frag{line: carryLine, text: carry})
		for _, loc := range spanRe.FindAllStringSubmatchIndex(carry, -1) {
			line := carryLine + strings.Count(carry[:loc[0]], "\n")
			out = append(out, frag{line: line, text: strings.TrimSpace(carry[loc[2]:loc[3]]), code: true, whole: true})
		}
		carry = ""
	}
	for i, l := range lines {
		n := d.line + i
		if t := strings.TrimSpace(l); strings.HasPrefix(t, "```") {
			flush()
			inFence = !inFence
			lang = strings.TrimPrefix(t, "```")
			continue
		}
		if inFence {
			if lang == "sh" || lang == "bash" || lang == "console" || lang == "" {
				if i := strings.Index(l, " #"); i >= 0 {
					l = l[:i]
				}
			}
			out = append(out, frag{line: n, text: l, code: true, lang: lang})
			continue
		}
		if strings.HasPrefix(strings.TrimSpace(l), "|") {
			cells := tableCells(l)
			if i+1 < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[i+1]), "|-") {
				quoted = map[int]bool{}
				for c, h := range cells {
					quoted[c] = quotedColumn.MatchString(strings.TrimSpace(h))
				}
			}
			for c := range cells {
				if quoted[c] {
					cells[c] = ""
				}
			}
			l = strings.Join(cells, "|")
		} else {
			quoted = nil
		}
		if carry == "" {
			carryLine = n
			carry = l
		} else {
			carry += "\n" + l
		}
		if strings.Count(carry, "`")%2 == 0 || strings.TrimSpace(l) == "" {
			flush()
		}
	}
	flush()
	return out
}

// A table column headed "TensorFlow ..." or "Python" quotes the course's code (its scripts,
// its variables), not the project's: its cells are not checked.
var quotedColumn = regexp.MustCompile(`^(TensorFlow|Python)\b`)

// tableCells splits a Markdown table row at the bars outside code spans.
func tableCells(row string) []string {
	var cells []string
	inSpan, start := false, 0
	for i, r := range row {
		switch {
		case r == '`':
			inSpan = !inSpan
		case r == '|' && !inSpan:
			cells = append(cells, row[start:i])
			start = i + 1
		}
	}
	return append(cells, row[start:])
}

// A problem: a document's line names something that does not exist.
type problem struct {
	doc  string
	line int
	what string
}

func (p problem) String() string { return fmt.Sprintf("%s:%d: %s", p.doc, p.line, p.what) }

var (
	makeRe       = regexp.MustCompile(`(?:^|[\s;&|(])make((?:[ \t]+[A-Z][A-Z0-9_]*=\S*)*)(?:[ \t]+([a-z][a-z0-9-]*))?(?:$|[\s;&|)])`)
	makeVarRe    = regexp.MustCompile(`([A-Z][A-Z0-9_]*)=(\S*)`)
	tagsFlagRe   = regexp.MustCompile(`-tags[= ]+(?:'([^']*)'|"([^"]*)"|([A-Za-z0-9_,.]+))`)
	goBuildRe    = regexp.MustCompile(`go:build ([A-Za-z0-9_.!&|() ]+)`)
	tagPhraseRe  = regexp.MustCompile("(?:`([A-Za-z0-9_]+)` (?:build )?tag\\b|\\b(?:build )?tag `([A-Za-z0-9_]+)`)")
	pathTokRe    = regexp.MustCompile(`[A-Za-z0-9_.*@~+/$-]+`)
	envDollarRe  = regexp.MustCompile(`\$\{?([A-Z][A-Z0-9_]*)`)
	envWholeRe   = regexp.MustCompile(`^([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\*?|[A-Z][A-Z0-9]*_\*)(?:=.*)?$`)
	envAssignRe  = regexp.MustCompile(`(?:^|\s)([A-Z][A-Z0-9]*_[A-Z0-9_]*)=`)
	envPrefixRe  = regexp.MustCompile(`\b((?:GODIST|TF|SLURM|JUPYTER|CUDA|NCCL)_(?:[A-Z0-9_]*[A-Z0-9]|\*))`)
	subcommandRe = regexp.MustCompile(`(?:^|[\s(]|bin/)godist[ \t]+([a-z][a-z-]*)`)
	testNameRe   = regexp.MustCompile(`\b((?:Test|Benchmark)[A-Z0-9_]\w*)`)
	linkRe       = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	goStringRe   = regexp.MustCompile(`"[^"]*"`)
	qualifiedRe  = regexp.MustCompile(`(?:^|[^\w.])([a-z][a-z0-9]*)\.([A-Z]\w*)(?:\.([A-Z]\w*))?`)
	// proseModuleRe: a host-like first element (gorgonia.org, github.com) and a path, after a
	// space or an opening parenthesis, so not inside a URL.
	proseModuleRe = regexp.MustCompile(`(?:^|[\s(])((?:[a-z0-9-]+\.)+(?:org|com|io|net|dev|in|co)/[A-Za-z0-9_./-]*[A-Za-z0-9_])`)
	domainRe      = regexp.MustCompile(`^[a-z0-9-]+(\.[a-z0-9-]+)*\.(org|com|io|net|dev|in|co)$`)
)

// Extensions of files a document may name by their bare name.
var codeExts = map[string]bool{".go": true, ".s": true, ".sh": true, ".ipynb": true, ".cu": true, ".ptx": true, ".md": true, ".mod": true}

func (f *facts) check(d doc) []problem {
	var probs []problem
	seen := map[string]bool{}
	report := func(line int, format string, args ...any) {
		what := fmt.Sprintf(format, args...)
		if key := fmt.Sprint(line, what); !seen[key] {
			seen[key] = true
			probs = append(probs, problem{d.path, line, what})
		}
	}
	checkTag := func(line int, tag string) {
		tag = strings.Trim(tag, " ,")
		f.count("build tag")
		if tag == "" || toolchainTags[tag] || strings.HasPrefix(tag, "go1.") || f.tags[tag] {
			return
		}
		report(line, "build tag %q: no //go:build line uses it", tag)
	}
	for _, fr := range fragments(d) {
		// Build tags, in code and in phrases such as "the `openblas` tag".
		for _, m := range tagsFlagRe.FindAllStringSubmatch(fr.text, -1) {
			for _, tag := range strings.FieldsFunc(m[1]+m[2]+m[3], func(r rune) bool { return r == ',' || r == ' ' }) {
				checkTag(fr.line, tag)
			}
		}
		for _, m := range goBuildRe.FindAllStringSubmatch(fr.text, -1) {
			for _, id := range identRe.FindAllString(m[1], -1) {
				checkTag(fr.line, id)
			}
		}
		if !fr.code {
			for _, m := range tagPhraseRe.FindAllStringSubmatch(fr.text, -1) {
				checkTag(fr.line, m[1]+m[2])
			}
		}
		// Environment variables: GODIST_* and the other prefixes the project reads, anywhere.
		for _, m := range envPrefixRe.FindAllStringSubmatch(fr.text, -1) {
			f.checkEnv(fr.line, m[1], report)
		}
		if !d.markdown {
			for _, m := range envDollarRe.FindAllStringSubmatch(fr.text, -1) {
				f.checkEnv(fr.line, m[1], report)
			}
			f.checkTests(fr.line, fr.text, report)
			f.checkPaths(d, fr.line, fr.text, false, report)
			f.checkIdents(fr.line, fr.text, report)
			continue
		}
		if !fr.code {
			// A Go module named in prose ("the backend goes through gorgonia.org/cu") is one
			// go.mod requires; links (https://...) are not looked at.
			for _, m := range proseModuleRe.FindAllStringSubmatch(fr.text, -1) {
				f.count("Go module")
				if !f.isModule(strings.TrimRight(m[1], ".,;:")) {
					report(fr.line, "Go module %s: not in go.mod", strings.TrimRight(m[1], ".,;:"))
				}
			}
			for _, m := range linkRe.FindAllStringSubmatch(fr.text, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				target, _, _ = strings.Cut(target, "#")
				f.count("link")
				if _, err := os.Stat(filepath.Join(f.root, d.dir, target)); err != nil {
					report(fr.line, "link %q: no such file", m[1])
				}
			}
			continue
		}
		// Code: make targets and variables, environment variables, subcommands, tests, paths.
		for _, m := range makeRe.FindAllStringSubmatch(fr.text, -1) {
			for _, v := range makeVarRe.FindAllStringSubmatch(m[1], -1) {
				if !regexp.MustCompile(`(?m)^` + v[1] + `\s*[?:]?=|\$\(` + v[1] + `\)`).MatchString(f.makefile) {
					report(fr.line, "make variable %s: the Makefile does not use it", v[1])
				}
				if v[1] == "TAGS" {
					for _, tag := range strings.FieldsFunc(strings.Trim(v[2], `'"`), func(r rune) bool { return r == ',' || r == ' ' }) {
						checkTag(fr.line, tag)
					}
				}
			}
			if m[2] != "" {
				f.count("make target")
			}
			if m[2] != "" && !f.makeTargets[m[2]] {
				report(fr.line, "make target %q: not in the Makefile", m[2])
			}
		}
		for _, m := range envDollarRe.FindAllStringSubmatch(fr.text, -1) {
			f.checkEnv(fr.line, m[1], report)
		}
		if fr.whole {
			if m := envWholeRe.FindStringSubmatch(fr.text); m != nil {
				f.checkEnv(fr.line, m[1], report)
			}
		} else if fr.lang != "go" && fr.lang != "python" {
			for _, m := range envAssignRe.FindAllStringSubmatch(fr.text, -1) {
				f.checkEnv(fr.line, m[1], report)
			}
		}
		if fr.lang != "python" {
			for _, m := range subcommandRe.FindAllStringSubmatch(fr.text, -1) {
				f.count("godist subcommand")
				if !f.subcommands[m[1]] {
					report(fr.line, "command \"godist %s\": cmd/godist registers no such subcommand", m[1])
				}
			}
		}
		f.checkTests(fr.line, fr.text, report)
		if fr.lang != "python" {
			f.checkIdents(fr.line, fr.text, report)
		}
		pathText := fr.text
		if fr.lang == "go" {
			// Go code: its import paths; its comments' words (tensor/number) are no paths.
			pathText = strings.Join(goStringRe.FindAllString(fr.text, -1), " ")
		}
		f.checkPaths(d, fr.line, pathText, true, report)
	}
	return probs
}

func (f *facts) checkEnv(line int, name string, report func(int, string, ...any)) {
	f.count("environment variable")
	if prefix, ok := strings.CutSuffix(name, "*"); ok {
		for lit := range f.literals {
			if strings.HasPrefix(lit, prefix) && !strings.Contains(lit, " ") {
				return
			}
		}
		report(line, "environment variables %s: no non-test Go code names one", name)
		return
	}
	switch {
	case f.literals[name] || f.setsEnv(name):
	case testKnobs[name] != "":
		if !f.testLits[name] {
			report(line, "environment variable %s: listed as a test knob, but no test reads it", name)
		}
	case notEnv[name] != "":
		if !strings.Contains(f.goText.String(), name) {
			report(line, "%s: listed as named by the code (%s), but no non-test Go file names it", name, notEnv[name])
		}
	default:
		report(line, "environment variable %s: no non-test Go code reads it (os.Getenv, LookupEnv or a constant) or sets for a program it starts", name)
	}
}

// setsEnv reports whether non-test code hands name to a program it starts ("NAME=" + value):
// a document may name such a variable (slurmtest sets SLURM_CONF for Slurm's commands).
func (f *facts) setsEnv(name string) bool {
	for lit := range f.literals {
		if strings.HasPrefix(lit, name+"=") {
			return true
		}
	}
	return false
}

func (f *facts) checkTests(line int, text string, report func(int, string, ...any)) {
	for _, m := range testNameRe.FindAllStringSubmatch(text, -1) {
		name := m[1]
		f.count("test function")
		// A -run pattern matches by prefix, so a name that starts some test's name counts.
		i := sort.SearchStrings(f.testFuncs, name)
		if i == len(f.testFuncs) || !strings.HasPrefix(f.testFuncs[i], name) {
			report(line, "test %s: no such Test or Benchmark function", name)
		}
	}
}

// checkPaths checks the tokens of text that name the project's files and directories: those
// with a code file's extension, and those whose first element is a directory of the project.
func (f *facts) checkPaths(d doc, line int, text string, markdown bool, report func(int, string, ...any)) {
	for _, tok := range pathTokRe.FindAllString(text, -1) {
		tok = strings.TrimRight(tok, ".,:;-")
		if !strings.ContainsAny(tok, "/.") || strings.HasPrefix(tok, "/") || strings.HasPrefix(tok, "~") ||
			strings.HasPrefix(tok, "..") || strings.HasPrefix(tok, "@") || strings.HasPrefix(tok, "$") {
			continue
		}
		tok = strings.TrimPrefix(tok, "./")
		if rest, ok := strings.CutPrefix(tok, "godist/"); ok {
			tok = rest // an import path of this module
		}
		first, _, hasSlash := strings.Cut(tok, "/")
		if hasSlash && domainRe.MatchString(first) {
			if markdown {
				f.count("Go module")
			}
			if markdown && !f.isModule(tok) {
				report(line, "Go module %s: not in go.mod", tok)
			}
			continue
		}
		ext := path.Ext(strings.TrimSuffix(tok, "/"))
		if len(ext) > 1 && ext[1] >= 'A' && ext[1] <= 'Z' {
			// A package path and one of its names (internal/goid.Get): the package's directory.
			tok, ext = strings.TrimSuffix(tok, ext), ""
		}
		if !hasSlash {
			if codeExts[ext] && tok != ext && !strings.Contains(tok, "*") {
				f.count("file name")
			}
			if !codeExts[ext] || tok == ext || strings.Contains(tok, "*") {
				continue
			}
			if !markdown {
				// A package doc's bare file name is one of the package's files, of its parent's
				// (a generator under its package), or of the root (README.md).
				if !f.exists([]string{d.dir, path.Dir(d.dir), "."}, tok) {
					report(line, "file %s: not in %s, its parent or the root", tok, d.dir)
				}
			} else if !f.basenames[tok] {
				report(line, "file %s: no file of that name in the project", tok)
			}
			continue
		}
		if writer, ok := f.outputOf(tok); ok {
			f.count("build output")
			if b, err := os.ReadFile(filepath.Join(f.root, writer)); err != nil || !strings.Contains(string(b), strings.TrimSuffix(tok, "/")) {
				report(line, "build output %s: %s does not write it", tok, writer)
			}
			continue
		}
		bases := []string{".", "distlib", d.dir}
		candidate := codeExts[ext]
		for _, b := range bases {
			if st, err := os.Stat(filepath.Join(f.root, b, first)); err == nil && st.IsDir() {
				candidate = true
			}
		}
		if !candidate {
			continue
		}
		f.count("path")
		if !f.exists(bases, tok) {
			report(line, "path %s: no such file or directory", tok)
		}
	}
}

func (f *facts) count(kind string) {
	if f.checked != nil {
		f.checked[kind]++
	}
}

func (f *facts) outputOf(tok string) (string, bool) {
	for prefix, writer := range outputs {
		if strings.HasPrefix(tok, prefix) {
			return writer, true
		}
	}
	return "", false
}

func (f *facts) exists(bases []string, tok string) bool {
	for _, b := range bases {
		p := filepath.Join(f.root, b, filepath.FromSlash(tok))
		if strings.Contains(tok, "*") {
			if m, _ := filepath.Glob(p); len(m) > 0 {
				return true
			}
		} else if _, err := os.Stat(p); err == nil {
			return true
		}
	}
	return false
}

func (f *facts) isModule(p string) bool {
	for _, m := range f.modules {
		if p == m || strings.HasPrefix(p, m+"/") {
			return true
		}
	}
	return false
}

// TestDocsNameWhatExists reads every document and checks each build tag, make target and
// variable, file and directory, environment variable, godist subcommand, test function, Go
// module and project Go name it names.
func TestDocsNameWhatExists(t *testing.T) {
	f := gather(t)
	if len(f.docs) < 4 {
		t.Fatalf("found %d documents; README.md, ARCHITECTURE.md and the package docs expected", len(f.docs))
	}
	var all []problem
	for _, d := range f.docs {
		all = append(all, f.check(d)...)
	}
	for _, p := range all {
		t.Error(p)
	}
	if testing.Verbose() {
		names := make([]string, len(f.docs))
		for i, d := range f.docs {
			names[i] = d.path
		}
		t.Logf("checked %d documents: %s", len(f.docs), strings.Join(names, " "))
		t.Logf("names checked (with repeats across documents): %v", f.checked)
	}
}

// TestAllowlistsHold: each allowlisted name is still where its reason says.
func TestAllowlistsHold(t *testing.T) {
	f := gather(t)
	for name, why := range testKnobs {
		if !f.testLits[name] {
			t.Errorf("testKnobs: %s (%s): no test reads it any more; drop it from the list", name, why)
		}
	}
	for name, why := range notEnv {
		if !strings.Contains(f.goText.String(), name) {
			t.Errorf("notEnv: %s (%s): no non-test Go file names it any more; drop it from the list", name, why)
		}
	}
	for prefix, writer := range outputs {
		b, err := os.ReadFile(filepath.Join(f.root, writer))
		if err != nil || !strings.Contains(string(b), prefix) {
			t.Errorf("outputs: %s no longer names %s; drop it from the list", writer, prefix)
		}
	}
}

// TestExtractors: the extractors find what a document names in the forms the documents use.
func TestExtractors(t *testing.T) {
	f := &facts{root: t.TempDir(), tags: map[string]bool{"openblas": true}, makeTargets: map[string]bool{"test": true},
		makefile: "TAGS ?=\n", literals: map[string]bool{"GODIST_DATA_DIR": true, "SLURM_JOB_ID": true},
		testLits: map[string]bool{}, subcommands: map[string]bool{"launch": true}, basenames: map[string]bool{},
		testFuncs: []string{"TestBrowserLab"}, modules: []string{"gorgonia.org/tensor"},
		pkgDirs: map[string][]string{"optim": {"distlib/optim"}},
		decls:   map[string]map[string]bool{"distlib/optim": {"Spec": true, "type Spec": true, "Spec.Apply": true}},
		embeds:  map[string]map[string]bool{}}
	for _, p := range []string{"cmd/godist/main.go", "distlib/keras/fit.go"} {
		if err := os.MkdirAll(filepath.Join(f.root, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(f.root, p), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	text := "Run `make test` and `make TAGS=openblas test`, or `make bench`.\n" +
		"The backend builds only with the `cuda` tag; `go test -tags gpukerneltest ./x`.\n" +
		"Set `GODIST_DATA_DIR` or `GODIST_NOPE=1`; Slurm sets `SLURM_*`; `TF_CONFIG`.\n" +
		"```sh\nbin/godist launch --workers 2   # make nothing here\nbin/godist frobnicate\n```\n" +
		"`go test ./cmd/godist -run TestBrowser` and `TestGone`; `ARCHITECTURE.md`; [x](missing.md).\n" +
		"`keras/fit.go`, `keras/gone.go`, `cmd/godist/` and `gpu/`; `gorgonia.org/cu`, `gorgonia.org/tensor`.\n" +
		"| TensorFlow | Go |\n|---|---|\n| `source $STORE/x.sh` | `$GODIST_DATA_DIR/y.go` |\n" +
		"The backend goes through gorgonia.org/cu ([yaegi](https://github.com/traefik/yaegi)).\n" +
		"`optim.Spec.Apply`, `optim.Spec.Nope`, `optim.Gone`, `optim.Specs` and `strategy.Whatever`.\n"
	var got []string
	for _, p := range f.check(doc{path: "D.md", dir: ".", text: text, line: 1, markdown: true}) {
		got = append(got, p.String())
	}
	want := []string{
		`D.md:1: make target "bench": not in the Makefile`,
		`D.md:2: build tag "cuda": no //go:build line uses it`,
		`D.md:2: build tag "gpukerneltest": no //go:build line uses it`,
		`D.md:3: environment variable GODIST_NOPE: no non-test Go code reads it (os.Getenv, LookupEnv or a constant) or sets for a program it starts`,
		`D.md:3: environment variable TF_CONFIG: no non-test Go code reads it (os.Getenv, LookupEnv or a constant) or sets for a program it starts`,
		`D.md:5: build output bin/godist: Makefile does not write it`,
		`D.md:6: build output bin/godist: Makefile does not write it`,
		`D.md:6: command "godist frobnicate": cmd/godist registers no such subcommand`,
		`D.md:8: link "missing.md": no such file`,
		`D.md:8: test TestGone: no such Test or Benchmark function`,
		`D.md:8: file ARCHITECTURE.md: no file of that name in the project`,
		`D.md:9: path keras/gone.go: no such file or directory`,
		`D.md:9: Go module gorgonia.org/cu: not in go.mod`,
		`D.md:13: Go module gorgonia.org/cu: not in go.mod`,
		`D.md:14: Go name optim.Spec.Nope: Spec has no method or field Nope`,
		`D.md:14: Go name optim.Gone: package optim (distlib/optim) declares no Gone`,
	}
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
