package widgets

import (
	"encoding/json"
	"strings"
	"testing"

	"godist/distlib/display"
)

// installDialect sets a recorder as the front end, speaking d (ready as given).
func installDialect(t *testing.T, d Dialect, ready bool) *recorder {
	t.Helper()
	r := newRecorder()
	old := SetFrontend(r)
	setState(d, ready, "test")
	t.Cleanup(func() { SetFrontend(old); resetDialect() })
	return r
}

func TestDialectChoice(t *testing.T) {
	vscode := map[string]any{"cellId": "vscode-notebook-cell:/home/s/a.ipynb#W1sZmlsZQ%3D%3D"}
	cases := []struct {
		name      string
		signals   func()
		want      Dialect
		wantReady bool
	}{
		{"nothing tells: ipywidgets 7 models, text for Fit", func() {}, Ipywidgets7, false},
		{"Notebook 6 validates the version", func() { _ = VersionReply(map[string]any{"validated": true, "frontend_version": "2.1.4"}) }, Ipywidgets6, true},
		{"Notebook 6 refuses the version", func() { _ = VersionReply(map[string]any{"validated": false}) }, Ipywidgets6, false},
		{"JupyterLab opens the control comm", ControlOpened, Ipywidgets8, true},
		{"VS Code's cell ids", func() { ExecuteMetadata(vscode) }, Ipywidgets7, true},
		{"JupyterLab's cell ids say nothing", func() {
			ExecuteMetadata(map[string]any{"cellId": "5d3f0a6e-1c4b-4bb2-9c1e-2d1f0a9b8c7d", "deletedCells": []any{}})
		}, Ipywidgets7, false},
		{"JupyterLab cell after its control comm keeps ipywidgets 8", func() {
			ControlOpened()
			ExecuteMetadata(map[string]any{"cellId": "5d3f0a6e"})
		}, Ipywidgets8, true},
		{"a second front end in VS Code", func() { ControlOpened(); ExecuteMetadata(vscode) }, Ipywidgets7, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			installDialect(t, Ipywidgets7, false)
			resetDialect()
			tc.signals()
			if got := CurrentDialect(); got != tc.want || Ready() != tc.wantReady {
				t.Errorf("dialect %s ready %v, want %s ready %v (%s)", got.Name, Ready(), tc.want.Name, tc.wantReady, FrontendSeen())
			}
		})
	}
}

// opened decodes the recorder's comm_open log: each comm's data and metadata.
func opened(t *testing.T, r *recorder, log []string) (ids []string, data []map[string]any) {
	t.Helper()
	for _, l := range log {
		f := strings.SplitN(l, " ", 3)
		if f[0] != "open" {
			continue
		}
		var d map[string]any
		if err := json.Unmarshal([]byte(f[2]), &d); err != nil {
			t.Fatal(err)
		}
		ids, data = append(ids, f[1]), append(data, d)
	}
	return ids, data
}

func TestProtocol2Open(t *testing.T) {
	type model struct{ name, module, version, view, viewModule, viewVersion string }
	for _, d := range []Dialect{Ipywidgets7, Ipywidgets8} {
		cases := []struct {
			make   func() Child
			models []model // layout, style (if any), then the widget
		}{
			{func() Child { return NewIntProgress(0, 10) }, []model{
				{"LayoutModel", d.Base, d.BaseVersion, "LayoutView", d.Base, d.BaseVersion},
				{"ProgressStyleModel", d.Controls, d.ControlsVersion, "StyleView", d.Base, d.BaseVersion},
				{"IntProgressModel", d.Controls, d.ControlsVersion, "ProgressView", d.Controls, d.ControlsVersion}}},
			{func() Child { return NewHTML("<b>x</b>") }, []model{
				{"LayoutModel", d.Base, d.BaseVersion, "LayoutView", d.Base, d.BaseVersion},
				{"DescriptionStyleModel", d.Controls, d.ControlsVersion, "StyleView", d.Base, d.BaseVersion},
				{"HTMLModel", d.Controls, d.ControlsVersion, "HTMLView", d.Controls, d.ControlsVersion}}},
			{func() Child { return NewOutput() }, []model{
				{"LayoutModel", d.Base, d.BaseVersion, "LayoutView", d.Base, d.BaseVersion},
				{"OutputModel", d.Output, d.OutputVersion, "OutputView", d.Output, d.OutputVersion}}},
			{func() Child { return NewButton("Stop") }, []model{
				{"LayoutModel", d.Base, d.BaseVersion, "LayoutView", d.Base, d.BaseVersion},
				{"ButtonStyleModel", d.Controls, d.ControlsVersion, "StyleView", d.Base, d.BaseVersion},
				{"ButtonModel", d.Controls, d.ControlsVersion, "ButtonView", d.Controls, d.ControlsVersion}}},
		}
		for _, tc := range cases {
			r := installDialect(t, d, true)
			w := tc.make()
			ids, data := opened(t, r, r.take())
			if len(data) != len(tc.models) {
				t.Fatalf("%s: opened %d comms, want %d", d.Name, len(data), len(tc.models))
			}
			for i, m := range tc.models {
				if md := r.mds[ids[i]]; md["version"] != d.Protocol || len(md) != 1 {
					t.Errorf("%s %s: comm_open metadata %v, want {version: %s}", d.Name, m.name, md, d.Protocol)
				}
				if bp, ok := data[i]["buffer_paths"].([]any); !ok || len(bp) != 0 || len(data[i]) != 2 {
					t.Errorf("%s %s: data %v, want {state, buffer_paths: []}", d.Name, m.name, data[i])
				}
				st, _ := data[i]["state"].(map[string]any)
				got := model{st["_model_name"].(string), st["_model_module"].(string), st["_model_module_version"].(string),
					st["_view_name"].(string), st["_view_module"].(string), st["_view_module_version"].(string)}
				if got != m {
					t.Errorf("%s: model %d = %+v, want %+v", d.Name, i, got, m)
				}
				if _, ok := st["msg_throttle"]; ok {
					t.Errorf("%s %s: protocol 2 state has protocol 1's msg_throttle", d.Name, m.name)
				}
			}
			if w.ModelID() != ids[len(ids)-1] {
				t.Errorf("%s: ModelID %s, want the last comm %s", d.Name, w.ModelID(), ids[len(ids)-1])
			}
		}
	}
}

func TestProtocol2DisplayAndUpdates(t *testing.T) {
	for _, d := range []Dialect{Ipywidgets7, Ipywidgets8} {
		r := installDialect(t, d, true)
		pub := &pubRec{}
		oldPub := display.SetPublisher(pub)
		p := NewIntProgress(0, 10)
		r.take()
		if err := p.Display(); err != nil {
			t.Fatal(err)
		}
		if log := r.take(); len(log) != 0 {
			t.Errorf("%s: Display sent comm messages %v; protocol 2 shows views by display_data only", d.Name, log)
		}
		if len(pub.shown) != 1 {
			t.Fatalf("%s: %d display_data, want 1", d.Name, len(pub.shown))
		}
		view, _ := pub.shown[0][ViewMIME].(map[string]any)
		if view["model_id"] != p.ModelID() || view["version_major"] != 2 || view["version_minor"] != 0 {
			t.Errorf("%s: view %v, want model_id %s version_major 2 version_minor 0", d.Name, view, p.ModelID())
		}
		if pub.shown[0]["text/plain"] != "IntProgress(value=0, min=0, max=10)" {
			t.Errorf("%s: text/plain fallback %v", d.Name, pub.shown[0]["text/plain"])
		}
		display.SetPublisher(oldPub)

		p.SetValue(4)
		want := `msg ` + p.ModelID() + ` {"buffer_paths":[],"method":"update","state":{"value":4}}`
		if log := r.take(); len(log) != 1 || log[0] != want {
			t.Errorf("%s: SetValue sent %v, want %s", d.Name, log, want)
		}

		// The front end changes a value: it reaches Go; ipywidgets 8 gets its echo.
		rc := r.recv[p.ModelID()]
		rc.Message(map[string]any{"method": "update", "state": map[string]any{"value": 7.0, "no_such_key": 1.0}, "buffer_paths": []any{}}, nil)
		if p.Value() != 7 {
			t.Errorf("%s: front end's update: Value %d, want 7", d.Name, p.Value())
		}
		log := r.take()
		if d == Ipywidgets8 {
			wantEcho := `reply ` + p.ModelID() + ` {"buffer_paths":[],"method":"echo_update","state":{"value":7}}`
			if len(log) != 1 || log[0] != wantEcho {
				t.Errorf("%s: after the front end's update sent %v, want %s", d.Name, log, wantEcho)
			}
		} else if len(log) != 0 {
			t.Errorf("%s: after the front end's update sent %v, want nothing (no echo before protocol 2.1)", d.Name, log)
		}

		rc.Message(map[string]any{"method": "request_state"}, nil)
		log = r.take()
		if len(log) != 1 || !strings.Contains(log[0], `"buffer_paths":[]`) || !strings.Contains(log[0], `"value":7`) || !strings.Contains(log[0], `"_model_name":"IntProgressModel"`) {
			t.Errorf("%s: request_state answered %v, want the full state as a protocol 2 update", d.Name, log)
		}
	}
}

func TestControlRequestStates(t *testing.T) {
	r := installDialect(t, Ipywidgets8, true)
	bar := NewIntProgress(0, 5)
	bar.SetValue(2)
	gone := NewLabel("closed")
	gone.Close()
	lbl := NewLabel("kept")
	r.take()
	reply, err := ControlMessage(map[string]any{"method": "request_states"})
	if err != nil {
		t.Fatal(err)
	}
	if reply["method"] != "update_states" {
		t.Fatalf("method %v, want update_states", reply["method"])
	}
	states := reply["states"].(map[string]any)
	for _, id := range []string{bar.ModelID(), lbl.ModelID()} {
		st, ok := states[id].(map[string]any)
		if !ok {
			t.Fatalf("update_states lacks open model %s: %v", id, states)
		}
		if st["model_module"] != "@jupyter-widgets/controls" || st["model_module_version"] != "2.0.0" {
			t.Errorf("model %s: module %v %v, want @jupyter-widgets/controls 2.0.0", id, st["model_module"], st["model_module_version"])
		}
	}
	if st := states[bar.ModelID()].(map[string]any)["state"].(map[string]any); st["value"] != 2 {
		t.Errorf("bar's state value %v, want 2", st["value"])
	}
	if _, ok := states[gone.ModelID()]; ok {
		t.Errorf("update_states has the closed label %s", gone.ModelID())
	}
	// The bar's layout and style are models too: a restored page needs them.
	layout := strings.TrimPrefix(bar.Get("layout").(string), "IPY_MODEL_")
	if st, ok := states[layout].(map[string]any); !ok || st["model_name"] != "LayoutModel" || st["model_module"] != "@jupyter-widgets/base" {
		t.Errorf("update_states layout %s = %v, want a LayoutModel in @jupyter-widgets/base", layout, states[layout])
	}
	if _, err := ControlMessage(map[string]any{"method": "bogus"}); err == nil || !strings.Contains(err.Error(), `"bogus"`) {
		t.Errorf("unknown method: err %v, want one naming it", err)
	}

	// Protocol 1 models (Notebook 6) are not offered to a protocol 2 manager.
	setState(Ipywidgets6, true, "test")
	old := NewLabel("nb6")
	reply, _ = ControlMessage(map[string]any{"method": "request_states"})
	if _, ok := reply["states"].(map[string]any)[old.ModelID()]; ok {
		t.Errorf("update_states offers protocol 1 model %s", old.ModelID())
	}
}

// TestProtocol2OutputAppend: protocol 2 Outputs take appended output into their outputs
// state (as ipywidgets' append_stdout), not as messages parented by the model's id, which
// JupyterLab routes to no Output; outputs the front end captured stay before them.
func TestProtocol2OutputAppend(t *testing.T) {
	for _, d := range []Dialect{Ipywidgets7, Ipywidgets8} {
		r := installDialect(t, d, true)
		o := NewOutput()
		ids, _ := opened(t, r, r.take())
		id := ids[len(ids)-1]
		captured := map[string]any{"output_type": "stream", "name": "stdout", "text": "captured\n"}
		r.recv[id].Message(map[string]any{"method": "update", "state": map[string]any{"outputs": []any{captured}}, "buffer_paths": []any{}}, nil)
		r.take()
		if err := o.AppendStdout("later\n"); err != nil {
			t.Fatal(err)
		}
		if err := o.AppendDisplay(display.Bundle{"text/html": "<b>x</b>", "text/plain": "x"}); err != nil {
			t.Fatal(err)
		}
		if err := o.Clear(); err != nil {
			t.Fatal(err)
		}
		want := []string{
			`msg ` + id + ` {"buffer_paths":[],"method":"update","state":{"outputs":[{"name":"stdout","output_type":"stream","text":"captured\n"},{"name":"stdout","output_type":"stream","text":"later\n"}]}}`,
			`msg ` + id + ` {"buffer_paths":[],"method":"update","state":{"outputs":[{"name":"stdout","output_type":"stream","text":"captured\n"},{"name":"stdout","output_type":"stream","text":"later\n"},{"data":{"text/html":"\u003cb\u003ex\u003c/b\u003e","text/plain":"x"},"metadata":{},"output_type":"display_data"}]}}`,
			`msg ` + id + ` {"buffer_paths":[],"method":"update","state":{"outputs":[]}}`,
		}
		if got := r.take(); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s: sent\n%s\nwant\n%s", d.Name, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

func TestDescriptionWidth(t *testing.T) {
	for _, d := range []Dialect{Ipywidgets6, Ipywidgets7, Ipywidgets8} {
		r := installDialect(t, d, true)
		p := NewIntProgress(0, 10)
		style := strings.TrimPrefix(p.Get("style").(string), "IPY_MODEL_")
		r.take()
		p.SetDescriptionWidth("initial")
		log := r.take()
		if len(log) != 1 || !strings.HasPrefix(log[0], "msg "+style+" ") || !strings.Contains(log[0], `"state":{"description_width":"initial"}`) {
			t.Errorf("%s: SetDescriptionWidth sent %v, want an update of style model %s", d.Name, log, style)
		}
	}
}
