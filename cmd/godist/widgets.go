package main

import (
	"godist/distlib/widgets"
	"godist/kernel"
)

// installWidgets connects package widgets to k's comms: the version comm of protocol 1
// front ends, the control comm of protocol 2 managers, the cell metadata VS Code sends
// (from which package widgets picks its dialect), and the jupyter.widget comms that widget
// models open from compiled code. The core's panels and Fit bars reach the same comms:
// package widgets installs itself as package progress' UI when linked.
func installWidgets(k *kernel.Kernel) {
	k.RegisterCommTarget(widgets.VersionTargetName, versionTarget{k})
	k.RegisterCommTarget(widgets.ControlTargetName, controlTarget{k})
	k.OnExecuteRequest(widgets.ExecuteMetadata)
	widgets.SetFrontend(widgetFrontend{k})
}

// controlTarget serves the jupyter.widget.control comm that JupyterLab 4 and Notebook 7
// open when they connect: request_states gets every widget's state (update_states).
type controlTarget struct{ k *kernel.Kernel }

// Open implements kernel.CommTarget.
func (controlTarget) Open(c *kernel.Comm, data map[string]any) { widgets.ControlOpened() }

// Message implements kernel.CommTarget.
func (t controlTarget) Message(c *kernel.Comm, data map[string]any, buffers [][]byte) {
	reply, err := widgets.ControlMessage(data)
	if err != nil {
		t.k.Logf("%v", err)
		return
	}
	c.Reply(reply)
}

// Close implements kernel.CommTarget.
func (controlTarget) Close(c *kernel.Comm, data map[string]any) {}

// Urgent implements kernel.UrgentTarget: a page reloaded while a cell runs gets its widgets
// back at once, not after the cell (the manager gives up after a few seconds).
func (controlTarget) Urgent(*kernel.Comm) bool { return true }

// versionTarget answers the front end's jupyter.widget.version comm: the kernel sends the
// JavaScript version range it needs, the front end says whether it satisfies it.
type versionTarget struct{ k *kernel.Kernel }

// Open implements kernel.CommTarget.
func (versionTarget) Open(c *kernel.Comm, data map[string]any) { c.Send(widgets.VersionHello()) }

// Message implements kernel.CommTarget.
func (t versionTarget) Message(c *kernel.Comm, data map[string]any, buffers [][]byte) {
	if err := widgets.VersionReply(data); err != nil {
		t.k.Logf("%v", err)
	}
}

// Close implements kernel.CommTarget.
func (versionTarget) Close(c *kernel.Comm, data map[string]any) {}

// widgetFrontend implements widgets.Frontend with the kernel's comms.
type widgetFrontend struct{ k *kernel.Kernel }

// Open implements widgets.Frontend.
func (f widgetFrontend) Open(data, metadata map[string]any, r widgets.Receiver) (widgets.Channel, error) {
	c, err := f.k.OpenCommWithMetadata(widgets.TargetName, data, metadata, widgetComm{r})
	if err != nil {
		return nil, err
	}
	return widgetChannel{c}, nil
}

// CellID implements widgets.Frontend.
func (f widgetFrontend) CellID() string { return f.k.CellMessageID() }

// PublishFor implements widgets.Frontend.
func (f widgetFrontend) PublishFor(parentID, msgType string, content map[string]any) error {
	return f.k.PublishFor(parentID, msgType, content)
}

// widgetChannel adapts a kernel comm to widgets.Channel.
type widgetChannel struct{ c *kernel.Comm }

func (w widgetChannel) ID() string                { return w.c.ID }
func (w widgetChannel) Send(data map[string]any)  { w.c.Send(data) }
func (w widgetChannel) Reply(data map[string]any) { w.c.Reply(data) }
func (w widgetChannel) Close()                    { w.c.Close(nil) }

// widgetComm adapts a widgets.Receiver to kernel.CommTarget.
type widgetComm struct{ r widgets.Receiver }

func (w widgetComm) Open(c *kernel.Comm, data map[string]any) {}
func (w widgetComm) Message(c *kernel.Comm, data map[string]any, buffers [][]byte) {
	w.r.Message(data, buffers)
}
func (w widgetComm) Close(c *kernel.Comm, data map[string]any) { w.r.Closed() }

// Urgent implements kernel.UrgentTarget: a widget that asks for it (the cluster panel's
// Stop button) gets the front end's messages while a cell runs.
func (w widgetComm) Urgent(*kernel.Comm) bool {
	u, ok := w.r.(interface{ Urgent() bool })
	return ok && u.Urgent()
}
