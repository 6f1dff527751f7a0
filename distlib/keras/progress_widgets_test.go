package keras

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"godist/distlib/display"
	"godist/distlib/widgets"
)

// widgetFE is a widgets.Frontend that keeps each model's state as the front end would and
// logs, in order, what reaches the front end: state changes, output published for an
// Output widget, and what the test calls the cell's prints.
type widgetFE struct {
	cell   string // the running cell's id, "" between cells
	mu     sync.Mutex
	n      int
	states map[string]map[string]any
	log    []string
}

func newWidgetFE() *widgetFE { return &widgetFE{cell: "cell-1", states: map[string]map[string]any{}} }

func (f *widgetFE) Open(data, _ map[string]any, r widgets.Receiver) (widgets.Channel, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	id := fmt.Sprintf("w%d", f.n)
	if st, ok := data["state"].(map[string]any); ok { // protocol 2
		data = st
	}
	f.states[id] = data
	return &widgetCh{f, id}, nil
}
func (f *widgetFE) CellID() string { return f.cell }
func (f *widgetFE) PublishFor(parent, msgType string, content map[string]any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = append(f.log, fmt.Sprintf("%s %s %v", msgType, parent, content["text"]))
	return nil
}

// Write makes fe the cell's standard output: what is written is printed (see print).
func (f *widgetFE) Write(p []byte) (int, error) {
	f.print(string(p))
	return len(p), nil
}

// print logs text the cell printed, routed as the front end routes it: to the Output whose
// msg_id is the cell's, else to the cell.
func (f *widgetFE) print(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	to := "cell"
	for id, st := range f.states {
		if st["_model_name"] == "OutputModel" && f.cell != "" && st["msg_id"] == f.cell {
			to = id
		}
	}
	f.log = append(f.log, "print "+to+" "+s)
}

// model returns the id of the one model named name.
func (f *widgetFE) model(t *testing.T, name string) string {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	found := ""
	for id, st := range f.states {
		if st["_model_name"] == name {
			if found != "" {
				t.Fatalf("two %s models: %s and %s", name, found, id)
			}
			found = id
		}
	}
	if found == "" {
		t.Fatalf("no %s model", name)
	}
	return found
}

type widgetCh struct {
	f  *widgetFE
	id string
}

func (c *widgetCh) ID() string { return c.id }
func (c *widgetCh) Send(data map[string]any) {
	c.f.mu.Lock()
	defer c.f.mu.Unlock()
	if st, ok := data["state"].(map[string]any); ok && data["method"] == "update" {
		for k, v := range st {
			c.f.states[c.id][k] = v
		}
		if id, ok := st["msg_id"]; ok {
			c.f.log = append(c.f.log, fmt.Sprintf("msg_id %s %q", c.id, id))
		}
	}
}
func (c *widgetCh) Close() {
	c.f.mu.Lock()
	defer c.f.mu.Unlock()
	c.f.log = append(c.f.log, "close "+c.id)
	c.f.states[c.id]["closed"] = true
}

// viewPublisher records displays, widget views included.
type viewPublisher struct{ shown []display.Bundle }

func (p *viewPublisher) Display(d, _ display.Bundle, id string) { p.shown = append(p.shown, d) }
func (p *viewPublisher) Update(d, _ display.Bundle, id string)  { p.shown = append(p.shown, d) }
func (p *viewPublisher) ClearOutput(bool)                       {}

// withWidgets installs fe as a front end that validated the widget protocol (or not) and
// a publisher for the cell's displays.
func withWidgets(t *testing.T, fe *widgetFE, validated bool) *viewPublisher {
	t.Helper()
	oldFE := widgets.SetFrontend(fe)
	if err := widgets.VersionReply(map[string]any{"validated": validated}); err != nil {
		t.Fatal(err)
	}
	pub := &viewPublisher{}
	old := display.SetPublisher(pub)
	t.Cleanup(func() {
		display.SetPublisher(old)
		widgets.SetFrontend(oldFE)
	})
	return pub
}

// TestFitWidgetBar runs Fit with a widget front end and a callback that prints at each
// epoch's end: one box is shown, its bar says the epoch with the steps, time left and
// metrics beside it, the history gets each epoch's lines with the callback's print right
// after them, and when Fit ends the live row goes and the history stays.
func TestFitWidgetBar(t *testing.T) {
	fe := newWidgetFE()
	pub := withWidgets(t, fe, true)
	m, ds := smallModel(t, SGD(0.1))
	var mid string // the live row at epoch 2's last step
	cb := LambdaCallback{
		OnTrainBatchEnd: func(b int, _ Logs) {
			fe.mu.Lock()
			defer fe.mu.Unlock()
			bar, txt := fe.states[fe.modelLocked("ProgressModel")], fe.states[fe.modelLocked("HTMLModel")]
			if b == 3 && bar["description"] == "Epoch 2/2" {
				mid = fmt.Sprintf("%v %v/%v %v", bar["description"], bar["value"], bar["max"], txt["value"])
			}
		},
		OnEpochEnd: func(e int, _ Logs) { fe.print(fmt.Sprintf("callback after epoch %d", e+1)) },
	}
	m.stdout = fe // Fit's prints are the cell's
	m.Fit(ds, Epochs(2), Callbacks(cb))
	if len(pub.shown) != 1 {
		t.Fatalf("displayed %d bundles, want the one widget view: %v", len(pub.shown), pub.shown)
	}
	view, _ := pub.shown[0][widgets.ViewMIME].(map[string]any)
	box := fe.model(t, "VBoxModel")
	if view["model_id"] != box {
		t.Errorf("displayed %v, want the VBox %s", pub.shown[0], box)
	}
	if !strings.HasPrefix(mid, "Epoch 2/2 4/4 <pre") || !strings.Contains(mid, ">4/4 0s ") || !strings.Contains(mid, "/step - accuracy: ") {
		t.Errorf("the live row at epoch 2's last step: %q, want the epoch on the bar at 2/4 and the steps, time left and metrics beside it", mid)
	}
	hist := fe.model(t, "OutputModel")
	var got []string
	for _, l := range fe.log {
		if !strings.HasPrefix(l, "close ") {
			got = append(got, stripANSI(l))
		}
	}
	epochLine := func(e string) string {
		return `print ` + hist + ` Epoch ` + e + `/2\n4/4 ━{20} \d+s \d+[mu]?s/step - accuracy: [0-9.]+ - loss: [0-9.]+\n`
	}
	want := []string{
		`msg_id ` + hist + ` "cell-1"`,
		epochLine("1"),
		`print ` + hist + ` callback after epoch 1`,
		epochLine("2"),
		`print ` + hist + ` callback after epoch 2`,
		`msg_id ` + hist + ` ""`,
	}
	if len(got) != len(want) {
		t.Fatalf("the front end got\n%s\nwant %d entries matching\n%s", strings.Join(got, "\n"), len(want), strings.Join(want, "\n"))
	}
	for i := range want {
		if !matches(want[i], got[i]) {
			t.Errorf("entry %d: %q, want a match for %q", i, got[i], want[i])
		}
	}
	children, _ := fe.states[box]["children"].([]any)
	if len(children) != 1 || children[0] != "IPY_MODEL_"+hist {
		t.Errorf("the box's children at the end: %v, want the history alone", children)
	}
	for _, name := range []string{"ProgressModel", "HTMLModel", "HBoxModel"} {
		if fe.states[fe.model(t, name)]["closed"] != true {
			t.Errorf("the live row's %s was not closed at the end", name)
		}
	}
}

func (f *widgetFE) modelLocked(name string) string {
	for id, st := range f.states {
		if st["_model_name"] == name {
			return id
		}
	}
	return ""
}

func matches(re, s string) bool {
	ok, err := regexp.MatchString("^"+re+"$", s)
	return err == nil && ok
}

// TestProgressWidgetsOrText checks the choice: the widget bar where a widget front end
// validated, text displays where none did (no comm opened), and text for verbose 2.
func TestProgressWidgetsOrText(t *testing.T) {
	for _, tc := range []struct {
		name      string
		validated bool
		verbose   int
		widgets   bool
	}{
		{"widget front end", true, 1, true},
		{"no widget front end", false, 1, false},
		{"verbose 2: one line per epoch, no bar", true, 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fe := newWidgetFE()
			pub := withWidgets(t, fe, tc.validated)
			clk := newTestClock()
			p := newProgress(tc.verbose, &bytes.Buffer{}, clk.now)
			p.around(func() { runEpochs(p, clk, twoEpochLogs, nil) })
			if (p.wbar != nil) != tc.widgets || (fe.n > 0) != tc.widgets {
				t.Fatalf("widget bar %v, %d comms opened; want widgets %v", p.wbar != nil, fe.n, tc.widgets)
			}
			for _, b := range pub.shown {
				_, view := b[widgets.ViewMIME]
				_, text := b["text/plain"]
				if view != tc.widgets || text == tc.widgets {
					t.Errorf("displayed %v, want widgets %v", b, tc.widgets)
				}
			}
		})
	}
}

// TestProgressWidgetInterrupted checks an interrupted epoch with the widget bar: its last
// state and the interruption line go to the history, printed there while the bar captures
// the cell's output, else appended to it (a Fit outside a cell).
func TestProgressWidgetInterrupted(t *testing.T) {
	for _, tc := range []struct {
		name, cell, kind string
	}{
		{"in a cell: printed", "cell-1", "print"},
		{"outside a cell: appended", "", "stream"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fe := newWidgetFE()
			fe.cell = tc.cell
			withWidgets(t, fe, true)
			clk := newTestClock()
			p := newProgress(1, fe, clk.now)
			p.around(func() {
				p.epochBegin(0, 3, 10)
				clk.advance(time.Second)
				p.step(1, Logs{"loss": 2})
				p.emitLine("Fit interrupted in epoch 1/3 after step 1/10")
			})
			var got []string
			for _, l := range fe.log {
				if strings.HasPrefix(l, "print ") || strings.HasPrefix(l, "stream ") {
					got = append(got, stripANSI(l))
				}
			}
			want := tc.kind + " " + fe.model(t, "OutputModel") + " Epoch 1/3\n 1/10 ━━━━━━━━━━━━━━━━━━━━ 9s 1s/step - loss: 2.0000\nFit interrupted in epoch 1/3 after step 1/10\n"
			if len(got) != 1 || got[0] != want {
				t.Errorf("history got %q, want %q", got, want)
			}
		})
	}
}
