package driver

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ebitengine/purego"
)

// ErrNotFound reports that a library was found in none of the places searched. The error
// that wraps it names every place looked.
var ErrNotFound = errors.New("gpu/driver: library not found")

// Library describes one shared library to load: the environment variable that may name its
// file, the file names to try in order (libcublas.so.13 before .12 before .11) and the
// directories searched after the dynamic loader's own path.
type Library struct {
	What  string   // "CUDA driver", for messages
	Env   string   // GODIST_CUDA_LIB
	Names []string // libcuda.so.1
	Dirs  []string // well-known directories, searched in order after the loader's path
	// NoDefault skips the dynamic loader's default search path (ld.so.cache,
	// LD_LIBRARY_PATH); tests set it so that the machine's own libraries do not interfere.
	NoDefault bool
}

// Attempt is one place a library was looked for and why it did not load.
type Attempt struct {
	Place  string // a path, "$GODIST_CUDA_LIB=...", or "libcuda.so.1 (dynamic loader path)"
	Reason string
}

// LoadError is the error of a library that could not be loaded; it lists every attempt.
type LoadError struct {
	Lib      Library
	Attempts []Attempt
	notFound bool
}

// Error names the library, every place looked and what to do.
func (e *LoadError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "gpu/driver: cannot load the %s (%s); looked in:", e.Lib.What, strings.Join(e.Lib.Names, ", "))
	for _, a := range e.Attempts {
		fmt.Fprintf(&b, " %s (%s);", a.Place, a.Reason)
	}
	fmt.Fprintf(&b, " set %s to the library's file to use another one", e.Lib.Env)
	return b.String()
}

// Unwrap makes errors.Is(err, ErrNotFound) hold when no candidate file existed at all.
func (e *LoadError) Unwrap() error {
	if e.notFound {
		return ErrNotFound
	}
	return nil
}

// Loaded is a library opened by Load.
type Loaded struct {
	Handle uintptr
	Path   string // the file or name that dlopen accepted
}

// Load opens the library, trying in order: the file named by the environment variable (and
// only it, when the variable is set), each name through the dynamic loader's default path
// (ld.so.cache, LD_LIBRARY_PATH), then each name in each of Dirs. A file that exists but is
// not an ELF shared object is reported by name rather than handed to dlopen.
func Load(lib Library) (*Loaded, error) {
	e := &LoadError{Lib: lib, notFound: true}
	if lib.Env != "" {
		if p := os.Getenv(lib.Env); p != "" {
			h, reason := open(p, true)
			if reason == "" {
				return &Loaded{Handle: h, Path: p}, nil
			}
			e.notFound = false
			e.Attempts = append(e.Attempts, Attempt{Place: "$" + lib.Env + "=" + p, Reason: reason})
			return nil, e
		}
	}
	if !lib.NoDefault {
		for _, n := range lib.Names {
			h, err := purego.Dlopen(n, purego.RTLD_NOW|purego.RTLD_GLOBAL)
			if err == nil {
				return &Loaded{Handle: h, Path: n}, nil
			}
			e.Attempts = append(e.Attempts, Attempt{Place: n + " (dynamic loader path)", Reason: shortDlerror(err)})
		}
	}
	for _, d := range lib.Dirs {
		for _, n := range lib.Names {
			p := filepath.Join(d, n)
			h, reason := open(p, false)
			if reason == "" {
				return &Loaded{Handle: h, Path: p}, nil
			}
			if reason != "no such file" {
				e.notFound = false
			}
			e.Attempts = append(e.Attempts, Attempt{Place: p, Reason: reason})
		}
	}
	if len(e.Attempts) == 0 {
		e.Attempts = append(e.Attempts, Attempt{Place: "nowhere", Reason: "no directory to search"})
	}
	return nil, e
}

// open dlopens a file after checking that it exists and is ELF; the reason is "" on success.
func open(path string, named bool) (uintptr, string) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return 0, "no such file"
		}
		return 0, err.Error()
	}
	var magic [4]byte
	_, err = io.ReadFull(f, magic[:])
	f.Close()
	if err != nil || !bytes.Equal(magic[:], []byte("\x7fELF")) {
		return 0, "not a shared library: the file has no ELF header"
	}
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return 0, shortDlerror(err)
	}
	return h, ""
}

func shortDlerror(err error) string {
	s := strings.TrimSpace(err.Error())
	if s == "" {
		return "not found"
	}
	// glibc: "libcuda.so.1: cannot open shared object file: No such file or directory";
	// macOS: "dlopen(libcuda.so.1, 0x000A): tried: 'libcuda.so.1' (no such file), ...".
	if i := strings.LastIndex(s, ": "); i >= 0 && strings.Contains(strings.ToLower(s[i:]), "no such file") {
		return "not found"
	}
	return s
}

// SystemDirs are the well-known directories of NVIDIA libraries on Linux, searched after the
// dynamic loader's path.
var SystemDirs = []string{
	"/usr/lib/x86_64-linux-gnu",
	"/usr/lib/aarch64-linux-gnu",
	"/usr/lib64",
	"/usr/lib",
	"/usr/local/cuda/lib64",
	"/usr/local/cuda/targets/x86_64-linux/lib",
	"/usr/local/cuda/targets/sbsa-linux/lib",    // arm64 servers (Grace)
	"/usr/local/cuda/targets/aarch64-linux/lib", // Jetson
	"/usr/local/nvidia/lib64",
	"/usr/lib/wsl/lib",
	"/opt/cuda/lib64",
}

// pythonRoots are where Python's site-packages and dist-packages directories are globbed.
var pythonRoots = []string{"/usr/lib", "/usr/local/lib", "/opt/conda/lib"}

// WheelDirs returns the library directories of NVIDIA's Python wheels (nvidia-cublas-cu13,
// nvidia-nccl-cu13, ...: site-packages/nvidia/<name>/lib and, for CUDA 13 wheels,
// site-packages/nvidia/cu13/lib), found by globbing the python3 site-packages and
// dist-packages directories under the usual prefixes, $HOME/.local and $VIRTUAL_ENV.
// pkg narrows the glob to one wheel ("cublas", "nccl"); "" takes them all.
func WheelDirs(pkg string) []string {
	roots := append([]string{}, pythonRoots...)
	if h, err := os.UserHomeDir(); err == nil {
		roots = append(roots, filepath.Join(h, ".local", "lib"))
	}
	if v := os.Getenv("VIRTUAL_ENV"); v != "" {
		roots = append([]string{filepath.Join(v, "lib")}, roots...)
	}
	if pkg == "" {
		pkg = "*"
	}
	var out []string
	seen := map[string]bool{}
	for _, r := range roots {
		for _, sp := range []string{"python3*/site-packages", "python3*/dist-packages", "python3/dist-packages"} {
			for _, sub := range []string{pkg, "cu1*"} {
				m, _ := filepath.Glob(filepath.Join(r, sp, "nvidia", sub, "lib"))
				sort.Strings(m)
				for _, d := range m {
					if !seen[d] {
						seen[d] = true
						out = append(out, d)
					}
				}
			}
		}
	}
	return out
}

// The libraries the backend loads.
var (
	// CUDALib is the CUDA driver library, part of the NVIDIA driver.
	CUDALib = Library{What: "CUDA driver", Env: "GODIST_CUDA_LIB", Names: []string{"libcuda.so.1", "libcuda.so"}}
	// CUBLASLib is cuBLAS, from a CUDA toolkit or the nvidia-cublas Python wheel.
	CUBLASLib = Library{What: "cuBLAS library", Env: "GODIST_CUBLAS_LIB", Names: []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so.11"}}
	// NCCLLib is NCCL, from a system package or the nvidia-nccl Python wheel.
	NCCLLib = Library{What: "NCCL library", Env: "GODIST_NCCL_LIB", Names: []string{"libnccl.so.2"}}
)

// withDirs returns lib with its well-known directories filled in.
func withDirs(lib Library, wheel string) Library {
	if lib.Dirs == nil {
		lib.Dirs = append(append([]string{}, SystemDirs...), WheelDirs(wheel)...)
	}
	return lib
}
