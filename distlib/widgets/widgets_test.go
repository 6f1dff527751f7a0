package widgets

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"godist/distlib/display"
)

// recorder is a Frontend that records what the widgets send, in order, as JSON lines.
type recorder struct {
	mu     sync.Mutex
	n      int
	log    []string
	recv   map[string]Receiver
	states map[string]map[string]any
	mds    map[string]map[string]any // comm_open metadata by comm id
	cell   string
}

func newRecorder() *recorder {
	return &recorder{recv: map[string]Receiver{}, states: map[string]map[string]any{}, mds: map[string]map[string]any{}}
}

func (r *recorder) add(kind, id string, data any) {
	b, _ := json.Marshal(data)
	r.log = append(r.log, kind+" "+id+" "+string(b))
}

func (r *recorder) Open(data, md map[string]any, rc Receiver) (Channel, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	id := fmt.Sprintf("m%d", r.n)
	r.recv[id] = rc
	r.states[id] = data
	r.mds[id] = md
	r.add("open", id, data)
	return &recChannel{r: r, id: id}, nil
}

func (r *recorder) CellID() string { return r.cell }

func (r *recorder) PublishFor(parentID, msgType string, content map[string]any) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.add(msgType, parentID, content)
	return nil
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.log
	r.log = nil
	return l
}

type recChannel struct {
	r  *recorder
	id string
}

func (c *recChannel) ID() string { return c.id }
func (c *recChannel) Send(data map[string]any) {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	c.r.add("msg", c.id, data)
}
func (c *recChannel) Reply(data map[string]any) {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	c.r.add("reply", c.id, data)
}
func (c *recChannel) Close() {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	c.r.add("close", c.id, nil)
}

// install sets a recorder as the front end for one test.
func install(t *testing.T, validatedFE bool) *recorder {
	t.Helper()
	return installDialect(t, Ipywidgets6, validatedFE)
}

type pubRec struct{ shown []display.Bundle }

func (p *pubRec) Display(data, md display.Bundle, id string) { p.shown = append(p.shown, data) }
func (p *pubRec) Update(data, md display.Bundle, id string)  {}
func (p *pubRec) ClearOutput(bool)                           {}

func TestOpenState(t *testing.T) {
	cases := []struct {
		name      string
		make      func() Child
		model     string
		view      string
		want      map[string]any // keys checked in the widget's comm_open data
		parts     []string       // model names of the layout/style comms opened before it
		wantPlain string
	}{
		{"IntProgress", func() Child { return NewIntProgress(0, 10) }, "ProgressModel", "ProgressView",
			map[string]any{"value": 0.0, "min": 0.0, "max": 10.0, "step": 1.0, "bar_style": "", "orientation": "horizontal"},
			[]string{"LayoutModel", "ProgressStyleModel"}, "IntProgress(value=0, min=0, max=10)"},
		{"FloatProgress", func() Child { return NewFloatProgress(0, 1) }, "ProgressModel", "ProgressView",
			map[string]any{"value": 0.0, "max": 1.0, "step": 0.1}, []string{"LayoutModel", "ProgressStyleModel"}, "FloatProgress(value=0, min=0, max=1)"},
		{"HTML", func() Child { return NewHTML("<b>hi</b>") }, "HTMLModel", "HTMLView",
			map[string]any{"value": "<b>hi</b>", "placeholder": "\u200b"}, []string{"LayoutModel"}, `HTML(value="<b>hi</b>")`},
		{"Label", func() Child { return NewLabel("loss") }, "LabelModel", "LabelView",
			map[string]any{"value": "loss"}, []string{"LayoutModel"}, `Label(value="loss")`},
		{"Button", func() Child { return NewButton("Stop") }, "ButtonModel", "ButtonView",
			map[string]any{"description": "Stop", "button_style": "", "disabled": false, "icon": "", "tooltip": ""},
			[]string{"LayoutModel", "ButtonStyleModel"}, `Button(description="Stop")`},
		{"Output", func() Child { return NewOutput() }, "OutputModel", "OutputView",
			map[string]any{"msg_id": ""}, []string{"LayoutModel"}, "Output()"},
		{"HBox", func() Child { return NewHBox() }, "HBoxModel", "HBoxView",
			map[string]any{"children": []any{}, "box_style": ""}, []string{"LayoutModel"}, "HBox(children=0 widgets)"},
		{"VBox", func() Child { return NewVBox() }, "VBoxModel", "VBoxView",
			map[string]any{"children": []any{}}, []string{"LayoutModel"}, "VBox(children=0 widgets)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := install(t, false)
			w := tc.make()
			log := r.take()
			if len(log) != len(tc.parts)+1 {
				t.Fatalf("opened %d comms, want %d: %v", len(log), len(tc.parts)+1, log)
			}
			var states []map[string]any
			for _, l := range log {
				f := strings.SplitN(l, " ", 3)
				if f[0] != "open" {
					t.Fatalf("want comm_open, got %s", l)
				}
				var s map[string]any
				if err := json.Unmarshal([]byte(f[2]), &s); err != nil {
					t.Fatal(err)
				}
				states = append(states, s)
			}
			for i, p := range tc.parts {
				if states[i]["_model_name"] != p || states[i]["_model_module_version"] != "~2.1.4" {
					t.Errorf("part %d: model %v version %v, want %s ~2.1.4", i, states[i]["_model_name"], states[i]["_model_module_version"], p)
				}
			}
			s := states[len(states)-1]
			base := map[string]any{"_model_name": tc.model, "_view_name": tc.view, "_model_module": "jupyter-js-widgets",
				"_view_module": "jupyter-js-widgets", "_model_module_version": "~2.1.4", "_view_module_version": "~2.1.4",
				"msg_throttle": 1.0, "layout": "IPY_MODEL_m1"}
			for k, v := range tc.want {
				base[k] = v
			}
			for k, v := range base {
				if !sameJSON(s[k], v) {
					t.Errorf("state %s = %#v, want %#v", k, s[k], v)
				}
			}
			if len(tc.parts) == 2 && s["style"] != "IPY_MODEL_m2" {
				t.Errorf("style = %v, want IPY_MODEL_m2", s["style"])
			}
			if w.ModelID() != fmt.Sprintf("m%d", len(tc.parts)+1) {
				t.Errorf("ModelID = %s", w.ModelID())
			}
			if got := fmt.Sprint(w); got != tc.wantPlain {
				t.Errorf("String() = %q, want %q", got, tc.wantPlain)
			}
		})
	}
}

func TestUpdates(t *testing.T) {
	cases := []struct {
		name string
		do   func(r *recorder) []string // returns the wanted messages
	}{
		{"int value sends update", func(r *recorder) []string {
			p := NewIntProgress(0, 10)
			r.take()
			p.SetValue(3)
			return []string{`msg m3 {"buffers":[],"method":"update","state":{"value":3}}`}
		}},
		{"same value sends nothing", func(r *recorder) []string {
			p := NewIntProgress(0, 10)
			p.SetValue(3)
			r.take()
			p.SetValue(3)
			return nil
		}},
		{"value clamped to max", func(r *recorder) []string {
			p := NewIntProgress(0, 10)
			r.take()
			p.SetValue(12)
			if p.Value() != 10 {
				t.Errorf("Value = %d, want 10", p.Value())
			}
			return []string{`msg m3 {"buffers":[],"method":"update","state":{"value":10}}`}
		}},
		{"float max clamps value", func(r *recorder) []string {
			p := NewFloatProgress(0, 1)
			p.SetValue(0.75)
			r.take()
			if err := p.SetMax(0.5); err != nil {
				t.Fatal(err)
			}
			return []string{`msg m3 {"buffers":[],"method":"update","state":{"max":0.5,"value":0.5}}`}
		}},
		{"html value", func(r *recorder) []string {
			h := NewHTML("")
			r.take()
			h.SetValue("<i>x</i>")
			return []string{`msg m2 {"buffers":[],"method":"update","state":{"value":"\u003ci\u003ex\u003c/i\u003e"}}`}
		}},
		{"box children", func(r *recorder) []string {
			a, b := NewLabel("a"), NewLabel("b")
			box := NewHBox(a)
			r.take()
			if err := box.SetChildren(a, b); err != nil {
				t.Fatal(err)
			}
			return []string{`msg m6 {"buffers":[],"method":"update","state":{"children":["IPY_MODEL_m2","IPY_MODEL_m4"]}}`}
		}},
		{"close closes parts", func(r *recorder) []string {
			b := NewButton("x")
			r.take()
			b.Close()
			b.Close()
			b.SetDescription("later") // kept, not sent
			return []string{"close m3 null", "close m1 null", "close m2 null"}
		}},
		{"request_state sends everything", func(r *recorder) []string {
			l := NewLabel("a")
			r.take()
			r.recv["m2"].Message(map[string]any{"method": "request_state"}, nil)
			got := r.take()
			if len(got) != 1 || !strings.Contains(got[0], `"_model_name":"LabelModel"`) || !strings.Contains(got[0], `"method":"update"`) {
				t.Errorf("request_state answer = %v", got)
			}
			_ = l
			return nil
		}},
		{"backbone sync sets state without echo", func(r *recorder) []string {
			p := NewIntProgress(0, 10)
			r.take()
			r.recv["m3"].Message(map[string]any{"method": "backbone", "sync_data": map[string]any{"value": 7.0}}, nil)
			if p.Value() != 7 {
				t.Errorf("Value after sync = %d, want 7", p.Value())
			}
			return nil
		}},
		{"front end close", func(r *recorder) []string {
			p := NewIntProgress(0, 10)
			r.take()
			r.recv["m3"].Closed()
			if !p.Closed() {
				t.Error("not closed after the front end closed the comm")
			}
			p.SetValue(4)
			return nil
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := install(t, false)
			want := tc.do(r)
			got := r.take()
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("sent\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

func TestButtonClick(t *testing.T) {
	cases := []struct {
		name   string
		data   map[string]any
		clicks int
	}{
		{"custom click", map[string]any{"method": "custom", "content": map[string]any{"event": "click"}}, 1},
		{"custom other event", map[string]any{"method": "custom", "content": map[string]any{"event": "hover"}}, 0},
		{"custom without content", map[string]any{"method": "custom"}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := install(t, true)
			b := NewButton("Go")
			n := 0
			if err := b.OnClick(func(got *Button) {
				if got != b {
					t.Error("callback got another button")
				}
				n++
			}); err != nil {
				t.Fatal(err)
			}
			// A panicking callback does not stop the others.
			_ = b.OnClick(func(*Button) { panic("boom") })
			r.recv[b.ModelID()].Message(tc.data, nil)
			if n != tc.clicks {
				t.Errorf("callback ran %d times, want %d", n, tc.clicks)
			}
		})
	}
	if err := NewButton("x").OnClick(nil); err == nil || !strings.Contains(err.Error(), "nil") {
		t.Errorf("OnClick(nil) error = %v", err)
	}
}

func TestDisplay(t *testing.T) {
	cases := []struct {
		name      string
		validated bool
		wantPlain bool
	}{
		{"validated front end draws the view", true, false},
		{"no widget front end gets text", false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := install(t, tc.validated)
			pub := &pubRec{}
			old := display.SetPublisher(pub)
			defer display.SetPublisher(old)
			p := NewIntProgress(0, 5)
			r.take()
			if err := p.Display(); err != nil {
				t.Fatal(err)
			}
			if got := r.take(); len(got) != 1 || got[0] != `msg m3 {"method":"display"}` {
				t.Errorf("sent %v, want the display method", got)
			}
			if len(pub.shown) != 1 {
				t.Fatalf("shown %d bundles", len(pub.shown))
			}
			b := pub.shown[0]
			if v, _ := b[ViewMIME].(map[string]any); v["model_id"] != "m3" {
				t.Errorf("view = %v", b[ViewMIME])
			}
			if _, ok := b["text/plain"]; ok != tc.wantPlain {
				t.Errorf("text/plain present %v, want %v", ok, tc.wantPlain)
			}
			p.Close()
			if err := p.Display(); err == nil {
				t.Error("Display after Close: no error")
			}
		})
	}
}

func TestNoFrontend(t *testing.T) {
	old := SetFrontend(nil)
	defer SetFrontend(old)
	p := NewIntProgress(0, 3)
	p.SetValue(2)
	if p.Value() != 2 || !strings.HasPrefix(p.ModelID(), "local-") {
		t.Errorf("value %d id %s", p.Value(), p.ModelID())
	}
	if Ready() {
		t.Error("Ready without a front end")
	}
	ran := false
	if err := NewOutput().Capture(func() { ran = true }); err != nil || !ran {
		t.Errorf("Capture: %v ran %v", err, ran)
	}
}

func TestVersionReply(t *testing.T) {
	cases := []struct {
		data    map[string]any
		ready   bool
		wantErr bool
	}{
		{map[string]any{"validated": true, "frontend_version": "2.1.4"}, true, false},
		{map[string]any{"validated": false, "frontend_version": "3.0.0"}, false, false},
		{map[string]any{"version": "x"}, false, true},
	}
	for _, tc := range cases {
		install(t, false)
		err := VersionReply(tc.data)
		if (err != nil) != tc.wantErr || Ready() != tc.ready {
			t.Errorf("VersionReply(%v): err %v Ready %v, want err %v Ready %v", tc.data, err, Ready(), tc.wantErr, tc.ready)
		}
	}
	if VersionHello()["version"] != "~2.1.4" {
		t.Errorf("VersionHello = %v", VersionHello())
	}
}

func TestOutputRouting(t *testing.T) {
	r := install(t, true)
	o := NewOutput()
	r.take()
	if err := o.Capture(func() {}); err == nil || !strings.Contains(err.Error(), "no cell") {
		t.Errorf("Capture between cells: %v", err)
	}
	r.cell = "req-1"
	if err := o.Capture(func() { r.add("print", "", "in") }); err != nil {
		t.Fatal(err)
	}
	if err := o.AppendStdout("later\n"); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`msg m2 {"buffers":[],"method":"update","state":{"msg_id":"req-1"}}`,
		`print  "in"`,
		`msg m2 {"buffers":[],"method":"update","state":{"msg_id":""}}`,
		`stream m2 {"name":"stdout","text":"later\n"}`,
	}
	if got := r.take(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("sent\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestBadInput(t *testing.T) {
	install(t, false)
	p := NewIntProgress(0, 3)
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"bar style", p.SetBarStyle("red"), `bar style "red"`},
		{"max below min", p.SetMax(-1), "below min 0"},
		{"unknown key", p.Set("colour", "red"), `no settable state "colour"`},
		{"private key", p.Set("_model_name", "x"), `no settable state "_model_name"`},
		{"nil child", NewVBox().SetChildren(p, nil), "child 1 is nil"},
	}
	for _, tc := range cases {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) || !strings.HasPrefix(tc.err.Error(), "widgets: ") {
			t.Errorf("%s: error %v, want one containing %q", tc.name, tc.err, tc.want)
		}
	}
	func() {
		defer func() {
			if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "min is greater than max") {
				t.Errorf("NewIntProgress(5, 1) panic = %v", r)
			}
		}()
		NewIntProgress(5, 1)
	}()
}
