// Package installer writes godist's Jupyter kernelspec (kernel.json and logos), finds
// Jupyter's data directories the way jupyter_core does, and uninstalls the kernelspec.
package installer

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// KernelName is the kernelspec directory name, the name front ends select the kernel by.
const KernelName = "godist"

// Spec is the content of kernel.json.
type Spec struct {
	Argv          []string          `json:"argv"`
	DisplayName   string            `json:"display_name"`
	Language      string            `json:"language"`
	InterruptMode string            `json:"interrupt_mode"`
	Env           map[string]string `json:"env,omitempty"`
	Metadata      map[string]any    `json:"metadata,omitempty"`
}

// NewSpec returns the kernelspec that starts binary (an absolute path) as a kernel.
func NewSpec(binary string) Spec {
	return Spec{
		Argv:          []string{binary, "kernel", "{connection_file}"},
		DisplayName:   "Go (godist)",
		Language:      "go",
		InterruptMode: "message",
		Metadata:      map[string]any{"debugger": false},
	}
}

// UserDataDir returns Jupyter's per-user data directory: $JUPYTER_DATA_DIR when set,
// otherwise ~/Library/Jupyter on macOS, %APPDATA%\jupyter on Windows and
// $XDG_DATA_HOME/jupyter (default ~/.local/share/jupyter) elsewhere.
func UserDataDir() (string, error) {
	if d := os.Getenv("JUPYTER_DATA_DIR"); d != "" {
		return d, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("installer: no home directory for the user data dir (set JUPYTER_DATA_DIR): %w", err)
	}
	switch runtime.GOOS {
	case "darwin":
		return filepath.Join(home, "Library", "Jupyter"), nil
	case "windows":
		if a := os.Getenv("APPDATA"); a != "" {
			return filepath.Join(a, "jupyter"), nil
		}
		return filepath.Join(home, "AppData", "Roaming", "jupyter"), nil
	}
	if x := os.Getenv("XDG_DATA_HOME"); x != "" {
		return filepath.Join(x, "jupyter"), nil
	}
	return filepath.Join(home, ".local", "share", "jupyter"), nil
}

// PrefixDataDir returns the data directory of an installation prefix: PREFIX/share/jupyter.
func PrefixDataDir(prefix string) string {
	return filepath.Join(prefix, "share", "jupyter")
}

// searchPath is a list of directories, first wins, without repeats.
type searchPath []string

// add appends d unless it is empty or already listed.
func (p *searchPath) add(d string) {
	if d == "" {
		return
	}
	for _, e := range *p {
		if e == d {
			return
		}
	}
	*p = append(*p, d)
}

// DataDirs returns the directories Jupyter searches for data, first wins: the entries of
// $JUPYTER_PATH, the user data dir, the prefixes of active environments
// ($CONDA_PREFIX, $VIRTUAL_ENV), then /usr/local/share/jupyter and /usr/share/jupyter.
func DataDirs() []string {
	var dirs searchPath
	add := dirs.add
	for _, d := range filepath.SplitList(os.Getenv("JUPYTER_PATH")) {
		add(strings.TrimRight(d, string(filepath.Separator)))
	}
	if u, err := UserDataDir(); err == nil {
		add(u)
	}
	for _, env := range []string{"CONDA_PREFIX", "VIRTUAL_ENV"} {
		if p := os.Getenv(env); p != "" {
			add(PrefixDataDir(p))
		}
	}
	if runtime.GOOS == "windows" {
		if p := os.Getenv("PROGRAMDATA"); p != "" {
			add(filepath.Join(p, "jupyter"))
		}
	} else {
		add("/usr/local/share/jupyter")
		add("/usr/share/jupyter")
	}
	return []string(dirs)
}

// SpecDir returns where the godist kernelspec lives under a data directory.
func SpecDir(dataDir string) string {
	return filepath.Join(dataDir, "kernels", KernelName)
}

// Install writes the kernelspec (kernel.json, logo-32x32.png, logo-64x64.png) under
// dataDir/kernels/godist, replacing an earlier one, and returns that directory.
func Install(dataDir string, spec Spec) (string, error) {
	if len(spec.Argv) == 0 || !filepath.IsAbs(spec.Argv[0]) {
		return "", fmt.Errorf("installer: kernel argv %q must start with an absolute path", spec.Argv)
	}
	dir := SpecDir(dataDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("installer: create %s: %w", dir, err)
	}
	raw, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return "", fmt.Errorf("installer: encode kernel.json: %w", err)
	}
	files := map[string][]byte{"kernel.json": append(raw, '\n')}
	for _, size := range []int{32, 64} {
		png, err := Logo(size)
		if err != nil {
			return "", err
		}
		files[fmt.Sprintf("logo-%dx%d.png", size, size)] = png
	}
	for name, b := range files {
		if err := writeAtomic(filepath.Join(dir, name), b); err != nil {
			return "", err
		}
	}
	return dir, nil
}

func writeAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("installer: write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("installer: write %s: %w", path, err)
	}
	return nil
}

// ErrNotInstalled is returned by Uninstall when there is no kernelspec to remove.
var ErrNotInstalled = errors.New("installer: godist kernelspec not installed")

// Uninstall removes dataDir/kernels/godist. It refuses a directory whose kernel.json is
// not godist's, so that it never deletes another kernel.
func Uninstall(dataDir string) error {
	dir := SpecDir(dataDir)
	raw, err := os.ReadFile(filepath.Join(dir, "kernel.json"))
	if os.IsNotExist(err) {
		if _, serr := os.Stat(dir); os.IsNotExist(serr) {
			return fmt.Errorf("%w in %s", ErrNotInstalled, dataDir)
		}
	} else if err != nil {
		return fmt.Errorf("installer: read %s: %w", dir, err)
	} else {
		var s Spec
		if json.Unmarshal(raw, &s) != nil || len(s.Argv) < 2 || s.Argv[1] != "kernel" || s.Language != "go" {
			return fmt.Errorf("installer: %s does not hold a godist kernelspec; remove it by hand", dir)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("installer: remove %s: %w", dir, err)
	}
	return nil
}
