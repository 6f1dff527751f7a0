package widgets

import (
	"html"
	"sync"

	"godist/distlib/display"
)

// FitBar is Keras' progress display drawn with widgets, one per Fit (or Evaluate): a live
// row, the bar with the epoch as its description ("Epoch 2/5") and beside it the step
// count, time left and metrics ("12/64 3s 12ms/step - loss: 0.3100"), under a history (an
// Output area) of what the cell prints during the run: the finished epochs' lines, which
// Keras prints there, and a callback's lines, in the order they came. When the run ends
// the live row goes and the history stays, read as Keras' text is. Keras' Fit uses it when
// Ready reports a widget front end.
type FitBar struct {
	box     *Box // VBox(history, row)
	history *Output
	row     *Box // HBox(bar, text)
	bar     *IntProgress
	text    *HTML

	mu        sync.Mutex
	shown     bool
	ended     bool
	capturing bool
	desc      string
	target    int
}

// NewFitBar returns a bar that shows itself in the running cell when Run starts (or on
// its first Progress or Append).
func NewFitBar() *FitBar {
	f := &FitBar{history: NewOutput(), bar: NewIntProgress(0, 1), text: NewHTML(""), target: 1}
	f.bar.SetDescriptionWidth("initial") // "Epoch 10/100" whole
	f.row = NewHBox(f.bar, f.text)
	f.box = NewVBox(f.history, f.row)
	return f
}

// show displays the box once.
func (f *FitBar) show() {
	f.mu.Lock()
	shown := f.shown
	f.shown = true
	f.mu.Unlock()
	if !shown {
		_ = f.box.Display()
	}
}

// Run shows the bar and runs fn (the run's epochs) with what the running cell prints or
// displays meanwhile going to the history (Output.Capture; Capturing reports it); with no
// cell running, the output goes where it would. When fn returns the live row is removed;
// when it panics the row stays where it stopped, red.
func (f *FitBar) Run(fn func()) {
	f.show()
	ok := false
	defer func() {
		if !ok {
			_ = f.bar.SetBarStyle("danger")
		}
	}()
	err := f.history.Capture(func() {
		f.setCapturing(true)
		defer f.setCapturing(false)
		fn()
	})
	if err != nil { // closed, or no cell is running: fn has not run
		fn()
	}
	ok = true
	f.end()
}

func (f *FitBar) setCapturing(c bool) {
	f.mu.Lock()
	f.capturing = c
	f.mu.Unlock()
}

// Capturing reports whether Run is capturing the cell's output into the history: what the
// caller prints then lands there in order; otherwise Append puts lines there.
func (f *FitBar) Capturing() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.capturing
}

// Progress sets the live row: description (the epoch, "" for none), current of target
// steps (target 0: unknown, the bar drawn full) and text beside the bar.
func (f *FitBar) Progress(description string, current, target int, text string) {
	f.show()
	if target <= 0 {
		target = max(current, 1)
	}
	f.mu.Lock()
	descChanged, targetChanged := description != f.desc, target != f.target
	f.desc, f.target = description, target
	f.mu.Unlock()
	if descChanged {
		f.bar.SetDescription(description)
	}
	if targetChanged {
		_ = f.bar.SetMax(target) // target >= 1 = min; the value is clamped to it
	}
	f.bar.SetValue(current)
	f.text.SetValue(`<pre style="margin:0 0 0 0.5em;padding:0;border:0;background:none">` + html.EscapeString(text) + `</pre>`)
}

// Append adds text (finished lines, ending in a newline; ANSI colours as Keras writes them
// are drawn) to the history, after what the cell printed before: for lines printed while
// Run is not Capturing (a run outside a cell).
func (f *FitBar) Append(text string) {
	f.show()
	display.Sync()
	_ = f.history.AppendStdout(text)
}

// end removes the live row, leaving the history.
func (f *FitBar) end() {
	f.mu.Lock()
	ended := f.ended
	f.ended = true
	f.mu.Unlock()
	if ended {
		return
	}
	_ = f.box.SetChildren(f.history)
	f.row.Close()
	f.bar.Close()
	f.text.Close()
}

// Box returns the box that holds the history and the live row, to close or nest it.
func (f *FitBar) Box() *Box { return f.box }
