package widgets

import (
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"sync"

	"godist/distlib/display"
)

var barStyles = []string{"", "success", "info", "warning", "danger"}
var buttonStyles = []string{"", "primary", "success", "info", "warning", "danger"}

func checkStyle(what, s string, allowed []string) error {
	for _, a := range allowed {
		if strings.EqualFold(s, a) {
			return nil
		}
	}
	return fmt.Errorf("widgets: %s %q is not one of %q", what, s, allowed)
}

// IntProgress is a progress bar with an integer value (ipywidgets.IntProgress).
type IntProgress struct{ *Widget }

// NewIntProgress returns a bar from min to max with value min; it panics when min > max
// (the kernel reports the panic as the cell's error).
func NewIntProgress(min, max int) *IntProgress {
	if min > max {
		panic(fmt.Errorf("widgets: NewIntProgress(%d, %d): min is greater than max: pass min <= max", min, max))
	}
	return &IntProgress{newWidget("IntProgress", "ProgressModel", "ProgressView", map[string]any{
		"value": min, "min": min, "max": max, "step": 1, "bar_style": "", "description": "",
		"disabled": false, "orientation": "horizontal",
	}, "ProgressStyleModel", map[string]any{"bar_color": nil, "description_width": ""})}
}

func (p *IntProgress) ints() (v, lo, hi int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return toInt(p.state["value"]), toInt(p.state["min"]), toInt(p.state["max"])
}

// Value returns the bar's value.
func (p *IntProgress) Value() int { v, _, _ := p.ints(); return v }

// Min returns the bar's minimum.
func (p *IntProgress) Min() int { _, lo, _ := p.ints(); return lo }

// Max returns the bar's maximum.
func (p *IntProgress) Max() int { _, _, hi := p.ints(); return hi }

// SetValue sets the value, clamped to [min, max] as ipywidgets does, and sends it.
func (p *IntProgress) SetValue(v int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	lo, hi := toInt(p.state["min"]), toInt(p.state["max"])
	p.setLocked(map[string]any{"value": clampInt(v, lo, hi)})
}

// SetMax sets the maximum; a max below min is an error naming both. The value is clamped.
func (p *IntProgress) SetMax(max int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	lo := toInt(p.state["min"])
	if max < lo {
		return fmt.Errorf("widgets: IntProgress.SetMax(%d): below min %d", max, lo)
	}
	p.setLocked(map[string]any{"max": max, "value": clampInt(toInt(p.state["value"]), lo, max)})
	return nil
}

// SetDescription sets the label shown beside the bar.
func (p *IntProgress) SetDescription(s string) { p.set("description", s) }

// SetDescriptionWidth sets the width of the label's column, a CSS width such as "120px",
// or "initial" to fit the label (ipywidgets' style.description_width); "" is the front
// end's default, which cuts a long label.
func (p *IntProgress) SetDescriptionWidth(width string) {
	setStyle(p.Widget, "description_width", width)
}

// SetBarStyle sets the bar's colour: "", "success", "info", "warning" or "danger".
func (p *IntProgress) SetBarStyle(style string) error {
	if err := checkStyle("IntProgress bar style", style, barStyles); err != nil {
		return err
	}
	p.set("bar_style", strings.ToLower(style))
	return nil
}

// setStyle sets a key of w's style model, when it has one.
func setStyle(w *Widget, key string, value any) {
	w.mu.Lock()
	var style *Widget
	if ref, _ := w.state["style"].(string); ref != "" {
		for _, part := range w.parts {
			if "IPY_MODEL_"+part.id == ref {
				style = part
			}
		}
	}
	w.mu.Unlock()
	if style != nil {
		style.set(key, value)
	}
}

// FloatProgress is a progress bar with a float value (ipywidgets.FloatProgress).
type FloatProgress struct{ *Widget }

// NewFloatProgress returns a bar from min to max with value min; it panics when min > max.
func NewFloatProgress(min, max float64) *FloatProgress {
	if min > max {
		panic(fmt.Errorf("widgets: NewFloatProgress(%g, %g): min is greater than max: pass min <= max", min, max))
	}
	return &FloatProgress{newWidget("FloatProgress", "ProgressModel", "ProgressView", map[string]any{
		"value": min, "min": min, "max": max, "step": 0.1, "bar_style": "", "description": "",
		"disabled": false, "orientation": "horizontal",
	}, "ProgressStyleModel", map[string]any{"bar_color": nil, "description_width": ""})}
}

func (p *FloatProgress) floats() (v, lo, hi float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return toFloat(p.state["value"]), toFloat(p.state["min"]), toFloat(p.state["max"])
}

// Value returns the bar's value.
func (p *FloatProgress) Value() float64 { v, _, _ := p.floats(); return v }

// Max returns the bar's maximum.
func (p *FloatProgress) Max() float64 { _, _, hi := p.floats(); return hi }

// SetValue sets the value, clamped to [min, max] as ipywidgets does, and sends it.
func (p *FloatProgress) SetValue(v float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	lo, hi := toFloat(p.state["min"]), toFloat(p.state["max"])
	p.setLocked(map[string]any{"value": clampFloat(v, lo, hi)})
}

// SetMax sets the maximum; a max below min is an error naming both. The value is clamped.
func (p *FloatProgress) SetMax(max float64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	lo := toFloat(p.state["min"])
	if max < lo {
		return fmt.Errorf("widgets: FloatProgress.SetMax(%g): below min %g", max, lo)
	}
	p.setLocked(map[string]any{"max": max, "value": clampFloat(toFloat(p.state["value"]), lo, max)})
	return nil
}

// SetDescription sets the label shown beside the bar.
func (p *FloatProgress) SetDescription(s string) { p.set("description", s) }

// SetBarStyle sets the bar's colour: "", "success", "info", "warning" or "danger".
func (p *FloatProgress) SetBarStyle(style string) error {
	if err := checkStyle("FloatProgress bar style", style, barStyles); err != nil {
		return err
	}
	p.set("bar_style", strings.ToLower(style))
	return nil
}

// HTML shows an HTML fragment (ipywidgets.HTML).
type HTML struct{ *Widget }

// NewHTML returns an HTML widget showing value.
func NewHTML(value string) *HTML {
	s, ss := textStyle()
	return &HTML{newWidget("HTML", "HTMLModel", "HTMLView", map[string]any{
		"value": value, "description": "", "disabled": false, "placeholder": "\u200b",
	}, s, ss)}
}

// textStyle is the style model of HTML and Label: protocol 2 front ends expect one
// (DescriptionStyleModel, in ipywidgets 7's and 8's controls); protocol 1's has none.
func textStyle() (string, map[string]any) {
	if CurrentDialect().V2() {
		return "DescriptionStyleModel", map[string]any{"description_width": ""}
	}
	return "", nil
}

// Value returns the HTML shown.
func (h *HTML) Value() string { s, _ := h.Get("value").(string); return s }

// SetValue replaces the HTML shown.
func (h *HTML) SetValue(html string) { h.set("value", html) }

// Label shows a line of text (ipywidgets.Label).
type Label struct{ *Widget }

// NewLabel returns a label showing value.
func NewLabel(value string) *Label {
	s, ss := textStyle()
	return &Label{newWidget("Label", "LabelModel", "LabelView", map[string]any{
		"value": value, "description": "", "disabled": false, "placeholder": "\u200b",
	}, s, ss)}
}

// Value returns the label's text.
func (l *Label) Value() string { s, _ := l.Get("value").(string); return s }

// SetValue replaces the label's text.
func (l *Label) SetValue(s string) { l.set("value", s) }

// Button is a push button whose clicks run Go callbacks (ipywidgets.Button).
type Button struct {
	*Widget
	cbMu   sync.Mutex
	clicks []func(*Button)
}

// NewButton returns a button labelled description.
func NewButton(description string) *Button {
	b := &Button{Widget: newWidget("Button", "ButtonModel", "ButtonView", map[string]any{
		"description": description, "button_style": "", "disabled": false, "icon": "", "tooltip": "",
	}, "ButtonStyleModel", map[string]any{"button_color": nil, "font_weight": ""})}
	b.mu.Lock()
	b.onCustom = func(content map[string]any) {
		if content["event"] == "click" {
			b.Click()
		}
	}
	b.mu.Unlock()
	return b
}

// OnClick registers f to run on each click (in the kernel, between cells, as Python's
// on_click callbacks do). A nil f is an error.
func (b *Button) OnClick(f func(b *Button)) error {
	if f == nil {
		return fmt.Errorf("widgets: Button.OnClick: the callback is nil: pass a func(*widgets.Button)")
	}
	b.cbMu.Lock()
	b.clicks = append(b.clicks, f)
	b.cbMu.Unlock()
	return nil
}

// Click runs the click callbacks, as a click in the front end does. A callback's panic is
// printed to standard error and does not stop the others.
func (b *Button) Click() {
	b.cbMu.Lock()
	fs := append([]func(*Button){}, b.clicks...)
	b.cbMu.Unlock()
	for _, f := range fs {
		func() {
			defer func() {
				if r := recover(); r != nil {
					fmt.Fprintf(os.Stderr, "widgets: Button %q click callback panicked: %v\n%s", b.Description(), r, debug.Stack())
				}
			}()
			f(b)
		}()
	}
}

// Description returns the button's label.
func (b *Button) Description() string { s, _ := b.Get("description").(string); return s }

// SetDescription sets the button's label.
func (b *Button) SetDescription(s string) { b.set("description", s) }

// SetDisabled greys the button out (no clicks) or enables it.
func (b *Button) SetDisabled(disabled bool) { b.set("disabled", disabled) }

// SetButtonStyle sets the button's colour: "", "primary", "success", "info", "warning" or
// "danger".
func (b *Button) SetButtonStyle(style string) error {
	if err := checkStyle("Button style", style, buttonStyles); err != nil {
		return err
	}
	b.set("button_style", strings.ToLower(style))
	return nil
}

// Box is a container of widgets laid out in a row (HBox) or a column (VBox).
type Box struct {
	*Widget
	cmu      sync.Mutex
	children []Child
}

// NewHBox returns a box showing children side by side (ipywidgets.HBox).
func NewHBox(children ...Child) *Box { return newBox("HBox", children) }

// NewVBox returns a box showing children one above the other (ipywidgets.VBox).
func NewVBox(children ...Child) *Box { return newBox("VBox", children) }

func newBox(kind string, children []Child) *Box {
	refs, err := childRefs(kind, children)
	if err != nil {
		panic(err)
	}
	return &Box{Widget: newWidget(kind, kind+"Model", kind+"View", map[string]any{
		"children": refs, "box_style": "",
	}, "", nil), children: append([]Child(nil), children...)}
}

func childRefs(kind string, children []Child) ([]any, error) {
	refs := make([]any, 0, len(children))
	for i, c := range children {
		if c == nil {
			return nil, fmt.Errorf("widgets: %s child %d is nil: pass widgets made by a widgets.New function", kind, i)
		}
		refs = append(refs, "IPY_MODEL_"+c.ModelID())
	}
	return refs, nil
}

// Children returns the box's children.
func (b *Box) Children() []Child {
	b.cmu.Lock()
	defer b.cmu.Unlock()
	return append([]Child(nil), b.children...)
}

// SetChildren replaces the box's children; a nil child is an error naming its index.
func (b *Box) SetChildren(children ...Child) error {
	refs, err := childRefs(b.kind, children)
	if err != nil {
		return err
	}
	b.cmu.Lock()
	b.children = append([]Child(nil), children...)
	b.cmu.Unlock()
	b.set("children", refs)
	return nil
}

// Output is an area that shows output (ipywidgets.Output): what a cell prints inside
// Capture, and what Go code appends to it at any time, even from a button's callback
// after the cell ended.
type Output struct{ *Widget }

// NewOutput returns an empty output area.
func NewOutput() *Output {
	state := map[string]any{"msg_id": ""}
	if CurrentDialect().V2() {
		state["outputs"] = []any{}
	}
	return &Output{newWidgetIn(inOutput, "Output", "OutputModel", "OutputView", state, "", nil)}
}

// Capture runs f with the running cell's output (what it prints, its displays) shown in
// the output area instead of below the cell, as Python's `with out:` does. Outside the
// kernel f runs with its output where it would go anyway. It returns an error when the
// output is closed or no cell is running (a callback after the cell: use AppendStdout).
func (o *Output) Capture(f func()) error {
	fr := frontend()
	if o.Closed() {
		return fmt.Errorf("widgets: Output.Capture: %w", ErrClosed)
	}
	if fr == nil || o.ch == nil {
		f()
		return nil
	}
	id := fr.CellID()
	if id == "" {
		return fmt.Errorf("widgets: Output.Capture: no cell is running: call it from a cell, or use AppendStdout from callbacks")
	}
	display.Sync()
	o.set("msg_id", id)
	defer func() {
		display.Sync() // what f printed reaches the front end before the routing ends
		o.set("msg_id", "")
	}()
	f()
	return nil
}

// AppendStdout adds text to the output area as standard output.
func (o *Output) AppendStdout(text string) error {
	return o.publish("stream", map[string]any{"name": "stdout", "text": text}, text)
}

// AppendStderr adds text to the output area as standard error.
func (o *Output) AppendStderr(text string) error {
	return o.publish("stream", map[string]any{"name": "stderr", "text": text}, text)
}

// AppendDisplay adds a MIME bundle (display.Bundle{"text/html": ...}) to the output area.
func (o *Output) AppendDisplay(data display.Bundle) error {
	plain, _ := data["text/plain"].(string)
	return o.publish("display_data", map[string]any{"data": map[string]any(data), "metadata": map[string]any{}, "transient": map[string]any{}}, plain+"\n")
}

// Clear empties the output area.
func (o *Output) Clear() error {
	return o.publish("clear_output", map[string]any{"wait": false}, "")
}

func (o *Output) publish(msgType string, content map[string]any, plain string) error {
	if o.Closed() {
		return fmt.Errorf("widgets: Output %s: %w", msgType, ErrClosed)
	}
	fr := frontend()
	if fr == nil || o.ch == nil {
		fmt.Print(plain)
		return nil
	}
	if o.d.V2() {
		o.appendOutput(msgType, content)
		return nil
	}
	return fr.PublishFor(o.id, msgType, content)
}

// appendOutput adds an output to a protocol 2 Output's outputs state (clear_output empties
// it), as ipywidgets 7 and 8 do in append_stdout: their managers show that state, and route
// to an Output only replies to requests of their own (JupyterLab's message hooks), so a
// message with the model's id as its parent reaches no Output there. What the front end
// captured and sent back as outputs stays in front of it.
func (o *Output) appendOutput(msgType string, content map[string]any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var outputs []any
	if msgType != "clear_output" {
		old, _ := o.state["outputs"].([]any)
		outputs = append(outputs, old...)
		out := map[string]any{"output_type": msgType}
		for k, v := range content {
			if k != "transient" {
				out[k] = v
			}
		}
		outputs = append(outputs, out)
	}
	if outputs == nil {
		outputs = []any{}
	}
	o.setLocked(map[string]any{"outputs": outputs})
}

func toInt(v any) int {
	switch x := v.(type) {
	case int:
		return x
	case float64:
		return int(x)
	case int64:
		return int(x)
	}
	return 0
}

func toFloat(v any) float64 {
	switch x := v.(type) {
	case float64:
		return x
	case int:
		return float64(x)
	case int64:
		return float64(x)
	}
	return 0
}

func clampInt(v, lo, hi int) int {
	if v < lo {
		return lo
	}
	if v > hi {
		return hi
	}
	return v
}

func clampFloat(v, lo, hi float64) float64 {
	if v < lo {
		return lo
	}
	if v > hi {
		return hi
	}
	return v
}
