// Package display shows rich output (HTML, Markdown, images, JSON) in a notebook, and
// display handles that update in place, such as progress bars and live plots.
//
// Inside the godist Jupyter kernel the functions publish display_data messages; elsewhere
// (a compiled program, a test, a terminal) they fall back to a plain-text rendering on
// standard output. The kernel installs its publisher with SetPublisher.
package display

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"io"
	"os"
	"sync"
	"sync/atomic"
)

// Bundle is a MIME bundle: a map from MIME type to data, as in Jupyter's display_data.
type Bundle map[string]any

// Publisher receives what the display functions produce. The kernel implements it.
type Publisher interface {
	// Display shows data. A non-empty id names a display that Update may change later.
	Display(data Bundle, metadata Bundle, id string)
	// Update replaces the display named id wherever it is shown.
	Update(data Bundle, metadata Bundle, id string)
	// ClearOutput clears the cell's output; with wait, only when new output arrives.
	ClearOutput(wait bool)
}

var (
	mu  sync.RWMutex
	pub Publisher
	seq atomic.Int64
)

// SetPublisher installs p as the receiver of displays and returns the previous one.
// A nil p restores the plain-text fallback.
func SetPublisher(p Publisher) Publisher {
	mu.Lock()
	defer mu.Unlock()
	old := pub
	pub = p
	return old
}

// PlainText is implemented by a Publisher that renders to plain text (the workers of
// %%distributed write to a pipe the notebook relays line by line): when PlainText reports
// true, InNotebook is false, so progress bars print lines instead of updating a display.
type PlainText interface {
	PlainText() bool
}

// InNotebook reports whether displays go to a notebook front end that updates them in
// place.
func InNotebook() bool {
	mu.RLock()
	p := pub
	mu.RUnlock()
	if p == nil {
		return false
	}
	if t, ok := p.(PlainText); ok && t.PlainText() {
		return false
	}
	return true
}

func current() Publisher {
	mu.RLock()
	defer mu.RUnlock()
	return pub
}

// Syncer is implemented by a Publisher whose cell output passes through buffers (the
// kernel's captured standard output): Sync delivers what was written before it.
type Syncer interface {
	Sync()
}

// Sync delivers the output written so far (prints included) to the front end before what
// comes next, when the publisher buffers it; otherwise it does nothing. Widgets that route
// output (an Output area's capture) call it.
func Sync() {
	if s, ok := current().(Syncer); ok {
		s.Sync()
	}
}

// Show displays a MIME bundle. It is the primitive the other functions use.
func Show(data Bundle) {
	if p := current(); p != nil {
		p.Display(data, Bundle{}, "")
		return
	}
	fallback(os.Stdout, data)
}

// HTML displays an HTML fragment.
func HTML(html string) { Show(Bundle{"text/html": html, "text/plain": html}) }

// Markdown displays Markdown text.
func Markdown(md string) { Show(Bundle{"text/markdown": md, "text/plain": md}) }

// SVG displays an SVG image given as XML text.
func SVG(svg string) { Show(Bundle{"image/svg+xml": svg, "text/plain": "<SVG image>"}) }

// JSON displays v as a JSON tree; it returns an error when v cannot be encoded.
func JSON(v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("display: JSON: %w", err)
	}
	var tree any
	_ = json.Unmarshal(raw, &tree)
	Show(Bundle{"application/json": tree, "text/plain": string(raw)})
	return nil
}

// PNG displays PNG-encoded bytes.
func PNG(pngBytes []byte) { Show(PNGBundle(pngBytes)) }

// PNGBundle returns the MIME bundle of PNG-encoded bytes.
func PNGBundle(pngBytes []byte) Bundle {
	return Bundle{"image/png": base64.StdEncoding.EncodeToString(pngBytes), "text/plain": fmt.Sprintf("<PNG image, %d bytes>", len(pngBytes))}
}

// Image displays img as a PNG; it returns an error when img cannot be encoded.
func Image(img image.Image) error {
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return fmt.Errorf("display: Image: %w", err)
	}
	PNG(buf.Bytes())
	return nil
}

// Text displays plain text.
func Text(s string) { Show(Bundle{"text/plain": s}) }

// ClearOutput clears the current cell's output; with wait, the clearing happens when the
// next output arrives, which avoids flicker in animations.
func ClearOutput(wait bool) {
	if p := current(); p != nil {
		p.ClearOutput(wait)
	}
}

// Handle is a display that can be updated in place.
type Handle struct {
	id    string
	shown bool
}

// NewHandle returns a handle with a fresh display id; nothing is shown until Update.
func NewHandle() *Handle {
	return &Handle{id: fmt.Sprintf("godist-%d-%d", os.Getpid(), seq.Add(1))}
}

// ID returns the handle's display id.
func (h *Handle) ID() string { return h.id }

// Update shows data in the handle's place: the first call displays it, later calls replace it.
// Outside a notebook every call prints the plain-text form.
func (h *Handle) Update(data Bundle) {
	p := current()
	if p == nil {
		fallback(os.Stdout, data)
		return
	}
	if !h.shown {
		h.shown = true
		p.Display(data, Bundle{}, h.id)
		return
	}
	p.Update(data, Bundle{}, h.id)
}

// UpdateHTML is Update with an HTML fragment and its plain-text alternative.
func (h *Handle) UpdateHTML(html, plain string) {
	h.Update(Bundle{"text/html": html, "text/plain": plain})
}

func fallback(w io.Writer, data Bundle) {
	if s, ok := data["text/plain"].(string); ok {
		fmt.Fprintln(w, s)
		return
	}
	for mime := range data {
		fmt.Fprintf(w, "<%s output>\n", mime)
		return
	}
}
