package main

import "testing"

// TestKernelEditor runs the jupyter_client tests of issue 12's "Editor's help":
// is_complete's invalid code, completion and inspection of cells not yet run, auto-import,
// and input requests with their prompt and password flag.
func TestKernelEditor(t *testing.T) {
	kernelRunScript(t, "testdata/editor.py")
}
