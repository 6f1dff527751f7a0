package interp

import (
	"errors"
	"fmt"
	"go/scanner"
	"go/token"
	"regexp"
	"strconv"
	"strings"
)

// This file maps the errors of the parser, yaegi and the check to the cell: a line, a
// caret and words a student can act on.

// posRE finds the leading "line:col: " of a yaegi or parser error.
var posRE = regexp.MustCompile(`^(?:[^\s:]*:)?(\d+):(\d+): `)

// compileError turns a parse, rewrite or yaegi compile error into an EvalError naming the
// cell's line, with the line and a caret in the traceback. Positions in yaegi errors are
// one line below the cell's (the source prefix line).
func compileError(err error, code string) error {
	var ee *EvalError
	if errors.As(err, &ee) {
		return ee
	}
	var line, col int
	msg := err.Error()
	var list scanner.ErrorList
	if errors.As(err, &list) && len(list) > 0 {
		line, col, msg = list[0].Pos.Line, list[0].Pos.Column, list[0].Msg
	} else if m := posRE.FindStringSubmatch(msg); m != nil {
		// yaegi's column is one of the rewritten source (a line mark and wrappers come
		// first on the line): the line is the cell's, the column is not, so no caret.
		line, _ = strconv.Atoi(m[1])
		line--
		msg = msg[len(m[0]):]
	}
	msg = strings.TrimPrefix(msg, "cell: ")
	if msg == "constant definition loop" || msg == "variable definition loop" {
		msg = undefinedMsg
	}
	msg += optionHint(msg)
	if line <= 0 {
		return newEvalError("CompileError", msg)
	}
	value := fmt.Sprintf("cell line %d: %s", line, msg)
	var trace []string
	lines := strings.Split(code, "\n")
	if line <= len(lines) {
		trace = append(trace, fmt.Sprintf("%4d | %s", line, lines[line-1]))
		if col > 0 {
			trace = append(trace, "     | "+strings.Repeat(" ", col-1)+"^")
		}
	}
	return newEvalError("CompileError", value, trace...)
}

var optionMismatch = regexp.MustCompile(`cannot use type keras\.(\w+)Option as type keras\.(\w+)Option`)

// optionHint says which options a keras call takes when a cell passes another call's
// (keras.Epochs to Predict), which yaegi reports as a bare type mismatch.
func optionHint(msg string) string {
	m := optionMismatch.FindStringSubmatch(msg)
	if m == nil {
		return ""
	}
	takes := map[string]string{
		"Fit":      "keras.Epochs, keras.StepsPerEpoch, keras.ValidationData, keras.Callbacks, keras.Verbose, keras.BatchSize, ...",
		"Evaluate": "keras.Steps, keras.Callbacks, keras.Verbose, keras.BatchSize",
		"Predict":  "keras.Steps, keras.Callbacks, keras.Verbose, keras.BatchSize",
	}[m[2]]
	if takes == "" {
		return ""
	}
	return fmt.Sprintf("\nthat option is not one of %s's: %s takes %s", m[2], m[2], takes)
}

var innerPos = regexp.MustCompile(`(\d+):(\d+): ([^:]+(?::[^\d][^:]*)*)$`)

// compilePanic turns a panic of yaegi's compiler into an error at the innermost position
// its message names ("CFG post-order panic: 2:16: incomplete type x" -> "2:16: undefined: x").
func compilePanic(r any) error {
	msg := fmt.Sprint(r)
	if m := innerPos.FindStringSubmatch(msg); m != nil {
		text := m[3]
		if strings.HasPrefix(text, "incomplete type ") {
			text = "undefined: " + strings.TrimPrefix(text, "incomplete type ")
		}
		return fmt.Errorf("%s:%s: %s", m[1], m[2], text)
	}
	return fmt.Errorf("the interpreter cannot compile this code (%s)", msg)
}

// undefinedMsg is yaegi's "definition loop" error, which it mostly gives for an undefined
// name; Session.undefinedName names the identifier when it can.
const undefinedMsg = "undefined name (or a constant defined in terms of itself)"

// undefinedName improves a compile error about an undefined name: it names the first
// identifier on the error's line that nothing in the session or the cell defines.
func (s *Session) undefinedName(ee *EvalError, code string) *EvalError {
	if ee.Name != "CompileError" || !strings.HasSuffix(ee.Value, undefinedMsg) {
		return ee
	}
	var line int
	if _, err := fmt.Sscanf(ee.Value, "cell line %d:", &line); err != nil {
		return ee
	}
	lines := strings.Split(code, "\n")
	if line < 1 || line > len(lines) {
		return ee
	}
	known := map[string]bool{}
	for _, n := range s.names() {
		known[n] = true
	}
	// Names the cell defines anywhere (roughly: identifiers followed by := , a type, or in
	// declarations) count as known.
	var sc scanner.Scanner
	fset := token.NewFileSet()
	sc.Init(fset.AddFile("", -1, len(code)), []byte(code), nil, 0)
	var prev token.Token
	var prevLit string
	for {
		_, tok, lit := sc.Scan()
		if tok == token.EOF {
			break
		}
		if prev == token.IDENT && (tok == token.DEFINE || tok == token.IDENT || tok == token.COMMA || tok == token.LBRACK || tok == token.MUL) {
			known[prevLit] = true
		}
		if (prev == token.FUNC || prev == token.TYPE || prev == token.VAR || prev == token.CONST) && tok == token.IDENT {
			known[lit] = true
		}
		prev, prevLit = tok, lit
	}
	var lsc scanner.Scanner
	src := []byte(lines[line-1])
	lsc.Init(fset.AddFile("", -1, len(src)), src, nil, 0)
	prev = token.ILLEGAL
	for {
		pos, tok, lit := lsc.Scan()
		if tok == token.EOF {
			break
		}
		if tok == token.IDENT && prev != token.PERIOD && !known[lit] {
			col := int(pos) - fset.File(pos).Base() + 1
			out := compileError(fmt.Errorf("%d:%d: undefined: %s", line+1, col, lit), code)
			var improved *EvalError
			if errors.As(out, &improved) {
				return improved
			}
		}
		prev = tok
	}
	return ee
}

// cellError is a CompileError at a cell position, with the line and a caret.
func cellError(line, col int, msg, code string) error {
	value := fmt.Sprintf("cell line %d: %s", line, msg)
	var trace []string
	lines := strings.Split(code, "\n")
	if line >= 1 && line <= len(lines) {
		trace = append(trace, fmt.Sprintf("%4d | %s", line, lines[line-1]))
		if col > 0 {
			trace = append(trace, "     | "+strings.Repeat(" ", col-1)+"^")
		}
	}
	return newEvalError("CompileError", value, trace...)
}

// interpreterWords are what yaegi's messages show of its insides.
var interpreterWords = regexp.MustCompile(`reflect|CFG|nil type|cannot compile this code|main\.|_godist|interp\.|valueInterface|unsupported assign|panic:`)

// interpreterLimit rewords a compile error of yaegi for code the cell check accepted with
// every name typed (so valid Go that the interpreter cannot run): it names the cell line (the group's first
// when yaegi gave none) and says what happened in words a student can act on; yaegi's own
// message stays in the traceback.
func (s *Session) interpreterLimit(err error, group []*chunk, code string) error {
	s.mu.Lock()
	partial := s.checkPartial
	s.mu.Unlock()
	var ee *EvalError
	if err == nil || partial || !errors.As(err, &ee) || ee.Name != "CompileError" || !interpreterWords.MatchString(ee.Value) ||
		strings.Contains(ee.Value, "the new definitions break") {
		return err // (a rebuild's error about an earlier cell's declaration is not this cell's)
	}
	line := group[0].Line
	fmt.Sscanf(ee.Value, "cell line %d:", &line)
	last := group[len(group)-1]
	where := fmt.Sprintf("cell line %d", line)
	if !strings.HasPrefix(ee.Value, "cell line ") {
		if end := last.Line + strings.Count(last.Text, "\n"); end > line {
			where = fmt.Sprintf("cell lines %d-%d", line, end)
		}
	}
	out := cellError(line, 0, "", code).(*EvalError)
	out.Value = where + ": Go accepts this code but the interpreter cannot run it; write it another way " +
		"(a generic function or type used more simply, or the construct in a function)"
	out.Traceback[0] = out.Name + ": " + out.Value
	out.Traceback = append(out.Traceback, "interpreter: "+ee.Value)
	return out
}
