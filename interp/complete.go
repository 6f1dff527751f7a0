package interp

import (
	"fmt"
	"go/scanner"
	"go/token"
	"go/types"
	"reflect"
	"sort"
	"strings"

	"github.com/traefik/yaegi/stdlib"
	"github.com/traefik/yaegi/stdlib/unrestricted"

	"godist/interp/symbols"
)

var keywords = []string{"break", "case", "chan", "const", "continue", "default", "defer", "else",
	"fallthrough", "for", "func", "go", "goto", "if", "import", "interface", "map", "package",
	"range", "return", "select", "struct", "switch", "type", "var"}

var builtins = []string{"append", "cap", "clear", "close", "complex", "copy", "delete", "imag",
	"len", "make", "max", "min", "new", "panic", "print", "println", "real", "recover",
	"bool", "byte", "error", "float32", "float64", "int", "int8", "int16", "int32", "int64",
	"rune", "string", "uint", "uint8", "uint16", "uint32", "uint64", "uintptr", "any",
	"true", "false", "nil", "iota"}

func isIdentByte(b byte) bool {
	return b == '_' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b >= 0x80
}

// clampCursor keeps a cursor (a byte offset) inside code.
func clampCursor(code string, cursor int) int {
	return min(max(cursor, 0), len(code))
}

// Complete returns the completions of the identifier before cursor and the range
// [start, end) it replaces, all three byte offsets into code (the kernel converts the
// protocol's code points): package members after "pkg.", fields and methods
// after "x." for a variable x, otherwise variables, declarations, imported packages,
// keywords and builtins.
func (s *Session) Complete(code string, cursor int) (matches []string, start, end int) {
	at := clampCursor(code, cursor)
	b := at
	for b > 0 && isIdentByte(code[b-1]) {
		b--
	}
	prefix := code[b:at]
	var cands []string
	if b > 0 && code[b-1] == '.' {
		x := b - 1
		for x > 0 && isIdentByte(code[x-1]) {
			x--
		}
		cands = s.members(code, x, b-1)
	} else {
		cands = append(s.names(), scanCell(code).names...)
		for _, im := range scanCell(code).imports {
			cands = append(cands, im.localName())
		}
	}
	seen := map[string]bool{}
	for _, c := range cands {
		if strings.HasPrefix(c, prefix) && !seen[c] && !strings.HasPrefix(c, "_godist") {
			seen[c] = true
			matches = append(matches, c)
		}
	}
	sort.Strings(matches)
	return matches, b, at
}

// names lists what an identifier may complete to.
func (s *Session) names() []string {
	var out []string
	for n := range s.currentGlobals() {
		out = append(out, n)
	}
	s.mu.Lock()
	for _, d := range s.decls {
		if d.kind != "method" {
			out = append(out, d.names...)
		}
	}
	for _, im := range s.imports {
		out = append(out, im.localName())
	}
	s.mu.Unlock()
	out = append(out, keywords...)
	return append(out, builtins...)
}

// packagePath returns the import path of an imported package's local name.
func (s *Session) packagePath(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, im := range s.imports {
		if im.localName() == name {
			return im.Path
		}
	}
	return ""
}

// packageSymbols returns the exported symbols of a compiled package.
func packageSymbols(path string) map[string]reflect.Value {
	for _, table := range []map[string]map[string]reflect.Value{symbols.Symbols, stdlib.Symbols} {
		for key, syms := range table {
			if i := strings.LastIndex(key, "/"); i >= 0 && key[:i] == path {
				return withUnrestricted(key, syms)
			}
		}
	}
	return withUnrestricted(path+"/"+pathBase(majorBase(path)), nil)
}

// withUnrestricted adds the names yaegi's unrestricted table gives a package (os.Exit,
// os/exec, syscall), as the session's interpreters have them.
func withUnrestricted(key string, syms map[string]reflect.Value) map[string]reflect.Value {
	extra, ok := unrestricted.Symbols[key]
	if !ok {
		return syms
	}
	merged := make(map[string]reflect.Value, len(syms)+len(extra))
	for n, v := range syms {
		merged[n] = v
	}
	for n, v := range extra {
		merged[n] = v
	}
	return merged
}

// members lists the members of the identifier code[from:to]: a package's symbols, a
// variable's fields and methods (with the methods the notebook declared), or the members
// of the type go/types gives it in the cell not yet run.
func (s *Session) members(code string, from, to int) []string {
	x := code[from:to]
	if path := s.cellPackagePath(code, x); path != "" {
		var out []string
		for name := range packageSymbols(path) {
			if !strings.HasPrefix(name, "_") {
				out = append(out, name)
			}
		}
		return out
	}
	v, ok := s.currentGlobals()[x]
	if !ok || !v.IsValid() {
		if t := s.cellTypeAt(code, from, to); t != nil {
			return typeMembers(t)
		}
		return nil
	}
	out := valueMembers(v)
	if !compiledType(v.Type(), 0) {
		s.mu.Lock()
		for _, d := range s.decls {
			if d.kind == "method" {
				for _, n := range d.names {
					out = append(out, n[strings.Index(n, ".")+1:])
				}
			}
		}
		s.mu.Unlock()
	}
	return out
}

func valueMembers(v reflect.Value) []string {
	var out []string
	t := v.Type()
	for _, tt := range []reflect.Type{t, reflect.PointerTo(t)} {
		for i := 0; i < tt.NumMethod(); i++ {
			out = append(out, tt.Method(i).Name)
		}
	}
	st := t
	if st.Kind() == reflect.Pointer {
		st = st.Elem()
	}
	if st.Kind() == reflect.Struct {
		for i := 0; i < st.NumField(); i++ {
			if f := st.Field(i); f.IsExported() {
				out = append(out, f.Name)
			}
		}
	}
	return out
}

// Inspect describes the name at cursor (a byte offset into code): a package member's signature and
// documentation (distlib documentation is generated into interp/symbols), a variable's type
// and value, or a declaration's source. found is false when nothing is known of the name.
func (s *Session) Inspect(code string, cursor, detail int) (data map[string]any, found bool) {
	at := clampCursor(code, cursor)
	b, e := at, at
	for b > 0 && (isIdentByte(code[b-1]) || code[b-1] == '.') {
		b--
	}
	for e < len(code) && isIdentByte(code[e]) {
		e++
	}
	name := strings.Trim(code[b:e], ".")
	if name == "" {
		return nil, false
	}
	text := s.describe(code, name, detail)
	if text == "" {
		// Declared in the cell, not yet run: its type from go/types.
		from := b + strings.Index(code[b:e], name)
		if t := s.cellTypeAt(code, from, from+len(name)); t != nil {
			text = fmt.Sprintf("%s %s", name, types.TypeString(t, func(p *types.Package) string {
				if p.Path() == "main" {
					return ""
				}
				return p.Name()
			}))
		}
	}
	if text == "" {
		return nil, false
	}
	return map[string]any{"text/plain": text}, true
}

func (s *Session) describe(code, name string, detail int) string {
	parts := strings.Split(name, ".")
	if path := s.cellPackagePath(code, parts[0]); path != "" {
		if len(parts) == 1 {
			if d, ok := symbols.Doc(path); ok {
				return d
			}
			if pkg, _ := stdPackageDoc(path); pkg != nil {
				return fmt.Sprintf("package %s // import %q\n\n%s", pkg.Name, path, strings.TrimSpace(pkg.Doc))
			}
			return fmt.Sprintf("package %s // import %q", pathBase(path), path)
		}
		qual := path + "." + strings.Join(parts[1:], ".")
		if d, ok := symbols.Doc(qual); ok {
			return d
		}
		if v, ok := packageSymbols(path)[parts[1]]; ok {
			desc := describeSymbol(pathBase(path)+"."+parts[1], v)
			if d := stdSymbolDoc(path, parts[1], detail); d != "" {
				return d + "\n\n" + desc
			}
			return desc
		}
		return ""
	}
	if v, ok := s.currentGlobals()[parts[0]]; ok && v.IsValid() {
		if len(parts) == 1 {
			val := fmt.Sprintf("%v", v.Interface())
			if detail == 0 && len(val) > 500 {
				val = val[:500] + "..."
			}
			return fmt.Sprintf("%s %s\nvalue: %s", parts[0], s.valueTypeString(v.Type()), val)
		}
		if m := v.MethodByName(parts[1]); m.IsValid() {
			return fmt.Sprintf("%s.%s %s", parts[0], parts[1], m.Type())
		}
		st := v
		for st.Kind() == reflect.Pointer && !st.IsNil() {
			st = st.Elem()
		}
		if st.Kind() == reflect.Struct {
			if f := st.FieldByName(parts[1]); f.IsValid() {
				return fmt.Sprintf("%s.%s %s\nvalue: %v", parts[0], parts[1], typeString(f.Type()), f)
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.decls {
		for _, n := range d.names {
			if n == name {
				return d.text
			}
		}
	}
	return ""
}

func describeSymbol(name string, v reflect.Value) string {
	switch {
	case v.Kind() == reflect.Func:
		return fmt.Sprintf("func %s: %s", name, v.Type())
	case v.Kind() == reflect.Pointer && v.Type().Elem().Kind() != reflect.Struct && v.IsNil():
		return fmt.Sprintf("type %s %s", name, v.Type().Elem())
	case v.Kind() == reflect.Pointer && v.IsNil():
		return fmt.Sprintf("type %s", name)
	}
	return fmt.Sprintf("%s %s = %v", name, v.Type(), v.Interface())
}

// IsComplete reports whether code is ready to run: "complete", "incomplete" (unclosed
// brackets or strings, or a line ending in an operator or comma; indent is the suggested
// indentation of the next line) or "invalid" (a closing bracket without its opening one,
// an illegal character, code that does not parse as Go such as `x := := 1`, or an operator
// no literal takes such as `1 +* 2`).
func (s *Session) IsComplete(code string) (status, indent string) {
	trimmed := strings.TrimSpace(code)
	if trimmed == "" || strings.HasPrefix(trimmed, "%") || strings.HasPrefix(trimmed, "!") {
		return "complete", ""
	}
	fset := token.NewFileSet()
	file := fset.AddFile("", -1, len(code))
	var sc scanner.Scanner
	var errs []string
	unterminated := false
	sc.Init(file, []byte(code), func(_ token.Position, msg string) {
		if strings.Contains(msg, "not terminated") {
			unterminated = true
			return
		}
		errs = append(errs, msg)
	}, scanner.ScanComments)
	depth := 0
	var last token.Token
	for {
		_, tok, lit := sc.Scan()
		if tok == token.EOF {
			break
		}
		switch tok {
		case token.LPAREN, token.LBRACE, token.LBRACK:
			depth++
		case token.RPAREN, token.RBRACE, token.RBRACK:
			depth--
			if depth < 0 {
				return "invalid", ""
			}
		case token.ILLEGAL:
			return "invalid", ""
		}
		if tok == token.COMMENT || tok == token.SEMICOLON && lit == "\n" {
			continue
		}
		last = tok
	}
	if unterminated {
		return "incomplete", ""
	}
	if len(errs) > 0 {
		return "invalid", ""
	}
	if depth > 0 {
		return "incomplete", strings.Repeat("\t", depth)
	}
	if last.IsOperator() && last != token.RPAREN && last != token.RBRACE && last != token.RBRACK &&
		last != token.INC && last != token.DEC && last != token.SEMICOLON && last != token.ELLIPSIS {
		return "incomplete", ""
	}
	if !syntaxValid(code) {
		return "invalid", ""
	}
	return "complete", ""
}

// valueTypeString names t as the notebook wrote it when it is (a pointer to) a type the
// notebook declared, else as typeString does.
func (s *Session) valueTypeString(t reflect.Type) string {
	named := s.notebookTypeNames()
	if n := named[t]; n != "" {
		return n
	}
	if t.Kind() == reflect.Pointer {
		if n := named[t.Elem()]; n != "" {
			return "*" + n
		}
	}
	return typeString(t)
}
