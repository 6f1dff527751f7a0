package distribute

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"godist/distlib/display"
	"godist/distlib/tensor"
	"godist/distlib/widgets"
	"godist/internal/leakcheck"
)

// panelFrontend is a widget front end that keeps the last HTML value each widget was sent.
type panelFrontend struct {
	mu    sync.Mutex
	n     int
	htmls []string // every HTML value sent, in order
}

func (f *panelFrontend) Open(data, _ map[string]any, r widgets.Receiver) (widgets.Channel, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	if v, ok := data["value"].(string); ok && data["_model_name"] == "HTMLModel" {
		f.htmls = append(f.htmls, v)
	}
	return panelChannel{f, fmt.Sprint(f.n)}, nil
}
func (f *panelFrontend) CellID() string                                  { return "" }
func (f *panelFrontend) PublishFor(string, string, map[string]any) error { return nil }
func (f *panelFrontend) last() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.htmls) == 0 {
		return ""
	}
	return f.htmls[len(f.htmls)-1]
}

type panelChannel struct {
	f  *panelFrontend
	id string
}

func (c panelChannel) ID() string { return c.id }
func (c panelChannel) Send(data map[string]any) {
	if st, ok := data["state"].(map[string]any); ok {
		if v, ok := st["value"].(string); ok && strings.Contains(v, "godist-cluster-panel") {
			c.f.mu.Lock()
			c.f.htmls = append(c.f.htmls, v)
			c.f.mu.Unlock()
		}
	}
}
func (c panelChannel) Close() {}

// notebookPub is a notebook's display publisher; it records the text shown.
type notebookPub struct {
	mu    sync.Mutex
	texts []string
}

func (p *notebookPub) Display(data, md display.Bundle, id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s, ok := data["text/plain"].(string); ok {
		p.texts = append(p.texts, s)
	}
}
func (p *notebookPub) Update(data, md display.Bundle, id string) {}
func (p *notebookPub) ClearOutput(bool)                          {}

// TestCoordinatorPanel: with the widget front end, the ClusterCoordinator's live panel
// shows both workers running and the closures scheduled and done reaching the totals;
// without it, in a notebook, Close shows the same panel as text.
func TestCoordinatorPanel(t *testing.T) {
	captureLog(t)
	for _, live := range []bool{true, false} {
		t.Run(fmt.Sprintf("widgets=%v", live), func(t *testing.T) {
			leakcheck.Check(t)
			pub := &notebookPub{}
			defer display.SetPublisher(display.SetPublisher(pub))
			fe := &panelFrontend{}
			if live {
				defer widgets.SetFrontend(widgets.SetFrontend(fe))
				_ = widgets.VersionReply(map[string]any{"validated": true})
				defer widgets.VersionReply(map[string]any{"validated": false})
			}
			s, _ := psCluster(t, 1, 2)
			c := NewClusterCoordinator(s)
			counter := s.NewVariable("counter", tensor.Scalar(0), false)
			step := func(w *WorkerContext) (*tensor.Tensor, error) {
				return nil, w.AssignAdd(counter, tensor.Scalar(1))
			}
			for range 20 {
				c.Schedule(step)
			}
			if err := c.Join(); err != nil {
				t.Fatal(err)
			}
			// The 20 closures may all finish on worker 0 before worker 1 has connected: the
			// panel would then rightly say 1/2. Wait until both are up (as a user would
			// see them come up) before the panel is checked.
			deadline := time.Now().Add(10 * time.Second)
			for !allUp(c.Stats().Up) && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if up := c.Stats().Up; !allUp(up) {
				t.Fatalf("workers up %v after 10s", up)
			}
			totals := []string{`closures scheduled: <span class="godist-counter">20</span>`, `done: <span class="godist-counter">20</span>`,
				`workers up: <span class="godist-counter">2/2</span>`, "<td>worker 0</td><td>127.0.0.1:2</td>",
				`<td>worker 1</td><td>127.0.0.1:3</td><td class="godist-task-state godist-state-running">running</td>`}
			if live {
				deadline := time.Now().Add(10 * time.Second)
				for !containsAll(fe.last(), totals) && time.Now().Before(deadline) {
					time.Sleep(20 * time.Millisecond)
				}
				if !containsAll(fe.last(), totals) {
					t.Errorf("the live panel never showed the totals %q:\n%s", totals, fe.last())
				}
			}
			c.Close()
			if live {
				if last := fe.last(); !strings.Contains(last, "</b>: closed</div>") {
					t.Errorf("final panel:\n%s", last)
				}
				if len(pub.texts) != 0 {
					t.Errorf("text panel printed with widgets: %q", pub.texts)
				}
				return
			}
			text := strings.Join(pub.texts, "")
			for _, want := range []string{"ClusterCoordinator: closed\n",
				"closures scheduled: 20, done: 20, failed: 0, retried: 0, queued: 0, running: 0, workers up: 2/2\n"} {
				if !strings.Contains(text, want) {
					t.Errorf("text panel lacks %q:\n%s", want, text)
				}
			}
		})
	}
}

func allUp(up []bool) bool {
	for _, u := range up {
		if !u {
			return false
		}
	}
	return len(up) > 0
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
