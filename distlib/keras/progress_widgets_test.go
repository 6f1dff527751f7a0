package keras

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"godist/distlib/display"
	"godist/distlib/widgets"
)

// widgetFE is a widgets.Frontend that keeps each model's state as the front end would.
type widgetFE struct {
	mu     sync.Mutex
	n      int
	states map[string]map[string]any
	sends  int
}

func (f *widgetFE) Open(data map[string]any, r widgets.Receiver) (widgets.Channel, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	id := fmt.Sprintf("w%d", f.n)
	f.states[id] = data
	return &widgetCh{f, id}, nil
}
func (f *widgetFE) CellID() string                                  { return "" }
func (f *widgetFE) PublishFor(string, string, map[string]any) error { return nil }

type widgetCh struct {
	f  *widgetFE
	id string
}

func (c *widgetCh) ID() string { return c.id }
func (c *widgetCh) Send(data map[string]any) {
	c.f.mu.Lock()
	defer c.f.mu.Unlock()
	c.f.sends++
	if st, ok := data["state"].(map[string]any); ok && data["method"] == "update" {
		for k, v := range st {
			c.f.states[c.id][k] = v
		}
	}
}
func (c *widgetCh) Close() {}

// viewPublisher records displays, widget views included.
type viewPublisher struct{ shown []display.Bundle }

func (p *viewPublisher) Display(d, _ display.Bundle, id string) { p.shown = append(p.shown, d) }
func (p *viewPublisher) Update(d, _ display.Bundle, id string)  { p.shown = append(p.shown, d) }
func (p *viewPublisher) ClearOutput(bool)                       {}

func TestProgressWidgetsOrText(t *testing.T) {
	cases := []struct {
		name    string
		widgets bool // a widget front end validated the version
	}{
		{"widget front end: widget bar", true},
		{"no widget front end: text display", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fe := &widgetFE{states: map[string]map[string]any{}}
			oldFE := widgets.SetFrontend(fe)
			defer widgets.SetFrontend(oldFE)
			if err := widgets.VersionReply(map[string]any{"validated": tc.widgets}); err != nil {
				t.Fatal(err)
			}
			defer widgets.VersionReply(map[string]any{"validated": false})
			pub := &viewPublisher{}
			old := display.SetPublisher(pub)
			defer display.SetPublisher(old)
			var buf bytes.Buffer
			clk := &fakeClock{step: 200 * time.Millisecond}
			p := newProgress(1, &buf, clk.now)
			p.epochBegin(0, 1, 4)
			p.step(1, Logs{"loss": 1})
			p.step(2, Logs{"loss": 0.75})
			if tc.widgets {
				bar := fe.states["w3"]
				if bar["_model_name"] != "ProgressModel" || bar["value"] != 2 || bar["max"] != 4 {
					t.Errorf("mid-epoch bar state = value %v max %v model %v, want ProgressModel 2/4", bar["value"], bar["max"], bar["_model_name"])
				}
			}
			p.step(4, Logs{"loss": 0.5})
			p.finish(Logs{"loss": 0.5})
			if buf.Len() != 0 {
				t.Errorf("wrote to the stream: %q", buf.String())
			}
			if !tc.widgets {
				if fe.n != 0 {
					t.Errorf("opened %d widget comms without a widget front end", fe.n)
				}
				for _, b := range pub.shown {
					if _, ok := b[widgets.ViewMIME]; ok {
						t.Errorf("a widget view was displayed: %v", b)
					}
				}
				return
			}
			if len(pub.shown) != 1 {
				t.Fatalf("displayed %d bundles, want one widget view: %v", len(pub.shown), pub.shown)
			}
			view, _ := pub.shown[0][widgets.ViewMIME].(map[string]any)
			if view["model_id"] == nil || fe.states[view["model_id"].(string)]["_model_name"] != "VBoxModel" {
				t.Errorf("displayed view %v, want the VBox", pub.shown[0])
			}
			html, _ := fe.states["w5"]["value"].(string)
			if !strings.Contains(html, "Epoch 1/1\n4/4 [==============================]") || !strings.Contains(html, "loss: 0.5000") {
				t.Errorf("HTML widget shows %q, want the epoch line and the final bar with its metrics", html)
			}
			if bar := fe.states["w3"]; bar["value"] != 4 || bar["max"] != 4 {
				t.Errorf("final bar value %v max %v, want 4/4", bar["value"], bar["max"])
			}
		})
	}
}
