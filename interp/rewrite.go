package interp

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"sort"
	"strings"
	"sync/atomic"
)

// Names the rewriter introduces. Cells should not use identifiers starting with _godist.
const (
	rtPkgName = "_godist"    // local name of the runtime helper package in every interpreter
	minFunc   = "_godistMin" // generic min, defined by the prelude
	maxFunc   = "_godistMax" // generic max, defined by the prelude
)

// hoistSeq numbers the temporaries that hold hoisted min and max calls.
var hoistSeq atomic.Int64

// rewriteEnv tells the rewriter what it cannot see in the chunk itself.
type rewriteEnv struct {
	// globalKind returns "int" when a global (variable or constant) name holds an integer,
	// "func" when it holds a function, "" when unknown or something else.
	globalKind func(name string) string
	// declared reports whether the session declares name at top level (a cell's func min
	// shadows the builtin).
	declared func(name string) bool
	// isGlobal reports whether name is a session variable or constant.
	isGlobal func(name string) bool
	// assignExisting turns a top-level `x, y := ...` whose names all exist into `x, y = ...`.
	assignExisting bool
	// plans are the constructs the cell's check planned: ranges over functions that
	// run as calls of the function (at the range's operand: the types of the yield values)
	// and new of a value (at the call: the value's type).
	plans map[planKey][]string
}

// rewriteChunk returns the chunk's text with the constructs yaegi cannot run rewritten into
// ones it can. Line breaks are kept, so positions in the result name the cell's lines:
//
//   - go f(x)                          -> { _godistA0 := x; go func() { defer recover...; f(_godistA0) }() }
//   - go func(...) {...}(...)          -> the literal gets a deferred recover first
//   - min(...), max(...)               -> the prelude's generic _godistMin / _godistMax
//   - clear(x)                         -> _godist.Clear(x)
//   - for k, v := range seq {...}      -> seq(func(k K, v V) bool {...; return true }), as
//     the cell's check planned it (env.plans), break and continue as return false and true
//   - new(v), v a value                -> &[]T{v}[0], T from the check's plan
//
// A range over a function that the check did not plan (it could not type the operand) is
// reported as an error when the operand is a literal or a global function.
func rewriteChunk(c *chunk, env rewriteEnv) (string, error) {
	pre, text, err := rewriteParts(c, env)
	return pre + text, err
}

// rewriteParts is rewriteChunk with the hoisted statements (pre, ending in "; ") apart from
// the rewritten chunk, for the final expression of a cell.
//
// yaegi cannot define a top-level variable from a generic call (x := min(a, b)), so
// top-level min and max calls are hoisted into statements before the chunk:
// `_godistT1 := a; _godistT1 = _godistMin(_godistT1, b); ` and the call becomes _godistT1.
// Top-level for, if, switch and select statements are put in a block so that their
// variables do not leak into the notebook's globals.
func rewriteParts(c *chunk, env rewriteEnv) (pre, text string, err error) {
	if c.Kind == chunkImport {
		return "", c.Text, nil
	}
	prefix := "package p;"
	if c.Kind == chunkStmt {
		prefix = "package p;func _(){"
	}
	padded := c.padded(prefix)
	base := len(prefix) + c.Line + c.Col - 1
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "cell", padded, parser.SkipObjectResolution)
	if err != nil {
		return "", "", shiftLines(err, -1)
	}
	tf := fset.File(f.Pos())
	off := func(p token.Pos) int { return tf.Offset(p) - base }
	rw := &rewriter{text: c.Text, off: off, env: env, ints: map[string]int{}, renamed: map[*ast.Ident]string{}, line: c.Line, col: c.Col}
	rw.collectInts(f)
	if c.Kind == chunkStmt {
		for _, st := range f.Decls[0].(*ast.FuncDecl).Body.List {
			if env.assignExisting {
				rw.assignExisting(st)
			}
			a, b := off(st.Pos()), off(st.End())
			open, closing := "{ ", " }"
			if needsFuncWrap(st) {
				// The outer block matters too: yaegi runs a top-level call of a function
				// literal again in every later evaluation.
				open, closing = "{ func() { ", " }() }"
			}
			if isLitCallStmt(st) {
				rw.edits = append(rw.edits, edit{a, a, func() string { return "{ " }}, edit{b, b, func() string { return " }" }})
			}
			switch st.(type) {
			case *ast.ForStmt, *ast.RangeStmt, *ast.IfStmt, *ast.SwitchStmt, *ast.TypeSwitchStmt, *ast.SelectStmt, *ast.BlockStmt, *ast.LabeledStmt:
				if open == "{ " {
					if _, ok := st.(*ast.BlockStmt); ok {
						break // a block already scopes its variables
					}
					if _, ok := st.(*ast.LabeledStmt); ok {
						break
					}
				}
				rw.edits = append(rw.edits, edit{a, a, func() string { return open }}, edit{b, b, func() string { return closing }})
			}
		}
	}
	var wrapper *ast.BlockStmt
	if c.Kind == chunkStmt {
		wrapper = f.Decls[0].(*ast.FuncDecl).Body
	}
	var rerr error
	var stack []ast.Node
	ast.Inspect(f, func(n ast.Node) bool {
		if n == nil {
			stack = stack[:len(stack)-1]
			return false
		}
		stack = append(stack, n)
		if rerr != nil {
			return false
		}
		switch n := n.(type) {
		case *ast.BlockStmt:
			if n != wrapper {
				rw.markLines(n.List)
			}
		case *ast.CaseClause:
			rw.markLines(n.Body)
		case *ast.CommClause:
			rw.markLines(n.Body)
		case *ast.ForStmt:
			if init, ok := n.Init.(*ast.AssignStmt); ok && init.Tok == token.DEFINE {
				rw.loopVars(init.Lhs, n.Body, []ast.Node{n.Init, n.Cond, n.Post})
			}
		case *ast.RangeStmt:
			if types, ok := rw.env.plans[planKey{"range", rw.cellPos(n.X)}]; ok {
				rw.rangeFunc(n, types) // each iteration is a call: its own variables
				break
			}
			if n.Tok == token.DEFINE {
				rw.loopVars([]ast.Expr{n.Key, n.Value}, n.Body, []ast.Node{n.Key, n.Value})
			}
			rerr = rw.rangeStmt(n)
		case *ast.GoStmt:
			rw.goStmt(n)
		case *ast.DeferStmt:
			if c.Kind == chunkStmt && !inFuncLit(stack) {
				rw.deferStmt(n, topLevel(stack))
			}
		case *ast.CallExpr:
			rw.builtinCall(n, c.Kind == chunkStmt && topLevel(stack))
		}
		return true
	})
	if rerr != nil {
		return "", "", rerr
	}
	text = rw.render(0, len(c.Text))
	if wrapper != nil && len(wrapper.List) > 0 {
		// The top-level statement marks its line first (in the hoisted part, so that a
		// final expression stays an expression).
		rw.hoisted = append([]string{rw.lineMark(wrapper.List[0])}, rw.hoisted...)
	}
	return strings.Join(rw.hoisted, ""), text, nil
}

// markVar is the interpreted global (a *int set by the prelude) that instrumented code
// writes the position of the statement it starts to: yaegi v0.16.1 reports a panic at the
// start of the top-level statement or function body it happened in, not at its place.
const markVar = "_godistLine"

// markLines puts a line mark before each statement of a list that may panic.
func (r *rewriter) markLines(list []ast.Stmt) {
	for _, st := range list {
		if !mayPanic(st) {
			continue
		}
		at := r.off(st.Pos())
		mark := r.lineMark(st)
		r.edits = append(r.edits, edit{at, at, func() string { return mark }})
	}
}

// lineMark returns the statement that records n's cell position: line<<16 | column.
func (r *rewriter) lineMark(n ast.Node) string {
	o := r.off(n.Pos())
	line := r.line + strings.Count(r.text[:o], "\n")
	col := o - strings.LastIndex(r.text[:o], "\n")
	if !strings.Contains(r.text[:o], "\n") {
		col = r.col + o
	}
	return fmt.Sprintf("*%s = %d; ", markVar, line<<16|min(col, 0xffff))
}

// mayPanic reports whether running st itself (a compound statement's header, not its
// body) may panic: a statement of plain arithmetic on names and constants gets no mark,
// so that tight interpreted loops stay as fast as they were.
func mayPanic(st ast.Stmt) bool {
	var parts []ast.Node
	switch st := st.(type) {
	case *ast.BranchStmt, *ast.EmptyStmt, *ast.LabeledStmt, *ast.CaseClause, *ast.CommClause:
		return false
	case *ast.BlockStmt:
		return false
	case *ast.ForStmt, *ast.RangeStmt, *ast.IfStmt, *ast.SwitchStmt, *ast.TypeSwitchStmt, *ast.SelectStmt:
		return true // once per run of the statement: cheap, and it covers the header
	case *ast.AssignStmt, *ast.IncDecStmt, *ast.ExprStmt, *ast.DeclStmt, *ast.ReturnStmt:
		parts = append(parts, st)
	default:
		return true // go, defer, send: calls or channel operations
	}
	risky := false
	for _, p := range parts {
		ast.Inspect(p, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncLit:
				return false
			case *ast.CallExpr, *ast.IndexExpr, *ast.IndexListExpr, *ast.SliceExpr, *ast.StarExpr,
				*ast.TypeAssertExpr, *ast.SelectorExpr:
				risky = true
			case *ast.BinaryExpr:
				risky = risky || n.Op == token.QUO || n.Op == token.REM
			case *ast.AssignStmt:
				risky = risky || n.Tok == token.QUO_ASSIGN || n.Tok == token.REM_ASSIGN
			case *ast.UnaryExpr:
				risky = risky || n.Op == token.ARROW
			}
			return !risky
		})
	}
	return risky
}

// needsFuncWrap reports whether a top-level compound statement must run inside a function
// literal: yaegi v0.16.1 leaves the variables of a multi-value definition (`a, err :=
// f()`, `v, ok := m[k]`, `var a, b = f()`) undefined when it sits in a block of top-level
// code (its compiler expects the global type analysis to have typed them, which only
// visits the top level), while inside a function it works. Statements whose meaning a
// function would change (return, defer, goto) are left alone.
func needsFuncWrap(st ast.Stmt) bool {
	switch st.(type) {
	case *ast.ForStmt, *ast.RangeStmt, *ast.IfStmt, *ast.SwitchStmt, *ast.TypeSwitchStmt, *ast.SelectStmt, *ast.BlockStmt, *ast.LabeledStmt:
	default:
		return false
	}
	multi, blocked := false, false
	ast.Inspect(st, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			return false
		case *ast.AssignStmt:
			multi = multi || n.Tok == token.DEFINE && len(n.Lhs) > 1 && len(n.Rhs) == 1
		case *ast.ValueSpec:
			multi = multi || len(n.Names) > 1 && len(n.Values) == 1
		case *ast.ReturnStmt, *ast.DeferStmt:
			blocked = true
		case *ast.BranchStmt:
			blocked = blocked || n.Tok == token.GOTO
		}
		return !blocked
	})
	return multi && !blocked
}

// isLitCallStmt reports whether st calls a function literal that returns nothing
// (`func() { ... }()`). yaegi v0.16.1 runs such a top-level statement again in every later
// evaluation of the interpreter; inside a block it does not.
func isLitCallStmt(st ast.Stmt) bool {
	es, ok := st.(*ast.ExprStmt)
	if !ok {
		return false
	}
	call, ok := ast.Unparen(es.X).(*ast.CallExpr)
	if !ok {
		return false
	}
	lit, ok := ast.Unparen(call.Fun).(*ast.FuncLit)
	return ok && lit.Type.Results == nil
}

// topLevel reports whether the innermost node of a statement chunk's stack runs at the
// notebook's top level: not inside a function literal or a block.
func topLevel(stack []ast.Node) bool {
	blocks := 0
	for _, n := range stack {
		switch n.(type) {
		case *ast.FuncLit:
			return false
		case *ast.BlockStmt:
			blocks++
		}
	}
	return blocks <= 1 // the wrapper function's body
}

// edit replaces text[start:end] with what gen returns; gen may render nested edits.
type edit struct {
	start, end int
	gen        func() string
}

type rewriter struct {
	text  string
	off   func(token.Pos) int
	env   rewriteEnv
	edits []edit
	ints  map[string]int // local names: >0 declared as integers only, <0 also as something else
	seq   int
	line  int // cell line of the text's start
	col   int // cell column of the text's start

	hoisted []string              // statements to run before the chunk
	renamed map[*ast.Ident]string // loop variables loopVars renamed in their loop's header
}

// assignExisting rewrites a top-level definition of existing variables as an assignment.
func (r *rewriter) assignExisting(st ast.Stmt) {
	a, ok := st.(*ast.AssignStmt)
	if !ok || a.Tok != token.DEFINE || r.env.isGlobal == nil {
		return
	}
	for _, lhs := range a.Lhs {
		id, ok := lhs.(*ast.Ident)
		if !ok || (id.Name != "_" && !r.env.isGlobal(id.Name)) {
			return
		}
	}
	at := r.off(a.TokPos)
	r.edits = append(r.edits, edit{at, at + 2, func() string { return "=" }})
}

// definedNames returns the variables a statement chunk defines at top level.
func definedNames(c *chunk) []string {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "cell", c.padded("package p;func _(){"), parser.SkipObjectResolution)
	if err != nil {
		return nil
	}
	var names []string
	for _, st := range f.Decls[0].(*ast.FuncDecl).Body.List {
		switch st := st.(type) {
		case *ast.AssignStmt:
			if st.Tok == token.DEFINE {
				for _, lhs := range st.Lhs {
					if id, ok := lhs.(*ast.Ident); ok && id.Name != "_" {
						names = append(names, id.Name)
					}
				}
			}
		case *ast.DeclStmt:
			if gd, ok := st.Decl.(*ast.GenDecl); ok && gd.Tok == token.VAR {
				for _, sp := range gd.Specs {
					for _, n := range sp.(*ast.ValueSpec).Names {
						names = append(names, n.Name)
					}
				}
			}
		}
	}
	return names
}

// render returns text[start:end] with the outermost edits inside it applied.
func (r *rewriter) render(start, end int) string {
	var in []edit
	for _, e := range r.edits {
		if e.start >= start && e.end <= end {
			in = append(in, e)
		}
	}
	sort.SliceStable(in, func(i, j int) bool {
		if in[i].start != in[j].start {
			return in[i].start < in[j].start
		}
		if (in[i].start == in[i].end) != (in[j].start == in[j].end) {
			return in[i].start == in[i].end // insertions first
		}
		return in[i].end > in[j].end
	})
	var b strings.Builder
	pos := start
	for _, e := range in {
		if e.start < pos {
			continue // nested in an edit already applied; its generator rendered it
		}
		b.WriteString(r.text[pos:e.start])
		b.WriteString(e.gen())
		pos = e.end
	}
	b.WriteString(r.text[pos:end])
	return b.String()
}

func (r *rewriter) src(n ast.Node) string { return r.render(r.off(n.Pos()), r.off(n.End())) }

// collectInts records local names declared with an integer type or initialized from an
// integer expression; a name also declared otherwise is marked ambiguous.
func (r *rewriter) collectInts(f *ast.File) {
	mark := func(name string, isInt bool) {
		if name == "_" {
			return
		}
		switch {
		case !isInt:
			r.ints[name] = -1
		case r.ints[name] >= 0:
			r.ints[name] = 1
		}
	}
	for pass := 0; pass < 2; pass++ {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.Field:
				for _, name := range n.Names {
					mark(name.Name, isIntType(n.Type))
				}
			case *ast.ValueSpec:
				for i, name := range n.Names {
					if n.Type != nil {
						mark(name.Name, isIntType(n.Type))
					} else if i < len(n.Values) && len(n.Values) == len(n.Names) {
						mark(name.Name, r.intLike(n.Values[i]))
					}
				}
			case *ast.AssignStmt:
				if n.Tok == token.DEFINE {
					for i, lhs := range n.Lhs {
						if id, ok := lhs.(*ast.Ident); ok {
							mark(id.Name, len(n.Rhs) == len(n.Lhs) && r.intLike(n.Rhs[i]))
						}
					}
				}
			case *ast.RangeStmt:
				if n.Tok == token.DEFINE {
					if id, ok := n.Key.(*ast.Ident); ok {
						mark(id.Name, r.intLike(n.X) || isSliceLike(n.X))
					}
					if id, ok := n.Value.(*ast.Ident); ok {
						mark(id.Name, false)
					}
				}
			}
			return true
		})
	}
}

var intTypes = map[string]bool{"int": true, "int8": true, "int16": true, "int32": true, "int64": true,
	"uint": true, "uint8": true, "uint16": true, "uint32": true, "uint64": true, "uintptr": true, "byte": true, "rune": true}

func isIntType(e ast.Expr) bool {
	id, ok := e.(*ast.Ident)
	return ok && intTypes[id.Name]
}

func isSliceLike(e ast.Expr) bool {
	switch x := e.(type) {
	case *ast.CompositeLit:
		_, ok := x.Type.(*ast.ArrayType)
		return ok
	case *ast.BasicLit:
		return x.Kind == token.STRING
	}
	return false
}

// intLike reports whether e is certainly an integer expression.
func (r *rewriter) intLike(e ast.Expr) bool {
	switch x := e.(type) {
	case *ast.BasicLit:
		return x.Kind == token.INT
	case *ast.ParenExpr:
		return r.intLike(x.X)
	case *ast.UnaryExpr:
		return (x.Op == token.SUB || x.Op == token.ADD || x.Op == token.XOR) && r.intLike(x.X)
	case *ast.BinaryExpr:
		switch x.Op {
		case token.SHL, token.SHR:
			return r.intLike(x.X)
		case token.ADD, token.SUB, token.MUL, token.QUO, token.REM, token.AND, token.OR, token.XOR, token.AND_NOT:
			return r.intLike(x.X) || r.intLike(x.Y)
		}
	case *ast.CallExpr:
		if id, ok := x.Fun.(*ast.Ident); ok && !r.env.declared(id.Name) {
			return id.Name == "len" || id.Name == "cap" || intTypes[id.Name]
		}
	case *ast.Ident:
		if v, ok := r.ints[x.Name]; ok {
			return v > 0
		}
		return r.env.globalKind != nil && r.env.globalKind(x.Name) == "int"
	}
	return false
}

func (r *rewriter) rangeStmt(n *ast.RangeStmt) error {
	if _, ok := n.X.(*ast.FuncLit); ok {
		return fmt.Errorf("%s: range over a function is not supported by the interpreter: call the iterator with a yield function instead", r.position(n))
	}
	if id, ok := n.X.(*ast.Ident); ok && r.ints[id.Name] == 0 && r.env.globalKind != nil && r.env.globalKind(id.Name) == "func" {
		return fmt.Errorf("%s: range over the function %s is not supported by the interpreter: call it with a yield function instead", r.position(n), id.Name)
	}
	return nil
}

// cellPos returns the cell position of n.
func (r *rewriter) cellPos(n ast.Node) cellPos {
	o := r.off(n.Pos())
	line := r.line + strings.Count(r.text[:o], "\n")
	col := o - strings.LastIndex(r.text[:o], "\n")
	if !strings.Contains(r.text[:o], "\n") {
		col = r.col + o
	}
	return cellPos{line, col}
}

// rangeFunc runs a range over a function (Go 1.23) as a call of the function with the
// loop's body as the yield function, which yaegi can run:
//
//	for k, v := range seq { BODY }  ->  seq(func(k K, v V) bool { BODY; return true })
//
// with the loop's own break and continue as return false and return true. The cell's
// check planned it (a body without return, defer, goto or jumps out) and gave K and V.
func (r *rewriter) rangeFunc(n *ast.RangeStmt, types []string) {
	vars := []ast.Expr{n.Key, n.Value}
	params := make([]string, len(types))
	for i := range params {
		name := "_"
		if i < len(vars) {
			if id, ok := vars[i].(*ast.Ident); ok {
				name = id.Name
			}
		}
		params[i] = name + " " + types[i]
	}
	x := n.X
	r.edits = append(r.edits, edit{r.off(n.For), r.off(n.Body.Lbrace) + 1, func() string {
		return fmt.Sprintf("%s(func(%s) bool {", r.src(x), strings.Join(params, ", "))
	}})
	end := r.off(n.Body.Rbrace)
	r.edits = append(r.edits, edit{end, end + 1, func() string { return "; return true })" }})
	breaks, continues, _ := rangeFuncBody(n.Body)
	for _, b := range breaks {
		r.edits = append(r.edits, edit{r.off(b.Pos()), r.off(b.End()), func() string { return "return false" }})
	}
	for _, c := range continues {
		r.edits = append(r.edits, edit{r.off(c.Pos()), r.off(c.End()), func() string { return "return true" }})
	}
}

// loopVars gives each iteration of a loop its own copy of the loop's variables, as Go 1.22
// does: yaegi keeps one variable for the whole loop, so closures (and goroutines) made in
// the body all saw its last value. The loop's header gets a temporary name for the
// variable, and the body defines the variable from it:
// `for _godistV1 := 0; _godistV1 < 3; _godistV1++ { i := _godistV1; BODY }`
// (`i := i`, or a nested block, would make yaegi's top-level code reuse the loop's own
// variable). Only a body that makes closures, defers or starts goroutines and uses the
// variable is rewritten; a body that assigns the variable or takes its address is left
// alone, since the copy would hide the change from the loop's post statement.
func (r *rewriter) loopVars(vars []ast.Expr, body *ast.BlockStmt, header []ast.Node) {
	var names []string
	for _, e := range vars {
		if id, ok := e.(*ast.Ident); ok && id.Name != "_" {
			names = append(names, id.Name)
		}
	}
	if len(names) == 0 || body == nil {
		return
	}
	captures := false
	used, changed := map[string]bool{}, map[string]bool{}
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit, *ast.DeferStmt, *ast.GoStmt:
			captures = true
		case *ast.Ident:
			used[n.Name] = true
		case *ast.AssignStmt:
			for _, l := range n.Lhs {
				if id, ok := l.(*ast.Ident); ok {
					changed[id.Name] = true
				}
			}
		case *ast.IncDecStmt:
			if id, ok := n.X.(*ast.Ident); ok {
				changed[id.Name] = true
			}
		case *ast.UnaryExpr:
			if id, ok := n.X.(*ast.Ident); ok && n.Op == token.AND {
				changed[id.Name] = true
			}
		}
		return true
	})
	if !captures {
		return
	}
	temp := map[string]string{}
	var copies, temps []string
	for _, name := range names {
		if used[name] && !changed[name] {
			r.seq++
			temp[name] = fmt.Sprintf("_godistV%d", r.seq)
			copies = append(copies, name)
			temps = append(temps, temp[name])
		}
	}
	if len(copies) == 0 {
		return
	}
	for _, h := range header {
		if h == nil || reflect.ValueOf(h).IsNil() {
			continue
		}
		ast.Inspect(h, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncLit:
				return false
			case *ast.SelectorExpr:
				ast.Inspect(n.X, func(m ast.Node) bool { return r.renameIdent(m, temp) })
				return false
			}
			return r.renameIdent(n, temp)
		})
	}
	open := fmt.Sprintf(" %s := %s; ", strings.Join(copies, ", "), strings.Join(temps, ", "))
	at := r.off(body.Lbrace) + 1
	r.edits = append(r.edits, edit{at, at, func() string { return open }})
}

// renameIdent renames an identifier of the map (for loopVars); it returns true to go on.
func (r *rewriter) renameIdent(n ast.Node, to map[string]string) bool {
	if id, ok := n.(*ast.Ident); ok {
		if t, ok := to[id.Name]; ok {
			r.renamed[id] = t
			r.edits = append(r.edits, edit{r.off(id.Pos()), r.off(id.End()), func() string { return t }})
		}
	}
	return true
}

// position formats n's position the way yaegi does (line+1:col), for compileError.
func (r *rewriter) position(n ast.Node) string {
	o := r.off(n.Pos())
	line := r.line + strings.Count(r.text[:o], "\n")
	col := o - strings.LastIndex(r.text[:o], "\n")
	return fmt.Sprintf("%d:%d", line+1, col)
}

const recoverStmt = "defer func() { if _godistR := recover(); _godistR != nil { " + rtPkgName + ".GoPanic(_godistR) } }(); "

func (r *rewriter) goStmt(n *ast.GoStmt) {
	call := n.Call
	if lit, ok := call.Fun.(*ast.FuncLit); ok {
		at := r.off(lit.Body.Lbrace) + 1
		r.edits = append(r.edits, edit{at, at, func() string { return " " + recoverStmt }})
		return
	}
	r.seq++
	seq := r.seq
	r.edits = append(r.edits, edit{r.off(n.Pos()), r.off(n.End()), func() string {
		decl, text := r.captureCall(call, seq)
		return fmt.Sprintf("{ %sgo func() { %s%s }() }", decl, recoverStmt, text)
	}})
}

// deferStmt rewrites a defer statement of a cell's top-level code (outside any function):
// yaegi keeps it in the interpreter's global frame and runs it again after every later
// evaluation. The call's arguments are evaluated now, as Go does, and the call is handed to
// the session, which runs it once, when the cell ends (last deferred first).
//
// The temporaries holding the arguments sit in a block at the top level (so that they do
// not become globals), but right in the statement list elsewhere: a temporary in a nested
// block of a loop body is one variable for all iterations in yaegi's top-level code.
func (r *rewriter) deferStmt(n *ast.DeferStmt, top bool) {
	call := n.Call
	r.seq++
	seq := r.seq
	r.edits = append(r.edits, edit{r.off(n.Pos()), r.off(n.End()), func() string {
		decl, text := r.captureCall(call, seq)
		stmt := fmt.Sprintf("%s%s.Defer(func() { %s })", decl, rtPkgName, text)
		if top {
			return "{ " + stmt + " }"
		}
		return stmt
	}})
}

// captureCall returns a definition of temporaries holding call's arguments (empty, or
// ending in "; ") and the call of call.Fun with them, for a go or defer statement.
func (r *rewriter) captureCall(call *ast.CallExpr, seq int) (decl, text string) {
	var names, vals []string
	args := make([]string, len(call.Args))
	for i, a := range call.Args {
		src := r.src(a)
		if lit, ok := a.(*ast.BasicLit); ok && lit.Kind != token.IMAG || isFuncLit(a) {
			args[i] = src // constants keep their untyped-ness; literals have no state to capture
			continue
		}
		name := fmt.Sprintf("_godistA%d_%d", seq, i)
		names = append(names, name)
		vals = append(vals, src)
		args[i] = name
	}
	ell := ""
	if call.Ellipsis.IsValid() {
		ell = "..."
	}
	if len(names) > 0 {
		decl = fmt.Sprintf("%s := %s; ", strings.Join(names, ", "), strings.Join(vals, ", "))
	}
	return decl, fmt.Sprintf("%s(%s%s)", r.src(call.Fun), strings.Join(args, ", "), ell)
}

// inFuncLit reports whether the innermost node of the stack is inside a function literal.
func inFuncLit(stack []ast.Node) bool {
	for _, n := range stack {
		if _, ok := n.(*ast.FuncLit); ok {
			return true
		}
	}
	return false
}

func isFuncLit(e ast.Expr) bool {
	_, ok := e.(*ast.FuncLit)
	return ok
}

func (r *rewriter) builtinCall(n *ast.CallExpr, top bool) {
	id, ok := n.Fun.(*ast.Ident)
	if !ok {
		return
	}
	if t, ok := r.env.plans[planKey{"new", r.cellPos(n)}]; ok && len(n.Args) == 1 {
		// new of a value (Go 1.26), planned by the cell's check with the value's type.
		arg := n.Args[0]
		r.edits = append(r.edits, edit{r.off(n.Pos()), r.off(n.End()), func() string {
			return fmt.Sprintf("&[]%s{%s}[0]", t[0], r.src(arg))
		}})
		return
	}
	if r.env.declared(id.Name) || r.ints[id.Name] != 0 {
		return
	}
	switch id.Name {
	case "min", "max":
		fn := minFunc
		if id.Name == "max" {
			fn = maxFunc
		}
		args := n.Args
		r.edits = append(r.edits, edit{r.off(n.Pos()), r.off(n.End()), func() string {
			// The generic helper infers its type from the first argument: put a typed
			// argument first (min and max do not depend on the order).
			order := make([]ast.Expr, len(args))
			copy(order, args)
			for i, a := range order {
				if _, lit := a.(*ast.BasicLit); !lit {
					order[0], order[i] = order[i], order[0]
					break
				}
			}
			parts := make([]string, len(order))
			for i, a := range order {
				parts[i] = r.src(a)
			}
			if !top {
				return fn + "(" + strings.Join(parts, ", ") + ")"
			}
			// Unique in the session: two statements of one cell hoist into one source.
			tmp := fmt.Sprintf("_godistT%d", hoistSeq.Add(1))
			stmt := fmt.Sprintf("%s := %s; ", tmp, oneLine(parts[0]))
			if len(parts) > 1 {
				stmt += fmt.Sprintf("%s = %s(%s, %s); ", tmp, fn, tmp, oneLine(strings.Join(parts[1:], ", ")))
			}
			r.hoisted = append(r.hoisted, stmt)
			// Keep the call's line breaks so that later positions stay right.
			return tmp + strings.Repeat("\n", strings.Count(r.text[r.off(n.Pos()):r.off(n.End())], "\n"))
		}})
	case "clear":
		r.edits = append(r.edits, edit{r.off(id.Pos()), r.off(id.End()), func() string { return rtPkgName + ".Clear" }})
	}
}

// oneLine joins a multi-line expression onto one line (hoisted statements sit on the
// chunk's first line).
func oneLine(s string) string {
	return strings.ReplaceAll(s, "\n", " ")
}
