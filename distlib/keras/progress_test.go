package keras

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"godist/distlib/display"
	progressui "godist/distlib/progress"
)

func TestBarLine(t *testing.T) {
	tests := []struct {
		name           string
		current, total int
		elapsed        time.Duration
		perStep        float64
		logs           Logs
		final          bool
		want, short    string
	}{
		{"live", 12, 64, 800 * time.Millisecond, 0.06, Logs{"loss": 0.31, "accuracy": 0.91}, false,
			"12/64 ━━━━━━━━━━━━━━━━━━━━ 3s 60ms/step - accuracy: 0.9100 - loss: 0.3100",
			"12/64 3s 60ms/step - accuracy: 0.9100 - loss: 0.3100"},
		{"final", 64, 64, 1900 * time.Millisecond, 0.03, Logs{"loss": 0.30121, "accuracy": 0.91234}, true,
			"64/64 ━━━━━━━━━━━━━━━━━━━━ 2s 30ms/step - accuracy: 0.9123 - loss: 0.3012",
			"64/64 2s 30ms/step - accuracy: 0.9123 - loss: 0.3012"},
		{"count padded to the target's width", 7, 125, 700 * time.Millisecond, 0.1, Logs{"loss": 0.5}, false,
			"  7/125 ━━━━━━━━━━━━━━━━━━━━ 11s 100ms/step - loss: 0.5000",
			"7/125 11s 100ms/step - loss: 0.5000"},
		{"small values", 2, 2, 2 * time.Millisecond, 0.001, Logs{"loss": 0.0001}, true,
			"2/2 ━━━━━━━━━━━━━━━━━━━━ 0s 1ms/step - loss: 1.0000e-04", "2/2 0s 1ms/step - loss: 1.0000e-04"},
		{"microseconds", 1000, 1000, 500 * time.Millisecond, 0.0005, nil, true,
			"1000/1000 ━━━━━━━━━━━━━━━━━━━━ 0s 500us/step", "1000/1000 0s 500us/step"},
		{"unknown target: time taken", 5, 0, 5 * time.Second, 1, Logs{}, false,
			"      5/Unknown 5s 1s/step", "5/Unknown 5s 1s/step"},
		{"training values by name, then validation", 1, 1, 3 * time.Second, 3,
			Logs{"val_loss": 1, "accuracy": 0.5, "loss": 2, "val_accuracy": 0.25, "mae": 0.75}, true,
			"1/1 ━━━━━━━━━━━━━━━━━━━━ 3s 3s/step - accuracy: 0.5000 - loss: 2.0000 - mae: 0.7500 - val_accuracy: 0.2500 - val_loss: 1.0000",
			"1/1 3s 3s/step - accuracy: 0.5000 - loss: 2.0000 - mae: 0.7500 - val_accuracy: 0.2500 - val_loss: 1.0000"},
		{"time left in minutes", 1, 100, 2 * time.Second, 2, nil, false,
			"  1/100 ━━━━━━━━━━━━━━━━━━━━ 3:18 2s/step", "1/100 3:18 2s/step"},
		{"time left in hours", 1, 10000, time.Second, 1, nil, false,
			"    1/10000 ━━━━━━━━━━━━━━━━━━━━ 2:46:39 1s/step", "1/10000 2:46:39 1s/step"},
	}
	for _, tc := range tests {
		b := newBarLine(tc.current, tc.total, tc.elapsed, tc.perStep, tc.logs, tc.final)
		if got := b.text(false); got != tc.want {
			t.Errorf("%s: text = %q, want %q", tc.name, got, tc.want)
		}
		if got := b.short(); got != tc.short {
			t.Errorf("%s: short = %q, want %q", tc.name, got, tc.short)
		}
		if got := stripANSI(b.text(true)); got != tc.want {
			t.Errorf("%s: coloured text without its codes = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestBarLineColours checks the ANSI codes against Keras 3's Progbar: the count and the
// time bold, the bar's done part green and the rest grey.
func TestBarLineColours(t *testing.T) {
	got := newBarLine(12, 64, time.Second, 0.06, Logs{"loss": 0.31}, false).text(true)
	want := "\x1b[1m12/64\x1b[0m \x1b[32m━━━\x1b[0m\x1b[37m━━━━━━━━━━━━━━━━━\x1b[0m \x1b[1m3s\x1b[0m 60ms/step - loss: 0.3100"
	if got != want {
		t.Errorf("live line %q, want %q", got, want)
	}
	got = newBarLine(0, 64, 0, 0, nil, false).text(true)
	want = "\x1b[1m 0/64\x1b[0m \x1b[37m━━━━━━━━━━━━━━━━━━━━\x1b[0m \x1b[1m0s\x1b[0m 0s/step"
	if got != want {
		t.Errorf("empty bar %q, want %q", got, want)
	}
}

var ansiCode = regexp.MustCompile("\x1b\\[[0-9;]*m")

func stripANSI(s string) string { return ansiCode.ReplaceAllString(s, "") }

// testClock is a clock the test sets.
type testClock struct{ t time.Time }

func newTestClock() *testClock               { return &testClock{t: time.Unix(1000, 0)} }
func (c *testClock) now() time.Time          { return c.t }
func (c *testClock) advance(d time.Duration) { c.t = c.t.Add(d) }

// atMS sets the clock to n milliseconds after its start.
func (c *testClock) atMS(n int) { c.t = time.Unix(1000, 0).Add(time.Duration(n) * time.Millisecond) }

// TestProgressPerStep checks Keras' time per step: from the end of the first step once
// there is a second, so that a slow first step (tracing, warm-up) is left out.
func TestProgressPerStep(t *testing.T) {
	clk := newTestClock()
	p := newProgress(1, &bytes.Buffer{}, clk.now)
	p.epochBegin(0, 1, 10)
	clk.atMS(1000)
	p.step(1, nil)
	if got := p.perStep(1, clk.now()); got != 1 {
		t.Errorf("after the first step: %v s/step, want 1", got)
	}
	for i := 2; i <= 4; i++ {
		clk.atMS(1000 + 100*(i-1))
		p.step(i, nil)
	}
	if got := p.perStep(4, clk.now()); got < 0.0999 || got > 0.1001 {
		t.Errorf("after 4 steps: %v s/step, want 0.1 (the first step left out)", got)
	}
}

// runEpochs drives p through epochs of 3 steps, 100ms each, with logs per epoch; between
// epochs (where Fit runs the callbacks' EpochEnd) it calls between.
func runEpochs(p *progress, clk *testClock, logs []Logs, between func(epoch int)) {
	for e := range logs {
		p.epochBegin(e, len(logs), 3)
		for s := 1; s <= 3; s++ {
			clk.advance(100 * time.Millisecond)
			p.step(s, logs[e])
		}
		clk.advance(20 * time.Millisecond)
		p.finish(logs[e])
		if between != nil {
			between(e)
		}
	}
}

var twoEpochLogs = []Logs{{"loss": 1, "accuracy": 0.5}, {"loss": 0.5, "accuracy": 0.75, "val_loss": 0.6}}

func TestProgressPlainGolden(t *testing.T) {
	tests := []struct {
		verbose int
		want    string
	}{
		{1, "Epoch 1/2\n" +
			"3/3 ━━━━━━━━━━━━━━━━━━━━ 0s 110ms/step - accuracy: 0.5000 - loss: 1.0000\n" +
			"Epoch 2/2\n" +
			"3/3 ━━━━━━━━━━━━━━━━━━━━ 0s 110ms/step - accuracy: 0.7500 - loss: 0.5000 - val_loss: 0.6000\n"},
		{2, "Epoch 1/2\n" +
			"3/3 - 0s - 110ms/step - accuracy: 0.5000 - loss: 1.0000\n" +
			"Epoch 2/2\n" +
			"3/3 - 0s - 110ms/step - accuracy: 0.7500 - loss: 0.5000 - val_loss: 0.6000\n"},
	}
	for _, tc := range tests {
		var buf bytes.Buffer
		clk := newTestClock()
		p := newProgress(tc.verbose, &buf, clk.now)
		runEpochs(p, clk, twoEpochLogs, nil)
		if got := buf.String(); got != tc.want {
			t.Errorf("verbose %d output:\n%s\nwant:\n%s", tc.verbose, got, tc.want)
		}
		if strings.ContainsAny(buf.String(), "\r\x1b") {
			t.Errorf("verbose %d plain output contains carriage returns or colour codes: %q", tc.verbose, buf.String())
		}
	}
}

// terminal replays what was written to a terminal: \r returns to the line's start and
// later text overwrites; colour codes take no room.
func terminal(out string) []string {
	var lines []string
	var cur []rune
	col := 0
	for _, r := range stripANSI(out) {
		switch r {
		case '\r':
			col = 0
		case '\n':
			lines = append(lines, string(cur))
			cur, col = nil, 0
		default:
			if col < len(cur) {
				cur[col] = r
			} else {
				cur = append(cur, r)
			}
			col++
		}
	}
	if len(cur) > 0 {
		lines = append(lines, string(cur))
	}
	return lines
}

func TestProgressTerminal(t *testing.T) {
	var buf bytes.Buffer
	clk := newTestClock()
	p := newProgress(1, &buf, clk.now)
	p.mode = modeTTY
	p.epochBegin(0, 1, 3)
	clk.advance(100 * time.Millisecond)
	p.step(1, Logs{"loss": 12.5, "accuracy": 0.125}) // a long line, then shorter ones over it
	clk.advance(100 * time.Millisecond)
	p.step(2, Logs{"loss": 1, "accuracy": 0.5})
	clk.advance(100 * time.Millisecond)
	p.step(3, Logs{"loss": 1, "accuracy": 0.5})
	p.finish(Logs{"loss": 1, "accuracy": 0.5})
	got := terminal(buf.String())
	want := []string{"Epoch 1/1", "3/3 ━━━━━━━━━━━━━━━━━━━━ 0s 100ms/step - accuracy: 0.5000 - loss: 1.0000"}
	if len(got) != 2 || got[0] != want[0] || strings.TrimRight(got[1], " ") != want[1] {
		t.Errorf("the terminal shows %q, want %q", got, want)
	}
	if !strings.Contains(buf.String(), "\x1b[32m") || strings.Count(buf.String(), "\r") < 3 {
		t.Errorf("terminal output %q: want the bar redrawn in place with its colours", buf.String())
	}
}

// outputArea is a notebook front end's output area: displays append outputs, updates
// replace the outputs shown under their display id.
type outputArea struct {
	outs []areaOutput
	ids  []string // one per Display call, in order
	plan []string // "display ID" / "update ID" / "show"
}

type areaOutput struct{ id, text string }

func (a *outputArea) Display(d, _ display.Bundle, id string) {
	s, _ := d["text/plain"].(string)
	a.outs = append(a.outs, areaOutput{id, s})
	if id == "" {
		a.plan = append(a.plan, "show")
		return
	}
	a.ids = append(a.ids, id)
	a.plan = append(a.plan, "display "+id)
}

func (a *outputArea) Update(d, _ display.Bundle, id string) {
	s, _ := d["text/plain"].(string)
	a.plan = append(a.plan, "update "+id)
	for i := range a.outs {
		if a.outs[i].id == id {
			a.outs[i].text = s
		}
	}
}

func (a *outputArea) ClearOutput(bool) {}

// text is what the area shows, colour codes taken out, one output a line.
func (a *outputArea) text() string {
	var b strings.Builder
	for _, o := range a.outs {
		b.WriteString(stripANSI(o.text) + "\n")
	}
	return b.String()
}

// TestProgressNotebookText checks the notebook without widgets: each epoch is its own
// display ("Epoch N/M" and the live line, updated in place), so that what is shown
// between epochs (a callback's prints) comes after that epoch's line, as Keras reads.
func TestProgressNotebookText(t *testing.T) {
	area := &outputArea{}
	old := display.SetPublisher(area)
	defer display.SetPublisher(old)
	var buf bytes.Buffer
	clk := newTestClock()
	p := newProgress(1, &buf, clk.now)
	runEpochs(p, clk, twoEpochLogs, func(e int) { display.Text("callback after epoch " + string(rune('1'+e))) })
	if buf.Len() != 0 {
		t.Errorf("notebook mode wrote to the stream: %q", buf.String())
	}
	want := "Epoch 1/2\n" +
		"3/3 ━━━━━━━━━━━━━━━━━━━━ 0s 110ms/step - accuracy: 0.5000 - loss: 1.0000\n" +
		"callback after epoch 1\n" +
		"Epoch 2/2\n" +
		"3/3 ━━━━━━━━━━━━━━━━━━━━ 0s 110ms/step - accuracy: 0.7500 - loss: 0.5000 - val_loss: 0.6000\n" +
		"callback after epoch 2\n"
	if got := area.text(); got != want {
		t.Errorf("the output area shows:\n%s\nwant:\n%s", got, want)
	}
	if len(area.ids) != 2 || area.ids[0] == area.ids[1] {
		t.Fatalf("display ids %q, want one new display per epoch", area.ids)
	}
	updates := 0
	for _, c := range area.plan {
		if strings.HasPrefix(c, "update ") {
			updates++
		}
	}
	if updates < 6 { // each epoch: 3 steps drawn, or throttled to fewer, and its last line
		t.Errorf("calls %q: want the live line updated in place while the epoch runs", area.plan)
	}
	if !strings.Contains(area.outs[0].text, "\x1b[32m━") {
		t.Errorf("the epoch line %q lacks Keras' green bar", area.outs[0].text)
	}
}

// TestFitNotebookCallbackPrintsAfterEpochLine runs Fit in a notebook without widgets with
// a callback that shows a line at each epoch's end: each comes right after its epoch's line.
func TestFitNotebookCallbackPrintsAfterEpochLine(t *testing.T) {
	area := &outputArea{}
	old := display.SetPublisher(area)
	defer display.SetPublisher(old)
	m, ds := smallModel(t, SGD(0.1))
	cb := LambdaCallback{OnEpochEnd: func(e int, logs Logs) { display.Text("end of epoch " + string(rune('1'+e))) }}
	m.Fit(ds, Epochs(3), Callbacks(cb))
	re := regexp.MustCompile(`^` +
		`Epoch 1/3\n4/4 ━{20} \d+s \d+[mu]?s/step - accuracy: [0-9.]+ - loss: [0-9.]+\nend of epoch 1\n` +
		`Epoch 2/3\n4/4 ━{20} \d+s \d+[mu]?s/step - accuracy: [0-9.]+ - loss: [0-9.]+\nend of epoch 2\n` +
		`Epoch 3/3\n4/4 ━{20} \d+s \d+[mu]?s/step - accuracy: [0-9.]+ - loss: [0-9.]+\nend of epoch 3\n$`)
	if got := area.text(); !re.MatchString(got) {
		t.Errorf("Fit's output area:\n%s\nwant it to match %s", got, re)
	}
}

// TestProgressPanelLines checks the cluster panel's side channel: with PanelEnv set and
// plain output, Fit's progress prints PanelLinePrefix lines with the examples trained and
// the seconds since Fit began, at most one per panelEvery, one at the epoch's last step,
// and the count goes on across epochs; without it, none.
func TestProgressPanelLines(t *testing.T) {
	for _, tc := range []struct {
		env  string
		want []string
	}{
		{"1", []string{
			`Epoch 1/2`,
			PanelLinePrefix + `{"epoch":1,"epochs":2,"step":1,"steps":4,"samples":32,"time":0.400}`,
			PanelLinePrefix + `{"epoch":1,"epochs":2,"step":3,"steps":4,"samples":96,"time":1.200}`,
			PanelLinePrefix + `{"epoch":1,"epochs":2,"step":4,"steps":4,"samples":128,"time":1.700}`,
			`Epoch 2/2`,
			PanelLinePrefix + `{"epoch":2,"epochs":2,"step":1,"steps":4,"samples":160,"time":2.200}`,
		}},
		{"", []string{`Epoch 1/2`, `Epoch 2/2`}},
	} {
		t.Setenv(PanelEnv, tc.env)
		var buf bytes.Buffer
		clock := time.Unix(0, 0)
		p := newProgress(2, &buf, func() time.Time { return clock })
		p.epochBegin(0, 2, 4)
		for i := 1; i <= 4; i++ {
			clock = clock.Add(400 * time.Millisecond) // steps 1 and 3 are due, 2 is too soon, 4 is the last
			p.samples = float64(32 * i)
			if i == 4 {
				clock = clock.Add(100 * time.Millisecond)
			}
			p.step(i, Logs{})
		}
		p.finish(Logs{})
		p.epochBegin(1, 2, 4)
		clock = clock.Add(500 * time.Millisecond)
		p.samples = 32
		p.step(1, Logs{})
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			if !strings.HasPrefix(l, "4/4") { // the epoch's line
				got = append(got, l)
			}
		}
		if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
			t.Errorf("%s=%q: output\n%s\nwant\n%s", PanelEnv, tc.env, strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
		}
	}
}

// fakeUI is a notebook UI installed in package progress that records Fit's bar.
type fakeUI struct{ bars []*fakeBar }

func (u *fakeUI) Ready() bool                                    { return true }
func (u *fakeUI) NewJobPanel(string, func()) progressui.JobPanel { return nil }
func (u *fakeUI) NewFitBar() progressui.FitBar {
	b := &fakeBar{}
	u.bars = append(u.bars, b)
	return b
}

type fakeBar struct{ calls []string }

func (b *fakeBar) Run(fn func())   { fn() }
func (b *fakeBar) Capturing() bool { return false }
func (b *fakeBar) Append(s string) { b.calls = append(b.calls, "append "+stripANSI(s)) }
func (b *fakeBar) Progress(desc string, current, target int, text string) {
	b.calls = append(b.calls, fmt.Sprintf("progress %s %d/%d", desc, current, target))
}

// TestProgressThroughUI: in a notebook whose UI is Ready, Fit's verbose 1 bar is the one
// package progress hands out (keras does not know widgets): the live row per step and the
// finished epochs' lines in its history; verbose 2 asks for no bar.
func TestProgressThroughUI(t *testing.T) {
	u := &fakeUI{}
	defer progressui.SetUI(progressui.SetUI(u))
	area := &outputArea{}
	defer display.SetPublisher(display.SetPublisher(area))
	var buf bytes.Buffer
	clk := newTestClock()
	p := newProgress(1, &buf, clk.now)
	runEpochs(p, clk, twoEpochLogs[:1], nil)
	if len(u.bars) != 1 {
		t.Fatalf("%d bars asked of the UI, want 1", len(u.bars))
	}
	want := []string{"progress Epoch 1/1 0/3", "progress Epoch 1/1 1/3", "progress Epoch 1/1 2/3",
		"progress Epoch 1/1 3/3", "progress Epoch 1/1 3/3", // the last step, then the epoch's final line
		"append Epoch 1/1\n3/3 ━━━━━━━━━━━━━━━━━━━━ 0s 110ms/step - accuracy: 0.5000 - loss: 1.0000\n"}
	if got := u.bars[0].calls; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the bar got %q, want %q", got, want)
	}
	if buf.Len() != 0 || len(area.outs) != 0 {
		t.Errorf("with the UI's bar Fit also wrote %q and displayed %q", buf.String(), area.outs)
	}
	newProgress(2, &buf, clk.now)
	if len(u.bars) != 1 {
		t.Errorf("verbose 2 asked the UI for a bar")
	}
}
