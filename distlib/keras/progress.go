package keras

import (
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"godist/distlib/display"
	progressui "godist/distlib/progress" // renamed: this file's progress type has the name
)

// progress renders Keras 3's progress bar (keras.utils.Progbar) for Fit and Evaluate, in
// one of four places:
//   - a notebook whose front end draws widgets (verbose 1): one FitBar for the run, from
//     the UI installed in package progress (widgets), a live row (the epoch, the bar,
//     steps, time left, metrics) under the history of the finished epochs' lines and of
//     what the cell printed between them;
//   - a notebook without widgets (console, nbconvert): each epoch its own display, "Epoch
//     2/5" and the live line updated in place (update_display_data), so that what
//     callbacks print at the epoch's end comes after that epoch's line;
//   - a terminal: the live line redrawn with a carriage return;
//   - elsewhere (a file, a %%distributed worker): one line per epoch, no colours.
type progress struct {
	verbose int // 1: bar, 2: one line per epoch
	mode    int // modePlain, modeTTY, modeNotebook
	w       io.Writer
	now     func() time.Time

	handle *display.Handle   // notebook text: this epoch's display (Evaluate's)
	wbar   progressui.FitBar // notebook with a widget front end, verbose 1
	header string            // "Epoch 2/5" while an epoch runs; "" for Evaluate
	live   string            // the live line last drawn (coloured), "" when none
	open   bool              // an epoch (or Evaluate) has begun and not finished

	target    int // steps per epoch, 0 when unknown
	start     time.Time
	lastDraw  time.Time
	firstStep time.Time // when step 1 ended: later steps are timed from it (Keras leaves out the first step's warm-up)
	lastLen   int       // terminal: the visible width of the line drawn
	stepsDone int

	// The cluster panel's side channel (PanelEnv set, plain output: a %%distributed
	// worker): a PanelLinePrefix line at most every panelEvery, and at each epoch's end.
	panel      bool
	epoch      int     // 1-based, 0 outside Fit's epochs
	epochs     int     // of Fit
	samples    float64 // examples trained in the epoch so far (Fit sets it before step)
	fitSamples float64 // examples trained in the Fit's finished epochs
	fitStart   time.Time
	lastPanel  time.Time
	panelStep  int // the step of the last panel line
}

// PanelEnv and PanelLinePrefix are the cluster panel's side channel (package progress
// documents it).
const (
	PanelEnv        = progressui.PanelEnv
	PanelLinePrefix = progressui.PanelLinePrefix
)

const panelEvery = 500 * time.Millisecond

// panelLine prints the panel's progress line when due (or when force): the epoch, the
// step, and the examples trained since Fit began with the seconds since then, from which
// the panel averages samples/s over its window.
func (p *progress) panelLine(force bool) {
	if !p.panel || p.epoch == 0 {
		return
	}
	now := p.now()
	if !force && !p.lastPanel.IsZero() && now.Sub(p.lastPanel) < panelEvery {
		return
	}
	p.lastPanel, p.panelStep = now, p.stepsDone
	fmt.Fprintf(p.w, "%s{\"epoch\":%d,\"epochs\":%d,\"step\":%d,\"steps\":%d,\"samples\":%.0f,\"time\":%.3f}\n",
		PanelLinePrefix, p.epoch, p.epochs, p.stepsDone, p.target, p.fitSamples+p.samples, now.Sub(p.fitStart).Seconds())
}

const (
	modePlain = iota
	modeTTY
	modeNotebook
)

// barWidth is the bar's length in glyphs, Keras 3's Progbar width.
const barWidth = 20

// newProgress chooses the rendering for where output goes.
func newProgress(verbose int, w io.Writer, now func() time.Time) *progress {
	p := &progress{verbose: verbose, w: w, now: now}
	switch {
	case display.InNotebook():
		p.mode = modeNotebook
		if verbose == 1 {
			p.wbar = progressui.NewFitBar() // nil unless a widget front end is ready
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

// color reports whether lines carry Keras' ANSI colours: where they are rendered (a
// terminal, a notebook), not in files.
func (p *progress) color() bool { return p.mode != modePlain }

// around runs fn, the epochs of a Fit or an Evaluate; with the widget bar, what the cell
// prints meanwhile goes to the bar's history, in order with the epochs' lines. p may be nil.
func (p *progress) around(fn func()) {
	if p == nil || p.wbar == nil {
		fn()
		return
	}
	p.wbar.Run(fn)
}

// epochBegin starts a new epoch's bar.
func (p *progress) epochBegin(epoch, epochs, target int) {
	p.target, p.stepsDone = target, 0
	p.epoch, p.epochs, p.samples, p.lastPanel, p.panelStep = epoch+1, epochs, 0, time.Time{}, 0
	p.start = p.now()
	if p.fitStart.IsZero() {
		p.fitStart = p.start
	}
	p.lastDraw, p.firstStep, p.live, p.open = time.Time{}, time.Time{}, "", true
	p.header = fmt.Sprintf("Epoch %d/%d", epoch+1, epochs)
	switch {
	case p.wbar != nil:
		p.wbar.Progress(p.header, 0, target, "")
	case p.mode == modeNotebook:
		p.handle = display.NewHandle()
		p.handle.Update(display.Bundle{"text/plain": p.header})
	default:
		fmt.Fprintln(p.w, p.header)
	}
}

// step redraws the bar after step (1-based) when enough time has passed.
func (p *progress) step(current int, logs Logs) {
	p.stepsDone, p.open = current, true
	now := p.now()
	if current == 1 {
		p.firstStep = now
	}
	p.panelLine(current == p.target)
	if p.verbose != 1 || p.mode == modePlain {
		return
	}
	if current != p.target && !p.lastDraw.IsZero() && now.Sub(p.lastDraw) < 100*time.Millisecond {
		return
	}
	p.lastDraw = now
	p.draw(newBarLine(current, p.target, now.Sub(p.start), p.perStep(current, now), logs, false))
}

// perStep is Keras' time per step after current steps: from the end of the first step
// when it is known, so that the first step's warm-up does not inflate the rest.
func (p *progress) perStep(current int, now time.Time) float64 {
	if current <= 0 {
		return 0
	}
	if current > 1 && !p.firstStep.IsZero() {
		return now.Sub(p.firstStep).Seconds() / float64(current-1)
	}
	return now.Sub(p.start).Seconds() / float64(current)
}

// finish shows the epoch's final line with logs (validation included).
func (p *progress) finish(logs Logs) {
	now := p.now()
	if p.panel && p.panelStep != p.stepsDone {
		p.panelLine(true)
	}
	p.fitSamples += p.samples
	p.samples = 0
	p.open = false
	elapsed, perStep := now.Sub(p.start), p.perStep(p.stepsDone, now)
	if p.verbose == 2 {
		p.epochLine(formatEpochLine(p.stepsDone, elapsed, perStep, logs))
		return
	}
	target := p.target
	if target == 0 {
		target = p.stepsDone
	}
	bl := newBarLine(p.stepsDone, target, elapsed, perStep, logs, true)
	switch p.mode {
	case modeTTY:
		p.draw(bl)
		fmt.Fprintln(p.w)
		p.lastLen = 0
	case modeNotebook:
		p.draw(bl)
		if p.wbar != nil {
			p.history(p.entry(p.live))
		}
	default:
		fmt.Fprintln(p.w, bl.text(false))
	}
	p.live = ""
}

// history adds finished lines to the widget bar's history: printed as the cell's output
// while the bar captures it (so that they keep their order with what callbacks print, in
// every front end that captures), else appended to it.
func (p *progress) history(text string) {
	if !p.wbar.Capturing() {
		p.wbar.Append(text)
		return
	}
	fmt.Fprint(p.w, text)
	display.Sync() // in the history before the bar moves on
}

// entry is the epoch's header (if any) and its line, as the history keeps them.
func (p *progress) entry(line string) string {
	if p.header == "" {
		return line + "\n"
	}
	return p.header + "\n" + line + "\n"
}

// epochLine shows verbose 2's line under the epoch's header.
func (p *progress) epochLine(line string) {
	if p.mode == modeNotebook {
		p.notebookText(line)
		return
	}
	fmt.Fprintln(p.w, line)
}

// emitLine shows a line of its own after the progress so far ("Fit interrupted ..."); an
// epoch cut short keeps its last drawn state above it.
func (p *progress) emitLine(s string) {
	switch {
	case p.wbar != nil:
		text := s + "\n"
		if p.open && p.live != "" {
			text = p.entry(p.live) + text
		}
		p.history(text)
	case p.mode == modeNotebook:
		display.Show(display.Bundle{"text/plain": s})
	case p.mode == modeTTY && p.lastLen > 0:
		fmt.Fprintf(p.w, "\n%s\n", s)
		p.lastLen = 0
	default:
		fmt.Fprintln(p.w, s)
	}
	p.open = false
}

// draw shows bl as the live line: on the widget bar, in the epoch's display, or over the
// terminal's current line.
func (p *progress) draw(bl barLine) {
	p.live = bl.text(p.color())
	switch {
	case p.wbar != nil:
		target := p.target
		if target == 0 {
			target = p.stepsDone
		}
		p.wbar.Progress(p.header, p.stepsDone, target, bl.short())
	case p.mode == modeNotebook:
		p.notebookText(p.live)
	case p.mode == modeTTY:
		width := utf8.RuneCountInString(bl.text(false))
		pad := ""
		if p.lastLen > width {
			pad = strings.Repeat(" ", p.lastLen-width)
		}
		fmt.Fprintf(p.w, "\r%s%s", p.live, pad)
		p.lastLen = width
	}
}

// notebookText shows line under the epoch's header in the epoch's display.
func (p *progress) notebookText(line string) {
	if p.handle == nil { // Evaluate: one display for the run
		p.handle = display.NewHandle()
	}
	text := line
	if p.header != "" {
		text = p.header + "\n" + line
	}
	p.handle.Update(display.Bundle{"text/plain": text})
}

// barLine is one state of Keras 3's progress bar, in parts; its text is
// "12/64 ━━━━━━━━━━━━━━━━━━━━ 3s 12ms/step - accuracy: 0.9100 - loss: 0.3100".
type barLine struct {
	count      string // "12/64", the count padded to the target's width; "     12/Unknown"
	known      bool   // the target is known: the count is bold and the bar drawn
	done, left int    // the bar's glyphs: done (green) then left (grey), barWidth in all
	time       string // time left ("3s", "1:05"); at the end and with no target, time taken
	perStep    string // "12ms/step"
	metrics    string // " - accuracy: 0.9100 - loss: 0.3100"
}

// newBarLine is the bar after current of target steps (target 0: unknown), elapsed since
// the start, perStep seconds a step, with logs; final: the epoch's closing line.
func newBarLine(current, target int, elapsed time.Duration, perStep float64, logs Logs, final bool) barLine {
	b := barLine{perStep: formatPerStep(perStep), metrics: formatLogs(logs)}
	if target > 0 {
		digits := int(math.Log10(float64(target))) + 1
		b.count, b.known = fmt.Sprintf("%*d/%d", digits, current, target), true
		prog := min(float64(current)/float64(target), 1)
		b.done = int(barWidth * prog)
		b.left = barWidth - b.done
	} else {
		b.count = fmt.Sprintf("%7d/Unknown", current)
	}
	if final || target == 0 {
		b.time = fmt.Sprintf("%.0fs", elapsed.Seconds())
		return b
	}
	eta := perStep * float64(target-current)
	switch {
	case eta > 3600:
		b.time = fmt.Sprintf("%d:%02d:%02d", int(eta)/3600, int(eta)%3600/60, int(eta)%60)
	case eta > 60:
		b.time = fmt.Sprintf("%d:%02d", int(eta)/60, int(eta)%60)
	default:
		b.time = fmt.Sprintf("%ds", int(eta))
	}
	return b
}

// ANSI SGR codes as Keras writes them.
const (
	ansiBold  = "\x1b[1m"
	ansiGreen = "\x1b[32m"
	ansiGrey  = "\x1b[37m"
	ansiReset = "\x1b[0m"
)

// text renders the line; with color, with Keras' ANSI codes (bold count and time, the
// bar's done part green and the rest grey), without, plain.
func (b barLine) text(color bool) string {
	var s strings.Builder
	paint := func(code, text string) {
		if color {
			s.WriteString(code + text + ansiReset)
		} else {
			s.WriteString(text)
		}
	}
	if b.known {
		paint(ansiBold, b.count)
		s.WriteString(" ")
		if b.done > 0 {
			paint(ansiGreen, strings.Repeat("━", b.done))
		}
		paint(ansiGrey, strings.Repeat("━", b.left))
	} else {
		s.WriteString(b.count)
	}
	s.WriteString(" ")
	paint(ansiBold, b.time)
	s.WriteString(" " + b.perStep + b.metrics)
	return s.String()
}

// short is the line without its bar, for the widget bar that draws it:
// "12/64 3s 12ms/step - accuracy: 0.9100 - loss: 0.3100".
func (b barLine) short() string {
	return strings.TrimLeft(b.count, " ") + " " + b.time + " " + b.perStep + b.metrics
}

// formatEpochLine renders Keras 3's verbose=2 line:
// "125/125 - 2s - 15ms/step - accuracy: 0.9123 - loss: 0.3012".
func formatEpochLine(steps int, elapsed time.Duration, perStep float64, logs Logs) string {
	return fmt.Sprintf("%d/%d - %.0fs - %s%s", steps, steps, elapsed.Seconds(), formatPerStep(perStep), formatLogs(logs))
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

// formatLogs renders the metrics as Keras 3's bar does: " - name: value" in its order
// (barKeys), 4 decimals, or 4 significant digits in exponent form for tiny values.
func formatLogs(logs Logs) string {
	var b strings.Builder
	for _, k := range barKeys(logs) {
		v := logs[k]
		if math.Abs(v) > 1e-3 {
			fmt.Fprintf(&b, " - %s: %.4f", k, v)
		} else {
			fmt.Fprintf(&b, " - %s: %.4e", k, v)
		}
	}
	return b.String()
}

// barKeys orders log keys as Keras 3's bar shows them: the training values by name, then
// the validation values by name (its trainer sorts the logs; validation comes last).
func barKeys(logs Logs) []string {
	keys := make([]string, 0, len(logs))
	for k := range logs {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		vi, vj := strings.HasPrefix(keys[i], "val_"), strings.HasPrefix(keys[j], "val_")
		if vi != vj {
			return vj
		}
		return keys[i] < keys[j]
	})
	return keys
}

// logKeys orders log keys for History and messages: loss, then the metrics, then the
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
