package main

import (
	"godist/distlib/widgets"
	"godist/kernel"
)

// installWidgets connects package widgets to k's comms: the version comm the widget front
// end opens, and the jupyter.widget comms that widget models open from compiled code.
func installWidgets(k *kernel.Kernel) {
	k.RegisterCommTarget(widgets.VersionTargetName, versionTarget{k})
	widgets.SetFrontend(widgetFrontend{k})
}

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
func (f widgetFrontend) Open(data map[string]any, r widgets.Receiver) (widgets.Channel, error) {
	c, err := f.k.OpenComm(widgets.TargetName, data, widgetComm{r})
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

func (w widgetChannel) ID() string               { return w.c.ID }
func (w widgetChannel) Send(data map[string]any) { w.c.Send(data) }
func (w widgetChannel) Close()                   { w.c.Close(nil) }

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
