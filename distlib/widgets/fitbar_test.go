package widgets

import (
	"strings"
	"testing"

	"godist/distlib/display"
)

// TestFitBarRun checks Fit's widget bar over a run: one view shown, the live row (the epoch
// as the bar's description, the bar at its step, the text beside it) under the history,
// the history getting the lines Append adds and the cell's prints (captured) in order,
// and at the end the live row removed and closed, the history kept.
func TestFitBarRun(t *testing.T) {
	r := install(t, true)
	r.cell = "req-7"
	var pub pubRec
	defer display.SetPublisher(display.SetPublisher(&pub))
	f := NewFitBar()
	if kids := f.box.Children(); len(kids) != 2 || kids[0] != Child(f.history) || kids[1] != Child(f.row) {
		t.Fatalf("box children %v, want the history then the live row", kids)
	}
	if kids := f.row.Children(); len(kids) != 2 || kids[0] != Child(f.bar) || kids[1] != Child(f.text) {
		t.Fatalf("row children %v, want the bar then its text", kids)
	}
	r.take()
	f.Run(func() {
		if !f.Capturing() {
			t.Error("Run in a cell is not capturing its output")
		}
		f.Progress("Epoch 1/2", 0, 4, "")
		f.Progress("Epoch 1/2", 3, 4, "3/4 1s 20ms/step - loss: 0.5000")
		if got := f.bar.Get("description"); got != "Epoch 1/2" || f.bar.Value() != 3 || f.bar.Max() != 4 {
			t.Errorf("bar %v %d/%d, want Epoch 1/2 3/4", got, f.bar.Value(), f.bar.Max())
		}
		if got := f.text.Value(); !strings.Contains(got, ">3/4 1s 20ms/step - loss: 0.5000</pre>") {
			t.Errorf("text beside the bar %q", got)
		}
		f.Append("Epoch 1/2\n4/4 done\n")
		r.mu.Lock()
		r.add("print", "", "callback")
		r.mu.Unlock()
		f.Progress("Epoch 2/2", 1, 8, "1/8 <b>")
		if f.bar.Value() != 1 || f.bar.Max() != 8 || !strings.Contains(f.text.Value(), "1/8 &lt;b&gt;") {
			t.Errorf("epoch 2: bar %d/%d text %q, want 1/8 and the text escaped", f.bar.Value(), f.bar.Max(), f.text.Value())
		}
		f.Append("Epoch 2/2\n8/8 done\n")
	})
	if len(pub.shown) != 1 {
		t.Errorf("shown %d times, want once", len(pub.shown))
	}
	if f.Capturing() {
		t.Error("still capturing after Run")
	}
	h := f.history.ModelID()
	var order []string
	closed := map[string]bool{}
	for _, l := range r.take() {
		switch {
		case strings.HasPrefix(l, "msg "+h+" ") && strings.Contains(l, `"msg_id"`),
			strings.HasPrefix(l, "stream "), strings.HasPrefix(l, "print "):
			order = append(order, l)
		case strings.HasPrefix(l, "close "):
			closed[strings.Fields(l)[1]] = true
		}
	}
	want := []string{
		`msg ` + h + ` {"buffers":[],"method":"update","state":{"msg_id":"req-7"}}`,
		`stream ` + h + ` {"name":"stdout","text":"Epoch 1/2\n4/4 done\n"}`,
		`print  "callback"`,
		`stream ` + h + ` {"name":"stdout","text":"Epoch 2/2\n8/8 done\n"}`,
		`msg ` + h + ` {"buffers":[],"method":"update","state":{"msg_id":""}}`,
	}
	if strings.Join(order, "\n") != strings.Join(want, "\n") {
		t.Errorf("sent\n%s\nwant\n%s", strings.Join(order, "\n"), strings.Join(want, "\n"))
	}
	if kids := f.box.Children(); len(kids) != 1 || kids[0] != Child(f.history) {
		t.Errorf("box children at the end %v, want the history alone", kids)
	}
	for _, w := range []*Widget{f.row.Widget, f.bar.Widget, f.text.Widget} {
		if !closed[w.ModelID()] || !w.Closed() {
			t.Errorf("%s of the live row not closed at the end", w.kind)
		}
	}
	if f.history.Closed() {
		t.Error("the history was closed")
	}
}

// TestFitBarPanics checks a run that fails: the capture ends, the live row stays where it
// stopped with its bar red, and the panic goes on to the cell.
func TestFitBarPanics(t *testing.T) {
	r := install(t, true)
	r.cell = "req-8"
	var pub pubRec
	defer display.SetPublisher(display.SetPublisher(&pub))
	f := NewFitBar()
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the panic did not reach the caller")
			}
		}()
		f.Run(func() {
			f.Progress("Epoch 1/3", 2, 10, "2/10")
			panic("step failed")
		})
	}()
	if got := f.history.Get("msg_id"); got != "" {
		t.Errorf("history still captures the cell (msg_id %v)", got)
	}
	if len(f.box.Children()) != 2 || f.row.Closed() || f.bar.Value() != 2 {
		t.Errorf("the live row was removed or reset after a failure: children %d, value %d", len(f.box.Children()), f.bar.Value())
	}
	if got := f.bar.Get("bar_style"); got != "danger" {
		t.Errorf("bar style %v after a failure, want danger", got)
	}
}

// TestFitBarNoCell checks a run with no cell running (Fit from a goroutine after its cell):
// fn runs once, uncaptured.
func TestFitBarNoCell(t *testing.T) {
	r := install(t, true)
	var pub pubRec
	defer display.SetPublisher(display.SetPublisher(&pub))
	f := NewFitBar()
	runs := 0
	f.Run(func() {
		runs++
		if f.Capturing() {
			t.Error("capturing with no cell running")
		}
	})
	if runs != 1 {
		t.Errorf("fn ran %d times, want once", runs)
	}
	for _, l := range r.take() {
		if strings.Contains(l, `"msg_id":"`) && !strings.Contains(l, `"msg_id":""`) {
			t.Errorf("captured with no cell running: %s", l)
		}
	}
}

// TestFitBarUnknownTarget checks an epoch of unknown length: the bar is drawn full at each
// step, without going back to zero.
func TestFitBarUnknownTarget(t *testing.T) {
	install(t, true)
	var pub pubRec
	defer display.SetPublisher(display.SetPublisher(&pub))
	f := NewFitBar()
	for _, step := range []int{5, 7} {
		f.Progress("Epoch 1/1", step, 0, "")
		if f.bar.Value() != step || f.bar.Max() != step {
			t.Errorf("after step %d of unknown: bar %d/%d, want full", step, f.bar.Value(), f.bar.Max())
		}
	}
}
