package main

import (
	"strings"
	"testing"

	"godist/interp"
)

// TestKernelCompleteInspectBytes: the executor hands the kernel's byte offsets to the
// session and its byte offsets back, unconverted, in code with multi-byte characters.
func TestKernelCompleteInspectBytes(t *testing.T) {
	e := newSessionExecutor(interp.Options{})
	defer e.Close()
	code := "import \"strings\"\nv := \"日本\"\nstrings.ToU"
	matches, start, end := e.Complete(code, len(code))
	found := false
	for _, m := range matches {
		found = found || m == "ToUpper"
	}
	if !found || start != len(code)-len("ToU") || end != len(code) {
		t.Errorf("Complete = %v, %d, %d, want ToUpper from byte %d to %d", matches, start, end, len(code)-len("ToU"), len(code))
	}
	code = "import \"strings\"\nv := \"日本\"; strings.Repeat(v, 2)"
	at := strings.Index(code, "Repeat") + 2
	data, found := e.Inspect(code, at, 0)
	if text, _ := data["text/plain"].(string); !found || !strings.Contains(text, "func Repeat(") {
		t.Errorf("Inspect at byte %d = %v, %v, want strings.Repeat", at, data, found)
	}
}
