package keras

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"godist/distlib/display"
)

func TestFormatBar(t *testing.T) {
	tests := []struct {
		name           string
		current, total int
		elapsed        time.Duration
		logs           Logs
		final          bool
		want           string
	}{
		{"final", 125, 125, 1875 * time.Millisecond, Logs{"loss": 0.30121, "accuracy": 0.91234}, true,
			"125/125 [==============================] - 2s 15ms/step - loss: 0.3012 - accuracy: 0.9123"},
		{"partial", 7, 125, 700 * time.Millisecond, Logs{"loss": 0.5}, false,
			"  7/125 [>.............................] - ETA: 11s - loss: 0.5000"},
		{"first", 1, 10, time.Second, Logs{"loss": 2.3}, false,
			" 1/10 [==>...........................] - ETA: 9s - loss: 2.3000"},
		{"small values", 2, 2, 2 * time.Millisecond, Logs{"loss": 0.0001}, true,
			"2/2 [==============================] - 0s 1ms/step - loss: 1.0000e-04"},
		{"unknown", 5, 0, 5 * time.Second, Logs{}, false,
			"      5/Unknown - 5s 1s/step"},
		{"validation order", 1, 1, 3 * time.Second, Logs{"val_loss": 1, "accuracy": 0.5, "loss": 2, "val_accuracy": 0.25}, true,
			"1/1 [==============================] - 3s 3s/step - loss: 2.0000 - accuracy: 0.5000 - val_loss: 1.0000 - val_accuracy: 0.2500"},
		{"eta minutes", 1, 100, 2 * time.Second, nil, false,
			"  1/100 [..............................] - ETA: 3:18"},
	}
	for _, tc := range tests {
		if got := formatBar(tc.current, tc.total, tc.elapsed, tc.logs, tc.final); got != tc.want {
			t.Errorf("%s: formatBar = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// fakeClock advances by step on every call: the golden output below has 4 calls per
// epoch in plain mode (start, 3 steps of work, finish), 240ms over 3 steps.
type fakeClock struct {
	t    time.Time
	step time.Duration
}

func (c *fakeClock) now() time.Time { c.t = c.t.Add(c.step); return c.t }

func TestProgressPlainGolden(t *testing.T) {
	tests := []struct {
		verbose int
		want    string
	}{
		{1, "Epoch 1/2\n" +
			"3/3 [==============================] - 0s 80ms/step - loss: 1.0000 - accuracy: 0.5000\n" +
			"Epoch 2/2\n" +
			"3/3 [==============================] - 0s 80ms/step - loss: 0.5000 - accuracy: 0.7500 - val_loss: 0.6000\n"},
		{2, "Epoch 1/2\n" +
			"3/3 - 0s - loss: 1.0000 - accuracy: 0.5000 - 0s/epoch - 80ms/step\n" +
			"Epoch 2/2\n" +
			"3/3 - 0s - loss: 0.5000 - accuracy: 0.7500 - val_loss: 0.6000 - 0s/epoch - 80ms/step\n"},
	}
	for _, tc := range tests {
		var buf bytes.Buffer
		clk := &fakeClock{step: 60 * time.Millisecond}
		p := newProgress(tc.verbose, &buf, clk.now)
		logs := []Logs{{"loss": 1, "accuracy": 0.5}, {"loss": 0.5, "accuracy": 0.75, "val_loss": 0.6}}
		for e := 0; e < 2; e++ {
			p.epochBegin(e, 2, 3)
			for s := 1; s <= 3; s++ {
				clk.now() // the step's work
				p.step(s, logs[e])
			}
			p.finish(logs[e])
		}
		if got := buf.String(); got != tc.want {
			t.Errorf("verbose %d output:\n%s\nwant:\n%s", tc.verbose, got, tc.want)
		}
		if strings.Contains(buf.String(), "\r") {
			t.Errorf("verbose %d plain output contains carriage returns", tc.verbose)
		}
	}
}

type fakePublisher struct {
	calls []string // "display id" or "update id"
	last  string
}

func (f *fakePublisher) Display(d display.Bundle, _ display.Bundle, id string) {
	f.calls = append(f.calls, "display "+id)
	f.last, _ = d["text/plain"].(string)
}

func (f *fakePublisher) Update(d display.Bundle, _ display.Bundle, id string) {
	f.calls = append(f.calls, "update "+id)
	f.last, _ = d["text/plain"].(string)
}

func (f *fakePublisher) ClearOutput(bool) {}

func TestProgressNotebookUpdatesOneHandle(t *testing.T) {
	pub := &fakePublisher{}
	old := display.SetPublisher(pub)
	defer display.SetPublisher(old)
	var buf bytes.Buffer
	clk := &fakeClock{step: 200 * time.Millisecond}
	p := newProgress(1, &buf, clk.now)
	for e := 0; e < 2; e++ {
		p.epochBegin(e, 2, 2)
		p.step(1, Logs{"loss": 1})
		p.step(2, Logs{"loss": 0.5})
		p.finish(Logs{"loss": 0.5})
	}
	if buf.Len() != 0 {
		t.Errorf("notebook mode wrote to the stream: %q", buf.String())
	}
	if len(pub.calls) < 4 {
		t.Fatalf("calls = %v, want a display and updates", pub.calls)
	}
	id := strings.TrimPrefix(pub.calls[0], "display ")
	for i, c := range pub.calls[1:] {
		if c != "update "+id {
			t.Errorf("call %d = %q, want %q", i+1, c, "update "+id)
		}
	}
	wantLines := []string{"Epoch 1/2", "2/2 [==============================]", "Epoch 2/2", "2/2 [==============================]"}
	lines := strings.Split(pub.last, "\n")
	if len(lines) != len(wantLines) {
		t.Fatalf("final display:\n%s\nwant %d lines", pub.last, len(wantLines))
	}
	for i, w := range wantLines {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("final display line %d = %q, want prefix %q", i, lines[i], w)
		}
	}
}

// TestProgressPanelLines checks the cluster panel's side channel: with PanelEnv set and
// plain output, Fit's progress prints PanelLinePrefix lines, at most one per panelEvery
// and one at the epoch's last step (32 samples a step: 32/0.4s, 96/1.2s, 128/1.7s);
// without it, none.
func TestProgressPanelLines(t *testing.T) {
	for _, tc := range []struct {
		env  string
		want []string
	}{
		{"1", []string{
			`Epoch 1/2`,
			PanelLinePrefix + `{"epoch":1,"epochs":2,"step":1,"steps":4,"samples_per_sec":80.0}`,
			PanelLinePrefix + `{"epoch":1,"epochs":2,"step":3,"steps":4,"samples_per_sec":80.0}`,
			PanelLinePrefix + `{"epoch":1,"epochs":2,"step":4,"steps":4,"samples_per_sec":75.3}`,
		}},
		{"", []string{`Epoch 1/2`}},
	} {
		t.Setenv(PanelEnv, tc.env)
		var buf bytes.Buffer
		clock := time.Unix(0, 0)
		p := newProgress(1, &buf, func() time.Time { return clock })
		p.epochBegin(0, 2, 4)
		for i := 1; i <= 4; i++ {
			clock = clock.Add(400 * time.Millisecond) // steps 1 and 3 are due, 2 is too soon, 4 is the last
			p.samples = float64(32 * i)
			if i == 4 {
				clock = clock.Add(100 * time.Millisecond)
			}
			p.step(i, Logs{})
		}
		if got := strings.Split(strings.TrimSpace(buf.String()), "\n"); strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
			t.Errorf("%s=%q: output\n%s\nwant\n%s", PanelEnv, tc.env, strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
		}
	}
}
