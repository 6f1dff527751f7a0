// Package notebooks holds the course activities as Go notebooks. Its test executes each
// notebook headless through the real godist kernel (nbclient, kernel "godist" installed in
// a temporary JUPYTER_DATA_DIR) and checks the outputs of its cells.
//
// To add a notebook: put NAME.ipynb here and add a row to notebookChecks with a check
// function built from the helpers below (wantOutput, wantError, wantMIME, wantNoErrors,
// findCell). Every .ipynb in this directory must have a row.
package notebooks

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

// notebookChecks maps each notebook to the function that checks its executed outputs.
// timeout bounds one cell (nbclient's timeout); 0 means defaultCellTimeout.
var notebookChecks = []struct {
	file    string
	timeout time.Duration
	check   func(t *testing.T, nb *notebook)
}{
	// Rows are added with their notebooks, e.g.:
	// {"00-kernel-tour.ipynb", 0, checkKernelTour},
	{"00-kernel-tour.ipynb", 2 * time.Minute, checkKernelTour},
	{"07-keras3-distribution.ipynb", 5 * time.Minute, checkKeras3Distribution},
	{"quickstart.ipynb", 3 * time.Minute, checkQuickstart},
	{"01-environment.ipynb", time.Minute, checkEnvironment},
	{"05-two-workers.ipynb", 3 * time.Minute, checkTwoWorkers},
	{"02-tensors-and-keras.ipynb", 2 * time.Minute, checkTensorsAndKeras},
	{"04-cluster-resolver.ipynb", 2 * time.Minute, checkClusterResolver},
	{"06-parameter-server.ipynb", 3 * time.Minute, checkParameterServer},
	{"09-practical-pipeline.ipynb", 3 * time.Minute, checkPracticalPipeline},
	{"03-one-node.ipynb", 3 * time.Minute, checkOneNode},
	{transferLearningNotebook, 3 * time.Minute, checkTransferLearning},
	{"08-gpu.ipynb", 3 * time.Minute, checkGPU},
	{fashionTalkNotebook, 5 * time.Minute, checkFashionTalk},
}

const defaultCellTimeout = 5 * time.Minute

// notebookSetup holds, for the notebooks that need something started first (a Slurm
// cluster), a function that starts it for the duration of the subtest and returns the
// extra environment ("NAME=value") of the notebook's kernel; it may skip the subtest with
// a reason. It gets the shared environment (e.bin is the kernel's godist binary). Check
// files register theirs from init.
var notebookSetup = map[string]func(t *testing.T, e *env) []string{}

// python is the interpreter that has Debian's Jupyter packages.
const python = "/usr/bin/python3"

// executeScript runs one notebook with nbclient and writes the executed copy, even when a
// cell fails or times out (errors stay in the outputs for the check functions to see).
//
// With a fifth argument, a JSON {"before": text, "code": code, "after": seconds}, it first
// inserts a code cell with code before the first code cell containing text, and interrupts
// the kernel after that many seconds of it (nbclient's interrupt_on_timeout); the inserted
// cell carries the metadata "godist_interrupted": true.
const executeScript = `
import json, sys, nbformat
from nbclient import NotebookClient
src, dst, timeout, cwd = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
nb = nbformat.read(src, as_version=4)
kw = {}
if len(sys.argv) > 5:
    spec = json.loads(sys.argv[5])
    at = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code" and spec["before"] in c.source)
    extra = nbformat.v4.new_code_cell(spec["code"])
    extra.metadata["godist_interrupted"] = True
    nb.cells.insert(at, extra)
    kw = dict(interrupt_on_timeout=True,
              timeout_func=lambda cell: spec["after"] if cell.metadata.get("godist_interrupted") else timeout)
client = NotebookClient(nb, kernel_name="godist", timeout=timeout, allow_errors=True,
                        startup_timeout=60, resources={"metadata": {"path": cwd}}, **kw)
status = 0
try:
    client.execute()
except Exception as e:
    print("nbclient:", type(e).__name__, e, file=sys.stderr)
    status = 3
finally:
    nbformat.write(nb, dst)
sys.exit(status)
`

// notebook is an executed .ipynb as the checks see it.
type notebook struct {
	Path  string
	Cells []cell
}

type cell struct {
	Type    string   // "code", "markdown", "raw"
	Source  string   // the cell's source text
	Outputs []output // code cells only
}

type output struct {
	Type      string         // "stream", "execute_result", "display_data", "error"
	Name      string         // stream name
	Text      string         // stream text
	Data      map[string]any // execute_result and display_data bundles
	EName     string
	EValue    string
	Traceback []string
}

// Stream returns what the cell wrote to one stream ("stdout" or "stderr"). The kernel
// forwards the two streams through separate pipes, so their relative order within a cell
// is not kept: a check of printed lines next to a library's log lines reads one stream.
func (c cell) Stream(name string) string {
	var b strings.Builder
	for _, o := range c.Outputs {
		if o.Type == "stream" && o.Name == name {
			b.WriteString(o.Text)
		}
	}
	return b.String()
}

// text returns what a reader sees of an output as plain text: colour codes (Keras' bar
// draws with them) are not.
func (o output) text() string {
	switch o.Type {
	case "stream":
		return ansiColour.ReplaceAllString(o.Text, "")
	case "error":
		return o.EName + ": " + o.EValue + "\n" + strings.Join(o.Traceback, "\n")
	}
	if s, ok := o.Data["text/plain"]; ok {
		return ansiColour.ReplaceAllString(joinSource(s), "")
	}
	return ""
}

// ansiColour matches an ANSI SGR sequence (a colour or bold on, or off).
var ansiColour = regexp.MustCompile("\x1b\\[[0-9;]*m")

// Text returns all the plain text a cell printed or displayed. Each output starts on a new
// line, as a front end shows it: a display's text does not run into the stream after it.
func (c cell) Text() string {
	var b strings.Builder
	for _, o := range c.Outputs {
		t := o.text()
		if b.Len() > 0 && t != "" && !strings.HasSuffix(b.String(), "\n") {
			b.WriteString("\n")
		}
		b.WriteString(t)
	}
	return b.String()
}

// joinSource decodes nbformat's "multiline string": a string or a list of strings.
func joinSource(v any) string {
	switch s := v.(type) {
	case string:
		return s
	case []any:
		var b strings.Builder
		for _, p := range s {
			if ps, ok := p.(string); ok {
				b.WriteString(ps)
			}
		}
		return b.String()
	}
	return ""
}

func readNotebook(path string) (*notebook, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f struct {
		Cells []struct {
			CellType string `json:"cell_type"`
			Source   any    `json:"source"`
			Outputs  []struct {
				OutputType string         `json:"output_type"`
				Name       string         `json:"name"`
				Text       any            `json:"text"`
				Data       map[string]any `json:"data"`
				EName      string         `json:"ename"`
				EValue     string         `json:"evalue"`
				Traceback  []string       `json:"traceback"`
			} `json:"outputs"`
		} `json:"cells"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, fmt.Errorf("notebook %s: %w", path, err)
	}
	nb := &notebook{Path: path}
	for _, c := range f.Cells {
		nc := cell{Type: c.CellType, Source: joinSource(c.Source)}
		for _, o := range c.Outputs {
			nc.Outputs = append(nc.Outputs, output{Type: o.OutputType, Name: o.Name, Text: joinSource(o.Text),
				Data: o.Data, EName: o.EName, EValue: o.EValue, Traceback: o.Traceback})
		}
		nb.Cells = append(nb.Cells, nc)
	}
	return nb, nil
}

// cellAt returns cell i (an index into all cells, markdown included, as in the .ipynb).
func cellAt(t *testing.T, nb *notebook, i int) cell {
	t.Helper()
	if i < 0 || i >= len(nb.Cells) {
		t.Fatalf("%s: no cell %d (the notebook has %d cells)", filepath.Base(nb.Path), i, len(nb.Cells))
	}
	return nb.Cells[i]
}

// findCell returns the index of the first code cell whose source contains substr.
func findCell(t *testing.T, nb *notebook, substr string) int {
	t.Helper()
	for i, c := range nb.Cells {
		if c.Type == "code" && strings.Contains(c.Source, substr) {
			return i
		}
	}
	t.Fatalf("%s: no code cell contains %q", filepath.Base(nb.Path), substr)
	return -1
}

// wantOutput checks that cell i's plain-text output (streams, results, displays) matches
// the regular expression re.
func wantOutput(t *testing.T, nb *notebook, i int, re string) {
	t.Helper()
	c := cellAt(t, nb, i)
	if !regexp.MustCompile(re).MatchString(c.Text()) {
		t.Errorf("%s cell %d: output %q does not match %q\nsource:\n%s", filepath.Base(nb.Path), i, c.Text(), re, c.Source)
	}
}

// wantStdout checks that what cell i wrote to standard output matches re.
func wantStdout(t *testing.T, nb *notebook, i int, re string) {
	t.Helper()
	c := cellAt(t, nb, i)
	if !regexp.MustCompile(re).MatchString(c.Stream("stdout")) {
		t.Errorf("%s cell %d: stdout %q does not match %q\nsource:\n%s", filepath.Base(nb.Path), i, c.Stream("stdout"), re, c.Source)
	}
}

// wantError checks that cell i failed with an error whose "ename: evalue" matches re.
func wantError(t *testing.T, nb *notebook, i int, re string) {
	t.Helper()
	c := cellAt(t, nb, i)
	for _, o := range c.Outputs {
		if o.Type == "error" && regexp.MustCompile(re).MatchString(o.EName+": "+o.EValue) {
			return
		}
	}
	t.Errorf("%s cell %d: no error matching %q; outputs: %q", filepath.Base(nb.Path), i, re, c.Text())
}

// wantMIME checks that cell i displayed or returned data of the given MIME type.
func wantMIME(t *testing.T, nb *notebook, i int, mime string) {
	t.Helper()
	c := cellAt(t, nb, i)
	for _, o := range c.Outputs {
		if _, ok := o.Data[mime]; ok {
			return
		}
	}
	t.Errorf("%s cell %d: no %s output; outputs: %q", filepath.Base(nb.Path), i, mime, c.Text())
}

// wantNoErrors checks that no cell failed except those listed.
func wantNoErrors(t *testing.T, nb *notebook, except ...int) {
	t.Helper()
	skip := map[int]bool{}
	for _, i := range except {
		skip[i] = true
	}
	for i, c := range nb.Cells {
		if skip[i] {
			continue
		}
		for _, o := range c.Outputs {
			if o.Type == "error" {
				t.Errorf("%s cell %d failed: %s: %s\nsource:\n%s", filepath.Base(nb.Path), i, o.EName, o.EValue, c.Source)
			}
		}
	}
}

// env is the built kernel and its kernelspec, shared by the notebooks.
type env struct {
	dir  string   // temporary root
	bin  string   // the godist binary the kernel runs
	vars []string // environment of the nbclient process
}

func setup(t *testing.T) *env {
	t.Helper()
	if testing.Short() {
		t.Skip("notebooks: executing notebooks is skipped under -short")
	}
	if _, err := os.Stat(python); err != nil {
		t.Skipf("notebooks: %s not found (install Debian's python3-nbclient)", python)
	}
	if out, err := exec.Command(python, "-c", "import nbclient, nbformat").CombinedOutput(); err != nil {
		t.Skipf("notebooks: %s lacks nbclient: %s", python, out)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "godist")
	build := exec.Command("go", "build", "-o", bin, "godist/cmd/godist")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("notebooks: go build ./cmd/godist: %v\n%s", err, out)
	}
	vars := append(os.Environ(),
		"JUPYTER_DATA_DIR="+filepath.Join(dir, "jupyter"),
		"JUPYTER_PATH=",
		"JUPYTER_RUNTIME_DIR="+filepath.Join(dir, "runtime"),
		"GODIST_HISTORY=off",
		"PYDEVD_DISABLE_FILE_VALIDATION=1")
	install := exec.Command(bin, "install")
	install.Env = vars
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("notebooks: godist install: %v\n%s", err, out)
	}
	script := filepath.Join(dir, "execute.py")
	if err := os.WriteFile(script, []byte(executeScript), 0o644); err != nil {
		t.Fatal(err)
	}
	return &env{dir: dir, bin: bin, vars: vars}
}

// execute runs the notebook file and returns its executed copy. When
// GODIST_NOTEBOOK_OUT names a directory, the executed copy is also saved there.
func (e *env) execute(t *testing.T, file string, cellTimeout time.Duration, extraEnv ...string) *notebook {
	t.Helper()
	return e.executeWith(t, file, cellTimeout, "", extraEnv...)
}

// executeWith is execute with executeScript's optional interrupt spec (JSON; "" for none).
func (e *env) executeWith(t *testing.T, file string, cellTimeout time.Duration, interrupt string, extraEnv ...string) *notebook {
	t.Helper()
	src, err := filepath.Abs(file)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(e.dir, "executed-"+filepath.Base(file))
	cwd := filepath.Dir(src)
	args := []string{filepath.Join(e.dir, "execute.py"), src, dst, fmt.Sprint(int(cellTimeout.Seconds())), cwd}
	if interrupt != "" {
		args = append(args, interrupt)
	}
	cmd := exec.Command(python, args...)
	cmd.Env = append(append([]string{}, e.vars...), extraEnv...)
	cmd.Dir = cwd
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// Bound the whole notebook: a kernel that never answers must not hang the test.
	select {
	case err = <-done:
	case <-time.After(cellTimeout + 10*time.Minute):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("%s: nbclient did not finish; output:\n%s", file, out.String())
	}
	if err != nil {
		t.Errorf("%s: nbclient: %v\n%s", file, err, out.String())
	}
	nb, rerr := readNotebook(dst)
	if rerr != nil {
		t.Fatalf("%s: read executed notebook: %v (nbclient output:\n%s)", file, rerr, out.String())
	}
	if d := os.Getenv("GODIST_NOTEBOOK_OUT"); d != "" {
		if raw, err := os.ReadFile(dst); err == nil {
			_ = os.MkdirAll(d, 0o755)
			_ = os.WriteFile(filepath.Join(d, filepath.Base(file)), raw, 0o644)
		}
	}
	return nb
}

func TestNotebooks(t *testing.T) {
	files, err := filepath.Glob("*.ipynb")
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	rows := map[string]bool{}
	for _, r := range notebookChecks {
		rows[r.file] = true
	}
	for _, f := range files {
		if !rows[f] {
			t.Errorf("notebook %s has no row in notebookChecks: add one with its check function", f)
		}
	}
	if len(notebookChecks) == 0 {
		t.Skip("notebooks: no notebook has a check row yet")
	}
	e := setup(t)
	for _, r := range notebookChecks {
		t.Run(strings.TrimSuffix(r.file, ".ipynb"), func(t *testing.T) {
			if _, err := os.Stat(r.file); err != nil {
				t.Fatalf("notebook of row %q: %v", r.file, err)
			}
			timeout := r.timeout
			if timeout == 0 {
				timeout = defaultCellTimeout
			}
			var extra []string
			if f := notebookSetup[r.file]; f != nil {
				extra = f(t, e)
			}
			nb := e.execute(t, r.file, timeout, extra...)
			r.check(t, nb)
		})
	}
}

func TestReadNotebook(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.ipynb")
	const doc = `{"cells":[{"cell_type":"markdown","source":["# t"]},
	{"cell_type":"code","source":["fmt.Println(1)\n","x"],"outputs":[
	 {"output_type":"stream","name":"stdout","text":["1\n"]},
	 {"output_type":"execute_result","data":{"text/plain":"42","image/png":"AA=="}},
	 {"output_type":"error","ename":"panic","evalue":"boom","traceback":["panic: boom"]}]}],
	"metadata":{},"nbformat":4,"nbformat_minor":5}`
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	nb, err := readNotebook(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(nb.Cells) != 2 || nb.Cells[1].Source != "fmt.Println(1)\nx" {
		t.Fatalf("readNotebook cells = %+v", nb.Cells)
	}
	wantOutput(t, nb, 1, `(?s)^1\n42\npanic: boom`)
	wantMIME(t, nb, 1, "image/png")
	wantError(t, nb, 1, `^panic: boom$`)
	if i := findCell(t, nb, "Println"); i != 1 {
		t.Errorf("findCell = %d, want 1", i)
	}
}
