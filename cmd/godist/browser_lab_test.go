package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The front ends of testdata/frontends: each a directory with a package.json and its
// package-lock.json, an index.js bundled by build.mjs, and an index.html.
const (
	jlabFrontEnd  = "jlab"  // JupyterLab 4's notebook and jupyterlab_widgets (ipywidgets 8)
	html7FrontEnd = "html7" // ipywidgets 7's HTML manager as VS Code's renderer drives it
)

// What widgets.FrontendSeen() says in each front end's kernel: the dialect and what showed it.
var (
	jlabSeen  = regexp.MustCompile(`^ipywidgets 8 \(widget protocol 2\.1\.0\): the front end opened jupyter\.widget\.control`)
	html7Seen = regexp.MustCompile(`^ipywidgets 7 \(widget protocol 2\.0\.0\): execute_request metadata cellId vscode-notebook-cell:`)
)

// TestBrowserLab runs TestBrowser's widget cells in two more front ends, against Debian's
// Notebook 6 server's kernel API and in headless Chromium: a JupyterLab 4 notebook page
// made of JupyterLab's own packages with jupyterlab_widgets' manager (widget protocol 2,
// ipywidgets 8 models), where a reloaded page gets its widgets back from the kernel; and
// ipywidgets 7's HTML manager on a kernel connection that sends VS Code's cell ids (widget
// protocol 2, ipywidgets 7 models). The pages are bundled from npm packages pinned by
// testdata/frontends/*/package-lock.json, installed and built once into the user's cache
// directory. Screenshots go where TestBrowser's go, named jlab-* and html7-*.
func TestBrowserLab(t *testing.T) {
	if testing.Short() {
		t.Skip("the browser test starts Chromium and a notebook server; skipped under -short")
	}
	needChromium(t)
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found (the JupyterLab 4 and ipywidgets 7 pages are built with node and npm): %v", tool, err)
		}
	}
	dist := buildFrontEnds(t, jlabFrontEnd, html7FrontEnd)
	srv := startNotebookServer(t, "--NotebookApp.extra_static_paths="+dist[jlabFrontEnd],
		"--NotebookApp.extra_static_paths="+dist[html7FrontEnd])
	b := startBrowser(t)
	shots := screenshotDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 9*time.Minute)
	defer cancel()

	t.Run("JupyterLab 4", func(t *testing.T) {
		defer noPageErrors(t, b)()
		open := func(t *testing.T, name string) *notebookPage {
			return openFrontEndPage(ctx, t, b, srv, jlabFrontEnd, name, jlabSeen)
		}
		nb := testWidgetCells(ctx, t, srv, shots, "jlab-", open)
		t.Run("reload", func(t *testing.T) {
			testReload(ctx, t, srv, nb, shots, func(t *testing.T, name string) *notebookPage {
				return loadFrontEndPage(ctx, t, nb.page, srv, jlabFrontEnd, name, jlabSeen)
			})
		})
	})

	// VS Code does not load widget state from the kernel: a reloaded VS Code window shows the
	// outputs it saved, not live widgets, so no reload is checked here.
	t.Run("ipywidgets 7 HTML manager", func(t *testing.T) {
		defer noPageErrors(t, b)()
		var pages []*notebookPage
		open := func(t *testing.T, name string) *notebookPage {
			nb := openFrontEndPage(ctx, t, b, srv, html7FrontEnd, name, html7Seen)
			pages = append(pages, nb)
			return nb
		}
		testWidgetCells(ctx, t, srv, shots, "html7-", open)
		for _, nb := range pages {
			var targets []string
			if err := nb.page.eval(ctx, "window.godistPage.commsOpened", &targets); err != nil {
				t.Fatal(err)
			}
			if slices.Contains(targets, "jupyter.widget.control") {
				t.Errorf("the ipywidgets 7 page opened comms %q: VS Code's manager never opens jupyter.widget.control", targets)
			}
		}
	})
}

// noPageErrors returns a func that fails t with the uncaught exceptions and console errors
// of b's pages since noPageErrors was called: the front-end code must run without them.
func noPageErrors(t *testing.T, b *browser) func() {
	b.mu.Lock()
	from := len(b.console)
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		var errs []string
		for _, l := range b.console[from:] {
			if strings.HasPrefix(l, "exception:") || strings.HasPrefix(l, "console.error:") {
				errs = append(errs, l)
			}
		}
		if len(errs) > 0 {
			t.Errorf("the pages reported %d errors:\n%s", len(errs), tail(strings.Join(errs, "\n"), 4000))
		}
	}
}

// openFrontEndPage opens notebook name in a new tab of front end fe (its page served from
// the notebook server's static files), waits for its godist kernel and its recorder, and
// checks that the kernel took the page for the widget front end it is (seen matches what
// widgets.FrontendSeen() says there).
func openFrontEndPage(ctx context.Context, t *testing.T, b *browser, srv *notebookServer, fe, name string, seen *regexp.Regexp) *notebookPage {
	t.Helper()
	p, err := b.newPage(ctx, 1280, 1600)
	if err != nil {
		t.Fatal(err)
	}
	return loadFrontEndPage(ctx, t, p, srv, fe, name, seen)
}

// loadFrontEndPage is openFrontEndPage in tab p: in a tab that shows the page already, it
// reloads it.
func loadFrontEndPage(ctx context.Context, t *testing.T, p *page, srv *notebookServer, fe, name string, seen *regexp.Regexp) *notebookPage {
	t.Helper()
	if err := p.bringToFront(ctx); err != nil {
		t.Fatal(err)
	}
	// Until the new document replaces it, the old one must not answer for it.
	if err := p.eval(ctx, "window.godistPage = undefined, true", nil); err != nil {
		t.Fatal(err)
	}
	if err := p.navigate(ctx, srv.URL+"/static/"+fe+"/index.html?path="+name+"&token="+srv.Token); err != nil {
		t.Fatal(err)
	}
	ready := `window.godistPageError ? "error: " + window.godistPageError : window.godistPage ? window.godistPage.state() : "loading"`
	v, err := p.waitFor(ctx, fe+"'s page, its godist kernel and its recorder", 2*time.Minute, ready, func(v json.RawMessage) bool {
		return string(v) == `"ready"` || strings.HasPrefix(string(v), `"error: `)
	})
	if err != nil {
		t.Fatal(err)
	}
	if string(v) != `"ready"` {
		t.Fatalf("%s's page failed: %s", fe, v)
	}
	nb := &notebookPage{page: p, srv: srv, history: map[int][]cellSnapshot{}, js: pageJS{
		execute:  "window.godistPage.execute(%d)",
		cellNode: "window.godistPage.cellNode(%d)",
		probe:    "window.godistPage.probe(%s)",
	}}
	// JupyterLab's manager opens jupyter.widget.control once the kernel is connected, and
	// the ipywidgets 7 page's probes carry VS Code's cell ids: either way the kernel knows the
	// front end once it has seen that; until then Fit would draw text.
	if out := nb.probeUntil(ctx, t, "import \"godist/distlib/widgets\"\nwidgets.Ready()", "ok true", time.Minute); out != "ok true" {
		t.Fatalf("widgets.Ready() in %s's kernel = %q, want ok true", fe, out)
	}
	speaks := strings.TrimPrefix(nb.probe(ctx, t, "widgets.FrontendSeen()"), "ok ")
	t.Logf("%s: the kernel speaks %s", fe, speaks)
	if !seen.MatchString(speaks) {
		t.Fatalf("%s: the kernel speaks %s, want it to match %s", fe, speaks, seen)
	}
	return nb
}

// testReload saves nb's notebook (its cells run by testWidgetCells), reloads the page and
// checks that its widgets come back as they were drawn, from the kernel (the notebook file
// holds no widget state), and still update.
func testReload(ctx context.Context, t *testing.T, srv *notebookServer, nb *notebookPage, shots string, reload func(*testing.T, string) *notebookPage) {
	if err := nb.collect(ctx); err != nil {
		t.Fatal(err)
	}
	var before []cellSnapshot
	for i := 0; i < 2; i++ {
		h := nb.history[i]
		if len(h) == 0 {
			t.Fatalf("cell %d was never recorded", i)
		}
		before = append(before, h[len(h)-1])
	}
	if _, ran := before[0].Prompt.(float64); !ran {
		t.Skip("the reload checks the widgets of the cells the subtests before it run; run them too")
	}
	var path string
	if err := nb.page.eval(ctx, "window.godistPage.save().then(() => window.godistPage.panel.context.path)", &path); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(srv.Dir, path))
	if err != nil {
		t.Fatal(err)
	}
	var saved struct {
		Metadata map[string]any `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &saved); err != nil {
		t.Fatal(err)
	}
	if _, ok := saved.Metadata["widgets"]; ok {
		t.Fatalf("the saved notebook holds widget state; the reload would not show that the kernel restores it")
	}
	reloaded := time.Now()
	re := reload(t, path)
	t.Logf("the page and its kernel were back %v after the reload", time.Since(reloaded).Round(time.Millisecond))
	restored := func(i int) func(cellSnapshot) bool {
		return func(s cellSnapshot) bool {
			return slices.Equal(s.Bars, before[i].Bars) && s.Fit == before[i].Fit && s.FitBox == before[i].FitBox &&
				(before[i].Panel == nil) == (s.Panel == nil) &&
				(s.Panel == nil || s.Panel.Status == before[i].Panel.Status && s.Panel.text() == before[i].Panel.text())
		}
	}
	for i := range before {
		if _, err := re.waitCell(ctx, i, 0, "the widgets drawn before the reload", 30*time.Second, restored(i)); err != nil {
			b, _ := json.Marshal(before[i])
			t.Fatalf("%v\nbefore the reload: %s", err, b)
		}
	}
	t.Logf("the widgets were drawn again %v after the reload", time.Since(reloaded).Round(time.Millisecond))
	re.screenshot(ctx, t, 0, shots, "jlab-reloaded.png")
	// The restored progress widget is the kernel's: a value set from Go moves its bar.
	if out := re.probe(ctx, t, "p.SetValue(5)"); !strings.HasPrefix(out, "ok") {
		t.Fatalf("p.SetValue(5) after the reload: %s", out)
	}
	if _, err := re.waitCell(ctx, 0, 0, "the restored progress widget at 5/20", 30*time.Second, func(s cellSnapshot) bool {
		return len(s.Bars) > 0 && s.Bars[0] == 25
	}); err != nil {
		t.Fatal(err)
	}
}

// buildFrontEnds installs (npm ci) and bundles the front ends of testdata/frontends named
// by names into the user's cache directory and returns each one's directory of pages, to
// be served as static files (its page is NAME/index.html there). node_modules is kept per
// lock file, the bundle per source: a later run reuses both until they change.
func buildFrontEnds(t *testing.T, names ...string) map[string]string {
	t.Helper()
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatalf("no cache directory for the front ends' npm packages: %v", err)
	}
	root := filepath.Join(cache, "godist", "browser")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	// One test process at a time installs and builds.
	lock, err := os.OpenFile(filepath.Join(root, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)

	src, err := filepath.Abs(filepath.Join("testdata", "frontends"))
	if err != nil {
		t.Fatal(err)
	}
	dist := map[string]string{}
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := buildFrontEnd(root, src, name)
			mu.Lock()
			dist[name], errs[i] = d, err
			mu.Unlock()
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return dist
}

// buildFrontEnd makes root/NAME-LOCKHASH/node_modules with npm ci and bundles the sources
// into root/NAME-LOCKHASH/build-SRCHASH/dist/NAME, unless already there; it removes old
// installs and builds of other hashes. It returns the dist directory.
func buildFrontEnd(root, src, name string) (string, error) {
	lockHash, err := hashFiles(src, []string{filepath.Join(name, "package.json"), filepath.Join(name, "package-lock.json")})
	if err != nil {
		return "", err
	}
	inst := filepath.Join(root, name+"-"+lockHash)
	if _, err := os.Stat(filepath.Join(inst, ".installed")); err != nil {
		removeStale(filepath.Join(root, name+"-*"))
		if err := os.MkdirAll(inst, 0o755); err != nil {
			return "", err
		}
		for _, f := range []string{"package.json", "package-lock.json"} {
			if err := copyFile(filepath.Join(src, name, f), filepath.Join(inst, f)); err != nil {
				return "", err
			}
		}
		if out, err := runTool(inst, 10*time.Minute, "npm", "ci", "--no-audit", "--no-fund"); err != nil {
			return "", fmt.Errorf("npm ci for the %s page in %s: %v\n%s", name, inst, err, out)
		}
		if err := os.WriteFile(filepath.Join(inst, ".installed"), nil, 0o644); err != nil {
			return "", err
		}
	}
	var files []string
	err = filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "dist") {
			return filepath.SkipDir
		}
		top := strings.Split(rel, string(filepath.Separator))[0]
		if !d.IsDir() && (top == name || !strings.Contains(rel, string(filepath.Separator))) {
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	srcHash, err := hashFiles(src, files)
	if err != nil {
		return "", err
	}
	build := filepath.Join(inst, "build-"+srcHash)
	dist := filepath.Join(build, "dist")
	if _, err := os.Stat(filepath.Join(build, ".built")); err == nil {
		return dist, nil
	}
	removeStale(filepath.Join(inst, "build-*"))
	for _, f := range files {
		if err := copyFile(filepath.Join(src, f), filepath.Join(build, f)); err != nil {
			return "", err
		}
	}
	if out, err := runTool(filepath.Join(build, name), 5*time.Minute, "node", "../build.mjs", filepath.Join(dist, name)); err != nil {
		return "", fmt.Errorf("bundling the %s page in %s: %v\n%s", name, build, err, out)
	}
	return dist, os.WriteFile(filepath.Join(build, ".built"), nil, 0o644)
}

// hashFiles returns a hex digest of the names and contents of files (relative to dir).
func hashFiles(dir string, files []string) (string, error) {
	h := sha256.New()
	for _, f := range slices.Sorted(slices.Values(files)) {
		raw, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", filepath.ToSlash(f), len(raw))
		h.Write(raw)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

func copyFile(from, to string) error {
	raw, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	return os.WriteFile(to, raw, 0o644)
}

// removeStale removes the installs or builds matching pattern made over a day ago: those of
// other lock files and sources, left alone while a test running beside this one may serve them.
func removeStale(pattern string) {
	old, _ := filepath.Glob(pattern)
	for _, d := range old {
		if fi, err := os.Stat(d); err == nil && time.Since(fi.ModTime()) > 24*time.Hour {
			_ = os.RemoveAll(d)
		}
	}
}

// runTool runs name with args in dir and returns its combined output.
func runTool(dir string, timeout time.Duration, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return tail(string(out), 8000), err
}
