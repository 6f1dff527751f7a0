package interp

import (
	"bytes"
	"fmt"
	"log"
	"strings"
	"testing"

	yaegi "github.com/traefik/yaegi/interp"
	"github.com/traefik/yaegi/stdlib"
)

// TestYaegiInternalPanicWritesNoLog covers third_party/yaegi-patches/0021: an internal
// panic of the interpreter (here a composite literal of a compiled integer type, which
// yaegi's compositeGenerator lacks) reaches the embedder as an error or a panic, without
// yaegi writing its own line through the log package (upstream used log.Panic).
func TestYaegiInternalPanicWritesNoLog(t *testing.T) {
	var logged bytes.Buffer
	out, flags := log.Writer(), log.Flags()
	log.SetOutput(&logged)
	defer func() { log.SetOutput(out); log.SetFlags(flags) }()

	i := yaegi.New(yaegi.Options{})
	if err := i.Use(stdlib.Symbols); err != nil {
		t.Fatal(err)
	}
	var failure string
	func() {
		defer func() {
			if r := recover(); r != nil {
				failure = fmt.Sprint(r)
			}
		}()
		if _, err := i.Eval("import \"time\"\nvar d = time.Duration{}"); err != nil {
			failure = err.Error()
		}
	}()
	if !strings.Contains(failure, "compositeGenerator not implemented") {
		t.Errorf("time.Duration{}: failure %q, want the interpreter's compositeGenerator error", failure)
	}
	if logged.Len() != 0 {
		t.Errorf("the interpreter wrote to the log: %q", logged.String())
	}
}
