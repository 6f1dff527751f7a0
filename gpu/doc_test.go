package gpu

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoCgoNoNVIDIAAtBuildTime checks that package gpu and its driver build with cgo off:
// the backend must not need a C toolchain or NVIDIA files to compile.
func TestNoCgoNoNVIDIAAtBuildTime(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a package")
	}
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{.CgoFiles}}", "godist/gpu").CombinedOutput()
	if err != nil {
		t.Skipf("go list unavailable: %v %s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "godist/gpu") && !strings.HasSuffix(line, "[]") {
			t.Errorf("package uses cgo: %s", line)
		}
		if strings.Contains(line, "gorgonia.org/cu") {
			t.Errorf("gpu depends on gorgonia.org/cu: %s", line)
		}
	}
}
