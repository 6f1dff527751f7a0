package notebooks

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestQuickstartAfterInterrupt executes the quickstart notebook with one more cell before
// its Fit: a Fit of many epochs, interrupted after a few seconds. The interrupted cell
// reports the interrupt and where training stopped; the rest of the notebook then runs to
// the end with the same checks as TestNotebooks (the closures of earlier cells, the model,
// its optimizer and the strategy all keep working).
func TestQuickstartAfterInterrupt(t *testing.T) {
	e := setup(t)
	spec, _ := json.Marshal(map[string]any{
		"before": "model.Fit(",
		"code":   "longHistory := model.Fit(trainDataset, keras.Epochs(1000))",
		"after":  8,
	})
	nb := e.executeWith(t, "quickstart.ipynb", 3*time.Minute, string(spec))
	at := findCell(t, nb, "keras.Epochs(1000)")
	c := cellAt(t, nb, at)
	if !strings.Contains(c.Text(), "Fit interrupted in epoch") {
		t.Errorf("the interrupted Fit did not say where it stopped:\n%s", c.Text())
	}
	interrupted := false
	for _, o := range c.Outputs {
		if o.Type == "error" && regexp.MustCompile(`^Interrupted`).MatchString(o.EName) {
			interrupted = true
		}
	}
	if !interrupted {
		t.Errorf("the long Fit cell has no Interrupted error:\n%s", c.Text())
	}
	// The rest, with the checks of an uninterrupted run.
	nb.Cells = append(nb.Cells[:at:at], nb.Cells[at+1:]...)
	checkQuickstart(t, nb)
}
