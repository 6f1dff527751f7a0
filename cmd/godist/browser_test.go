package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// The cells the browser test runs. progressFitCell advances a progress widget from the
// cell, then trains with Keras' Fit, whose bar is a widget where the front end validated.
const progressFitCell = `import (
	"time"
	"godist/distlib/data"
	"godist/distlib/keras"
	"godist/distlib/keras/layers"
	"godist/distlib/tensor"
	"godist/distlib/widgets"
)
p := widgets.NewIntProgress(0, 20)
p.SetDescription("Loading:")
p.Display()
for i := 1; i <= 20; i++ {
	time.Sleep(40 * time.Millisecond)
	p.SetValue(i)
}
x := tensor.RandomNormal([]int{4096, 8}, 0, 1, 1)
y := tensor.ReduceSum(x, 1)
ds := data.FromTensorSlices(x, y).Batch(64, false)
model := keras.Sequential(layers.Dense(16, layers.ReLU, layers.InputShape(8)), layers.Dense(1))
model.Compile(keras.Adam(1e-2), keras.MeanSquaredError())
h := model.Fit(ds, keras.Epochs(3))`

// shortDistributedCell is a two-worker job that prints, waits and ends: both workers run
// together for a few seconds however slowly each starts.
const shortDistributedCell = `%%distributed --workers 2
import (
    "fmt"
    "time"
)
fmt.Println("hello")
time.Sleep(3 * time.Second)
fmt.Println("bye")`

// lostWorkerCell is an elastic three-worker job (--elastic 2) whose worker 2 fails after a
// second while the two others go on: the panel marks worker 2 lost and the job done.
const lostWorkerCell = `%%distributed --workers 3 --elastic 2
import (
    "fmt"
    "os"
    "time"

    "godist/distlib/cluster"
)
r, _ := cluster.NewTFConfigClusterResolver()
fmt.Println("hello from worker", r.TaskID())
time.Sleep(time.Second)
if r.TaskID() == 2 {
    fmt.Println("worker 2 fails")
    os.Exit(3)
}
time.Sleep(2 * time.Second)
fmt.Println("bye")`

// longDistributedCell trains for 100000 epochs: only the panel's Stop button ends it.
const longDistributedCell = `%%distributed --workers 2
import (
    "fmt"
    "godist/distlib/data"
    "godist/distlib/distribute"
    "godist/distlib/keras"
    "godist/distlib/keras/layers"
    "godist/distlib/tensor"
)
strategy := distribute.NewMultiWorkerMirroredStrategy()
x := tensor.RandomNormal([]int{2048, 32}, 0, 1, 1)
y := tensor.ReduceSum(x, 1)
ds := data.FromTensorSlices(x, y).Batch(64, false).WithOptions(data.Options{AutoShardPolicy: data.AutoShardData})
var model *keras.Model
strategy.Scope(func() {
    model = keras.Sequential(layers.Dense(64, layers.ReLU, layers.InputShape(32)), layers.Dense(1))
    model.Compile(keras.Adam(1e-3), keras.MeanSquaredError())
})
fmt.Println("training")
model.Fit(ds, keras.Epochs(100000), keras.Verbose(2))`

// TestBrowser opens notebooks in Debian's Notebook 6 server with headless Chromium and
// reads back from the page's DOM what the widget front end drew: a progress widget that
// advances while its cell runs and Keras' Fit bar reaching its end; the %%distributed
// cluster panel showing two running workers, then both exited; and, in another notebook,
// a real mouse click on the panel's Stop button ending a long job's workers promptly.
// It saves a screenshot of each to $GODIST_SCREENSHOTS (a temporary directory when unset).
func TestBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("the browser test starts Chromium and a notebook server; skipped under -short")
	}
	needChromium(t)
	srv := startNotebookServer(t)
	b := startBrowser(t) // closed before the server stops: cleanups run last first
	shots := screenshotDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 9*time.Minute)
	defer cancel()

	testWidgetCells(ctx, t, srv, shots, "", func(t *testing.T, name string) *notebookPage {
		return openNotebook(ctx, t, b, srv, name)
	})
}

// screenshotDir returns $GODIST_SCREENSHOTS, made if need be, or a temporary directory
// when it is unset.
func screenshotDir(t *testing.T) string {
	shots := os.Getenv("GODIST_SCREENSHOTS")
	if shots == "" {
		return t.TempDir()
	}
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatalf("GODIST_SCREENSHOTS=%s: %v", shots, err)
	}
	return shots
}

// testWidgetCells runs the widget cells in notebooks that open opens (in one front end) and
// checks what its DOM shows: a progress widget and Fit's bar, the cluster panel of a short
// %%distributed job, and a click on a long job's Stop button. Screenshots go to
// shots/prefix+NAME.png. It returns the first notebook's page, its cells run.
func testWidgetCells(ctx context.Context, t *testing.T, srv *notebookServer, shots, prefix string, open func(t *testing.T, name string) *notebookPage) *notebookPage {
	name := srv.writeNotebook(t, prefix+"widgets.ipynb", progressFitCell, shortDistributedCell)
	nb := open(t, name)

	t.Run("progress and Fit", func(t *testing.T) {
		from := nb.run(ctx, t, 0, 3*time.Minute)
		// The reply can overtake the last updates: wait for Fit's end to be drawn (its live
		// row gone, the last epoch's line in its history).
		_, err := nb.waitCell(ctx, 0, from, "Fit's last epoch drawn", 30*time.Second, func(s cellSnapshot) bool {
			return len(s.Bars) == 1 && strings.Contains(s.fitHistory(), "Epoch 3/3")
		})
		if err != nil {
			t.Fatal(err)
		}
		history := nb.history[0][from:]
		var loading []float64 // the progress widget's bar, in the order drawn
		for _, s := range history {
			if len(s.Bars) > 0 && (len(loading) == 0 || loading[len(loading)-1] != s.Bars[0]) {
				loading = append(loading, s.Bars[0])
			}
		}
		if len(loading) < 3 || loading[len(loading)-1] != 100 || !slices.IsSorted(loading) {
			t.Errorf("the progress widget's bar widths as drawn = %v, want at least 3 rising to 100", loading)
		}
		if !slices.ContainsFunc(loading, func(w float64) bool { return w > 0 && w < 100 }) {
			t.Errorf("the progress widget was never drawn part way: %v", loading)
		}
		// While Fit trains, its bar (the epoch as its label) stands part way with the steps,
		// time left and loss beside it, under the finished epochs' lines.
		live := regexp.MustCompile(`^\d+/64 \d+s \d+[mu]?s/step - loss: [0-9.]+`)
		onBar := regexp.MustCompile(`(?m)^Epoch [1-3]/3$`)
		fitDrawn := 0
		for _, s := range history {
			if len(s.Bars) == 2 && s.Bars[1] > 0 && s.Bars[1] < 100 && live.MatchString(s.Fit) && onBar.MatchString(s.FitBox) {
				fitDrawn++
			}
		}
		if fitDrawn < 2 {
			t.Errorf("Fit's bar was drawn part way with its epoch, steps and loss %d times, want it updated while training", fitDrawn)
		}
		// At the end the live row is gone and the history reads as Keras prints: each
		// epoch's header and closing line, once.
		last := history[len(history)-1]
		if len(last.Bars) != 1 || last.Fit != "" {
			t.Errorf("after Fit the cell shows %d progress bars and live text %q, want the loading widget's bar alone", len(last.Bars), last.Fit)
		}
		for e := 1; e <= 3; e++ {
			header := fmt.Sprintf("Epoch %d/3", e)
			line := regexp.MustCompile(header + `\n64/64 ━{20} \d+s \d+[mu]?s/step - loss: [0-9.]+`)
			if n := strings.Count(last.fitHistory(), header); n != 1 || !line.MatchString(last.fitHistory()) {
				t.Errorf("Fit's history shows %q %d times and its line as %q, want once with Keras' closing line", header, n, last.fitHistory())
			}
		}
		nb.screenshot(ctx, t, 0, shots, prefix+"progress-fit.png")
	})

	t.Run("distributed panel", func(t *testing.T) {
		if err := nb.collect(ctx); err != nil {
			t.Fatal(err)
		}
		from := len(nb.history[1])
		nb.execute(ctx, t, 1)
		bothRunning := func(s cellSnapshot) bool {
			return s.Panel.state("worker 0") == "running" && s.Panel.state("worker 1") == "running"
		}
		if _, err := nb.waitCell(ctx, 1, from, "both workers running", 3*time.Minute, bothRunning); err != nil {
			t.Fatal(err)
		}
		nb.screenshot(ctx, t, 1, shots, prefix+"panel-running.png")
		nb.waitDone(ctx, t, 1, from, 3*time.Minute)
		// The reply can overtake the last updates, and the Stop button goes with the job
		// after the table's last update: wait for both.
		_, err := nb.waitCell(ctx, 1, from, "the panel's final state (done, no Stop button)", 30*time.Second, func(s cellSnapshot) bool {
			return s.Panel != nil && strings.HasSuffix(s.Panel.Status, ": done") && !slices.Contains(s.Buttons, "Stop")
		})
		if err != nil {
			t.Fatal(err)
		}
		history := nb.history[1][from:]
		running := slices.IndexFunc(history, bothRunning)
		last := history[len(history)-1]
		if len(last.Errors) > 0 {
			t.Errorf("the %%%%distributed cell failed: %q\n%s", last.Errors, last.Stream)
		}
		if running == len(history)-1 {
			t.Fatalf("the panel ends with the workers running:\n%s", snapshots(history))
		}
		for _, task := range []string{"worker 0", "worker 1"} {
			if got := last.Panel.state(task); got != "exited" {
				t.Errorf("at the end the panel shows %s %q, want exited:\n%s", task, got, snapshots(history))
			}
		}
		if last.Panel == nil || !strings.HasSuffix(last.Panel.Status, ": done") {
			t.Errorf("the panel's status at the end = %+v, want done", last.Panel)
		}
		if !strings.Contains(last.Panel.text(), "bye") {
			t.Errorf("the panel's last lines lack the workers' \"bye\": %+v", last.Panel)
		}
		nb.screenshot(ctx, t, 1, shots, prefix+"panel-exited.png")
	})

	t.Run("lost worker", func(t *testing.T) {
		nb := open(t, srv.writeNotebook(t, prefix+"lost.ipynb", lostWorkerCell))
		nb.execute(ctx, t, 0)
		last, err := nb.waitCell(ctx, 0, 0, "the panel's final state (done, worker 2 lost)", 3*time.Minute, func(s cellSnapshot) bool {
			return s.Panel != nil && strings.HasSuffix(s.Panel.Status, ": done") && !slices.Contains(s.Buttons, "Stop")
		})
		if err != nil {
			t.Fatal(err)
		}
		for task, want := range map[string]string{"worker 0": "exited", "worker 1": "exited", "worker 2": "lost"} {
			if got := last.Panel.state(task); got != want {
				t.Errorf("at the end the panel shows %s %q, want %s:\n%s", task, got, want, snapshots(nb.history[0]))
			}
		}
		if got := last.Panel.cell("worker 2", 6); got != "worker 2 fails" {
			t.Errorf("worker 2's last line in the panel = %q, want its own", got)
		}
		nb.waitDone(ctx, t, 0, 0, 30*time.Second)
		if final := nb.history[0][len(nb.history[0])-1]; len(final.Errors) > 0 {
			t.Errorf("the elastic job's cell failed: %q", final.Errors)
		}
		nb.screenshot(ctx, t, 0, shots, prefix+"panel-lost.png")
	})

	t.Run("Stop button", func(t *testing.T) {
		name := srv.writeNotebook(t, prefix+"stop.ipynb", longDistributedCell)
		nb := open(t, name)
		nb.execute(ctx, t, 0)
		epoch := regexp.MustCompile(`^\d+/100000$`)
		_, err := nb.waitCell(ctx, 0, 0, "both workers training with a Stop button", 3*time.Minute, func(s cellSnapshot) bool {
			return slices.Contains(s.Buttons, "Stop") && s.Panel.state("worker 0") == "running" &&
				s.Panel.state("worker 1") == "running" && epoch.MatchString(s.Panel.cell("worker 0", 3))
		})
		if err != nil {
			t.Fatal(err)
		}
		if pids := processesOf(srv.Bin, "worker-cell"); len(pids) != 2 {
			t.Errorf("%d worker processes while training, want 2: %v", len(pids), pids)
		}
		x, y := nb.buttonCenter(ctx, t, 0, "Stop")
		clicked := time.Now()
		if err := nb.page.click(ctx, x, y); err != nil {
			t.Fatal(err)
		}
		last, err := nb.waitCell(ctx, 0, len(nb.history[0]), "the panel to say stopped", 30*time.Second, func(s cellSnapshot) bool {
			return s.Panel != nil && strings.HasSuffix(s.Panel.Status, ": stopped")
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range []string{"worker 0", "worker 1"} {
			if got := last.Panel.state(task); got != "stopped" {
				t.Errorf("after Stop the panel shows %s %q, want stopped", task, got)
			}
		}
		// The cell ends with an error naming the Stop button (the reply and the error output
		// come on different channels: wait for both).
		_, err = nb.waitCell(ctx, 0, 0, "the cell's end with an error naming the Stop button", 30*time.Second, func(s cellSnapshot) bool {
			_, ended := s.Prompt.(float64)
			return ended && strings.Contains(strings.Join(s.Errors, "\n"), "Stop button")
		})
		if err != nil {
			t.Error(err)
		}
		for len(processesOf(srv.Bin, "worker-cell")) > 0 && time.Since(clicked) < 10*time.Second {
			time.Sleep(20 * time.Millisecond)
		}
		if pids := processesOf(srv.Bin, "worker-cell"); len(pids) > 0 {
			t.Errorf("worker processes %v still run %v after the Stop click", pids, time.Since(clicked))
		}
		if el := time.Since(clicked); el > 10*time.Second {
			t.Errorf("Stop took %v to end the job, want under 10s", el)
		} else {
			t.Logf("Stop ended the job and its workers in %v", el.Round(time.Millisecond))
		}
		nb.screenshot(ctx, t, 0, shots, prefix+"panel-stopped.png")
		// The kernel runs the next cell after a stopped job.
		if out := nb.probe(ctx, t, "1 + 1"); out != "ok 2" {
			t.Errorf("after Stop the kernel answers 1 + 1 with %q, want ok 2", out)
		}
	})
	return nb
}

// notebookPage is a notebook open in a browser tab, with a recorder of its cells' DOM.
type notebookPage struct {
	page    *page
	srv     *notebookServer
	js      pageJS
	history map[int][]cellSnapshot // every state each cell's DOM went through, in order
}

// pageJS is how the test drives one front end's page: JavaScript expressions, each a
// format with one verb.
type pageJS struct {
	execute  string // runs cell %d as its Run button does
	cellNode string // cell %d's element
	probe    string // a promise of "STATUS OUTPUT" for the code in the string literal %s
}

// notebook6JS drives Notebook 6's page.
var notebook6JS = pageJS{
	execute:  "Jupyter.notebook.execute_cells([%d]), true",
	cellNode: "Jupyter.notebook.get_cell(%d).element[0]",
	probe:    probeJS,
}

// cellSnapshot is what a cell's outputs show, read from the DOM.
type cellSnapshot struct {
	Bars    []float64      `json:"bars"`    // the progress bars' widths in percent
	Fit     string         `json:"fit"`     // the last <pre> of an HTML widget: Fit's live text
	FitBox  string         `json:"fitbox"`  // the text of the last VBox widget: Fit's history and live row
	Buttons []string       `json:"buttons"` // widget buttons' labels
	Panel   *panelSnapshot `json:"panel"`   // the cluster panel, nil when absent
	Prompt  any            `json:"prompt"`  // the input prompt number: null, "*" or a number
	Errors  []string       `json:"errors"`  // error outputs as "ename: evalue"
	Stream  string         `json:"stream"`  // stream outputs
}

// fitHistory is the text of Fit's finished epochs as the cell shows it: in Fit's box, where
// the front end routes the captured output to its history (Notebook 6, JupyterLab, VS Code),
// else among the cell's own outputs (the ipywidgets 7 HTML manager's page routes none).
func (s cellSnapshot) fitHistory() string {
	return s.FitBox + "\n" + ansiCodes.ReplaceAllString(s.Stream, "")
}

// ansiCodes matches ANSI SGR sequences (Keras' colours), which a front end draws as colour.
var ansiCodes = regexp.MustCompile("\x1b\\[[0-9;]*m")

type panelSnapshot struct {
	Status string     `json:"status"`
	Rows   [][]string `json:"rows"` // task, host:port, state, epoch, step, samples/s, last line
}

// state returns task's state cell, "" when the panel or the task is missing.
func (p *panelSnapshot) state(task string) string { return p.cell(task, 2) }

// cell returns column i of task's row.
func (p *panelSnapshot) cell(task string, i int) string {
	if p == nil {
		return ""
	}
	for _, r := range p.Rows {
		if len(r) > i && r[0] == task {
			return r[i]
		}
	}
	return ""
}

func (p *panelSnapshot) text() string {
	if p == nil {
		return ""
	}
	var b strings.Builder
	for _, r := range p.Rows {
		b.WriteString(strings.Join(r, " | ") + "\n")
	}
	return b.String()
}

func snapshots(h []cellSnapshot) string {
	var b strings.Builder
	for i, s := range h {
		if s.Panel != nil {
			fmt.Fprintf(&b, "%d: %s\n%s", i, s.Panel.Status, s.Panel.text())
		}
	}
	return tail(b.String(), 6000)
}

// recorderJS installs window.__godist: a MutationObserver on the notebook that records a
// snapshot of every cell's outputs each time the DOM changes, so that no drawn state is
// missed however fast the updates come; take() hands over and clears the records.
const recorderJS = `(() => {
  if (window.__godist) return true;
  const cellSnap = (cell) => {
    const el = cell.element[0];
    const out = {bars: [], fit: "", fitbox: "", buttons: [], panel: null, prompt: cell.input_prompt_number === undefined ? null : cell.input_prompt_number, errors: [], stream: ""};
    el.querySelectorAll(".progress-bar").forEach(b => out.bars.push(parseFloat(b.style.width) || 0));
    const pres = el.querySelectorAll(".widget-html-content pre");
    if (pres.length) out.fit = pres[pres.length - 1].textContent;
    const boxes = el.querySelectorAll(".widget-vbox");
    if (boxes.length) out.fitbox = boxes[boxes.length - 1].innerText;
    el.querySelectorAll(".output_wrapper button, .widget-area button").forEach(b => out.buttons.push(b.textContent.trim()));
    const table = el.querySelector("table.godist-cluster-panel");
    if (table) {
      const st = el.querySelector(".godist-cluster-status");
      out.panel = {status: st ? st.textContent : "", rows: []};
      table.querySelectorAll("tr").forEach(tr => {
        const tds = Array.from(tr.querySelectorAll("td")).map(td => td.textContent);
        if (tds.length) out.panel.rows.push(tds);
      });
    }
    for (const o of (cell.output_area ? cell.output_area.outputs : [])) {
      if (o.output_type === "error") out.errors.push(o.ename + ": " + o.evalue);
      if (o.output_type === "stream") out.stream += o.text;
    }
    return out;
  };
  const g = window.__godist = {log: [], last: ""};
  g.snap = () => Jupyter.notebook.get_cells().map(cellSnap);
  g.take = () => { g.record(); const l = g.log; g.log = []; return l; };
  g.record = () => {
    const s = JSON.stringify(g.snap());
    if (s !== g.last) { g.last = s; g.log.push(JSON.parse(s)); }
  };
  new MutationObserver(g.record).observe(document.getElementById("notebook-container"),
    {subtree: true, childList: true, attributes: true, characterData: true});
  g.record();
  return true;
})()`

// probeJS runs code in the page's kernel without a cell and resolves to "STATUS OUTPUT"
// once it has both the reply and the kernel's idle status (all output comes before idle).
const probeJS = `new Promise(resolve => {
  let out = "", status = null, idle = false;
  const done = () => { if (status !== null && idle) resolve(status + " " + out); };
  Jupyter.notebook.kernel.execute(%s, {
    iopub: {status: m => { if (m.content.execution_state === "idle") { idle = true; done(); } }, output: m => {
      const c = m.content;
      if (c.data && c.data["text/plain"] !== undefined) out += c.data["text/plain"];
      else if (c.text !== undefined) out += c.text;
      else if (c.ename !== undefined) out += c.ename + ": " + c.evalue;
    }},
    shell: {reply: m => { status = m.content.status; done(); }},
  }, {silent: false, store_history: false});
})`

// openNotebook opens name in a new tab, waits for its godist kernel and for the widget front
// end to validate the protocol with the kernel, and installs the DOM recorder.
func openNotebook(ctx context.Context, t *testing.T, b *browser, srv *notebookServer, name string) *notebookPage {
	t.Helper()
	p, err := b.newPage(ctx, 1280, 1600)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.navigate(ctx, srv.URL+"/notebooks/"+name+"?token="+srv.Token); err != nil {
		t.Fatal(err)
	}
	ready := `(() => {
	  if (typeof Jupyter === "undefined" || !Jupyter.notebook || !Jupyter.notebook._fully_loaded) return "loading";
	  const k = Jupyter.notebook.kernel;
	  if (!k || !k.is_connected()) return "no kernel";
	  if (k.name !== "godist") return "kernel " + k.name;
	  if (!k.widget_manager) return "no widget manager";
	  return "ready";
	})()`
	if _, err := p.waitFor(ctx, "the notebook, its godist kernel and the widget manager", 2*time.Minute, ready, func(v json.RawMessage) bool {
		return string(v) == `"ready"`
	}); err != nil {
		t.Fatal(err)
	}
	nb := &notebookPage{page: p, srv: srv, js: notebook6JS, history: map[int][]cellSnapshot{}}
	// The front end opens jupyter.widget.version when the kernel connects; until the kernel
	// has its "validated" answer, Fit would draw text. Probe until it has.
	if out := nb.probeUntil(ctx, t, "import \"godist/distlib/widgets\"\nwidgets.Ready()", "ok true", time.Minute); out != "ok true" {
		t.Fatalf("widgets.Ready() in the page's kernel = %q, want ok true (the widget front end did not validate)", out)
	}
	if err := p.eval(ctx, recorderJS, nil); err != nil {
		t.Fatal(err)
	}
	return nb
}

// probe runs code in the kernel without a cell and returns "STATUS OUTPUT".
func (nb *notebookPage) probe(ctx context.Context, t *testing.T, code string) string {
	t.Helper()
	lit, _ := json.Marshal(code)
	var out string
	if err := nb.page.eval(ctx, fmt.Sprintf(nb.js.probe, lit), &out); err != nil {
		t.Fatalf("kernel probe %q: %v", code, err)
	}
	return out
}

// probeUntil runs code until its result is want or timeout passes; it returns the last result.
func (nb *notebookPage) probeUntil(ctx context.Context, t *testing.T, code, want string, timeout time.Duration) string {
	t.Helper()
	lit, _ := json.Marshal(code)
	v, err := nb.page.waitFor(ctx, fmt.Sprintf("%q to give %q", code, want), timeout, fmt.Sprintf(nb.js.probe, lit), func(v json.RawMessage) bool {
		var s string
		return json.Unmarshal(v, &s) == nil && s == want
	})
	var s string
	_ = json.Unmarshal(v, &s)
	if err != nil {
		t.Log(err)
	}
	return s
}

// execute starts cell i as the Run button does.
func (nb *notebookPage) execute(ctx context.Context, t *testing.T, i int) {
	t.Helper()
	if err := nb.page.eval(ctx, fmt.Sprintf(nb.js.execute, i), nil); err != nil {
		t.Fatal(err)
	}
}

// collect takes the recorder's new snapshots into the history.
func (nb *notebookPage) collect(ctx context.Context) error {
	var batch [][]cellSnapshot
	if err := nb.page.eval(ctx, "window.__godist.take()", &batch); err != nil {
		return err
	}
	for _, cells := range batch {
		for i, c := range cells {
			h := nb.history[i]
			if n := len(h); n > 0 && sameSnapshot(h[n-1], c) {
				continue
			}
			nb.history[i] = append(h, c)
		}
	}
	return nil
}

func sameSnapshot(a, b cellSnapshot) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// waitCell collects snapshots until one of cell i from nb.history[i][from] on satisfies
// cond (checked on every state drawn) or timeout passes; it returns that snapshot.
func (nb *notebookPage) waitCell(ctx context.Context, i, from int, what string, timeout time.Duration, cond func(cellSnapshot) bool) (cellSnapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	seen := from
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		err := nb.collect(ctx)
		h := nb.history[i]
		for ; seen < len(h); seen++ {
			if cond(h[seen]) {
				return h[seen], nil
			}
		}
		if err != nil && ctx.Err() == nil {
			return cellSnapshot{}, fmt.Errorf("cell %d, waiting for %s: %w", i, what, err)
		}
		select {
		case <-ctx.Done():
			var last cellSnapshot
			if n := len(h); n > 0 {
				last = h[n-1]
			}
			raw, _ := json.Marshal(last)
			return last, fmt.Errorf("cell %d: no %s in %v; last state %s", i, what, timeout, tail(string(raw), 4000))
		case <-tick.C:
		}
	}
}

// waitDone waits for cell i's execution to end (its prompt shows a number in a state from
// nb.history[i][from] on) and returns that state.
func (nb *notebookPage) waitDone(ctx context.Context, t *testing.T, i, from int, timeout time.Duration) cellSnapshot {
	t.Helper()
	s, err := nb.waitCell(ctx, i, from, "end of execution", timeout, func(s cellSnapshot) bool {
		_, ok := s.Prompt.(float64)
		return ok
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// run executes cell i, waits for its reply (an ended prompt) without error and returns
// the index in nb.history[i] of the first state since it started. Updates published
// before the kernel went idle can still be on their way: wait for them by their content.
func (nb *notebookPage) run(ctx context.Context, t *testing.T, i int, timeout time.Duration) int {
	t.Helper()
	if err := nb.collect(ctx); err != nil {
		t.Fatal(err)
	}
	from := len(nb.history[i])
	nb.execute(ctx, t, i)
	last := nb.waitDone(ctx, t, i, from, timeout)
	if len(last.Errors) > 0 {
		t.Fatalf("cell %d failed: %s\n%s", i, strings.Join(last.Errors, "\n"), last.Stream)
	}
	return from
}

// buttonCenter scrolls cell i's widget button labelled label into view and returns its
// centre in viewport coordinates, checking that the button is what the point hits.
func (nb *notebookPage) buttonCenter(ctx context.Context, t *testing.T, i int, label string) (x, y float64) {
	t.Helper()
	js := fmt.Sprintf(`(() => {
	  const el = %s;
	  const b = Array.from(el.querySelectorAll(".output_wrapper button, .widget-area button, .jp-OutputArea button, .outputs button")).find(b => b.textContent.trim() === %q);
	  if (!b) return {found: false};
	  b.scrollIntoView({block: "center"});
	  const r = b.getBoundingClientRect();
	  const x = r.left + r.width / 2, y = r.top + r.height / 2;
	  const hit = document.elementFromPoint(x, y);
	  return {found: true, x, y, hits: !!hit && (hit === b || b.contains(hit))};
	})()`, fmt.Sprintf(nb.js.cellNode, i), label)
	var r struct {
		Found bool    `json:"found"`
		X     float64 `json:"x"`
		Y     float64 `json:"y"`
		Hits  bool    `json:"hits"`
	}
	if err := nb.page.eval(ctx, js, &r); err != nil {
		t.Fatal(err)
	}
	if !r.Found || !r.Hits {
		t.Fatalf("cell %d: button %q found %v, under its centre %v", i, label, r.Found, r.Hits)
	}
	return r.X, r.Y
}

// screenshot scrolls cell i into view and saves the viewport as dir/name.
func (nb *notebookPage) screenshot(ctx context.Context, t *testing.T, i int, dir, name string) {
	t.Helper()
	if err := nb.page.eval(ctx, fmt.Sprintf(nb.js.cellNode+".scrollIntoView(), true", i), nil); err != nil {
		t.Fatal(err)
	}
	path, err := nb.page.screenshot(ctx, dir, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}
