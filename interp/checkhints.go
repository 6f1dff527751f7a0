package interp

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"regexp"
	"strings"
)

// This file adds to a check error the Go form of a Python habit, on a line of its own.

// pythonHints says the Go form of an undefined name that is Python's.
var pythonHints = map[string]string{
	"None":  "Go writes Python's None as nil",
	"True":  "Go writes Python's True as true",
	"False": "Go writes Python's False as false",
	"self":  "a Go method names its receiver in its declaration: func (m *MyLayer) Call(x ...) { ... m.units ... }",
	"str":   "Go's string type is string; fmt.Sprint(x) makes a string of a value",
	"float": "Go's float types are float64 and float32 (tensors hold float32)",
	"list":  "Go writes a list as a slice: []float32{1, 2, 3}, or make([]T, n)",
	"dict":  "Go writes a dict as a map: map[string]int{\"a\": 1}",
	"elif":  "Go writes elif as else if",
	"np":    "numpy is not a Go package: use godist/distlib/tensor (tensor.Constant, tensor.Zeros, ...)",
	"tf":    "TensorFlow's Go counterparts are the godist/distlib packages (notebooks/README.md maps them)",
}

// nearest returns the name of names closest to a misspelt name (at most two edits, or a
// different case), "" when none is that close.
func nearest(name string, names []string) string {
	best, bestDist := "", 3
	for _, n := range names {
		if n == name || !token.IsExported(n) && token.IsExported(name) {
			continue
		}
		// Python's snake_case names the same member: num_replicas_in_sync, NumReplicasInSync.
		d := editDistance(strings.ToLower(strings.ReplaceAll(name, "_", "")), strings.ToLower(n))
		if d < bestDist || d == bestDist && best != "" && n < best {
			best, bestDist = n, d
		}
	}
	if bestDist > 2 || len(name) < 4 {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance of two strings.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// mismatched finds the two types of go/types' "(mismatched types A and B)".
var mismatched = regexp.MustCompile(`\(mismatched types (.+) and (.+)\)$`)

// numericKind says whether a type name (as a message writes it) is an integer or a float.
func numericKind(t string) string {
	switch {
	case t == "int" || t == "rune" || t == "byte" || strings.HasPrefix(t, "int") || strings.HasPrefix(t, "uint"):
		return "int"
	case strings.HasPrefix(t, "float"):
		return "float"
	}
	return ""
}

// joinExprs writes expressions as source, comma-separated.
func joinExprs(es []ast.Expr) string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = types.ExprString(e)
	}
	return strings.Join(out, ", ")
}

// undefinedMember matches go/types' "x.m undefined (type T has no field or method m)".
var undefinedMember = regexp.MustCompile(`^(.+)\.(\w+) undefined \(type (.+) has no field or method \w+\)$`)

// stringFuncs are the strings functions for Python's str methods ({s} is the string).
var stringFuncs = map[string]string{
	"upper": "strings.ToUpper({s})", "lower": "strings.ToLower({s})", "strip": "strings.TrimSpace({s})",
	"split": "strings.Split({s}, sep)", "startswith": "strings.HasPrefix({s}, prefix)",
	"endswith": "strings.HasSuffix({s}, suffix)", "replace": "strings.ReplaceAll({s}, old, new)",
	"format": "fmt.Sprintf({s}, args...)", "join": "strings.Join(parts, {s})",
}

// pythonHint returns one line saying the Go form when the error is a Python habit:
// calling a value, assigning to a method, len of a tensor, an undefined Python name, a
// result count ignored.
func pythonHint(e *types.Error, f *ast.File, fset *token.FileSet, info *types.Info, code string, imports []importSpec, pkg *types.Package) string {
	msg := e.Msg
	switch {
	case strings.HasPrefix(msg, "undefined: "):
		name, _, _ := strings.Cut(strings.TrimPrefix(msg, "undefined: "), " (but have ")
		if h := pythonHints[name]; h != "" {
			return h
		}
		if pkg, member, ok := strings.Cut(name, "."); ok {
			// Python's submodules (keras.callbacks.X, keras.optimizers.X) are flat in Go.
			if h := submoduleHint(f, e.Pos, pkg, member, imports); h != "" {
				return h
			}
			// A typo of a package member: keras.SparseCategoricalCrossetropy.
			for _, im := range imports {
				if im.localName() == pkg {
					if p, err := symImporter.Import(im.Path); err == nil {
						if near := nearest(member, p.Scope().Names()); near != "" {
							return fmt.Sprintf("did you mean %s.%s?", pkg, near)
						}
					}
				}
			}
		}
		// x = 1 for a new x: Python's assignment defines, Go's does not.
		var asg *ast.AssignStmt
		ast.Inspect(f, func(n ast.Node) bool {
			if a, ok := n.(*ast.AssignStmt); ok && a.Tok == token.ASSIGN {
				for _, l := range a.Lhs {
					if id, ok := l.(*ast.Ident); ok && id.Pos() == e.Pos {
						asg = a
					}
				}
			}
			return asg == nil
		})
		if asg != nil {
			return fmt.Sprintf("Go defines a new variable with := (x := v, or var x T): %s := %s", joinExprs(asg.Lhs), joinExprs(asg.Rhs))
		}
		// A typo of a session's name: modle.Fit(...).
		if !strings.Contains(name, ".") && pkg != nil {
			if near := nearest(name, pkg.Scope().Names()); near != "" && !strings.HasPrefix(near, "_") {
				return fmt.Sprintf("did you mean %s?", near)
			}
		}
	case strings.Contains(msg, "cannot call ") && strings.HasSuffix(msg, " is not a function"):
		var call *ast.CallExpr
		ast.Inspect(f, func(n ast.Node) bool {
			if c, ok := n.(*ast.CallExpr); ok && c.Fun.Pos() == e.Pos && call == nil {
				call = c
			}
			return call == nil
		})
		if call == nil {
			return ""
		}
		t := info.Types[call.Fun].Type
		if t == nil {
			return ""
		}
		fun := types.ExprString(call.Fun)
		what := fmt.Sprintf("cannot call %s (a %s, not a function)", fun, typeText(t))
		if m := methodNamed(t, "Call"); m != nil {
			args := make([]string, len(call.Args))
			for i, a := range call.Args {
				args[i] = types.ExprString(a)
			}
			return fmt.Sprintf("%s: write %s.Call(%s)", what, fun, strings.Join(args, ", "))
		}
		return what + ": Go calls only functions and methods"
	case strings.HasPrefix(msg, "cannot assign to "):
		var sel *ast.SelectorExpr
		var asg *ast.AssignStmt
		ast.Inspect(f, func(n ast.Node) bool {
			if a, ok := n.(*ast.AssignStmt); ok && len(a.Lhs) == len(a.Rhs) {
				for i, l := range a.Lhs {
					if s, ok := ast.Unparen(l).(*ast.SelectorExpr); ok && s.Pos() == e.Pos {
						sel, asg = s, a
						asg.Rhs = a.Rhs[i : i+1]
					}
				}
			}
			return sel == nil
		})
		if sel == nil {
			return ""
		}
		selection := info.Selections[sel]
		if selection == nil || selection.Kind() != types.MethodVal {
			return ""
		}
		x, name := types.ExprString(sel.X), sel.Sel.Name
		recv := typeText(info.Types[sel.X].Type)
		if m := methodNamed(info.Types[sel.X].Type, "Set"+name); m != nil {
			return fmt.Sprintf("%s is a method of %s, not a field: write %s.Set%s(%s)", name, recv, x, name, types.ExprString(asg.Rhs[0]))
		}
		return fmt.Sprintf("%s is a method of %s, not a field: call it, %s.%s(...)", name, recv, x, name)
	case strings.HasSuffix(msg, "for built-in len") || strings.HasSuffix(msg, "for built-in cap"):
		var call *ast.CallExpr
		ast.Inspect(f, func(n ast.Node) bool {
			if c, ok := n.(*ast.CallExpr); ok && len(c.Args) == 1 && c.Args[0].Pos() == e.Pos {
				call = c
			}
			return call == nil
		})
		if call == nil {
			return ""
		}
		t := info.Types[call.Args[0]].Type
		if t == nil {
			return ""
		}
		x := types.ExprString(call.Args[0])
		if methodNamed(t, "Shape") != nil {
			hint := fmt.Sprintf("a %s has no len: write %s.Shape()[0] for its first dimension", typeText(t), x)
			if methodNamed(t, "Size") != nil {
				hint += fmt.Sprintf(", %s.Size() for its number of elements", x)
			}
			return hint
		}
		for _, m := range []string{"Len", "Cardinality", "Size", "NumElements"} {
			if methodNamed(t, m) != nil {
				return fmt.Sprintf("a %s has no len: write %s.%s()", typeText(t), x, m)
			}
		}
	case strings.Contains(msg, "(untyped float constant) truncated to "):
		// 0.5 * n with n an int: the constant takes n's type.
		var other ast.Expr
		ast.Inspect(f, func(n ast.Node) bool {
			if b, ok := n.(*ast.BinaryExpr); ok && other == nil {
				if b.X.Pos() == e.Pos {
					other = b.Y
				} else if b.Y.Pos() == e.Pos {
					other = b.X
				}
			}
			return other == nil
		})
		if other != nil {
			return fmt.Sprintf("Go converts between number types only when asked: float64(%s)", types.ExprString(other))
		}
	case strings.Contains(msg, "(mismatched types "):
		m := mismatched.FindStringSubmatch(msg)
		if m == nil {
			return ""
		}
		a, b := strings.TrimPrefix(m[1], "untyped "), strings.TrimPrefix(m[2], "untyped ")
		if a == "string" && b != "string" || b == "string" && a != "string" {
			return "Go does not turn values into strings by itself: fmt.Sprint(\"loss: \", loss), or fmt.Sprintf(\"loss: %.3f\", loss)"
		}
		if numericKind(a) != "" && numericKind(b) != "" && numericKind(a) != numericKind(b) {
			return fmt.Sprintf("Go converts between number types only when asked: %s(x) or %s(y)", a, b)
		}
	case strings.HasPrefix(msg, "assignment mismatch: ") && strings.Contains(msg, " returns "):
		return "Go returns an error (or a second value) as a further result: name each result, e.g. v, err := ..., and check err"
	case undefinedMember.MatchString(msg):
		m := undefinedMember.FindStringSubmatch(msg)
		x, member, typ := m[1], m[2], m[3]
		switch {
		case member == "append" && strings.HasPrefix(typ, "[]"):
			return fmt.Sprintf("Go appends with a builtin: %s = append(%s, v)", x, x)
		case member == "numpy" && strings.Contains(typ, "tensor.Tensor"):
			return fmt.Sprintf("a tensor's values are %s.Data() (a []float32), a scalar's %s.Item()", x, x)
		case (member == "items" || member == "keys" || member == "values") && strings.HasPrefix(typ, "map["):
			return fmt.Sprintf("Go ranges over a map: for k, v := range %s { ... }", x)
		case typ == "string" && stringFuncs[member] != "":
			return fmt.Sprintf("Go's string functions are in package strings: %s", strings.ReplaceAll(stringFuncs[member], "{s}", x))
		}
		// A typo of a method or field: model.Complie.
		var sel *ast.SelectorExpr
		ast.Inspect(f, func(n ast.Node) bool {
			if se, ok := n.(*ast.SelectorExpr); ok && se.Sel.Pos() == e.Pos && se.Sel.Name == member {
				sel = se
			}
			return sel == nil
		})
		if sel != nil && info.Types[sel.X].Type != nil && !strings.Contains(msg, "but does have") {
			if near := nearest(member, typeMembers(info.Types[sel.X].Type)); near != "" {
				return fmt.Sprintf("did you mean %s.%s?", x, near)
			}
		}
	case strings.Contains(msg, "cannot indirect"):
		// x ** 2 parses as x * (*2).
		if line := fset.Position(e.Pos).Line; line >= 1 && line <= len(strings.Split(code, "\n")) && strings.Contains(strings.Split(code, "\n")[line-1], "**") {
			return "Go has no ** operator: math.Pow(x, y) for float64"
		}
	case strings.Contains(msg, "(no value) used as value"):
		return "this call returns nothing: call it as a statement of its own"
	}
	return ""
}

// submoduleHint gives the Go form of pkg.member.Name, a Python submodule path such as
// keras.callbacks.ReduceLROnPlateau: pkg.Name where the package has Name, layers.Name for
// keras.layers; "" otherwise.
func submoduleHint(f *ast.File, pos token.Pos, pkg, member string, imports []importSpec) string {
	var outer *ast.SelectorExpr
	ast.Inspect(f, func(n ast.Node) bool {
		if se, ok := n.(*ast.SelectorExpr); ok {
			if in, ok := se.X.(*ast.SelectorExpr); ok && in.Sel.Name == member && (in.Sel.Pos() == pos || in.Pos() == pos) {
				outer = se
			}
		}
		return outer == nil
	})
	if outer == nil {
		return ""
	}
	name := outer.Sel.Name
	for _, im := range imports {
		if im.localName() != pkg {
			continue
		}
		if p, err := symImporter.Import(im.Path); err == nil && p.Scope().Lookup(name) != nil {
			return fmt.Sprintf("Go's %s has no %s: write %s.%s", pkg, member, pkg, name)
		}
		if member == "layers" {
			return fmt.Sprintf("Keras' layers are package layers in Go: write layers.%s, with import \"godist/distlib/keras/layers\"", name)
		}
	}
	return ""
}

// typeText writes t as an error message does: package names, not paths.
func typeText(t types.Type) string {
	return types.TypeString(t, func(p *types.Package) string {
		if p.Path() == "main" {
			return ""
		}
		return p.Name()
	})
}

// methodNamed returns the method of t (or *t) of that name, nil if none.
func methodNamed(t types.Type, name string) *types.Func {
	obj, _, _ := types.LookupFieldOrMethod(t, true, nil, name)
	if f, ok := obj.(*types.Func); ok {
		return f
	}
	return nil
}
