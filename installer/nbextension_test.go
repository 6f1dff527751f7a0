package installer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestConfigDirs(t *testing.T) {
	t.Setenv("JUPYTER_CONFIG_DIR", "/c")
	t.Setenv("JUPYTER_CONFIG_PATH", "/p1:/p2/")
	t.Setenv("HOME", "/h")
	t.Setenv("CONDA_PREFIX", "")
	t.Setenv("VIRTUAL_ENV", "/venv")
	got := ConfigDirs()
	want := []string{"/c", "/p1", "/p2", "/h/.local/etc/jupyter", "/venv/etc/jupyter", "/usr/etc/jupyter", "/usr/local/etc/jupyter", "/etc/jupyter"}
	if !slices.Equal(got, want) {
		t.Errorf("ConfigDirs() = %q, want %q", got, want)
	}
	t.Setenv("JUPYTER_CONFIG_DIR", "")
	if got := ConfigDirs(); got[0] != "/h/.jupyter" {
		t.Errorf("ConfigDirs()[0] without JUPYTER_CONFIG_DIR = %q, want /h/.jupyter", got[0])
	}
}

// TestNBExtensionEnabled merges config files the way Notebook 6's ConfigManager does:
// earlier directories win, and in a directory notebook.json wins over notebook.d/*.json.
func TestNBExtensionEnabled(t *testing.T) {
	const ext = WidgetExtension
	on := `{"load_extensions": {"` + ext + `": true}}`
	off := `{"load_extensions": {"` + ext + `": false}}`
	null := `{"load_extensions": {"` + ext + `": null}}`
	tests := []struct {
		name    string
		files   map[string]string // path under the temp dir: user/..., sys/...
		want    bool
		from    string // relative to the temp dir
		wantErr string
	}{
		{"nothing", nil, false, "", ""},
		{"system notebook.d", map[string]string{"sys/nbconfig/notebook.d/jupyter-js-widgets.json": on}, true, "sys/nbconfig/notebook.d/jupyter-js-widgets.json", ""},
		{"user disables", map[string]string{"sys/nbconfig/notebook.d/w.json": on, "user/nbconfig/notebook.json": off}, false, "user/nbconfig/notebook.json", ""},
		{"notebook.json over notebook.d", map[string]string{"sys/nbconfig/notebook.d/w.json": off, "sys/nbconfig/notebook.json": on}, true, "sys/nbconfig/notebook.json", ""},
		{"d files in name order", map[string]string{"sys/nbconfig/notebook.d/a.json": on, "sys/nbconfig/notebook.d/b.json": off}, false, "sys/nbconfig/notebook.d/b.json", ""},
		{"null removes", map[string]string{"sys/nbconfig/notebook.json": on, "user/nbconfig/notebook.json": null}, false, "", ""},
		{"other extensions only", map[string]string{"user/nbconfig/notebook.json": `{"load_extensions": {"x/y": true}}`}, false, "", ""},
		{"bad json", map[string]string{"user/nbconfig/notebook.json": `{"load_extensions":`}, false, "", "user/nbconfig/notebook.json is not a JSON object"},
		{"bad value", map[string]string{"user/nbconfig/notebook.json": `{"load_extensions": {"` + ext + `": "yes"}}`}, false, "", "want true or false"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			for p, c := range tt.files {
				writeFile(t, filepath.Join(root, p), c)
			}
			dirs := []string{filepath.Join(root, "user"), filepath.Join(root, "sys")}
			got, from, err := NBExtensionEnabled(dirs, ext)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("NBExtensionEnabled() error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			wantFrom := ""
			if tt.from != "" {
				wantFrom = filepath.Join(root, tt.from)
			}
			if got != tt.want || from != wantFrom {
				t.Errorf("NBExtensionEnabled() = %v, %q, want %v, %q", got, from, tt.want, wantFrom)
			}
		})
	}
}

func TestEnableNBExtensionKeepsTheRest(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "nbconfig", "notebook.json")
	writeFile(t, path, `{"Cell": {"x": 1}, "load_extensions": {"other/ext": true, "`+WidgetExtension+`": false}}`)
	got, err := EnableNBExtension(dir, WidgetExtension)
	if err != nil {
		t.Fatal(err)
	}
	if got != path {
		t.Errorf("EnableNBExtension() = %s, want %s", got, path)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Cell           map[string]any  `json:"Cell"`
		LoadExtensions map[string]bool `json:"load_extensions"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatalf("%s: %v\n%s", path, err, raw)
	}
	if cfg.Cell["x"] != 1.0 || !cfg.LoadExtensions["other/ext"] || !cfg.LoadExtensions[WidgetExtension] {
		t.Errorf("after EnableNBExtension %s =\n%s", path, raw)
	}

	// A new config dir gets a new file; a load_extensions that is not an object is an error.
	fresh := t.TempDir()
	if _, err := EnableNBExtension(fresh, WidgetExtension); err != nil {
		t.Fatal(err)
	}
	if on, _, err := NBExtensionEnabled([]string{fresh}, WidgetExtension); err != nil || !on {
		t.Errorf("after EnableNBExtension in a new dir: enabled %v, %v", on, err)
	}
	bad := t.TempDir()
	writeFile(t, filepath.Join(bad, "nbconfig", "notebook.json"), `{"load_extensions": [1]}`)
	if _, err := EnableNBExtension(bad, WidgetExtension); err == nil || !strings.Contains(err.Error(), "want an object") {
		t.Errorf("EnableNBExtension over a list: error %v, want one saying it wants an object", err)
	}
}

func TestEnableWidgets(t *testing.T) {
	root := t.TempDir()
	data := filepath.Join(root, "data")
	user, sys := filepath.Join(root, "user"), filepath.Join(root, "sys")
	configs := []string{user, sys}

	// Not installed: nothing written, a line that says how to install it.
	s, err := EnableWidgets([]string{data}, configs, user)
	if err != nil {
		t.Fatal(err)
	}
	if s.JS != "" || s.Wrote || !strings.Contains(s.String(), "not installed") {
		t.Errorf("without the extension: %+v, %q", s, s)
	}
	if _, err := os.Stat(filepath.Join(user, "nbconfig")); !os.IsNotExist(err) {
		t.Errorf("without the extension EnableWidgets wrote config: %v", err)
	}

	js := filepath.Join(data, "nbextensions", "jupyter-js-widgets", "extension.js")
	writeFile(t, js, "define([], function() {});\n")

	// Installed, enabled system-wide: nothing written, the line names the file.
	sysFile := filepath.Join(sys, "nbconfig", "notebook.d", "jupyter-js-widgets.json")
	writeFile(t, sysFile, `{"load_extensions": {"`+WidgetExtension+`": true}}`)
	s, err = EnableWidgets([]string{data}, configs, user)
	if err != nil {
		t.Fatal(err)
	}
	want := "widgets: Notebook widget extension enabled (jupyter-js-widgets, by " + sysFile + ")"
	if s.JS != js || s.Wrote || s.String() != want {
		t.Errorf("enabled system-wide: %+v\n%q, want\n%q", s, s, want)
	}

	// Disabled by the user: enabled in the user's config, and said so.
	userFile := filepath.Join(user, "nbconfig", "notebook.json")
	writeFile(t, userFile, `{"load_extensions": {"`+WidgetExtension+`": false}}`)
	s, err = EnableWidgets([]string{data}, configs, user)
	if err != nil {
		t.Fatal(err)
	}
	want = "widgets: Notebook widget extension enabled (jupyter-js-widgets) in " + userFile
	if !s.Wrote || s.String() != want {
		t.Errorf("disabled by the user: %+v\n%q, want\n%q", s, s, want)
	}
	if on, from, err := NBExtensionEnabled(configs, WidgetExtension); err != nil || !on || from != userFile {
		t.Errorf("after EnableWidgets: enabled %v by %q (%v), want true by %s", on, from, err, userFile)
	}
	// Again: nothing more to do.
	if s, err = EnableWidgets([]string{data}, configs, user); err != nil || s.Wrote {
		t.Errorf("second EnableWidgets: %+v, %v, want nothing written", s, err)
	}
}
