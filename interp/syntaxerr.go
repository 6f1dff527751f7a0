package interp

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"godist/interp/internal/syntax"
)

// This file reports a cell that does not parse, in gc's parser's words, with the Go form
// of the Python syntax on its line.

// syntaxHints give the Go form of Python syntax found on the line of a syntax error.
var syntaxHints = []struct {
	re   *regexp.Regexp
	hint string
}{
	{regexp.MustCompile(`\bdef\s+\w+\s*\(`), "Go declares a function with func: func name(x float32) float32 { ... }"},
	{regexp.MustCompile(`\bfor\s+\w+(\s*,\s*\w+)?\s+in\b`), "Go loops with range: for i := range n { ... }, or for i, x := range xs { ... }"},
	{regexp.MustCompile(`\b(import\s+\w+\s+as|from\s+[\w.]+\s+import)\b`), "Go imports a package by its path: import \"godist/distlib/keras\", or import k \"godist/distlib/keras\" to name it k"},
	{regexp.MustCompile(`\bf"`), "Go formats a string with fmt.Sprintf(\"%v\", x) (or fmt.Println(a, b))"},
	{regexp.MustCompile(`\*\*`), "Go has no ** operator: math.Pow(x, y) for float64"},
	{regexp.MustCompile(`[(,]\s*[A-Za-z_]\w*\s*=[^=]`), "Go has no keyword arguments: pass the arguments in order; distlib takes options as values, e.g. model.Fit(ds, keras.Epochs(5))"},
	{regexp.MustCompile(`(^|[^!<>=])=\s*\[|\(\s*\[`), "Go writes a list as a slice literal with its type: []float32{1, 2, 3}"},
	{regexp.MustCompile(`(^|[^!<>=])=\s*\{`), "Go writes a dict as a map literal with its type: map[string]int{\"a\": 1}"},
	{regexp.MustCompile(`^\s*print\s+[^\s(]`), "Go prints with a call: fmt.Println(x)"},
	{regexp.MustCompile(`\b(and|or|not)\b`), "Go's boolean operators are &&, || and !"},
	{regexp.MustCompile(`\b(if|for|while|else|elif)\b.*:\s*$`), "Go puts a block in braces, not after a colon: if x > 0 { ... }"},
	{regexp.MustCompile(`\bwhile\b`), "Go's while loop is for: for cond { ... }"},
	{regexp.MustCompile(`\blambda\b`), "Go writes a lambda as a function literal: func(x float32) float32 { return 2 * x }"},
}

// syntaxError reports a cell that does not parse: "syntax error: " and the parser's
// message at the cell line, and the Go form when the line holds Python syntax.
func syntaxError(err error, code string) error {
	out := compileError(err, code)
	var ee *EvalError
	if !errors.As(out, &ee) || ee.Name != "CompileError" {
		return out
	}
	var line int
	if _, serr := fmt.Sscanf(ee.Value, "cell line %d:", &line); serr != nil {
		return out
	}
	prefix := fmt.Sprintf("cell line %d: ", line)
	msg := strings.TrimPrefix(ee.Value, prefix)
	var ce *chunkError
	if errors.As(err, &ce) {
		if gl, gcol, gmsg, ok := gcSyntaxError(ce.c); ok {
			out := cellError(gl, gcol, gmsg, code).(*EvalError)
			ee, line, msg = out, gl, gmsg
			prefix = fmt.Sprintf("cell line %d: ", line)
		}
	}
	if !strings.HasPrefix(msg, "syntax error") {
		msg = "syntax error: " + msg
	}
	lines := strings.Split(code, "\n")
	if line >= 1 && line <= len(lines) {
		for _, h := range syntaxHints {
			if h.re.MatchString(lines[line-1]) {
				msg += "\n" + h.hint
				break
			}
		}
	}
	ee.Value = prefix + msg
	ee.Traceback[0] = ee.Name + ": " + ee.Value
	return ee
}

// gcSyntaxError parses a chunk that go/parser refused with gc's parser (a copy of
// cmd/compile/internal/syntax) and returns its first error: the cell line and column and
// gc's message ("syntax error: unexpected = in argument list; possibly missing comma or )").
func gcSyntaxError(c *chunk) (line, col int, msg string, ok bool) {
	prefix := "package p;"
	if c.Kind == chunkStmt {
		prefix = "package p;func _(){"
	}
	var first *syntax.Error
	_, _ = syntax.Parse(syntax.NewFileBase("cell"), strings.NewReader(c.padded(prefix)), func(err error) {
		if e, isSyntax := err.(syntax.Error); isSyntax && first == nil {
			first = &e
		}
	}, nil, 0)
	if first == nil || first.Pos.Line() < 2 {
		return 0, 0, "", false
	}
	return int(first.Pos.Line()) - 1, int(first.Pos.Col()), first.Msg, true
}
