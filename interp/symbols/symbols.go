// Package symbols exposes godist's distlib packages to the interpreter: it holds the
// `yaegi extract` output for each distlib package (Symbols) and the documentation of their
// exported names (Docs), so that notebook cells can import distlib and inspection can show
// documentation without the sources.
//
// Everything here except this file and the generator (gen/) is generated: run
// `make generate` (go generate ./interp/symbols) after changing a distlib package's exported
// API; `make check-generate` fails when the committed tables are stale.
package symbols

import "reflect"

//go:generate go run ./gen

// Symbols maps "importpath/name" to the exported symbols of that package, in the form
// yaegi's Interpreter.Use expects.
var Symbols = map[string]map[string]reflect.Value{}

// Doc returns the documentation of a qualified name such as "godist/distlib/display.HTML"
// or of a package path such as "godist/distlib/display", and whether there is any.
func Doc(name string) (string, bool) {
	d, ok := Docs[name]
	return d, ok
}
