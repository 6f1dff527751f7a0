package widgets

import (
	"encoding/json"
	"fmt"
	"html"
	"strings"
	"sync"
	"time"

	"godist/distlib/progress"
)

// The cluster panel: one table of a job's tasks (chief/worker/ps, host:port, state, epoch,
// step, samples/s, last log line), fed by the task events its source publishes through
// package progress (%%distributed, a cluster.Launch from a cell, a ClusterCoordinator), drawn live as an HTML widget with a
// Stop button where the widget front end is Ready, and printed once as a text table at the
// end elsewhere.
//
// The DOM the front end shows: a <table class="godist-cluster-panel"> whose header row is
// "task", "address", "state", "epoch", "step", "samples/s (last 10 s)", "last line" and whose rows start
// with the task's name ("worker 0") and carry its state ("starting", "running", "exited",
// "failed", "lost", "stopped") in a cell of class "godist-task-state"; a <div
// class="godist-cluster-status"> above it says "running", "stopping", "stopped", "failed" or
// "done" (a failed job's launcher adds its root cause: "failed: worker 1 (exit code 3)
// first; ..."); counters (a coordinator's closures and workers) are in a <div
// class="godist-cluster-counters">; a failed task's last lines are in a <pre
// class="godist-task-failure"> (those of a task an elastic job lost too).

// TaskState is a task's state in the cluster panel; the core publishes it (package
// progress), the panel draws it.
type TaskState = progress.TaskState

// The task states, as package progress defines them.
const (
	StateStarting = progress.StateStarting
	StateRunning  = progress.StateRunning
	StateExited   = progress.StateExited
	StateFailed   = progress.StateFailed
	StateStopped  = progress.StateStopped
	StateLost     = progress.StateLost
	StateDown     = progress.StateDown
)

// PanelEvent is what a source tells the panel about one task (progress.TaskEvent). Zero
// fields mean "no news"; the row's samples/s is the change of Samples over the last
// panelWindow of reports.
type PanelEvent = progress.TaskEvent

// PanelRow is one task's row: what the events about it add up to.
type PanelRow struct {
	Task, Addr    string
	State         TaskState
	Epoch, Epochs int
	Step, Steps   int
	// SamplesPerSec is the examples trained a second over the last panelWindow of the
	// task's reports (over the time since its Fit began while that is shorter); 0: none yet.
	SamplesPerSec float64
	Lines         []string // the last lines (at most PanelKeepLines), the newest last

	points []samplePoint // the throughput reports in the window, oldest first
}

// samplePoint is one throughput report: samples trained by at.
type samplePoint struct {
	at      time.Duration
	samples float64
}

// panelWindow is the span the panel's samples/s are averaged over, as its header says: long
// enough that workers in one job, reporting at different moments of their epochs, show
// the same figure.
const panelWindow = 10 * time.Second

// PanelKeepLines is how many of a task's last output lines a row keeps (a failed task's
// are shown).
const PanelKeepLines = 10

// Apply returns the row after ev: the pure state machine of a task. starting -> running ->
// exited/failed/stopped; an output line or progress moves a starting task to running; a
// final state does not change any more (a late line is still kept).
func (r PanelRow) Apply(ev PanelEvent) PanelRow {
	if r.State == "" {
		r.State = StateStarting
	}
	if r.Task == "" {
		r.Task = ev.Task
	}
	if ev.Addr != "" {
		r.Addr = ev.Addr
	}
	if ev.Line != "" {
		r.Lines = append(append([]string(nil), r.Lines...), ev.Line)
		if len(r.Lines) > PanelKeepLines {
			r.Lines = r.Lines[len(r.Lines)-PanelKeepLines:]
		}
	}
	if ev.Epoch > 0 {
		r.Epoch, r.Epochs = ev.Epoch, ev.Epochs
		if ev.Step == 0 {
			r.Step, r.Steps = 0, ev.Steps
		}
	}
	if ev.Step > 0 {
		r.Step, r.Steps = ev.Step, ev.Steps
	}
	if ev.At > 0 {
		r.points, r.SamplesPerSec = addSamplePoint(r.points, samplePoint{ev.At, ev.Samples})
	}
	next := ev.State
	if next == "" && r.State == StateStarting && (ev.Line != "" || ev.Epoch > 0 || ev.Step > 0) {
		next = StateRunning
	}
	if next != "" && !r.State.Final() {
		r.State = next
	}
	return r
}

// addSamplePoint returns the window's reports with p added (a copy: Apply is pure) and the
// samples a second from the oldest to p, over panelWindow (or from the Fit's beginning). A report behind the last one in time or count
// is a new Fit's: its window starts again from that Fit's beginning (no samples at 0).
func addSamplePoint(points []samplePoint, p samplePoint) ([]samplePoint, float64) {
	if n := len(points); n == 0 || p.at < points[n-1].at || p.samples < points[n-1].samples {
		points = []samplePoint{{0, 0}}
	}
	start := 0 // the newest report at or before the window's start, so that it spans it all
	for start+1 < len(points) && points[start+1].at <= p.at-panelWindow {
		start++
	}
	kept := append(append(make([]samplePoint, 0, len(points)-start+1), points[start:]...), p)
	first := kept[0]
	if len(kept) < 2 || p.at <= first.at {
		return kept, 0
	}
	return kept, (p.samples - first.samples) / (p.at - first.at).Seconds()
}

// Last returns the row's last output line, "" if none.
func (r PanelRow) Last() string {
	if len(r.Lines) == 0 {
		return ""
	}
	return r.Lines[len(r.Lines)-1]
}

func (r PanelRow) cells() []string {
	epoch, step, rate := "", "", ""
	if r.Epoch > 0 {
		epoch = fmt.Sprint(r.Epoch)
		if r.Epochs > 0 {
			epoch += fmt.Sprintf("/%d", r.Epochs)
		}
	}
	if r.Step > 0 {
		step = fmt.Sprint(r.Step)
		if r.Steps > 0 {
			step += fmt.Sprintf("/%d", r.Steps)
		}
	}
	if r.SamplesPerSec > 0 {
		rate = fmt.Sprintf("%.1f", r.SamplesPerSec)
	}
	return []string{r.Task, r.Addr, string(r.State), epoch, step, rate, strings.TrimSpace(r.Last())}
}

var panelHeader = []string{"task", "address", "state", "epoch", "step",
	fmt.Sprintf("samples/s (last %.0f s)", panelWindow.Seconds()), "last line"}

// PanelSnapshot is what a panel shows at one moment.
type PanelSnapshot struct {
	Title    string
	Status   string // running, stopping, stopped, failed, done
	Rows     []PanelRow
	Counters [][2]string // name, value: a coordinator's closures and workers
}

// panelStyle spaces the panel's columns and colours the task states; its selectors name
// only the panel's own classes.
const panelStyle = `<style>table.godist-cluster-panel th, table.godist-cluster-panel td {padding: 1px 10px 1px 0; text-align: left; vertical-align: top}` +
	` .godist-state-running {color: #1a7f37} .godist-state-failed {color: #cf222e} .godist-state-stopped {color: #9a6700} .godist-state-lost {color: #bc4c00}</style>`

// HTML renders the snapshot as the panel's table (the DOM the package doc of Panel names).
func (s PanelSnapshot) HTML() string {
	var b strings.Builder
	esc := html.EscapeString
	fmt.Fprintf(&b, `<div class="godist-cluster-panel-box">%s<div class="godist-cluster-status"><b>%s</b>: %s</div>`, panelStyle, esc(s.Title), esc(s.Status))
	if len(s.Counters) > 0 {
		b.WriteString(`<div class="godist-cluster-counters">`)
		for i, c := range s.Counters {
			if i > 0 {
				b.WriteString(" · ")
			}
			fmt.Fprintf(&b, `%s: <span class="godist-counter">%s</span>`, esc(c[0]), esc(c[1]))
		}
		b.WriteString(`</div>`)
	}
	b.WriteString(`<table class="godist-cluster-panel"><thead><tr>`)
	for _, h := range panelHeader {
		fmt.Fprintf(&b, "<th>%s</th>", esc(h))
	}
	b.WriteString("</tr></thead><tbody>")
	for _, r := range s.Rows {
		b.WriteString("<tr>")
		for i, c := range r.cells() {
			switch i {
			case 2:
				fmt.Fprintf(&b, `<td class="godist-task-state godist-state-%s">%s</td>`, esc(string(r.State)), esc(c))
			case 6:
				fmt.Fprintf(&b, `<td><code>%s</code></td>`, esc(c))
			default:
				fmt.Fprintf(&b, "<td>%s</td>", esc(c))
			}
		}
		b.WriteString("</tr>")
	}
	b.WriteString("</tbody></table>")
	for _, r := range s.Rows {
		if (r.State == StateFailed || r.State == StateLost) && len(r.Lines) > 0 {
			fmt.Fprintf(&b, `<div>%s %s; its last lines:</div><pre class="godist-task-failure">%s</pre>`, esc(r.Task), endedHow(r.State), esc(strings.Join(r.Lines, "\n")))
		}
	}
	b.WriteString("</div>")
	return b.String()
}

// Text renders the snapshot as a plain-text table, the panel's form without widgets.
func (s PanelSnapshot) Text() string {
	rows := [][]string{panelHeader}
	for _, r := range s.Rows {
		rows = append(rows, r.cells())
	}
	width := make([]int, len(panelHeader))
	for _, row := range rows {
		for i, c := range row {
			width[i] = max(width[i], len([]rune(c)))
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s\n", s.Title, s.Status)
	if len(s.Counters) > 0 {
		for i, c := range s.Counters {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%s: %s", c[0], c[1])
		}
		b.WriteString("\n")
	}
	for _, row := range rows {
		var line strings.Builder
		for i, c := range row {
			if i > 0 {
				line.WriteString("  ")
			}
			if i == len(row)-1 {
				line.WriteString(c)
			} else {
				line.WriteString(c + strings.Repeat(" ", width[i]-len([]rune(c))))
			}
		}
		b.WriteString(strings.TrimRight(line.String(), " ") + "\n")
	}
	for _, r := range s.Rows {
		if (r.State == StateFailed || r.State == StateLost) && len(r.Lines) > 0 {
			fmt.Fprintf(&b, "%s %s; its last lines:\n", r.Task, endedHow(r.State))
			for _, l := range r.Lines {
				fmt.Fprintf(&b, "  %s\n", l)
			}
		}
	}
	return b.String()
}

// PanelEnv and PanelLinePrefix are the cluster panel's side channel on a task's output
// (package progress documents it).
const (
	PanelEnv        = progress.PanelEnv
	PanelLinePrefix = progress.PanelLinePrefix
)

// Line feeds the panel one line of a job's output, "[worker 0] text" as the launcher
// prefixes it: a PanelLinePrefix progress line updates the task's epoch, step and
// samples/s and Line returns false (the line is not to be shown); any other task line
// becomes the task's last line and Line returns true. Lines of no task ("[launch] ...",
// unprefixed) only return true.
func (p *Panel) Line(line string) (show bool) {
	end := strings.Index(line, "] ")
	if !strings.HasPrefix(line, "[") || end < 0 {
		return true
	}
	task, rest := line[1:end], line[end+2:]
	if task == "launch" {
		return true
	}
	if js, ok := strings.CutPrefix(rest, PanelLinePrefix); ok {
		var pl struct {
			Epoch, Epochs, Step, Steps int
			Samples, Time              float64
		}
		if json.Unmarshal([]byte(js), &pl) == nil {
			p.Update(PanelEvent{Task: task, Epoch: pl.Epoch, Epochs: pl.Epochs, Step: pl.Step, Steps: pl.Steps,
				Samples: pl.Samples, At: time.Duration(pl.Time * float64(time.Second))})
			return false
		}
	}
	p.Update(PanelEvent{Task: task, Line: rest})
	return true
}

// panelInterval is the least time between two redraws of a live panel for output lines
// and progress; state changes redraw at once.
const panelInterval = 250 * time.Millisecond

// Panel is the live cluster panel. Its methods are safe for concurrent use.
type Panel struct {
	mu       sync.Mutex
	snap     PanelSnapshot
	index    map[string]int
	live     bool // drawn as widgets
	html     *HTML
	stop     *Button
	box      *Box
	lastDraw time.Time
	timer    *time.Timer // a pending redraw
	finished bool
}

// NewPanel returns a panel titled title. Where the widget front end is Ready it shows
// itself in the running cell at once, with a Stop button that calls onStop (once; nil: no
// button); the kernel delivers that click even while the cell runs. Elsewhere it shows
// nothing until Finish.
func NewPanel(title string, onStop func()) *Panel {
	p := &Panel{snap: PanelSnapshot{Title: title, Status: "running"}, index: map[string]int{}}
	if !Ready() {
		return p
	}
	p.live = true
	p.html = NewHTML(p.snap.HTML())
	children := []Child{p.html}
	if onStop != nil {
		p.stop = NewButton("Stop")
		p.stop.mu.Lock()
		p.stop.urgent = true
		p.stop.mu.Unlock()
		_ = p.stop.SetButtonStyle("danger")
		var once sync.Once
		_ = p.stop.OnClick(func(b *Button) {
			once.Do(func() {
				b.SetDisabled(true)
				p.setStatus("stopping")
				onStop()
			})
		})
		children = append(children, p.stop)
	}
	p.box = NewVBox(children...)
	_ = p.box.Display()
	return p
}

// Live reports whether the panel is drawn as widgets (else Finish returns its text).
func (p *Panel) Live() bool { return p.live }

// Update applies ev to its task's row (adding the row on the task's first event).
func (p *Panel) Update(ev PanelEvent) {
	if ev.Task == "" {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	i, ok := p.index[ev.Task]
	if !ok {
		i = len(p.snap.Rows)
		p.index[ev.Task] = i
		p.snap.Rows = append(p.snap.Rows, PanelRow{})
	}
	before := p.snap.Rows[i].State
	p.snap.Rows[i] = p.snap.Rows[i].Apply(ev)
	p.redrawLocked(!ok || p.snap.Rows[i].State != before)
}

// SetCounters replaces the counters shown above the table, in order.
func (p *Panel) SetCounters(counters [][2]string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.snap.Counters = append([][2]string(nil), counters...)
	p.redrawLocked(false)
}

func (p *Panel) setStatus(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.finished {
		p.snap.Status = s
		p.redrawLocked(true)
	}
}

// Snapshot returns what the panel shows now.
func (p *Panel) Snapshot() PanelSnapshot {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.snapshotLocked()
}

func (p *Panel) snapshotLocked() PanelSnapshot {
	s := p.snap
	s.Rows = append([]PanelRow(nil), s.Rows...)
	s.Counters = append([][2]string(nil), s.Counters...)
	return s
}

// redrawLocked sends the table to the front end now if now or the last draw is old
// enough, else once panelInterval after the last draw.
func (p *Panel) redrawLocked(now bool) {
	if !p.live || p.finished {
		return
	}
	wait := panelInterval - time.Since(p.lastDraw)
	if now || wait <= 0 {
		if p.timer != nil {
			p.timer.Stop()
			p.timer = nil
		}
		p.lastDraw = time.Now()
		p.html.SetValue(p.snap.HTML())
		return
	}
	if p.timer == nil {
		p.timer = time.AfterFunc(wait, func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.timer = nil
			if !p.finished {
				p.lastDraw = time.Now()
				p.html.SetValue(p.snap.HTML())
			}
		})
	}
}

// Finish ends the panel with status (done, stopped, failed): rows still not in a final
// state get final (exited when done, stopped otherwise), the live panel is drawn a last
// time and its Stop button removed. It returns the text table when the panel is not live
// (the caller prints it), "" when it is. Later calls return the same and change nothing.
func (p *Panel) Finish(status string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.finished {
		p.snap.Status = status
		end := StateStopped
		if status == "done" {
			end = StateExited
		}
		for i, r := range p.snap.Rows {
			if !r.State.Final() {
				p.snap.Rows[i] = r.Apply(PanelEvent{State: end})
			}
		}
		if p.timer != nil {
			p.timer.Stop()
			p.timer = nil
		}
		if p.live {
			p.html.SetValue(p.snap.HTML())
			if p.stop != nil {
				_ = p.box.SetChildren(p.html)
				p.stop.Close()
			}
		}
		p.finished = true
	}
	if p.live {
		return ""
	}
	return p.snap.Text()
}

// endedHow says how a failed or lost task ended, after its name.
func endedHow(st TaskState) string {
	if st == StateLost {
		return "was lost (the job went on without it)"
	}
	return "failed"
}
