package widgets

import "godist/distlib/progress"

// The core (distribute, cluster, keras) publishes through package progress and imports no
// widgets; linking this package installs it as the drawer of their panels and bars.
func init() { progress.SetUI(progressUI{}) }

// progressUI implements progress.UI with Panel and FitBar.
type progressUI struct{}

func (progressUI) Ready() bool { return Ready() }

func (progressUI) NewJobPanel(title string, onStop func()) progress.JobPanel {
	return NewPanel(title, onStop)
}

func (progressUI) NewFitBar() progress.FitBar { return NewFitBar() }

// Panel and FitBar are what the core draws through.
var (
	_ progress.JobPanel = (*Panel)(nil)
	_ progress.FitBar   = (*FitBar)(nil)
)
