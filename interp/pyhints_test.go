package interp

import (
	"context"
	"strings"
	"testing"
)

// TestPythonNamesHints: a member written in Python's snake_case, and a Keras submodule path,
// get the Go name in a did-you-mean line.
func TestPythonNamesHints(t *testing.T) {
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if _, err := s.Execute(ctx, `import (
	"godist/distlib/distribute"
	"godist/distlib/keras"
)
strategy := distribute.NewMirroredStrategy()`, nil); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ cell, want string }{
		{"strategy.num_replicas_in_sync", "did you mean strategy.NumReplicasInSync?"},
		{`cb := keras.callbacks.ReduceLROnPlateau("val_loss", 0.1, 2)`, "Go's keras has no callbacks: write keras.ReduceLROnPlateau"},
		{`opt := keras.optimizers.Adam(0.001)`, "Go's keras has no optimizers: write keras.Adam"},
		{`d := keras.layers.Dense(10)`, "Keras' layers are package layers in Go: write layers.Dense"},
	}
	for _, tc := range cases {
		_, err := s.Execute(ctx, tc.cell, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "cell line 1") {
			t.Errorf("%s: error %v, want one at cell line 1 with %q", tc.cell, err, tc.want)
		}
	}
}
