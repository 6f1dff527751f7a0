package widgets

import (
	"testing"

	"godist/distlib/progress"
)

// TestProgressUI: linking widgets installs it as package progress' UI, so the core's panels
// are Panels (text at Finish without a front end) and its Fit bars FitBars when Ready.
func TestProgressUI(t *testing.T) {
	if progress.Ready() != Ready() {
		t.Errorf("progress.Ready() = %v, widgets.Ready() = %v", progress.Ready(), Ready())
	}
	p, ok := progress.NewJobPanel("job", nil).(*Panel)
	if !ok {
		t.Fatalf("progress.NewJobPanel did not return a widgets Panel")
	}
	p.Update(PanelEvent{Task: "worker 0", Addr: "h:1"})
	if text := p.Finish("done"); text == "" || p.Live() {
		t.Errorf("without a front end the panel is live or Finish returns no table: %q", text)
	}
	if !Ready() && progress.NewFitBar() != nil {
		t.Errorf("a Fit bar without a widget front end")
	}
}
