package progress

import (
	"os/exec"
	"strings"
	"testing"
)

// TestCoreImportsNoWidgets: the core publishes through this package and the notebook's UI
// subscribes; distribute, cluster and keras do not import widgets, and this package
// imports nothing of godist.
func TestCoreImportsNoWidgets(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	for _, pkg := range []string{"godist/distlib/distribute", "godist/distlib/cluster", "godist/distlib/keras", "godist/distlib/progress"} {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			if dep == "godist/distlib/widgets" {
				t.Errorf("%s imports %s: publish through package progress instead", pkg, dep)
			}
			if pkg == "godist/distlib/progress" && dep != pkg && strings.HasPrefix(dep, "godist/") {
				t.Errorf("progress imports %s: it must stay dependency-free", dep)
			}
		}
	}
}

// fakeUI records what the core asked for.
type fakeUI struct {
	ready  bool
	panels []string
}

func (u *fakeUI) Ready() bool { return u.ready }
func (u *fakeUI) NewJobPanel(title string, onStop func()) JobPanel {
	u.panels = append(u.panels, title)
	return nopPanel{}
}
func (u *fakeUI) NewFitBar() FitBar { return fakeBar{} }

type fakeBar struct{}

func (fakeBar) Run(fn func())                     { fn() }
func (fakeBar) Capturing() bool                   { return false }
func (fakeBar) Progress(string, int, int, string) {}
func (fakeBar) Append(string)                     {}

// TestSetUI: without a UI the core gets text (no bar, a panel that shows every line and
// prints nothing); with one, the panel comes from it, and the bar only when it is Ready.
func TestSetUI(t *testing.T) {
	old := SetUI(nil)
	defer SetUI(old)
	if Ready() || NewFitBar() != nil {
		t.Errorf("no UI: Ready %v, NewFitBar %v; want false, nil", Ready(), NewFitBar())
	}
	p := NewJobPanel("job", nil)
	p.Update(TaskEvent{Task: "worker 0", State: StateRunning})
	if !p.Line("[worker 0] "+PanelLinePrefix+"{}") || p.Finish("done") != "" || p.Live() {
		t.Errorf("the panel without a UI hides a line, prints a table or is live")
	}
	u := &fakeUI{}
	SetUI(u)
	if Ready() || NewFitBar() != nil {
		t.Errorf("UI not ready: Ready %v, NewFitBar %v; want false, nil", Ready(), NewFitBar())
	}
	u.ready = true
	if !Ready() || NewFitBar() == nil {
		t.Errorf("UI ready: Ready %v, NewFitBar %v; want true, a bar", Ready(), NewFitBar())
	}
	NewJobPanel("job", nil)
	if len(u.panels) != 1 || u.panels[0] != "job" {
		t.Errorf("panels asked of the UI %q, want [job]", u.panels)
	}
}

func TestFinal(t *testing.T) {
	for s, want := range map[TaskState]bool{StateStarting: false, StateRunning: false, StateDown: false,
		StateExited: true, StateFailed: true, StateStopped: true} {
		if s.Final() != want {
			t.Errorf("%s.Final() = %v, want %v", s, s.Final(), want)
		}
	}
}
