package widgets

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
)

// Dialect is what one kind of widget front end speaks: the widget protocol version and the
// JavaScript modules (with versions) its models live in.
type Dialect struct {
	// Name is the ipywidgets release whose front end speaks it, such as "ipywidgets 8".
	Name string
	// Protocol is the widget protocol version: "1" (ipywidgets 6), "2.0.0" (ipywidgets 7),
	// "2.1.0" (ipywidgets 8). Protocol 2 puts it in every comm_open's metadata.
	Protocol string
	// Controls, Base and Output are the modules of the controls (progress bars, buttons,
	// boxes; style models), of the layout model and style views, and of the Output widget.
	Controls, ControlsVersion string
	Base, BaseVersion         string
	Output, OutputVersion     string
}

// V2 reports whether d is widget protocol 2 (ipywidgets 7 and 8).
func (d Dialect) V2() bool { return strings.HasPrefix(d.Protocol, "2") }

// The dialects the kernel serves. See SetDialect for how one is chosen.
var (
	// Ipywidgets6 is Debian's Notebook 6 extension (jupyter-js-widgets 2.1.4).
	Ipywidgets6 = Dialect{Name: "ipywidgets 6", Protocol: "1",
		Controls: ModelModule, ControlsVersion: FrontendVersion,
		Base: ModelModule, BaseVersion: FrontendVersion,
		Output: ModelModule, OutputVersion: FrontendVersion}
	// Ipywidgets7 is VS Code's renderer for non-Python kernels and the ipywidgets 7
	// managers (html-manager 0.20, widgetsnbextension 3).
	Ipywidgets7 = Dialect{Name: "ipywidgets 7", Protocol: "2.0.0",
		Controls: "@jupyter-widgets/controls", ControlsVersion: "1.5.0",
		Base: "@jupyter-widgets/base", BaseVersion: "1.2.0",
		Output: "@jupyter-widgets/output", OutputVersion: "1.0.0"}
	// Ipywidgets8 is JupyterLab 4 and Notebook 7 (jupyterlab_widgets 3, jupyterlab-manager 5).
	Ipywidgets8 = Dialect{Name: "ipywidgets 8", Protocol: "2.1.0",
		Controls: "@jupyter-widgets/controls", ControlsVersion: "2.0.0",
		Base: "@jupyter-widgets/base", BaseVersion: "2.0.0",
		Output: "@jupyter-widgets/output", OutputVersion: "1.0.0"}
)

// ControlTargetName is the comm target that ipywidgets 7.7+ and 8 managers open when they
// connect to a kernel, to fetch every widget's state at once (request_states).
const ControlTargetName = "jupyter.widget.control"

// VSCodeCellPrefix begins the cellId that VS Code puts in every execute_request's metadata.
const VSCodeCellPrefix = "vscode-notebook-cell:"

// feState is what the front end has shown of itself.
type feState struct {
	d     Dialect
	ready bool   // a widget manager is there: Fit and the panels draw widgets
	why   string // what showed it, for FrontendSeen
}

// defaultState is the choice where nothing tells: protocol 2 with ipywidgets 7's models,
// which VS Code and every ipywidgets 7 manager draw; widgets are not assumed to be drawn
// (console, nbconvert), so Fit and the panels print text.
var defaultState = feState{d: Ipywidgets7, why: "nothing yet: protocol 2 with ipywidgets 7 models"}

var fest atomic.Pointer[feState]

func init() { resetDialect() }

func resetDialect() {
	s := defaultState
	fest.Store(&s)
}

func setState(d Dialect, ready bool, why string) {
	fest.Store(&feState{d: d, ready: ready, why: why})
}

// CurrentDialect returns the dialect that widgets made now are opened in.
func CurrentDialect() Dialect { return fest.Load().d }

// FrontendSeen says which dialect the kernel speaks and what the front end showed to decide it.
func FrontendSeen() string {
	s := fest.Load()
	return fmt.Sprintf("%s (widget protocol %s): %s", s.d.Name, s.d.Protocol, s.why)
}

// ControlOpened records that the front end opened the jupyter.widget.control comm: a
// JupyterLab 4 or Notebook 7 widget manager (jupyterlab-manager 5), so widgets are opened
// with ipywidgets 8's models from now on.
func ControlOpened() {
	setState(Ipywidgets8, true, "the front end opened "+ControlTargetName+" (JupyterLab 4 / Notebook 7)")
}

// ExecuteMetadata looks at an execute_request's metadata: VS Code's cellId makes the kernel
// speak what VS Code's renderer draws for a non-Python kernel (ipywidgets 7's models).
func ExecuteMetadata(md map[string]any) {
	id, _ := md["cellId"].(string)
	if !strings.HasPrefix(id, VSCodeCellPrefix) {
		return
	}
	if s := fest.Load(); s.ready && s.d == Ipywidgets7 {
		return
	}
	setState(Ipywidgets7, true, "execute_request metadata cellId "+VSCodeCellPrefix+"... (VS Code)")
}

// registry holds the open widget models, for the control comm's request_states.
var (
	regMu    sync.Mutex
	registry = map[string]*Widget{}
)

func register(w *Widget) {
	regMu.Lock()
	registry[w.id] = w
	regMu.Unlock()
}

func unregister(w *Widget) {
	regMu.Lock()
	delete(registry, w.id)
	regMu.Unlock()
}

// ControlMessage answers a message on the jupyter.widget.control comm: {"method":
// "request_states"} gets {"method": "update_states", "states": {id: {model_name,
// model_module, model_module_version, state}}, "buffer_paths": {}} with every open
// protocol 2 model, so that a reloaded page gets its widgets back at once. Another method
// is an error naming it.
func ControlMessage(data map[string]any) (map[string]any, error) {
	method, _ := data["method"].(string)
	if method != "request_states" {
		return nil, fmt.Errorf("widgets: %s comm: unknown method %q (want request_states)", ControlTargetName, method)
	}
	regMu.Lock()
	ws := make([]*Widget, 0, len(registry))
	for _, w := range registry {
		ws = append(ws, w)
	}
	regMu.Unlock()
	sort.Slice(ws, func(i, j int) bool { return ws[i].id < ws[j].id })
	states := map[string]any{}
	for _, w := range ws {
		w.mu.Lock()
		if !w.closed && w.ch != nil && w.d.V2() {
			states[w.id] = map[string]any{
				"model_name": w.state["_model_name"], "model_module": w.state["_model_module"],
				"model_module_version": w.state["_model_module_version"], "state": copyState(w.state),
			}
		}
		w.mu.Unlock()
	}
	return map[string]any{"method": "update_states", "states": states, "buffer_paths": map[string]any{}}, nil
}
