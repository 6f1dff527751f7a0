// Package cell carries the context of the notebook cell that is running to compiled library
// code, the way package display carries its output.
//
// The godist kernel installs each cell's context with Set for as long as the cell runs; an
// interrupt cancels it. Library calls that block or run user work take a context.Context
// (keras' FitContext, distribute's RunContext, ...); their context-free forms, the ones a
// cell translated line by line from TensorFlow calls (model.Fit(ds, keras.Epochs(20))),
// use Context, so that interrupting the cell stops them. Outside the kernel (a compiled
// program, a test) Context returns context.Background().
package cell

import (
	"context"
	"sync"
)

var (
	mu  sync.RWMutex
	cur context.Context
)

// Context returns the context of the cell that is running, or context.Background() when
// none is (outside the kernel, or between cells).
func Context() context.Context {
	mu.RLock()
	defer mu.RUnlock()
	if cur == nil {
		return context.Background()
	}
	return cur
}

// Set installs ctx as the running cell's context and returns a function that restores the
// previous one. A nil ctx means none. The kernel calls it around every cell.
func Set(ctx context.Context) (restore func()) {
	mu.Lock()
	prev := cur
	cur = ctx
	mu.Unlock()
	return func() {
		mu.Lock()
		cur = prev
		mu.Unlock()
	}
}
