package widgets

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"godist/distlib/display"
)

func TestPanelRowApply(t *testing.T) {
	cases := []struct {
		name   string
		events []PanelEvent
		want   TaskState
		last   string
		epoch  int
		step   int
	}{
		{"new row starts", []PanelEvent{{Task: "worker 0", Addr: "127.0.0.1:1"}}, StateStarting, "", 0, 0},
		{"a line means running", []PanelEvent{{Task: "worker 0"}, {Line: "hello"}}, StateRunning, "hello", 0, 0},
		{"progress means running", []PanelEvent{{Task: "worker 0"}, {Epoch: 1, Epochs: 2}}, StateRunning, "", 1, 0},
		{"running then exited", []PanelEvent{{Task: "worker 0"}, {State: StateRunning}, {State: StateExited}}, StateExited, "", 0, 0},
		{"starting can fail", []PanelEvent{{Task: "worker 0"}, {State: StateFailed}}, StateFailed, "", 0, 0},
		{"exited is final", []PanelEvent{{Task: "worker 0"}, {State: StateExited}, {State: StateRunning}, {State: StateFailed}}, StateExited, "", 0, 0},
		{"failed is final", []PanelEvent{{Task: "worker 0"}, {State: StateFailed}, {State: StateStopped}}, StateFailed, "", 0, 0},
		{"lost is final", []PanelEvent{{Task: "worker 2", State: StateRunning}, {State: StateLost}, {State: StateExited}}, StateLost, "", 0, 0},
		{"stopped is final, late line kept", []PanelEvent{{Task: "worker 0"}, {State: StateStopped}, {Line: "bye"}}, StateStopped, "bye", 0, 0},
		{"new epoch resets the step", []PanelEvent{{Task: "w"}, {Epoch: 1, Epochs: 2}, {Step: 5, Steps: 8}, {Epoch: 2, Epochs: 2, Steps: 8}}, StateRunning, "", 2, 0},
		{"down and up again", []PanelEvent{{Task: "w", State: StateRunning}, {State: StateDown}, {State: StateRunning}}, StateRunning, "", 0, 0},
		{"down is not final", []PanelEvent{{Task: "w", State: StateDown}, {State: StateStopped}}, StateStopped, "", 0, 0},
		{"step", []PanelEvent{{Task: "w"}, {Epoch: 1, Epochs: 2}, {Step: 5, Steps: 8}}, StateRunning, "", 1, 5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var r PanelRow
			for _, ev := range c.events {
				r = r.Apply(ev)
			}
			if r.State != c.want || r.Last() != c.last || r.Epoch != c.epoch || r.Step != c.step {
				t.Errorf("got state %q last %q epoch %d step %d, want %q %q %d %d", r.State, r.Last(), r.Epoch, r.Step, c.want, c.last, c.epoch, c.step)
			}
		})
	}
}

func TestPanelRowKeepsLastLines(t *testing.T) {
	var r PanelRow
	for i := range PanelKeepLines + 5 {
		r = r.Apply(PanelEvent{Task: "w", Line: strings.Repeat("x", i+1)})
	}
	if len(r.Lines) != PanelKeepLines || r.Lines[0] != strings.Repeat("x", 6) {
		t.Errorf("kept %d lines starting %q, want %d starting xxxxxx", len(r.Lines), r.Lines[0], PanelKeepLines)
	}
}

func TestPanelRender(t *testing.T) {
	s := PanelSnapshot{Title: "%%distributed", Status: "failed", Rows: []PanelRow{
		PanelRow{}.Apply(PanelEvent{Task: "worker 0", Addr: "127.0.0.1:5000", Epoch: 2, Epochs: 3, Step: 7, Steps: 10, Samples: 2469, At: 2 * time.Second, Line: "loss <1>"}),
		PanelRow{}.Apply(PanelEvent{Task: "worker 1", Addr: "127.0.0.1:5001", Line: "panic: boom"}).Apply(PanelEvent{State: StateFailed}),
		PanelRow{}.Apply(PanelEvent{Task: "worker 2", Addr: "127.0.0.1:5002", Line: "step 5"}).Apply(PanelEvent{State: StateLost}),
	}, Counters: [][2]string{{"closures done", "3/4"}}}
	h := s.HTML()
	for _, want := range []string{
		`<table class="godist-cluster-panel">`, "<th>samples/s (last 10 s)</th>", "<td>worker 0</td>", "<td>127.0.0.1:5000</td>",
		`<td class="godist-task-state godist-state-running">running</td>`, "<td>2/3</td>", "<td>7/10</td>", "<td>1234.5</td>",
		"<code>loss &lt;1&gt;</code>", `<td class="godist-task-state godist-state-failed">failed</td>`,
		`<pre class="godist-task-failure">panic: boom</pre>`, `<div class="godist-cluster-status"><b>%%distributed</b>: failed</div>`,
		`<td class="godist-task-state godist-state-lost">lost</td>`, `<div>worker 2 was lost (the job went on without it); its last lines:</div><pre class="godist-task-failure">step 5</pre>`,
		`closures done: <span class="godist-counter">3/4</span>`,
	} {
		if !strings.Contains(h, want) {
			t.Errorf("HTML lacks %q:\n%s", want, h)
		}
	}
	txt := s.Text()
	want := "%%distributed: failed\n" +
		"closures done: 3/4\n" +
		"task      address         state    epoch  step  samples/s (last 10 s)  last line\n" +
		"worker 0  127.0.0.1:5000  running  2/3    7/10  1234.5                 loss <1>\n" +
		"worker 1  127.0.0.1:5001  failed                                       panic: boom\n" +
		"worker 2  127.0.0.1:5002  lost                                         step 5\n" +
		"worker 1 failed; its last lines:\n  panic: boom\n" +
		"worker 2 was lost (the job went on without it); its last lines:\n  step 5\n"
	if txt != want {
		t.Errorf("Text:\n%s\nwant:\n%s", txt, want)
	}
}

func TestPanelTextWithoutWidgets(t *testing.T) {
	install(t, false) // a front end without a widget manager
	p := NewPanel("job", func() { t.Error("no Stop button without widgets") })
	if p.Live() {
		t.Fatal("panel is live without a validated widget front end")
	}
	p.Update(PanelEvent{Task: "worker 0", Line: "hi"})
	got := p.Finish("done")
	if !strings.Contains(got, "job: done\n") || !strings.Contains(got, "worker 0           exited") {
		t.Errorf("Finish text:\n%s", got)
	}
	if again := p.Finish("failed"); again != got {
		t.Errorf("second Finish changed the text:\n%s", again)
	}
}

func TestPanelLiveStop(t *testing.T) {
	r := install(t, true)
	var pub pubRec
	old := display.SetPublisher(&pub)
	defer display.SetPublisher(old)
	var stops atomic.Int32
	p := NewPanel("job", func() { stops.Add(1) })
	if !p.Live() {
		t.Fatal("panel not live with a validated front end")
	}
	if len(pub.shown) != 1 {
		t.Fatalf("panel displayed %d times, want once", len(pub.shown))
	}
	p.Update(PanelEvent{Task: "worker 0", Addr: "h:1"})
	p.Update(PanelEvent{Task: "worker 0", State: StateRunning})
	if !strings.Contains(p.html.Value(), "godist-state-running") {
		t.Errorf("a state change was not drawn at once: %s", p.html.Value())
	}
	if !(receiver{p.stop.Widget}).Urgent() {
		t.Error("the Stop button's clicks are not urgent")
	}
	p.stop.Click()
	p.stop.Click()
	if n := stops.Load(); n != 1 {
		t.Errorf("onStop ran %d times, want 1", n)
	}
	if s := p.Snapshot().Status; s != "stopping" {
		t.Errorf("status after Stop %q, want stopping", s)
	}
	if txt := p.Finish("stopped"); txt != "" {
		t.Errorf("live Finish returned text %q", txt)
	}
	v := p.html.Value()
	if !strings.Contains(v, "godist-state-stopped") || !strings.Contains(v, "</b>: stopped") {
		t.Errorf("final panel: %s", v)
	}
	closed := false
	for _, l := range r.take() {
		if strings.HasPrefix(l, "close "+p.stop.ModelID()+" ") {
			closed = true
		}
	}
	if !closed {
		t.Error("the Stop button was not closed at Finish")
	}
}

func TestPanelLine(t *testing.T) {
	install(t, false)
	p := NewPanel("job", nil)
	for _, tc := range []struct {
		line string
		show bool
	}{
		{"[worker 0] hello", true},
		{"[worker 1] " + PanelLinePrefix + `{"epoch":2,"epochs":3,"step":5,"steps":10,"samples":199,"time":2.000}`, false},
		{"[worker 1] " + PanelLinePrefix + "not json", true}, // shown as it is: no silent loss
		{"[launch] task worker 1 failed: exit status 1; stopping the job", true},
		{"no prefix", true},
	} {
		if got := p.Line(tc.line); got != tc.show {
			t.Errorf("Line(%q) = %v, want %v", tc.line, got, tc.show)
		}
	}
	s := p.Snapshot()
	if len(s.Rows) != 2 {
		t.Fatalf("rows %+v, want worker 0 and worker 1 only", s.Rows)
	}
	w0, w1 := s.Rows[0], s.Rows[1]
	if w0.Task != "worker 0" || w0.State != StateRunning || w0.Last() != "hello" {
		t.Errorf("worker 0 row %+v", w0)
	}
	if w1.Task != "worker 1" || w1.Epoch != 2 || w1.Epochs != 3 || w1.Step != 5 || w1.Steps != 10 || w1.SamplesPerSec != 99.5 ||
		w1.Last() != PanelLinePrefix+"not json" {
		t.Errorf("worker 1 row %+v", w1)
	}
}

// TestPanelRowSamplesPerSec checks the samples/s figure: the change of the samples a task
// reported over the last 10 s of its reports (from its Fit's beginning while shorter),
// whatever the moment of its epoch each report comes from.
func TestPanelRowSamplesPerSec(t *testing.T) {
	type rep struct {
		at      float64 // seconds since the Fit began, on the task's clock
		samples float64
	}
	cases := []struct {
		name    string
		reports []rep
		want    float64
	}{
		{"no report: no figure", nil, 0},
		{"first report: since the Fit began", []rep{{0.5, 100}}, 200},
		{"within the window: since the Fit began", []rep{{1, 100}, {4, 1000}}, 250},
		{"past the window: the last 10 s only", []rep{{1, 1000}, {5, 2000}, {11, 2100}, {15, 2500}}, 50},
		{"a report exactly 10 s back is the window's start", []rep{{2, 100}, {3, 200}, {12, 1200}}, 110},
		{"a pause longer than the window: from the last report before it", []rep{{1, 500}, {30, 3400}}, 100},
		{"a new Fit (time goes back) starts again", []rep{{20, 5000}, {1, 30}}, 30},
		{"a new Fit (fewer samples) starts again", []rep{{5, 5000}, {6, 40}}, 40.0 / 6},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := PanelRow{}.Apply(PanelEvent{Task: "worker 0"})
			for _, p := range c.reports {
				before, kept := r, append([]samplePoint(nil), r.points...)
				r = r.Apply(PanelEvent{Samples: p.samples, At: time.Duration(p.at * float64(time.Second))})
				if !slices.Equal(before.points, kept) {
					t.Errorf("Apply changed the row it was given: its reports %v became %v", kept, before.points)
				}
			}
			if math.Abs(r.SamplesPerSec-c.want) > 1e-9 {
				t.Errorf("samples/s %v, want %v", r.SamplesPerSec, c.want)
			}
		})
	}
}

// TestPanelSameJobSameRate feeds the panel what two identical workers of one job print
// (the job's samples, each on its own clock and at its own moments, one lagging a step
// behind) while the job speeds up from 500 to 1000 samples/s halfway: both show the last
// 10 s's 1000, not the 750 since the start nor each other's moment.
func TestPanelSameJobSameRate(t *testing.T) {
	install(t, false)
	p := NewPanel("job", nil)
	samples := func(at float64) float64 { // the job's count at a time
		if at <= 15 {
			return 500 * at
		}
		return 7500 + 1000*(at-15)
	}
	line := func(worker int, at, lag float64) string {
		return fmt.Sprintf("[worker %d] %s{\"epoch\":1,\"epochs\":9,\"step\":1,\"steps\":16,\"samples\":%.0f,\"time\":%.3f}",
			worker, PanelLinePrefix, samples(at-lag), at)
	}
	for at := 0.5; at <= 30; at += 0.5 {
		p.Line(line(0, at, 0))
		p.Line(line(1, at-0.27, 0.2))
	}
	rows := p.Snapshot().Rows
	for _, r := range rows {
		if math.Abs(r.SamplesPerSec-1000) > 50 {
			t.Errorf("%s: samples/s %.1f, want within 5%% of 1000", r.Task, r.SamplesPerSec)
		}
	}
}
