package distribute

import (
	"fmt"
	"time"

	"godist/distlib/display"
	"godist/distlib/progress"
	"godist/distlib/psched"
)

// The ClusterCoordinator's cluster panel, drawn by the UI installed in package progress
// (widgets): in a notebook with the widget front end, NewClusterCoordinator shows it in
// its cell, refreshed every coordinatorPanelEvery until Close: a row per worker task (its
// address, running while it is up, down while it is lost) and the counters of closures
// scheduled, done, failed, retried, queued and running and of the workers up. In a
// notebook without widgets, Close prints the same panel as text.

const coordinatorPanelEvery = 250 * time.Millisecond

// Stats returns the coordinator's counters: closures scheduled, done, failed, retried,
// queued and running, and which workers are up.
func (c *ClusterCoordinator) Stats() psched.Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sm.Stats()
}

// startPanel shows the live panel where the widget front end is ready and keeps it
// fresh until the coordinator's context ends (Close).
func (c *ClusterCoordinator) startPanel() {
	if !progress.Ready() {
		return
	}
	c.panel = progress.NewJobPanel("ClusterCoordinator", nil)
	c.refreshPanel(c.panel)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		t := time.NewTicker(coordinatorPanelEvery)
		defer t.Stop()
		for {
			select {
			case <-c.ctx.Done():
				return
			case <-t.C:
				c.refreshPanel(c.panel)
			}
		}
	}()
}

// refreshPanel shows the coordinator's state now on p.
func (c *ClusterCoordinator) refreshPanel(p progress.JobPanel) {
	st := c.Stats()
	up := 0
	for i, u := range st.Up {
		state := progress.StateDown
		if u {
			state, up = progress.StateRunning, up+1
		}
		addr := ""
		if i < len(c.s.workerAddrs) {
			addr = c.s.workerAddrs[i]
		}
		p.Update(progress.TaskEvent{Task: fmt.Sprintf("worker %d", i), Addr: addr, State: state})
	}
	p.SetCounters([][2]string{
		{"closures scheduled", fmt.Sprint(st.Scheduled)}, {"done", fmt.Sprint(st.Done)},
		{"failed", fmt.Sprint(st.Failed)}, {"retried", fmt.Sprint(st.Retried)},
		{"queued", fmt.Sprint(st.Queued)}, {"running", fmt.Sprint(st.Running)},
		{"workers up", fmt.Sprintf("%d/%d", up, len(st.Up))},
	})
}

// finishPanel ends the panel at Close: the live one's last state, or the text panel in
// a notebook without widgets.
func (c *ClusterCoordinator) finishPanel() {
	if !c.showPanel {
		return
	}
	p := c.panel
	if p == nil {
		if !display.InNotebook() {
			return
		}
		p = progress.NewJobPanel("ClusterCoordinator", nil)
	}
	c.refreshPanel(p)
	if text := p.Finish("closed"); text != "" {
		display.Show(display.Bundle{"text/plain": text})
	}
}
