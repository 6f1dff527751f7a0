package cluster

import (
	"bytes"
	"strings"
	"testing"

	"godist/distlib/progress"
	// The kernel links widgets, which installs itself as progress' UI: with it the panel
	// of a Launch in a cell prints its text table (TestLaunchPanelInCell).
	_ "godist/distlib/widgets"
)

// TestPanelEvent: a launcher event becomes the panel's task event; a start is no news
// for the state (the first output makes the task running).
func TestPanelEvent(t *testing.T) {
	for state, want := range map[string]progress.TaskState{"started": "", "exited": progress.StateExited,
		"failed": progress.StateFailed, "stopped": progress.StateStopped} {
		ev := TaskEvent{Task: Task{Type: "worker", Index: 1}, Addr: "127.0.0.1:9", State: state}
		got := ev.PanelEvent()
		if got != (progress.TaskEvent{Task: "worker 1", Addr: "127.0.0.1:9", State: want}) {
			t.Errorf("%s: PanelEvent() = %+v", state, got)
		}
	}
}

// linePanel is a progress.JobPanel that takes the progress lines and records the rest.
type linePanel struct{ lines []string }

func (p *linePanel) Update(progress.TaskEvent) {}
func (p *linePanel) SetCounters([][2]string)   {}
func (p *linePanel) Finish(string) string      { return "" }
func (p *linePanel) Live() bool                { return true }
func (p *linePanel) Line(l string) bool {
	p.lines = append(p.lines, l)
	return !strings.Contains(l, progress.PanelLinePrefix)
}

// TestPanelWriter: the job's output reaches the cell without the panel's progress lines,
// and the panel sees every line.
func TestPanelWriter(t *testing.T) {
	var out bytes.Buffer
	p := &linePanel{}
	w := panelWriter{w: &out, p: p}
	in := "[worker 0] hello\n[worker 0] " + progress.PanelLinePrefix + "{\"epoch\":1}\n[worker 1] bye\n"
	if n, err := w.Write([]byte(in)); n != len(in) || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	if got, want := out.String(), "[worker 0] hello\n[worker 1] bye\n"; got != want {
		t.Errorf("output %q, want %q", got, want)
	}
	if len(p.lines) != 3 {
		t.Errorf("the panel saw %q, want the 3 lines", p.lines)
	}
}
