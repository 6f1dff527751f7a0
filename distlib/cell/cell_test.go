package cell

import (
	"context"
	"testing"
)

func TestContext(t *testing.T) {
	if got := Context(); got != context.Background() {
		t.Fatalf("Context() outside a cell = %v, want context.Background()", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	restore := Set(ctx)
	if got := Context(); got != ctx {
		t.Fatalf("Context() in a cell = %v, want the cell's context", got)
	}
	cancel()
	if Context().Err() == nil {
		t.Fatal("Context().Err() = nil after the cell's context was cancelled")
	}
	restore()
	if got := Context(); got != context.Background() {
		t.Fatalf("Context() after restore = %v, want context.Background()", got)
	}
}
