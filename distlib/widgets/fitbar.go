package widgets

import "html"

// FitBar is Keras' progress bar drawn with widgets: a bar for the epoch's steps above an
// HTML area with the epoch lines and the live metrics (the text bar's lines). Keras' Fit
// uses it when Ready reports a widget front end.
type FitBar struct {
	box   *Box
	bar   *IntProgress
	text  *HTML
	shown bool
}

// NewFitBar returns a bar that shows itself in the running cell on its first Update.
func NewFitBar() *FitBar {
	bar := NewIntProgress(0, 1)
	text := NewHTML("")
	return &FitBar{box: NewVBox(bar, text), bar: bar, text: text}
}

// Update shows text (the lines the text bar would show, the live one last) with current of
// target steps done in the epoch; target 0 means the epoch length is unknown.
func (f *FitBar) Update(text string, current, target int) {
	max := target
	if max <= 0 {
		max = current
	}
	if max < 1 {
		max = 1
	}
	if current > max {
		current = max
	}
	f.bar.mu.Lock()
	f.bar.setLocked(map[string]any{"max": max, "value": current})
	f.bar.mu.Unlock()
	f.text.SetValue(`<pre style="margin:0">` + html.EscapeString(text) + `</pre>`)
	if !f.shown {
		f.shown = true
		_ = f.box.Display()
	}
}

// Box returns the box that holds the bar and the text, to close or nest it.
func (f *FitBar) Box() *Box { return f.box }
