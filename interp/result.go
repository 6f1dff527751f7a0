package interp

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"image"
	"image/png"
	"reflect"
	"strconv"
	"strings"

	yaegi "github.com/traefik/yaegi/interp"

	"godist/distlib/display"
)

// richMethods are the methods a value may have to display itself, by MIME type.
var richMethods = []struct{ method, mime string }{
	{"HTML", "text/html"},
	{"Markdown", "text/markdown"},
	{"SVG", "image/svg+xml"},
}

// render returns the MIME bundle of a final expression's value (nil for no value).
//
// Compiled values are inspected with reflection. Values of notebook-declared types have no
// methods in reflection, so the interpreter is asked: `_godistLast.HTML()` compiles only
// when the method exists.
func (s *Session) render(ctx context.Context, yi *yaegi.Interpreter, v reflect.Value) *Result {
	if !v.IsValid() {
		return nil
	}
	if v.Kind() == reflect.Interface {
		if v.IsNil() {
			// A nil error or interface (display.JSON's result, say) shows nothing, as
			// Python shows nothing for None.
			return nil
		}
		v = v.Elem()
	}
	data := map[string]any{}
	if v.CanInterface() {
		switch x := v.Interface().(type) {
		case display.Bundle:
			for k, val := range x {
				data[k] = val
			}
		case image.Image:
			var buf bytes.Buffer
			if err := png.Encode(&buf, x); err == nil {
				data["image/png"] = base64.StdEncoding.EncodeToString(buf.Bytes())
				data["text/plain"] = fmt.Sprintf("<image %v>", x.Bounds())
			}
		}
		for _, m := range richMethods {
			if f := v.MethodByName(m.method); f.IsValid() && f.Type().NumIn() == 0 && f.Type().NumOut() == 1 && f.Type().Out(0).Kind() == reflect.String {
				data[m.mime] = f.Call(nil)[0].String()
			}
		}
		if _, ok := data["text/plain"]; !ok {
			data["text/plain"] = plainText(v)
		}
	}
	if t := v.Type(); !(t.Name() != "" && t.PkgPath() != "") || !compiledType(t, 0) {
		// Maybe a notebook type: named types on compiled ones ([][]string) look compiled.
		// Only a struct (or a pointer to one, or an interface) can get a method by
		// embedding; other values have a method only if a cell declared one of that name,
		// so a plain 1 or "s" costs no failed compilations.
		embeds := false
		switch v.Kind() {
		case reflect.Struct, reflect.Pointer, reflect.Interface:
			embeds = true
		}
		try := func(method string) (string, bool) {
			if !embeds && !s.declaresMethod(method) {
				return "", false
			}
			return s.callString(ctx, yi, lastVar+"."+method+"()")
		}
		for _, m := range richMethods {
			if str, ok := try(m.method); ok {
				data[m.mime] = str
			}
		}
		if str, ok := try("String"); ok {
			data["text/plain"] = str
		} else if str, ok := try("Error"); ok {
			data["text/plain"] = str
		}
	}
	if len(data) == 0 {
		data["text/plain"] = fmt.Sprintf("<%s>", v.Type())
	}
	return &Result{Data: data, Metadata: map[string]any{}}
}

// renderTuple shows the values of a final expression with several (v holds them as a
// []any) as Go would print them in parentheses: (12, <nil>), with strings quoted.
func renderTuple(v reflect.Value) *Result {
	if !v.IsValid() || v.Kind() != reflect.Slice {
		return nil
	}
	parts := make([]string, v.Len())
	for i := range parts {
		e := v.Index(i)
		for e.Kind() == reflect.Interface && !e.IsNil() {
			e = e.Elem()
		}
		switch {
		case e.Kind() == reflect.Interface || !e.IsValid():
			parts[i] = "<nil>"
		case e.Kind() == reflect.String && e.CanInterface():
			parts[i] = strconv.Quote(e.String())
		case e.CanInterface():
			parts[i] = plainText(e)
		default:
			parts[i] = fmt.Sprintf("<%s>", e.Type())
		}
	}
	return &Result{Data: map[string]any{"text/plain": "(" + strings.Join(parts, ", ") + ")"}, Metadata: map[string]any{}}
}

// declaresMethod reports whether a cell declared a method of that name on some type.
func (s *Session) declaresMethod(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.decls {
		if d.kind != "method" {
			continue
		}
		for _, n := range d.names {
			if strings.HasSuffix(n, "."+name) {
				return true
			}
		}
	}
	return false
}

// callString evaluates expr in the interpreter when it compiles and yields a string.
func (s *Session) callString(ctx context.Context, yi *yaegi.Interpreter, expr string) (string, bool) {
	prog, err := compile(yi, expr)
	if err != nil {
		return "", false
	}
	v, err := s.execute(ctx, yi, prog)
	if err != nil || !v.IsValid() || v.Kind() != reflect.String {
		return "", false
	}
	return v.String(), true
}

// plainText formats a value the way fmt's %v does, errors and Stringers included.
func plainText(v reflect.Value) string {
	if x, ok := v.Interface().(string); ok {
		return x
	}
	return fmt.Sprintf("%v", v.Interface()) // fmt calls Error and String, and survives their panics
}
