// Package progress is how the library's core (distribute, cluster, keras) publishes what a
// job and a Fit are doing, without knowing who draws it: task events for the cluster panel,
// the panel's side channel on a task's output, and the handles of a panel and of Fit's bar.
//
// The notebook's UI (package widgets) installs itself with SetUI; the core asks Ready and
// calls NewJobPanel or NewFitBar. With no UI installed (a Go program that does not link
// widgets) Ready is false and NewJobPanel returns a panel that draws nothing, so that the
// core keeps to its plain-text output. The package imports nothing of godist.
package progress

import (
	"sync"
	"time"
)

// TaskState is a task's state in the cluster panel.
type TaskState string

// The task states. A task starts in StateStarting, is StateRunning from its first output
// (or a running event), and ends in one of exited, failed, lost or stopped, which are final.
const (
	StateStarting TaskState = "starting"
	StateRunning  TaskState = "running"
	StateExited   TaskState = "exited"
	StateFailed   TaskState = "failed"
	StateStopped  TaskState = "stopped"
	// StateLost is a task that failed while its elastic job went on without it.
	StateLost TaskState = "lost"
	// StateDown is a coordinator's worker that is lost for now (it may come back up:
	// running again); not final.
	StateDown TaskState = "down"
)

// Final reports whether s is an end state (exited, failed, stopped).
func (s TaskState) Final() bool {
	return s == StateExited || s == StateFailed || s == StateLost || s == StateStopped
}

// TaskEvent is what a source tells the cluster panel about one task. Zero fields mean "no
// news": State "" keeps the state, Epoch 0 the epoch, Line "" the last line, At 0 the
// throughput.
type TaskEvent struct {
	Task          string    // "worker 0", "ps 1", "chief 0"
	Addr          string    // host:port
	State         TaskState // the new state
	Epoch, Epochs int       // 1-based epoch of Epochs
	Step, Steps   int       // step (1-based) of Steps in the epoch; Steps 0: unknown
	// Samples is the number of examples trained since the task's Fit began (the whole
	// job's in a multi-worker job) at At, the time since then on the task's clock; the
	// panel's samples/s is their change over its window.
	Samples float64
	At      time.Duration
	Line    string // an output line of the task
}

// PanelEnv names the environment variable that makes Keras' Fit in a process with plain
// output (a task started by %%distributed or cluster.Launch from a cell) also print its
// progress as PanelLinePrefix lines for the cluster panel; the launcher sets it for the
// tasks and JobPanel.Line takes those lines out of the output, so the cell never shows them.
const PanelEnv = "GODIST_PANEL"

// PanelLinePrefix starts a progress line for the cluster panel, followed by JSON:
// {"epoch":1,"epochs":3,"step":10,"steps":125,"samples":1280,"time":1.575} (epoch and step
// 1-based, steps 0 when unknown; samples trained and seconds passed since the task's Fit
// began, the whole job's samples in a multi-worker job).
const PanelLinePrefix = "godist-panel: "

// JobPanel is the cluster panel of one job, as the core feeds it. Its methods are safe
// for concurrent use.
type JobPanel interface {
	// Update applies ev to its task's row (adding the row on the task's first event).
	Update(ev TaskEvent)
	// SetCounters replaces the counters (name, value) shown above the table, in order.
	SetCounters(counters [][2]string)
	// Line feeds the panel one line of the job's output, "[worker 0] text" as the
	// launcher prefixes it, and reports whether the line is to be shown (false for a
	// PanelLinePrefix progress line, which the panel takes).
	Line(line string) (show bool)
	// Finish ends the panel with status (done, stopped, failed, closed) and returns its
	// text table when it is not drawn live (the caller prints it), "" when it is.
	Finish(status string) string
	// Live reports whether the panel is drawn live (else Finish returns its text).
	Live() bool
}

// FitBar is Keras' progress bar of one Fit or Evaluate, drawn by the UI: a live row under
// a history of the finished epochs' lines and of what the cell prints meanwhile.
type FitBar interface {
	// Run shows the bar and runs fn (the run's epochs), capturing what the cell prints
	// meanwhile into the history; the live row goes when fn returns.
	Run(fn func())
	// Capturing reports whether Run is capturing the cell's output into the history.
	Capturing() bool
	// Progress sets the live row: description (the epoch, "" for none), current of
	// target steps (target 0: unknown) and text beside the bar.
	Progress(description string, current, target int, text string)
	// Append adds finished lines (ending in a newline) to the history.
	Append(text string)
}

// UI draws the core's panels and bars; package widgets implements it and installs itself.
type UI interface {
	// Ready reports whether a front end that draws widgets is connected: the core then
	// asks for a live panel or bar rather than printing text.
	Ready() bool
	// NewJobPanel returns a panel titled title, shown live with a Stop button that calls
	// onStop (once; nil: no button) where the front end is Ready, else drawn as text by
	// Finish.
	NewJobPanel(title string, onStop func()) JobPanel
	// NewFitBar returns a bar for one Fit or Evaluate; called only when Ready.
	NewFitBar() FitBar
}

var (
	mu sync.RWMutex
	ui UI
)

// SetUI installs u as the drawer of panels and bars and returns the previous one; nil
// removes it (the core then prints text only).
func SetUI(u UI) UI {
	mu.Lock()
	defer mu.Unlock()
	old := ui
	ui = u
	return old
}

func current() UI {
	mu.RLock()
	defer mu.RUnlock()
	return ui
}

// Ready reports whether a UI is installed and its front end draws widgets.
func Ready() bool {
	u := current()
	return u != nil && u.Ready()
}

// NewJobPanel returns the installed UI's panel for a job, or one that draws nothing (its
// Line shows every line, its Finish returns "") when no UI is installed.
func NewJobPanel(title string, onStop func()) JobPanel {
	if u := current(); u != nil {
		return u.NewJobPanel(title, onStop)
	}
	return nopPanel{}
}

// NewFitBar returns the installed UI's Fit bar when Ready, else nil: the caller prints
// Keras' text progress.
func NewFitBar() FitBar {
	if u := current(); u != nil && u.Ready() {
		return u.NewFitBar()
	}
	return nil
}

// nopPanel is the panel without a UI.
type nopPanel struct{}

func (nopPanel) Update(TaskEvent)        {}
func (nopPanel) SetCounters([][2]string) {}
func (nopPanel) Line(string) bool        { return true }
func (nopPanel) Finish(string) string    { return "" }
func (nopPanel) Live() bool              { return false }
