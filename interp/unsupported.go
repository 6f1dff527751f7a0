package interp

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"runtime"
	"strconv"
	"strings"

	"godist/internal/memlimit"
)

// This file refuses, before anything runs, what the interpreter or the process cannot run:
// valid Go that yaegi does not run, arrays larger than the memory, packages the kernel lacks.

// unsupported refuses, before anything runs, the valid Go that the interpreter cannot run:
// a range over a function (Go 1.23) whose body returns, defers or jumps out of it, a
// generic type alias (Go 1.24) and new of a value (Go 1.26) of a type the cell cannot name,
// each with the Go form that runs.
//
// A range over a function that can run as a call of the function with the loop body as
// its yield function is not refused: plans gets the cell position of its operand and the
// yield values' types as the cell writes them, for the rewriter.
func unsupported(f *ast.File, fset *token.FileSet, info *types.Info, code string, imports []importSpec, plans map[planKey][]string) error {
	var err error
	labeled := map[ast.Stmt]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		if l, ok := n.(*ast.LabeledStmt); ok {
			labeled[l.Stmt] = true
		}
		return true
	})
	ast.Inspect(f, func(n ast.Node) bool {
		if err != nil {
			return false
		}
		at := func(p token.Pos, msg string) {
			pos := fset.Position(p)
			if pos.Filename == "cell" {
				err = cellError(pos.Line, pos.Column, msg, code)
			}
		}
		switch n := n.(type) {
		case *ast.ValueSpec, *ast.CompositeLit:
			err = arrayTooLarge(n, fset, info, code)
		case *ast.RangeStmt:
			sig, ok := info.Types[n.X].Type.(*types.Signature)
			if !ok {
				if t := info.Types[n.X].Type; t != nil {
					sig, _ = t.Underlying().(*types.Signature)
				}
			}
			if sig == nil || sig.Params().Len() != 1 {
				return true
			}
			yield, _ := sig.Params().At(0).Type().Underlying().(*types.Signature)
			if yield == nil {
				return true
			}
			var params, typeTexts []string
			expressible := true
			for i := 0; i < yield.Params().Len(); i++ {
				name := "v"
				if i == 0 && yield.Params().Len() == 2 {
					name = "k"
				}
				pt := yield.Params().At(i).Type()
				params = append(params, name+" "+typeText(pt))
				tt, ok := sourceTypeText(pt, imports)
				expressible = expressible && ok
				typeTexts = append(typeTexts, tt)
			}
			_, _, why := rangeFuncBody(n.Body)
			switch {
			case labeled[n]:
				why = "a label"
			case n.Tok == token.ASSIGN:
				why = "variables assigned (=) rather than defined (:=)"
			case !expressible:
				why = "yield values of a type the cell cannot name"
			case yield.Results().Len() != 1:
				why = "a yield function that does not return bool"
			}
			if why == "" {
				pos := fset.Position(n.X.Pos())
				plans[planKey{"range", cellPos{pos.Line, pos.Column}}] = typeTexts
				return true
			}
			x, call := types.ExprString(n.X), types.ExprString(n.X)
			if _, lit := ast.Unparen(n.X).(*ast.FuncLit); lit {
				x, call = "func literal", "func(yield ...) { ... }"
			}
			at(n.X.Pos(), fmt.Sprintf("cannot range over %s (value of type %s): the interpreter runs a range-over-func loop (Go 1.23) only without %s\n"+
				"call the iterator with the loop body as its yield function: %s(func(%s) bool { ...; return true }) (return false to break)",
				x, typeText(info.Types[n.X].Type), why, call, strings.Join(params, ", ")))
		case *ast.TypeSpec:
			if n.Assign.IsValid() && n.TypeParams != nil && n.TypeParams.NumFields() > 0 {
				at(n.Pos(), fmt.Sprintf("generic type alias %s: the interpreter does not run generic type aliases (Go 1.24)\n"+
					"declare a generic type instead: type %s%s %s", n.Name.Name, n.Name.Name, fieldListText(n.TypeParams), types.ExprString(n.Type)))
			}
		case *ast.CallExpr:
			if id, ok := n.Fun.(*ast.Ident); ok && id.Name == "new" && len(n.Args) == 1 {
				if tv := info.Types[n.Args[0]]; tv.IsType() {
					err = sizeError(n, tv.Type, "new("+types.ExprString(n.Args[0])+")", fset, code)
				}
				if err != nil {
					return false
				}
				if obj, ok := info.Uses[id].(*types.Builtin); ok && obj.Name() == "new" && !info.Types[n.Args[0]].IsType() {
					// new of a value (Go 1.26) runs as &[]T{value}[0] where the cell can
					// name T.
					if t := info.Types[n.Args[0]].Type; t != nil {
						if text, ok := sourceTypeText(types.Default(t), imports); ok {
							pos := fset.Position(n.Pos())
							plans[planKey{"new", cellPos{pos.Line, pos.Column}}] = []string{text}
							return true
						}
					}
					v := types.ExprString(n.Args[0])
					at(n.Pos(), fmt.Sprintf("new(%s): the interpreter runs new of a value (Go 1.26) only of a type the cell can name\n"+
						"write v := %s and then &v", v, v))
				}
			}
		}
		return true
	})
	return err
}

// fieldListText writes a type parameter list: [T any, U comparable].
func fieldListText(fl *ast.FieldList) string {
	var parts []string
	for _, f := range fl.List {
		var names []string
		for _, n := range f.Names {
			names = append(names, n.Name)
		}
		parts = append(parts, strings.Join(names, ", ")+" "+types.ExprString(f.Type))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// rangeFuncBody finds, in the body of a range over a function, the break and continue
// statements of that loop (which become return false and return true when the body runs
// as the yield function); why says what keeps the body from running so: a return, a
// defer, a goto, or a break or continue of an outer statement.
func rangeFuncBody(body *ast.BlockStmt) (breaks, continues []*ast.BranchStmt, why string) {
	inner := map[string]bool{} // labels declared inside the body
	ast.Inspect(body, func(n ast.Node) bool {
		if l, ok := n.(*ast.LabeledStmt); ok {
			inner[l.Label.Name] = true
		}
		_, lit := n.(*ast.FuncLit)
		return !lit
	})
	var walk func(n ast.Node, inLoop, inBreakable bool)
	walk = func(root ast.Node, inLoop, inBreakable bool) {
		ast.Inspect(root, func(n ast.Node) bool {
			if n == root || why != "" {
				return why == ""
			}
			switch n := n.(type) {
			case *ast.FuncLit:
				return false
			case *ast.ForStmt:
				walk(n.Body, true, true)
				return false
			case *ast.RangeStmt:
				walk(n.Body, true, true)
				return false
			case *ast.SwitchStmt:
				walk(n.Body, inLoop, true)
				return false
			case *ast.TypeSwitchStmt:
				walk(n.Body, inLoop, true)
				return false
			case *ast.SelectStmt:
				walk(n.Body, inLoop, true)
				return false
			case *ast.ReturnStmt:
				why = "a return in its body"
			case *ast.DeferStmt:
				why = "a defer in its body"
			case *ast.BranchStmt:
				switch {
				case n.Tok == token.GOTO:
					why = "a goto in its body"
				case n.Label != nil:
					if !inner[n.Label.Name] {
						why = "a " + n.Tok.String() + " of an outer statement in its body"
					}
				case n.Tok == token.CONTINUE && !inLoop:
					continues = append(continues, n)
				case n.Tok == token.BREAK && !inBreakable:
					breaks = append(breaks, n)
				}
			}
			return true
		})
	}
	walk(body, false, false)
	return breaks, continues, why
}

// sourceTypeText writes t as the cell's source can: packages by the names the session
// imports them as; ok is false when a package of t is not imported.
func sourceTypeText(t types.Type, imports []importSpec) (string, bool) {
	ok := true
	text := types.TypeString(t, func(p *types.Package) string {
		if p.Path() == "main" {
			return ""
		}
		for _, im := range imports {
			if im.Path == p.Path() {
				return im.localName()
			}
		}
		ok = false
		return p.Name()
	})
	return text, ok
}

// goSizes are the sizes of types in this process.
var goSizes = types.SizesFor("gc", runtime.GOARCH)

// arrayTooLarge refuses a variable or composite literal of an array type larger than the
// memory the process may use (`var grid [1 << 34]float32`), which would end the process in
// the runtime's fatal "out of memory" when the interpreter allocates it.
func arrayTooLarge(n ast.Node, fset *token.FileSet, info *types.Info, code string) error {
	switch n := n.(type) {
	case *ast.ValueSpec:
		if n.Type != nil {
			return sizeError(n, info.Types[n.Type].Type, "var "+n.Names[0].Name+" "+types.ExprString(n.Type), fset, code)
		}
	case *ast.CompositeLit:
		if t := info.Types[n].Type; t != nil {
			return sizeError(n, t, types.ExprString(n.Type)+"{...}", fset, code)
		}
	}
	return nil
}

// sizeError returns a MemoryError at n's cell line when a value of type t does not fit in
// the memory the process may use.
func sizeError(n ast.Node, t types.Type, what string, fset *token.FileSet, code string) error {
	if t == nil {
		return nil
	}
	if _, isArray := t.Underlying().(*types.Array); !isArray {
		return nil
	}
	size := func() (s int64) {
		defer func() {
			if recover() != nil {
				s = -1 // a size overflowing int64
			}
		}()
		return goSizes.Sizeof(t)
	}()
	var err error
	if size < 0 {
		err = memlimit.CheckElems(what, -1, 1)
	} else {
		err = memlimit.Check(what, uint64(size))
	}
	if err == nil {
		return nil
	}
	pos := fset.Position(n.Pos())
	if pos.Filename != "cell" {
		return nil
	}
	out := cellError(pos.Line, pos.Column, err.Error(), code).(*EvalError)
	out.Name = "MemoryError"
	out.Traceback[0] = out.Name + ": " + out.Value
	return out
}

// pythonPackages are the Python packages a translation imports, and what to use instead.
var pythonPackages = map[string]string{
	"numpy":      "godist/distlib/tensor (tensor.Constant, tensor.Zeros, tensor.MatMul, ...)",
	"tensorflow": "the godist/distlib packages: distribute, keras, keras/layers, data, tensor (notebooks/README.md maps them)",
	"keras":      "godist/distlib/keras and godist/distlib/keras/layers",
	"torch":      "godist/distlib/tensor and godist/distlib/keras",
	"pandas":     "encoding/csv with godist/distlib/data",
	"matplotlib": "History.Plot of godist/distlib/keras, or godist/distlib/display",
}

// missingImport refuses an import of a package the kernel does not have, before the
// interpreter says that GOPATH is not set.
func missingImport(chunks []*chunk, code string) error {
	for _, c := range chunks {
		if c.Kind != chunkImport {
			continue
		}
		for _, im := range c.Imports {
			if packageAvailable(im.Path) {
				continue
			}
			line, col := c.Line, c.Col
			quoted := strconv.Quote(im.Path)
			if i := strings.Index(c.Text, quoted); i >= 0 {
				line += strings.Count(c.Text[:i], "\n")
				if nl := strings.LastIndex(c.Text[:i], "\n"); nl >= 0 {
					col = i - nl
				} else {
					col += i
				}
			}
			msg := fmt.Sprintf("could not import %s (the kernel has the standard library and godist's packages, not this one)", im.Path)
			if use := pythonPackages[strings.SplitN(im.Path, "/", 2)[0]]; use != "" {
				msg += "\n" + im.Path + " is Python's; in Go use " + use
			}
			return cellError(line, col, msg, code)
		}
	}
	return nil
}

// packageAvailable reports whether a session's interpreter can import path: a package of
// the symbol tables (unrestricted's included) or of the session's own helpers.
func packageAvailable(path string) bool {
	return packageSymbols(path) != nil || path == rtPath || path == carryPath
}
