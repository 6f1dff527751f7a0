package interp

import (
	"reflect"

	yaegi "github.com/traefik/yaegi/interp"
)

// This file reads the interpreter's global variables and constants.

// globalsOf returns the interpreter's global variables and constants. yaegi's Globals
// panics when a compiled but not executed declaration has not grown the global frame yet;
// executing an empty statement grows it.
func globalsOf(yi *yaegi.Interpreter) (g map[string]reflect.Value) {
	if g, ok := peekGlobals(yi); ok {
		return g
	}
	if prog, err := compile(yi, "_ = 0"); err == nil {
		_, _ = yi.Execute(prog)
	}
	if g, ok := peekGlobals(yi); ok {
		return g
	}
	return map[string]reflect.Value{}
}

// peekGlobals is Globals without growing the frame: safe while a cell runs (completion).
func peekGlobals(yi *yaegi.Interpreter) (g map[string]reflect.Value, ok bool) {
	get := func() (g map[string]reflect.Value, ok bool) {
		defer func() {
			if recover() != nil {
				ok = false
			}
		}()
		return yi.Globals(), true
	}
	return get()
}

// currentGlobals returns the session's globals for completion and inspection.
func (s *Session) currentGlobals() map[string]reflect.Value {
	g, _ := peekGlobals(s.interpreter())
	if g == nil {
		g = map[string]reflect.Value{}
	}
	return g
}
