package cell

import (
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// cellContextAllowed lists the distlib files (relative to distlib) that may read the running
// cell's context, and why: only the context-free forms that cells translate from TensorFlow
// read it; every call below them takes its caller's ctx, so that a Go program that cancels
// its own ctx stops every wait (ARCHITECTURE.md, "Contexts").
var cellContextAllowed = map[string]string{
	"distribute/cellwrap.go": "the strategies' and the coordinator's context-free forms (Run, Reduce, Gather, Barrier, BroadcastFromChief, NewVariable, Schedule, ScheduleFunction, Join, Fetch, ShardedVariable.Assign)",
	"keras/fit.go":           "Model.Fit, Evaluate and Predict, the context-free forms of FitContext, EvaluateContext and PredictContext",
	"keras/cellwrap.go":      "the parameter-server and mesh calls of the model's context-free methods (Call, Losses, SetWeights, the build, Optimizer.ApplyGradients)",
}

// TestCellContextOnlyInWrappers: no non-test Go file of distlib outside cellContextAllowed
// calls cell.Context().
func TestCellContextOnlyInWrappers(t *testing.T) {
	root := ".."
	var bad []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel == "cell/cell.go" {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if _, ok := cellContextAllowed[rel]; !ok && strings.Contains(string(src), "cell.Context()") {
			bad = append(bad, "distlib/"+rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(bad)
	for _, f := range bad {
		t.Errorf("%s calls cell.Context(): only the context-free forms that cells translate from TensorFlow may "+
			"read the cell's context (the files in cellContextAllowed); code below them takes its caller's ctx, "+
			"so that a program that cancels its own ctx stops the wait. Pass the ctx down, or put the "+
			"context-free wrapper in its package's cellwrap.go", f)
	}
	for f := range cellContextAllowed {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Errorf("cellContextAllowed names %s, which does not exist: remove it", f)
		}
	}
}
