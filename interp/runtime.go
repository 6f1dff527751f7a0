package interp

import (
	"fmt"
	"log"
	"os"
	"reflect"
	"time"

	yaegi "github.com/traefik/yaegi/interp"
	"github.com/traefik/yaegi/stdlib"
	"github.com/traefik/yaegi/stdlib/unrestricted"

	"godist/internal/memlimit"
	"godist/interp/symbols"
)

// rtPath is the import path of the helpers the rewriter calls; carryPath the package that
// hands variables over to a rebuilt interpreter.
const (
	rtPath    = "godist/interp/rt"
	carryPath = "godist/interp/carry"
	carryName = "_godistCarry"
)

// ExitError is the panic value of os.Exit and log.Fatal inside a cell: the cell stops with
// an error and the kernel keeps running.
type ExitError struct {
	Code int
}

// Error says that the cell called os.Exit (or log.Fatal) and that the kernel lives on.
func (e ExitError) Error() string {
	return fmt.Sprintf("os.Exit(%d) called: the kernel keeps running", e.Code)
}

// prelude is evaluated in every fresh interpreter: the runtime helpers and generic min/max
// (yaegi has neither builtin). Their type parameter has a name no cell uses: yaegi resolved
// a parameter named T to a cell's own type T, and every min in a function then failed.
const prelude = `import ` + rtPkgName + ` "` + rtPath + `"

var ` + markVar + ` = ` + rtPkgName + `.Line

type _godistOrdered interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 | ~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uintptr | ~float32 | ~float64 | ~string
}

func ` + minFunc + `[_godistE _godistOrdered](x _godistE, ys ..._godistE) _godistE {
	for _, y := range ys {
		if y < x || y != y {
			x = y
		}
	}
	return x
}

func ` + maxFunc + `[_godistE _godistOrdered](x _godistE, ys ..._godistE) _godistE {
	for _, y := range ys {
		if y > x || y != y {
			x = y
		}
	}
	return x
}
`

// clearValue implements the clear builtin with reflection: maps lose their entries, slices'
// elements become zero.
func clearValue(x any) {
	v := reflect.ValueOf(x)
	switch v.Kind() {
	case reflect.Map:
		v.Clear()
	case reflect.Slice:
		v.Clear()
	case reflect.Invalid:
	default:
		panic(fmt.Sprintf("invalid argument: clear(%s): argument must be a map or slice", v.Type()))
	}
}

// symbolTables returns the symbols a session's interpreters use: the standard library with
// the session's overrides (interruptible time.Sleep, os.Exit and log.Fatal that do not exit,
// os.Stdout/Stderr that reach the cell's output), distlib, and the runtime helpers.
func (s *Session) symbolTables() []yaegi.Exports {
	std := yaegi.Exports{}
	for k, v := range stdlib.Symbols {
		std[k] = v
	}
	// unrestricted adds names (os/exec, os.Exit, syscall ...) to packages stdlib already
	// has: merge per package, never replace a whole package's table.
	for k, v := range unrestricted.Symbols {
		merged := make(map[string]reflect.Value, len(std[k])+len(v))
		for name, sym := range std[k] {
			merged[name] = sym
		}
		for name, sym := range v {
			merged[name] = sym
		}
		std[k] = merged
	}
	// yaegi rewrites some stdlib symbols (log.Fatal, os.Stdout) when it loads the table
	// with fmt, so the overrides are a separate table, loaded after it.
	overrides := yaegi.Exports{}
	override := func(pkg string, syms map[string]reflect.Value) {
		overrides[pkg] = syms
	}
	exit := func(code int) { panic(ExitError{Code: code}) }
	override("os/os", map[string]reflect.Value{
		"Exit":   reflect.ValueOf(exit),
		"Stdout": reflect.ValueOf(&s.osStdout).Elem(),
		"Stderr": reflect.ValueOf(&s.osStderr).Elem(),
	})
	override("time/time", map[string]reflect.Value{
		"Sleep": reflect.ValueOf(s.sleep),
	})
	logger := func() *log.Logger { return log.New(s.osStderr, log.Prefix(), log.Flags()) }
	override("log/log", map[string]reflect.Value{
		"Fatal": reflect.ValueOf(func(v ...any) {
			_ = logger().Output(2, fmt.Sprint(v...))
			exit(1)
		}),
		"Fatalf": reflect.ValueOf(func(format string, v ...any) {
			_ = logger().Output(2, fmt.Sprintf(format, v...))
			exit(1)
		}),
		"Fatalln": reflect.ValueOf(func(v ...any) {
			_ = logger().Output(2, fmt.Sprintln(v...))
			exit(1)
		}),
	})
	rt := yaegi.Exports{rtPath + "/rt": {
		"GoPanic": reflect.ValueOf(s.goPanic),
		"Clear":   reflect.ValueOf(clearValue),
		"Line":    reflect.ValueOf(&s.mark),
		"Defer":   reflect.ValueOf(s.deferCall),
	}}
	return []yaegi.Exports{std, overrides, yaegi.Exports(symbols.Symbols), rt}
}

// deferCall keeps a call that a defer statement of the cell's top-level code deferred;
// runDeferred runs it when the cell ends. A replay (quiet) defers nothing.
func (s *Session) deferCall(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.quiet {
		s.deferred = append(s.deferred, f)
	}
}

// runDeferred runs the calls the cell's top-level code deferred, last first, and returns
// the first panic among them as the cell's error.
func (s *Session) runDeferred() (err error) {
	s.mu.Lock()
	calls := s.deferred
	s.deferred = nil
	s.mu.Unlock()
	for i := len(calls) - 1; i >= 0; i-- {
		func() {
			defer func() {
				if r := recover(); r != nil && err == nil {
					err = panicError(r, "deferred call ", nil)
				}
			}()
			calls[i]()
		}()
	}
	return err
}

// sleep is time.Sleep for cells: it returns early when the running cell is interrupted, so
// that sleeping loops and goroutines stop promptly.
func (s *Session) sleep(d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-s.cellDone():
	case <-s.closed:
	}
}

// newInterpreter returns a fresh yaegi interpreter wired to the session's streams, with
// the symbol tables and the prelude.
func (s *Session) newInterpreter(extra ...yaegi.Exports) (*yaegi.Interpreter, error) {
	yi := yaegi.New(yaegi.Options{
		Stdout:       s.osStdout,
		Stderr:       s.yaegiStderr,
		Stdin:        &stdinReader{s: s},
		Env:          os.Environ(),
		Unrestricted: true,
		Args:         []string{"godist-cell"},
		AllocCheck: func(what string, count, size int) error {
			return memlimit.CheckElems(what, count, size)
		},
	})
	for _, e := range append(s.symbolTables(), extra...) {
		if err := yi.Use(e); err != nil {
			return nil, fmt.Errorf("interp: loading symbols: %w", err)
		}
	}
	if _, err := yi.Eval(prelude); err != nil {
		return nil, fmt.Errorf("interp: prelude: %w", err)
	}
	return yi, nil
}
