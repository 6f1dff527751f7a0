package driver

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ebitengine/purego"
)

func TestLoadSearchOrder(t *testing.T) {
	empty1, empty2 := t.TempDir(), t.TempDir()
	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, "libcuda.so.1"), []byte("not a library\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		env      string
		dirs     []string
		want     []string // substrings, in this order
		notFound bool
	}{
		{"nothing anywhere names every place", "", []string{empty1, empty2},
			[]string{filepath.Join(empty1, "libcuda.so.1") + " (no such file)", filepath.Join(empty1, "libcuda.so") + " (no such file)",
				filepath.Join(empty2, "libcuda.so.1") + " (no such file)", "set GODIST_TEST_CUDA_LIB"}, true},
		{"non-ELF file is named", "", []string{empty1, bad},
			[]string{filepath.Join(empty1, "libcuda.so.1"), filepath.Join(bad, "libcuda.so.1") + " (not a shared library: the file has no ELF header)"}, false},
		{"env var is the only place when set", filepath.Join(bad, "libcuda.so.1"), []string{empty1},
			[]string{"$GODIST_TEST_CUDA_LIB=" + filepath.Join(bad, "libcuda.so.1") + " (not a shared library"}, false},
		{"env var naming a missing file", filepath.Join(empty1, "nope.so"), []string{empty2},
			[]string{"$GODIST_TEST_CUDA_LIB=" + filepath.Join(empty1, "nope.so") + " (no such file)"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GODIST_TEST_CUDA_LIB", tc.env)
			lib := Library{What: "CUDA driver", Env: "GODIST_TEST_CUDA_LIB", Names: []string{"libcuda.so.1", "libcuda.so"}, Dirs: tc.dirs, NoDefault: true}
			l, err := Load(lib)
			if err == nil {
				t.Fatalf("Load = %v, want an error", l)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "gpu/driver: cannot load the CUDA driver (libcuda.so.1, libcuda.so)") {
				t.Errorf("error %q does not start by naming the library", msg)
			}
			at := 0
			for _, w := range tc.want {
				i := strings.Index(msg[at:], w)
				if i < 0 {
					t.Fatalf("error %q lacks %q (after offset %d)", msg, w, at)
				}
				at += i + len(w)
			}
			if tc.env != "" && strings.Contains(msg, tc.dirs[0]) {
				t.Errorf("error %q searched directories although the env var was set", msg)
			}
			if got := errors.Is(err, ErrNotFound); got != tc.notFound {
				t.Errorf("errors.Is(err, ErrNotFound) = %v, want %v", got, tc.notFound)
			}
		})
	}
}

func TestLoadDefaultPathIsTriedBeforeDirs(t *testing.T) {
	dir := t.TempDir()
	_, err := Load(Library{What: "test library", Env: "GODIST_TEST_NONE_LIB", Names: []string{"libgodist-does-not-exist.so.7"}, Dirs: []string{dir}})
	if err == nil {
		t.Fatal("Load of a library that does not exist succeeded")
	}
	msg := err.Error()
	i, j := strings.Index(msg, "libgodist-does-not-exist.so.7 (dynamic loader path)"), strings.Index(msg, dir)
	if i < 0 || j < 0 || i > j {
		t.Fatalf("error %q: want the dynamic loader's path tried before %s", msg, dir)
	}
}

func TestWheelDirsGlobsSitePackages(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"python3.12/site-packages/nvidia/cublas/lib", "python3.12/site-packages/nvidia/nccl/lib",
		"python3.11/dist-packages/nvidia/cu13/lib", "python3.12/site-packages/nvidia/cudnn/include"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	old := pythonRoots
	pythonRoots = []string{root}
	t.Cleanup(func() { pythonRoots = old })
	t.Setenv("HOME", t.TempDir())
	t.Setenv("VIRTUAL_ENV", "")
	tests := []struct {
		pkg  string
		want []string
	}{
		{"cublas", []string{"python3.12/site-packages/nvidia/cublas/lib", "python3.11/dist-packages/nvidia/cu13/lib"}},
		{"nccl", []string{"python3.12/site-packages/nvidia/nccl/lib", "python3.11/dist-packages/nvidia/cu13/lib"}},
		{"", []string{"python3.12/site-packages/nvidia/cublas/lib", "python3.12/site-packages/nvidia/nccl/lib", "python3.11/dist-packages/nvidia/cu13/lib"}},
	}
	for _, tc := range tests {
		got := WheelDirs(tc.pkg)
		var want []string
		for _, w := range tc.want {
			want = append(want, filepath.Join(root, w))
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("WheelDirs(%q) = %q, want %q", tc.pkg, got, want)
		}
	}
}

// TestBindingSignatures registers every binding's Go signature against a libc symbol:
// purego checks at registration that it can make the call (argument kinds and counts), so
// a signature it cannot call fails here instead of on the GPU machine. Nothing is called.
func TestBindingSignatures(t *testing.T) {
	h, err := purego.Dlopen("libc.so.6", purego.RTLD_NOW)
	if err != nil {
		t.Skipf("no libc.so.6 to borrow a symbol from: %v", err)
	}
	sym, err := purego.Dlsym(h, "abs")
	if err != nil {
		t.Fatal(err)
	}
	var a api
	var b blasAPI
	var n ncclAPI
	tables := map[string]symtab{"cuda": a.symbols(), "cublas": b.symbols(), "nccl": n.symbols()}
	for lib, tab := range tables {
		for _, s := range tab {
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("%s: purego cannot bind %s: %v", lib, s.name, r)
					}
				}()
				purego.RegisterFunc(s.fn, sym)
			}()
		}
	}
	if len(tables["cuda"]) != 30 {
		t.Errorf("cuda binds %d functions, want 30", len(tables["cuda"]))
	}
}

// TestShortDlerror: a missing library reads "not found" in glibc's words and macOS's; other
// errors are kept whole.
func TestShortDlerror(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"libcuda.so.1: cannot open shared object file: No such file or directory", "not found"},
		{"dlopen(libcuda.so.1, 0x000A): tried: 'libcuda.so.1' (no such file), '/usr/lib/libcuda.so.1' (no such file, not in dyld cache)", "not found"},
		{"/x/libcuda.so.1: wrong ELF class: ELFCLASS32", "/x/libcuda.so.1: wrong ELF class: ELFCLASS32"},
		{"  ", "not found"},
	} {
		if got := shortDlerror(errors.New(c.in)); got != c.want {
			t.Errorf("shortDlerror(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
