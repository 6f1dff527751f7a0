package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"godist/installer"
)

const kernelPython = "/usr/bin/python3"

// kernelTestBinary builds the binary into a temporary directory.
func kernelTestBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "godist")
	out, err := exec.Command("go", "build", "-o", bin, "godist/cmd/godist").CombinedOutput()
	if err != nil {
		t.Fatalf("go build ./cmd/godist: %v\n%s", err, out)
	}
	return bin
}

func kernelNeedPython(t *testing.T, modules string) {
	t.Helper()
	if testing.Short() {
		t.Skip("kernel integration tests are skipped under -short")
	}
	if _, err := os.Stat(kernelPython); err != nil {
		t.Skipf("%s not found", kernelPython)
	}
	if out, err := exec.Command(kernelPython, "-c", "import "+modules).CombinedOutput(); err != nil {
		t.Skipf("%s lacks %s (installer/deps.sh installs them): %s", kernelPython, modules, out)
	}
}

func kernelRun(t *testing.T, env []string, timeout time.Duration, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	cmd.Dir = t.TempDir()
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestInstallCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary; skipped under -short")
	}
	bin := kernelTestBinary(t)
	data := t.TempDir()
	prefix := t.TempDir()
	config := t.TempDir() // install may enable the widget extension in the user's config dir
	env := append(os.Environ(), "JUPYTER_DATA_DIR="+data, "JUPYTER_CONFIG_DIR="+config)
	tests := []struct {
		name    string
		args    []string
		specDir string
		wantErr bool
	}{
		{"user default honours JUPYTER_DATA_DIR", []string{"install"}, filepath.Join(data, "kernels", "godist"), false},
		{"prefix", []string{"install", "--prefix", prefix}, filepath.Join(prefix, "share", "jupyter", "kernels", "godist"), false},
		{"user and prefix", []string{"install", "--user", "--prefix", prefix}, "", true},
		{"stray argument", []string{"install", "extra"}, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := kernelRun(t, env, time.Minute, bin, tt.args...)
			if (err != nil) != tt.wantErr {
				t.Fatalf("godist %v: err = %v, want error %v\n%s", tt.args, err, tt.wantErr, out)
			}
			if tt.wantErr {
				return
			}
			raw, err := os.ReadFile(filepath.Join(tt.specDir, "kernel.json"))
			if err != nil {
				t.Fatal(err)
			}
			var spec struct{ Argv []string }
			if err := json.Unmarshal(raw, &spec); err != nil {
				t.Fatal(err)
			}
			if len(spec.Argv) != 3 || spec.Argv[0] != bin || spec.Argv[1] != "kernel" {
				t.Errorf("argv = %q, want [%s kernel {connection_file}]", spec.Argv, bin)
			}
			for _, logo := range []string{"logo-32x32.png", "logo-64x64.png"} {
				if _, err := os.Stat(filepath.Join(tt.specDir, logo)); err != nil {
					t.Error(err)
				}
			}
		})
	}
	t.Run("widget extension", func(t *testing.T) {
		// The user turned the extension off: install turns it on in the user's config dir,
		// keeps the rest of the file, and says so in one line.
		nbconfig := filepath.Join(config, "nbconfig", "notebook.json")
		if err := os.MkdirAll(filepath.Dir(nbconfig), 0o755); err != nil {
			t.Fatal(err)
		}
		off := `{"load_extensions": {"jupyter-js-widgets/extension": false, "other/ext": true}}`
		if err := os.WriteFile(nbconfig, []byte(off), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := kernelRun(t, env, time.Minute, bin, "install")
		if err != nil {
			t.Fatalf("godist install: %v\n%s", err, out)
		}
		var lines []string
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "widgets: ") {
				lines = append(lines, l)
			}
		}
		if len(lines) != 1 {
			t.Fatalf("godist install printed %d widgets: lines, want 1:\n%s", len(lines), out)
		}
		if _, ok := installer.FindNBExtension(installer.DataDirs(), installer.WidgetExtension); !ok {
			if !strings.Contains(lines[0], "not installed") {
				t.Errorf("without the extension installed: %q, want it to say not installed", lines[0])
			}
			t.Skip("the widget extension is not installed here (jupyter-nbextension-jupyter-js-widgets): enabling not tested")
		}
		if want := "widgets: Notebook widget extension enabled (jupyter-js-widgets) in " + nbconfig; lines[0] != want {
			t.Errorf("godist install said %q, want %q", lines[0], want)
		}
		raw, err := os.ReadFile(nbconfig)
		if err != nil {
			t.Fatal(err)
		}
		var cfg struct {
			LoadExtensions map[string]bool `json:"load_extensions"`
		}
		if err := json.Unmarshal(raw, &cfg); err != nil || !cfg.LoadExtensions["jupyter-js-widgets/extension"] || !cfg.LoadExtensions["other/ext"] {
			t.Errorf("after install %s = %s (%v), want both extensions on", nbconfig, raw, err)
		}
		// The Notebook itself reads it as enabled.
		py := `import sys; from notebook.services.config.manager import ConfigManager; ` +
			`sys.exit(0 if ConfigManager().get("notebook")["load_extensions"]["jupyter-js-widgets/extension"] is True else 1)`
		if _, err := exec.Command(kernelPython, "-c", "import notebook").CombinedOutput(); err == nil {
			if out, err := kernelRun(t, env, time.Minute, kernelPython, "-c", py); err != nil {
				t.Errorf("the Notebook's ConfigManager does not see the extension enabled: %v\n%s", err, out)
			}
		}
		out, err = kernelRun(t, env, time.Minute, bin, "install")
		if err != nil || !strings.Contains(out, "widgets: Notebook widget extension enabled (jupyter-js-widgets, by "+nbconfig+")") {
			t.Errorf("second install: %v\n%s", err, out)
		}
	})
	if out, err := kernelRun(t, env, time.Minute, bin, "install", "--uninstall", "--prefix", prefix); err != nil {
		t.Fatalf("uninstall: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(prefix, "share", "jupyter", "kernels", "godist")); !os.IsNotExist(err) {
		t.Errorf("after --uninstall the kernelspec is still there: %v", err)
	}
	if out, err := kernelRun(t, env, time.Minute, bin, "install", "--uninstall", "--prefix", prefix); err == nil {
		t.Errorf("second --uninstall succeeded, want an error\n%s", out)
	}
}

// kernelEnv builds godist and installs its kernelspec in a temporary JUPYTER_DATA_DIR.
func kernelEnv(t *testing.T) []string {
	t.Helper()
	bin := kernelTestBinary(t)
	dir := t.TempDir()
	env := append(os.Environ(),
		"JUPYTER_DATA_DIR="+filepath.Join(dir, "data"),
		"JUPYTER_CONFIG_DIR="+filepath.Join(dir, "config"),
		"JUPYTER_PATH=",
		"JUPYTER_RUNTIME_DIR="+filepath.Join(dir, "runtime"),
		"GODIST_HISTORY="+filepath.Join(dir, "history.jsonl"))
	if out, err := kernelRun(t, env, time.Minute, bin, "install"); err != nil {
		t.Fatalf("godist install: %v\n%s", err, out)
	}
	return env
}

var kernelTestLine = regexp.MustCompile(`(?m)^(test_\w+) \(.*\) \.\.\. .*?(ok|FAIL|ERROR|skipped.*)$`)

// TestKernelConformance runs Debian's jupyter_kernel_test against the kernel with a sample
// for every attribute: no test may be skipped.
func TestKernelConformance(t *testing.T) {
	kernelNeedPython(t, "jupyter_client, jupyter_kernel_test")
	env := kernelEnv(t)
	script, _ := filepath.Abs("testdata/conformance.py")
	out, err := kernelRun(t, env, 5*time.Minute, kernelPython, script)
	if err != nil {
		t.Fatalf("jupyter_kernel_test: %v\n%s", err, out)
	}
	if strings.Contains(out, "skipped") {
		t.Errorf("jupyter_kernel_test skipped tests: every attribute needs a sample\n%s", out)
	}
	if n := len(kernelTestLine.FindAllString(out, -1)); n < 12 {
		t.Errorf("jupyter_kernel_test ran %d tests, want at least 12\n%s", n, out)
	}
}

// TestKernelProtocol runs our jupyter_client tests: interrupts, restart, shutdown, stdin,
// comms, forged signatures.
func TestKernelProtocol(t *testing.T) {
	kernelNeedPython(t, "jupyter_client")
	env := kernelEnv(t)
	script, _ := filepath.Abs("testdata/protocol.py")
	out, err := kernelRun(t, env, 5*time.Minute, kernelPython, script)
	if err != nil {
		t.Fatalf("protocol tests: %v\n%s", err, out)
	}
	for _, m := range kernelTestLine.FindAllStringSubmatch(out, -1) {
		if strings.HasPrefix(m[2], "skipped") {
			t.Logf("%s %s", m[1], m[2])
		}
	}
}

// TestKernelState runs the jupyter_client tests of issue 12's "State and control": the
// session after interrupts, deep recursion, a dead parent, restarts and redefinitions.
func TestKernelState(t *testing.T) {
	kernelRunScript(t, "testdata/state.py")
}

// TestKernelGoSemantics runs testdata/gosem.py: top-level defer, per-iteration loop
// variables, several result values, a display call's nil error and index panics.
func TestKernelGoSemantics(t *testing.T) {
	kernelRunScript(t, "testdata/gosem.py")
}

// kernelRunScript runs a unittest script of testdata against the installed kernel and
// fails with its output when a test fails.
func kernelRunScript(t *testing.T, script string) {
	t.Helper()
	kernelNeedPython(t, "jupyter_client")
	env := kernelEnv(t)
	path, _ := filepath.Abs(script)
	out, err := kernelRun(t, env, 5*time.Minute, kernelPython, path)
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
	if n := len(kernelTestLine.FindAllString(out, -1)); n == 0 {
		t.Errorf("%s ran no test\n%s", script, out)
	}
}
