// Package widgets shows Jupyter widgets (progress bars, HTML, labels, buttons, output
// areas, boxes) from Go, speaking the ipywidgets comm protocol over the kernel's comms.
//
// It speaks both widget protocols, in the dialect the front end shows (see Dialect):
//
//   - Protocol 1, Debian's Notebook 6 extension (ipywidgets 6, jupyter-js-widgets 2.1.4).
//     The front end opens a "jupyter.widget.version" comm, the kernel sends {"version":
//     "~2.1.4"} and the front end answers {"validated": true}. A model's comm_open data is
//     its whole state; the kernel sends {"method": "display"} to show a view; the front end
//     sends {"method": "backbone", "sync_data": {...}} when the user changes a value.
//   - Protocol 2 (ipywidgets 7 and 8: JupyterLab 4, Notebook 7, VS Code). comm_open carries
//     {"version": "2.x"} in its metadata and {"state": {...}, "buffer_paths": []} as data;
//     models live in @jupyter-widgets/controls, base and output at the release's versions;
//     views are display_data with version_major 2; both sides send {"method": "update",
//     "state": {...}, "buffer_paths": [...]}, and ipywidgets 8 front ends get an
//     "echo_update" for each change they send. Managers that connect open
//     "jupyter.widget.control" and ask {"method": "request_states"}, answered with every
//     model's state ("update_states"), which restores a reloaded page's widgets.
//
// In both, the front end sends {"method": "request_state"} and {"method": "custom",
// "content": {...}} (a button's {"event": "click"}).
//
// TensorFlow users translating
//
//	bar = ipywidgets.IntProgress(min=0, max=10); display(bar); bar.value = 3
//
// write
//
//	bar := widgets.NewIntProgress(0, 10); bar.Display(); bar.SetValue(3)
//
// Outside the kernel (a compiled program, a test, a console without the widget front end)
// widgets keep their values and Display prints their plain-text form.
package widgets

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"godist/distlib/display"
)

// Protocol constants of ipywidgets 6.0.0, the version Debian's Notebook 6 front end
// (jupyter-js-widgets 2.1.4) speaks.
const (
	// FrontendVersion is the semver range of the JavaScript widgets the models need; the
	// kernel sends it on the jupyter.widget.version comm.
	FrontendVersion = "~2.1.4"
	// ModelModule is the JavaScript module of the core widget models and views.
	ModelModule = "jupyter-js-widgets"
	// TargetName is the comm target of widget models.
	TargetName = "jupyter.widget"
	// VersionTargetName is the comm target the front end opens to check versions.
	VersionTargetName = "jupyter.widget.version"
	// ViewMIME is the MIME type of a widget view in display_data.
	ViewMIME = "application/vnd.jupyter.widget-view+json"
)

// Channel is a comm the kernel opened for one widget model.
type Channel interface {
	// ID returns the comm id, which is the model id.
	ID() string
	// Send sends a comm_msg with data.
	Send(data map[string]any)
	// Close sends comm_close.
	Close()
}

// Receiver gets what the front end sends on a widget's comm.
type Receiver interface {
	// Message is called for each comm_msg, with its data and binary buffers.
	Message(data map[string]any, buffers [][]byte)
	// Closed is called when the front end closes the comm.
	Closed()
}

// Frontend is the kernel's side of the widget comms; the godist kernel installs one with
// SetFrontend when it starts.
type Frontend interface {
	// Open opens a comm with target TargetName, data as its comm_open data and metadata
	// (nil for protocol 1) as the message's metadata; r receives the front end's messages.
	Open(data, metadata map[string]any, r Receiver) (Channel, error)
	// CellID returns the msg_id of the running cell's request, "" between cells.
	CellID() string
	// PublishFor publishes an iopub message (stream, display_data, clear_output) whose
	// parent msg_id is parentID.
	PublishFor(parentID, msgType string, content map[string]any) error
}

var (
	feMu      sync.RWMutex
	fe        Frontend
	feVersion atomic.Value // string: the front end's version, as it said
	localSeq  atomic.Int64
)

// SetFrontend installs f as the kernel side of widget comms and returns the previous one;
// nil means none (widgets then live only in the program).
func SetFrontend(f Frontend) Frontend {
	feMu.Lock()
	defer feMu.Unlock()
	old := fe
	fe = f
	if f == nil {
		resetDialect()
	}
	return old
}

func frontend() Frontend {
	feMu.RLock()
	defer feMu.RUnlock()
	return fe
}

// VersionHello is the data the kernel sends when the front end opens the
// jupyter.widget.version comm.
func VersionHello() map[string]any { return map[string]any{"version": FrontendVersion} }

// VersionReply records the front end's answer on the jupyter.widget.version comm,
// {"validated": bool, "frontend_version": "2.1.4"}. It returns an error naming the data
// when it has no boolean "validated".
func VersionReply(data map[string]any) error {
	v, ok := data["validated"].(bool)
	if !ok {
		return fmt.Errorf("widgets: version reply %v has no boolean \"validated\"", data)
	}
	s, _ := data["frontend_version"].(string)
	feVersion.Store(s)
	why := "the front end answered " + VersionTargetName + " validated"
	if !v {
		why = "the front end answered " + VersionTargetName + " not validated (version " + s + "): widgets are not drawn"
	}
	setState(Ipywidgets6, v, why)
	return nil
}

// Ready reports whether a widget front end is connected and showed itself: the kernel runs
// and the front end answered the jupyter.widget.version comm with validated true (Notebook
// 6), opened jupyter.widget.control (JupyterLab 4, Notebook 7) or sent VS Code's cell ids.
// This is the rule for choosing widgets over text (Keras' Fit does): the console, nbconvert
// and nbclient show none of these, so they get text.
func Ready() bool { return frontend() != nil && fest.Load().ready }

// FrontendVersionSeen returns the widget JavaScript version the front end reported, "" if
// none did.
func FrontendVersionSeen() string {
	s, _ := feVersion.Load().(string)
	return s
}

// Child is a widget that a box can hold: every widget in this package is one.
type Child interface {
	// ModelID returns the widget's model id.
	ModelID() string
}

// Widget is the model every widget type embeds: its state, synchronised with the front
// end, and its comm.
type Widget struct {
	mu       sync.Mutex
	d        Dialect // the dialect its comm was opened in
	id       string
	kind     string // the Go type's name, for the plain-text form
	state    map[string]any
	ch       Channel
	closed   bool
	parts    []*Widget // layout and style models, closed with the widget
	onCustom func(content map[string]any)
	urgent   bool // the front end's messages are handled as they come, even during a cell
}

// ErrClosed is returned by calls that need an open widget after Close.
var ErrClosed = errors.New("widgets: widget is closed")

// Where a model and its view live: the controls module (most widgets), the base module
// (Layout), a style (model in controls, StyleView in base), the output module.
const (
	inControls = iota
	inBase
	inStyle
	inOutput
)

// baseState returns the state keys every widget model has, in dialect d.
func baseState(d Dialect, where int, model, view string) map[string]any {
	mm, mv, vm, vv := d.Controls, d.ControlsVersion, d.Controls, d.ControlsVersion
	switch where {
	case inBase:
		mm, mv, vm, vv = d.Base, d.BaseVersion, d.Base, d.BaseVersion
	case inStyle:
		vm, vv = d.Base, d.BaseVersion
	case inOutput:
		mm, mv, vm, vv = d.Output, d.OutputVersion, d.Output, d.OutputVersion
	}
	s := map[string]any{
		"_model_module": mm, "_model_module_version": mv, "_model_name": model,
		"_view_module": vm, "_view_module_version": vv, "_view_name": view,
	}
	if !d.V2() {
		s["msg_throttle"] = 1
	}
	return s
}

// layoutState is the state of a LayoutModel with every CSS property unset.
func layoutState(d Dialect) map[string]any {
	s := baseState(d, inBase, "LayoutModel", "LayoutView")
	for _, k := range []string{"align_content", "align_items", "align_self", "border", "bottom",
		"display", "flex", "flex_flow", "height", "justify_content", "left", "margin", "max_height",
		"max_width", "min_height", "min_width", "order", "overflow", "overflow_x", "overflow_y",
		"padding", "right", "top", "visibility", "width"} {
		s[k] = nil
	}
	return s
}

// newWidget creates a DOM widget model with its layout (and a style model of styleModel,
// with styleState, unless styleModel is ""), and opens their comms when a front end is
// installed.
func newWidget(kind, model, view string, state map[string]any, styleModel string, styleState map[string]any) *Widget {
	return newWidgetIn(inControls, kind, model, view, state, styleModel, styleState)
}

// newWidgetIn is newWidget for a model in module where (inControls or inOutput).
func newWidgetIn(where int, kind, model, view string, state map[string]any, styleModel string, styleState map[string]any) *Widget {
	d := CurrentDialect()
	if d.V2() && model == "ProgressModel" {
		// ipywidgets 7 and 8 name the progress models by their value: IntProgressModel and
		// FloatProgressModel (ipywidgets 6 has the one ProgressModel).
		model = kind + "Model"
	}
	w := &Widget{kind: kind, d: d, state: baseState(d, where, model, view)}
	w.state["_dom_classes"] = []any{}
	for k, v := range state {
		w.state[k] = v
	}
	layout := openModel(d, "Layout", layoutState(d))
	w.parts = append(w.parts, layout)
	w.state["layout"] = "IPY_MODEL_" + layout.id
	if styleModel != "" {
		s := baseState(d, inStyle, styleModel, "StyleView")
		for k, v := range styleState {
			s[k] = v
		}
		style := openModel(d, "Style", s)
		w.parts = append(w.parts, style)
		w.state["style"] = "IPY_MODEL_" + style.id
	}
	w.open()
	return w
}

func openModel(d Dialect, kind string, state map[string]any) *Widget {
	w := &Widget{kind: kind, d: d, state: state}
	w.open()
	return w
}

// open opens the model's comm with its state, or gives it a local id without a front end.
func (w *Widget) open() {
	if f := frontend(); f != nil {
		data, md := copyState(w.state), map[string]any(nil)
		if w.d.V2() {
			data = map[string]any{"state": data, "buffer_paths": []any{}}
			md = map[string]any{"version": w.d.Protocol}
		}
		ch, err := f.Open(data, md, receiver{w})
		if err == nil {
			w.ch, w.id = ch, ch.ID()
			register(w)
			return
		}
		fmt.Fprintf(os.Stderr, "widgets: %s not shown: %v\n", w.kind, err)
	}
	w.id = fmt.Sprintf("local-%d", localSeq.Add(1))
}

func copyState(s map[string]any) map[string]any {
	c := make(map[string]any, len(s))
	for k, v := range s {
		c[k] = v
	}
	return c
}

// ModelID returns the widget's model id (its comm id; "local-N" without a front end).
func (w *Widget) ModelID() string { return w.id }

// Get returns the value of a state key (nil if there is none), as the front end sees it.
func (w *Widget) Get(key string) any {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.state[key]
}

// Set changes a state key and sends it to the front end. The key must be state the
// model already has ("value", "description", "max", ...): an unknown key is an error
// naming it, since the front end would ignore it. Set does not check the value's type;
// the typed setters (SetValue, ...) do.
func (w *Widget) Set(key string, value any) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.state[key]; !ok || strings.HasPrefix(key, "_") || key == "layout" || key == "style" {
		return fmt.Errorf("widgets: %s has no settable state %q (it has %s)", w.kind, key, strings.Join(w.keysLocked(), ", "))
	}
	w.setLocked(map[string]any{key: value})
	return nil
}

func (w *Widget) keysLocked() []string {
	var ks []string
	for k := range w.state {
		if !strings.HasPrefix(k, "_") && k != "msg_throttle" && k != "layout" && k != "style" {
			ks = append(ks, k)
		}
	}
	sort.Strings(ks)
	return ks
}

// setLocked stores kv and sends the keys whose value changed.
func (w *Widget) setLocked(kv map[string]any) {
	changed := map[string]any{}
	for k, v := range kv {
		if old, ok := w.state[k]; ok && sameJSON(old, v) {
			continue
		}
		w.state[k] = v
		changed[k] = v
	}
	if len(changed) > 0 && w.ch != nil && !w.closed {
		w.ch.Send(w.d.update("update", changed))
	}
}

func (w *Widget) set(key string, value any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.setLocked(map[string]any{key: value})
}

func sameJSON(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}

// UpdateMessage is the protocol 1 comm_msg data that sends changed state to the front end.
func UpdateMessage(state map[string]any) map[string]any {
	return Ipywidgets6.update("update", state)
}

// update is the comm_msg data of an update (or protocol 2's echo_update) in dialect d.
func (d Dialect) update(method string, state map[string]any) map[string]any {
	if d.V2() {
		return map[string]any{"method": method, "state": state, "buffer_paths": []any{}}
	}
	return map[string]any{"method": method, "state": state, "buffers": []any{}}
}

// DisplayMessage is the comm_msg data that asks the Notebook 6 front end to show a view
// of the model in the cell whose request is the message's parent.
func DisplayMessage() map[string]any { return map[string]any{"method": "display"} }

// ViewBundle is the protocol 1 display_data bundle of a view of model id, with plain as
// the text/plain fallback unless plain is "".
func ViewBundle(id, plain string) display.Bundle { return Ipywidgets6.viewBundle(id, plain) }

// viewBundle is ViewBundle in dialect d: protocol 2's view names its major and minor version.
func (d Dialect) viewBundle(id, plain string) display.Bundle {
	view := map[string]any{"model_id": id}
	if d.V2() {
		view["version_major"], view["version_minor"] = 2, 0
	}
	b := display.Bundle{ViewMIME: view}
	if plain != "" {
		b["text/plain"] = plain
	}
	return b
}

// Display shows the widget in the running cell. Where the widget front end validated
// (Ready), the front end draws the view; in protocol 1 the display_data then carries only
// the view MIME type, as ipywidgets 6 sends it, since Notebook 6 would show a text/plain
// part beside the widget. Protocol 2 front ends pick the widget over the text/plain
// fallback, which is always sent (as ipywidgets 7 and 8 do) for those that draw none;
// outside the kernel the plain text is printed. It returns ErrClosed after Close.
func (w *Widget) Display() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return fmt.Errorf("widgets: Display %s %s: %w", w.kind, w.id, ErrClosed)
	}
	if w.ch != nil && !w.d.V2() {
		w.ch.Send(DisplayMessage())
	}
	plain, d := w.plainLocked(), w.d
	w.mu.Unlock()
	if Ready() && !d.V2() {
		plain = ""
	}
	display.Show(d.viewBundle(w.id, plain))
	return nil
}

// String returns the widget's plain-text form, such as "IntProgress(value=3, min=0, max=10)".
func (w *Widget) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.plainLocked()
}

func (w *Widget) plainLocked() string {
	var parts []string
	for _, k := range []string{"value", "min", "max", "description", "children"} {
		v, ok := w.state[k]
		if !ok {
			continue
		}
		switch x := v.(type) {
		case string:
			if x == "" {
				continue
			}
			parts = append(parts, fmt.Sprintf("%s=%q", k, x))
		case []any:
			parts = append(parts, fmt.Sprintf("%s=%d widgets", k, len(x)))
		default:
			parts = append(parts, fmt.Sprintf("%s=%v", k, x))
		}
	}
	return w.kind + "(" + strings.Join(parts, ", ") + ")"
}

// Close closes the widget's comm (and its layout's and style's): the front end removes
// its views. Later changes are kept but not sent. Closing twice is harmless.
func (w *Widget) Close() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.closed = true
	ch := w.ch
	parts := w.parts
	w.mu.Unlock()
	unregister(w)
	if ch != nil {
		ch.Close()
	}
	for _, p := range parts {
		p.Close()
	}
}

// Closed reports whether the widget was closed, by Close or by the front end.
func (w *Widget) Closed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.closed
}

// receiver adapts a widget to Receiver.
type receiver struct{ w *Widget }

// Message implements Receiver: the front end's state changes, state requests and custom
// messages.
func (r receiver) Message(data map[string]any, buffers [][]byte) {
	w := r.w
	method, _ := data["method"].(string)
	switch method {
	case "backbone", "update": // protocol 1 sends backbone/sync_data, protocol 2 update/state
		key, keysKey := "sync_data", "buffer_keys"
		if method == "update" {
			key, keysKey = "state", "buffer_paths"
		}
		sync, _ := data[key].(map[string]any)
		if sync == nil {
			return
		}
		if keys, ok := data[keysKey].([]any); ok {
			for i, k := range keys {
				if ks, ok := k.(string); ok && i < len(buffers) {
					sync[ks] = buffers[i]
				}
			}
		}
		w.mu.Lock()
		echo := map[string]any{}
		for k, v := range sync {
			if _, ok := w.state[k]; ok && !strings.HasPrefix(k, "_") {
				w.state[k] = v // from the front end: not sent back as an update
				if _, bin := v.([]byte); !bin {
					echo[k] = v
				}
			}
		}
		// ipywidgets 8 front ends wait for the echo of each change they sent, in reply to it.
		if method == "update" && w.d.Protocol == Ipywidgets8.Protocol && w.ch != nil && !w.closed && len(echo) > 0 {
			if r, ok := w.ch.(interface{ Reply(map[string]any) }); ok {
				r.Reply(w.d.update("echo_update", echo))
			}
		}
		w.mu.Unlock()
	case "request_state":
		w.mu.Lock()
		if w.ch != nil && !w.closed {
			w.ch.Send(w.d.update("update", copyState(w.state)))
		}
		w.mu.Unlock()
	case "custom":
		content, _ := data["content"].(map[string]any)
		w.mu.Lock()
		f := w.onCustom
		w.mu.Unlock()
		if f != nil && content != nil {
			f(content)
		}
	default:
		fmt.Fprintf(os.Stderr, "widgets: %s %s: front end sent unknown method %q (want backbone, update, request_state or custom)\n", w.kind, w.id, method)
	}
}

// Urgent reports whether the kernel should hand the front end's messages to this widget
// as they arrive, even while a cell runs (the cluster panel's Stop button), instead of
// after the running cell.
func (r receiver) Urgent() bool {
	r.w.mu.Lock()
	defer r.w.mu.Unlock()
	return r.w.urgent
}

// Closed implements Receiver.
func (r receiver) Closed() {
	r.w.mu.Lock()
	r.w.closed = true
	r.w.mu.Unlock()
	unregister(r.w)
}
