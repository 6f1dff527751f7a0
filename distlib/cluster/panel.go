package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"godist/distlib/display"
	"godist/distlib/progress"
)

// ErrStopped is the cause of a job stopped with the cluster panel's Stop button.
var ErrStopped = errors.New("cluster: the job was stopped with the panel's Stop button")

// PanelEvent returns what the cluster panel shows of e.
func (e TaskEvent) PanelEvent() progress.TaskEvent {
	pe := progress.TaskEvent{Task: e.Task.String(), Addr: e.Addr}
	switch e.State {
	case "exited":
		pe.State = progress.StateExited
	case "failed":
		pe.State = progress.StateFailed
	case "stopped":
		pe.State = progress.StateStopped
	case "lost":
		pe.State = progress.StateLost
	}
	return pe
}

// PanelStatus returns the status the cluster panel ends with after a job whose context is
// ctx returned err: done, stopped or failed; a failure names its root cause
// ("failed: worker 1 (exit code 3) first; 1 other task failed after it").
func PanelStatus(ctx context.Context, err error) string {
	var je *JobError
	switch {
	case err == nil:
		return "done"
	case ctx.Err() != nil:
		return "stopped"
	case errors.As(err, &je):
		return "failed: " + je.Summary()
	}
	return "failed"
}

// panelWriter passes a job's output on to w, feeding p each line; the panel's progress
// lines are not passed on. Launch's syncWriter writes whole lines.
type panelWriter struct {
	w io.Writer
	p progress.JobPanel
}

func (pw panelWriter) Write(b []byte) (int, error) {
	var keep []byte
	for _, l := range bytes.SplitAfter(b, []byte("\n")) {
		if len(l) > 0 && pw.p.Line(strings.TrimSuffix(string(l), "\n")) {
			keep = append(keep, l...)
		}
	}
	if len(keep) > 0 {
		if _, err := pw.w.Write(keep); err != nil {
			return 0, err
		}
	}
	return len(b), nil
}

// launchWithPanel runs Launch with the cluster panel in the notebook cell, through the UI
// package progress has installed: live with a Stop button where the widget front end is
// ready, else printed to spec.Output as a table at the end.
func launchWithPanel(ctx context.Context, spec LaunchSpec) error {
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	title := fmt.Sprintf("cluster.Launch: %d workers", spec.Workers)
	if spec.PS > 0 {
		title += fmt.Sprintf(", %d ps", spec.PS)
	}
	if spec.Chief {
		title += ", a chief"
	}
	panel := progress.NewJobPanel(title, func() { stop(ErrStopped) })
	out := spec.Output
	spec.Output = panelWriter{w: out, p: panel}
	spec.Events = func(ev TaskEvent) { panel.Update(ev.PanelEvent()) }
	spec.Env = append(append([]string(nil), spec.Env...), progress.PanelEnv+"=1")
	err := Launch(ctx, spec)
	if table := panel.Finish(PanelStatus(ctx, err)); table != "" {
		fmt.Fprint(out, "\n"+table)
	}
	if err != nil && errors.Is(context.Cause(ctx), ErrStopped) {
		return fmt.Errorf("cluster: launch: %w", ErrStopped)
	}
	return err
}

// inCell reports whether Launch runs in a notebook cell (where it shows the panel).
func inCell() bool { return display.InNotebook() }
