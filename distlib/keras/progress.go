package keras

import (
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"
	"time"

	"godist/distlib/display"
	"godist/distlib/widgets"
)

// progress renders Keras' progress bar. In a notebook it updates one display handle in
// place for the whole Fit; on a terminal it redraws the current line; elsewhere it prints
// one line per epoch.
type progress struct {
	verbose int // 1: bar, 2: one line per epoch
	mode    int // modePlain, modeTTY, modeNotebook
	w       io.Writer
	now     func() time.Time

	handle *display.Handle
	wbar   *widgets.FitBar // notebook with a widget front end: the bar as widgets
	lines  []string        // notebook: what is shown above the live bar

	target     int // steps per epoch, 0 when unknown
	start      time.Time
	lastDraw   time.Time
	lastLen    int
	stepsDone  int
	firstStepT time.Duration

	// The cluster panel's side channel (PanelEnv set, plain output: a %%distributed
	// worker): a PanelLinePrefix line at most every panelEvery, and at each epoch's end.
	panel     bool
	epoch     int     // 1-based, 0 outside Fit's epochs
	epochs    int     // of Fit
	samples   float64 // examples trained in the epoch so far (Fit sets it before step)
	lastPanel time.Time
}

// PanelEnv and PanelLinePrefix are the cluster panel's side channel (package widgets
// documents it).
const (
	PanelEnv        = widgets.PanelEnv
	PanelLinePrefix = widgets.PanelLinePrefix
)

const panelEvery = 500 * time.Millisecond

// panelLine prints the panel's progress line when due (or when force).
func (p *progress) panelLine(force bool) {
	if !p.panel || p.epoch == 0 {
		return
	}
	now := p.now()
	if !force && !p.lastPanel.IsZero() && now.Sub(p.lastPanel) < panelEvery {
		return
	}
	p.lastPanel = now
	rate := 0.0
	if el := now.Sub(p.start).Seconds(); el > 0 && p.samples > 0 {
		rate = p.samples / el
	}
	fmt.Fprintf(p.w, "%s{\"epoch\":%d,\"epochs\":%d,\"step\":%d,\"steps\":%d,\"samples_per_sec\":%.1f}\n",
		PanelLinePrefix, p.epoch, p.epochs, p.stepsDone, p.target, rate)
}

const (
	modePlain = iota
	modeTTY
	modeNotebook
)

const barWidth = 30

// newProgress chooses the rendering for where output goes.
func newProgress(verbose int, w io.Writer, now func() time.Time) *progress {
	p := &progress{verbose: verbose, w: w, now: now}
	switch {
	case display.InNotebook():
		p.mode = modeNotebook
		p.handle = display.NewHandle()
		if widgets.Ready() { // the widget hook: same text, drawn as a progress widget
			p.wbar = widgets.NewFitBar()
		}
	case isTerminal(w):
		p.mode = modeTTY
	default:
		p.panel = os.Getenv(PanelEnv) != ""
	}
	return p
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// epochBegin starts a new epoch's bar.
func (p *progress) epochBegin(epoch, epochs, target int) {
	p.target, p.stepsDone = target, 0
	p.epoch, p.epochs, p.samples, p.lastPanel = epoch+1, epochs, 0, time.Time{}
	p.start = p.now()
	p.lastDraw = time.Time{}
	p.emitLine(fmt.Sprintf("Epoch %d/%d", epoch+1, epochs))
}

// step redraws the bar after step (1-based) when enough time has passed.
func (p *progress) step(current int, logs Logs) {
	p.stepsDone = current
	p.panelLine(current == p.target)
	if p.verbose != 1 || p.mode == modePlain {
		return
	}
	now := p.now()
	if current != p.target && !p.lastDraw.IsZero() && now.Sub(p.lastDraw) < 100*time.Millisecond {
		return
	}
	p.lastDraw = now
	p.draw(formatBar(current, p.target, now.Sub(p.start), logs, false))
}

// finish prints the epoch's final line with logs (validation included).
func (p *progress) finish(logs Logs) {
	elapsed := p.now().Sub(p.start)
	var line string
	if p.verbose == 2 {
		line = formatEpochLine(p.stepsDone, elapsed, logs)
	} else {
		target := p.target
		if target == 0 {
			target = p.stepsDone
		}
		line = formatBar(p.stepsDone, target, elapsed, logs, true)
	}
	switch p.mode {
	case modeTTY:
		p.draw(line)
		fmt.Fprintln(p.w)
		p.lastLen = 0
	case modeNotebook:
		p.lines = append(p.lines, line)
		p.show(strings.Join(p.lines, "\n"))
	default:
		fmt.Fprintln(p.w, line)
	}
}

// emitLine shows a line of its own ("Epoch 1/3").
func (p *progress) emitLine(s string) {
	if p.mode == modeNotebook {
		p.lines = append(p.lines, s)
		p.show(strings.Join(p.lines, "\n"))
		return
	}
	fmt.Fprintln(p.w, s)
}

func (p *progress) draw(line string) {
	switch p.mode {
	case modeTTY:
		pad := ""
		if p.lastLen > len(line) {
			pad = strings.Repeat(" ", p.lastLen-len(line))
		}
		fmt.Fprintf(p.w, "\r%s%s", line, pad)
		p.lastLen = len(line)
	case modeNotebook:
		p.show(strings.Join(append(append([]string(nil), p.lines...), line), "\n"))
	}
}

// show puts text in the notebook's display: the widget bar's, or the text display's.
func (p *progress) show(text string) {
	if p.wbar != nil {
		p.wbar.Update(text, p.stepsDone, p.target)
		return
	}
	p.handle.Update(display.Bundle{"text/plain": text})
}

// formatBar renders one state of Keras' progress bar, such as
// "125/125 [==============================] - 2s 15ms/step - loss: 0.3012 - accuracy: 0.9123".
// target 0 means unknown.
func formatBar(current, target int, elapsed time.Duration, logs Logs, final bool) string {
	var b strings.Builder
	if target > 0 {
		digits := int(math.Log10(float64(target))) + 1
		fmt.Fprintf(&b, "%*d/%d [", digits, current, target)
		prog := float64(current) / float64(target)
		if prog > 1 {
			prog = 1
		}
		pw := int(barWidth * prog)
		if pw > 0 {
			b.WriteString(strings.Repeat("=", pw-1))
			if current < target {
				b.WriteString(">")
			} else {
				b.WriteString("=")
			}
		}
		b.WriteString(strings.Repeat(".", barWidth-pw))
		b.WriteString("]")
	} else {
		fmt.Fprintf(&b, "%7d/Unknown", current)
	}
	perStep := 0.0
	if current > 0 {
		perStep = elapsed.Seconds() / float64(current)
	}
	if final || target == 0 {
		fmt.Fprintf(&b, " - %.0fs %s", elapsed.Seconds(), formatPerStep(perStep))
	} else {
		eta := perStep * float64(target-current)
		switch {
		case eta > 3600:
			fmt.Fprintf(&b, " - ETA: %d:%02d:%02d", int(eta)/3600, int(eta)%3600/60, int(eta)%60)
		case eta > 60:
			fmt.Fprintf(&b, " - ETA: %d:%02d", int(eta)/60, int(eta)%60)
		default:
			fmt.Fprintf(&b, " - ETA: %ds", int(eta))
		}
	}
	b.WriteString(formatLogs(logs))
	return b.String()
}

// formatEpochLine renders Keras' verbose=2 line:
// "125/125 - 2s - loss: 0.3012 - accuracy: 0.9123 - 2s/epoch - 15ms/step".
func formatEpochLine(steps int, elapsed time.Duration, logs Logs) string {
	perStep := 0.0
	if steps > 0 {
		perStep = elapsed.Seconds() / float64(steps)
	}
	return fmt.Sprintf("%d/%d - %.0fs%s - %.0fs/epoch - %s", steps, steps, elapsed.Seconds(),
		formatLogs(logs), elapsed.Seconds(), formatPerStep(perStep))
}

func formatPerStep(s float64) string {
	switch {
	case s >= 1 || s == 0:
		return fmt.Sprintf("%.0fs/step", s)
	case s >= 1e-3:
		return fmt.Sprintf("%.0fms/step", s*1e3)
	default:
		return fmt.Sprintf("%.0fus/step", s*1e6)
	}
}

func formatLogs(logs Logs) string {
	var b strings.Builder
	for _, k := range logKeys(logs) {
		v := logs[k]
		if math.Abs(v) > 1e-3 {
			fmt.Fprintf(&b, " - %s: %.4f", k, v)
		} else {
			fmt.Fprintf(&b, " - %s: %.4e", k, v)
		}
	}
	return b.String()
}

// logKeys orders log keys the way Keras prints them: loss, then the metrics, then the
// validation values in the same order.
func logKeys(logs Logs) []string {
	keys := make([]string, 0, len(logs))
	for k := range logs {
		keys = append(keys, k)
	}
	rank := func(k string) (int, string) {
		val := 0
		if strings.HasPrefix(k, "val_") {
			val, k = 2, strings.TrimPrefix(k, "val_")
		}
		if k == "loss" {
			return val, k
		}
		return val + 1, k
	}
	sort.Slice(keys, func(i, j int) bool {
		ri, ki := rank(keys[i])
		rj, kj := rank(keys[j])
		if ri != rj {
			return ri < rj
		}
		return ki < kj
	})
	return keys
}
