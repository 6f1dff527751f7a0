package main

import "testing"

// TestKernelWidgets runs the widget protocol tests through jupyter_client, speaking as
// Debian's Notebook 6 widget front end: the version comm, model state, updates (also after
// the cell), display, a button click reaching its Go callback, Output capture, close, and
// Keras' Fit drawing its bar as widgets only when the front end validated.
func TestKernelWidgets(t *testing.T) {
	kernelRunScript(t, "testdata/widgets.py")
}

// TestKernelPanel runs the cluster panel's protocol tests through jupyter_client with a
// validated widget front end: a %%distributed --workers 2 cell's panel shows both workers
// running then exited, cluster.Launch in a cell shows the same panel, and its Stop button, clicked while a long Fit runs, stops the job
// promptly and the panel says stopped.
func TestKernelPanel(t *testing.T) {
	kernelRunScript(t, "testdata/panel.py")
}

// TestKernelWidgetsProtocol2 runs the widget protocol 2 tests through jupyter_client,
// speaking as JupyterLab 4 (the control comm, ipywidgets 8 models, request_states,
// echo_update), as VS Code (its cell ids, ipywidgets 7 models) and as a front end that
// shows nothing (ipywidgets 7 models, Fit as text).
func TestKernelWidgetsProtocol2(t *testing.T) {
	kernelRunScript(t, "testdata/widgets2.py")
}
