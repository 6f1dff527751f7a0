package installer

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
)

// WidgetExtension is the require path of the Notebook 6 widget front end, the nbextension
// Debian's jupyter-nbextension-jupyter-js-widgets installs (ipywidgets 6, the protocol
// package distlib/widgets speaks).
const WidgetExtension = "jupyter-js-widgets/extension"

// UserConfigDir returns Jupyter's per-user config directory: $JUPYTER_CONFIG_DIR when set,
// otherwise ~/.jupyter.
func UserConfigDir() (string, error) {
	if d := os.Getenv("JUPYTER_CONFIG_DIR"); d != "" {
		return d, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("installer: no home directory for the user config dir (set JUPYTER_CONFIG_DIR): %w", err)
	}
	return filepath.Join(home, ".jupyter"), nil
}

// PrefixConfigDir returns the config directory of an installation prefix: PREFIX/etc/jupyter.
func PrefixConfigDir(prefix string) string {
	return filepath.Join(prefix, "etc", "jupyter")
}

// ConfigDirs returns the directories Jupyter reads config from, first wins, as
// jupyter_core does: the user config dir, the entries of $JUPYTER_CONFIG_PATH, the user
// site's etc/jupyter (~/.local/etc/jupyter), the prefixes of active environments
// ($CONDA_PREFIX, $VIRTUAL_ENV), then /usr/etc/jupyter (Debian's Python prefix),
// /usr/local/etc/jupyter and /etc/jupyter.
func ConfigDirs() []string {
	var dirs searchPath
	add := dirs.add
	if u, err := UserConfigDir(); err == nil {
		add(u)
	}
	for _, d := range filepath.SplitList(os.Getenv("JUPYTER_CONFIG_PATH")) {
		add(strings.TrimRight(d, string(filepath.Separator)))
	}
	if runtime.GOOS != "windows" {
		if home, err := os.UserHomeDir(); err == nil {
			add(filepath.Join(home, ".local", "etc", "jupyter"))
		}
	}
	for _, env := range []string{"CONDA_PREFIX", "VIRTUAL_ENV"} {
		if p := os.Getenv(env); p != "" {
			add(PrefixConfigDir(p))
		}
	}
	if runtime.GOOS == "windows" {
		if p := os.Getenv("PROGRAMDATA"); p != "" {
			add(filepath.Join(p, "jupyter"))
		}
	} else {
		add("/usr/etc/jupyter")
		add("/usr/local/etc/jupyter")
		add("/etc/jupyter")
	}
	return []string(dirs)
}

// FindNBExtension returns the JavaScript file of the nbextension with require path require
// (dataDir/nbextensions/REQUIRE.js) in the first of dataDirs that has it.
func FindNBExtension(dataDirs []string, require string) (string, bool) {
	for _, d := range dataDirs {
		p := filepath.Join(d, "nbextensions", filepath.FromSlash(require)+".js")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, true
		}
	}
	return "", false
}

// NBExtensionEnabled reports whether the Notebook loads the nbextension require, merging
// the "notebook" section of configDirs (first wins) as Notebook 6 does: in each directory
// nbconfig/notebook.d/*.json in name order, then nbconfig/notebook.json, over the
// directories after it. from is the file that decides ("" when no file names require). A
// file that is not valid JSON is an error naming it.
func NBExtensionEnabled(configDirs []string, require string) (enabled bool, from string, err error) {
	for i := len(configDirs) - 1; i >= 0; i-- {
		nb := filepath.Join(configDirs[i], "nbconfig")
		files, _ := filepath.Glob(filepath.Join(nb, "notebook.d", "*.json"))
		sort.Strings(files)
		files = append(files, filepath.Join(nb, "notebook.json"))
		for _, f := range files {
			cfg, err := readNBConfig(f)
			if err != nil {
				return false, "", err
			}
			exts, _ := cfg["load_extensions"].(map[string]any)
			v, ok := exts[require]
			if !ok {
				continue
			}
			switch v := v.(type) {
			case bool:
				enabled, from = v, f
			case nil: // null removes the key when the Notebook merges
				enabled, from = false, ""
			default:
				return false, "", fmt.Errorf("installer: %s: load_extensions[%q] is %v, want true or false", f, require, v)
			}
		}
	}
	return enabled, from, nil
}

// readNBConfig reads a frontend config file; a missing file is an empty config.
func readNBConfig(path string) (map[string]any, error) {
	raw, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return map[string]any{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("installer: read %s: %w", path, err)
	}
	cfg := map[string]any{}
	if len(strings.TrimSpace(string(raw))) == 0 {
		return cfg, nil
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return nil, fmt.Errorf("installer: %s is not a JSON object (fix or remove it): %w", path, err)
	}
	return cfg, nil
}

// EnableNBExtension sets load_extensions[require] to true in configDir/nbconfig/notebook.json,
// keeping the rest of that file, and returns the file's path.
func EnableNBExtension(configDir, require string) (string, error) {
	path := filepath.Join(configDir, "nbconfig", "notebook.json")
	cfg, err := readNBConfig(path)
	if err != nil {
		return "", err
	}
	exts, ok := cfg["load_extensions"].(map[string]any)
	if !ok {
		if v, present := cfg["load_extensions"]; present && v != nil {
			return "", fmt.Errorf("installer: %s: load_extensions is %v, want an object", path, v)
		}
		exts = map[string]any{}
	}
	exts[require] = true
	cfg["load_extensions"] = exts
	raw, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return "", fmt.Errorf("installer: encode %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", fmt.Errorf("installer: create %s: %w", filepath.Dir(path), err)
	}
	return path, writeAtomic(path, append(raw, '\n'))
}

// WidgetState is what EnableWidgets found and did about the Notebook widget extension.
type WidgetState struct {
	JS    string // the extension's JavaScript file; "" when it is not installed
	By    string // the config file that enables it; "" when it is not enabled
	Wrote bool   // EnableWidgets wrote By
}

// String is the one line `godist install` prints about the extension.
func (s WidgetState) String() string {
	switch {
	case s.JS == "":
		return "widgets: Notebook widget extension not installed (make deps installs jupyter-nbextension-jupyter-js-widgets); progress shows as text"
	case s.Wrote:
		return fmt.Sprintf("widgets: Notebook widget extension enabled (jupyter-js-widgets) in %s", s.By)
	default:
		return fmt.Sprintf("widgets: Notebook widget extension enabled (jupyter-js-widgets, by %s)", s.By)
	}
}

// EnableWidgets makes the Notebook load the widget front end: when its JavaScript is in
// one of dataDirs and configDirs (first wins) do not already enable it, it enables it in
// writeDir (a config directory: the user's, or a prefix's).
func EnableWidgets(dataDirs, configDirs []string, writeDir string) (WidgetState, error) {
	js, ok := FindNBExtension(dataDirs, WidgetExtension)
	if !ok {
		return WidgetState{}, nil
	}
	s := WidgetState{JS: js}
	enabled, from, err := NBExtensionEnabled(configDirs, WidgetExtension)
	if err != nil {
		return s, err
	}
	if enabled {
		s.By = from
		return s, nil
	}
	path, err := EnableNBExtension(writeDir, WidgetExtension)
	if err != nil {
		return s, err
	}
	s.By, s.Wrote = path, true
	return s, nil
}
