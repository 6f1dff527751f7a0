package layers

import (
	"strings"
	"testing"
)

func TestStringLookup(t *testing.T) {
	l := StringLookup([]string{"a", "b", "c"}, 1)
	if got := l.Lookup("b", "zzz", "a").Data(); got[0] != 2 || got[1] != 0 || got[2] != 1 {
		t.Fatalf("Lookup(b, zzz, a) = %v, want [2 0 1]", got)
	}
	if got := StringLookup([]string{"a", "b"}, 0).Lookup("b").Data(); got[0] != 1 {
		t.Fatalf("without OOV ids Lookup(b) = %v, want [1]", got)
	}
	bad := []struct {
		name string
		fn   func()
		want string
	}{
		{"unknown without OOV", func() { StringLookup([]string{"a"}, 0).Lookup("x") }, `"x" is not in the vocabulary (a)`},
		{"repeated entry", func() { StringLookup([]string{"a", "a"}, 1) }, `has "a" twice`},
		{"empty entry", func() { StringLookup([]string{""}, 1) }, "entry 0 is empty"},
		{"negative OOV", func() { StringLookup(nil, -1) }, "num_oov_indices -1"},
		{"ragged rows", func() { StringLookup([]string{"a"}, 1).LookupRows([][]string{{"a", "a"}, {"a"}}) }, "row 1 has 1 strings"},
		{"bad embedding", func() { Embedding(0, 4) }, "input_dim=0"},
	}
	for _, tt := range bad {
		func() {
			defer func() {
				r := recover()
				if r == nil || !strings.Contains(r.(error).Error(), tt.want) {
					t.Errorf("%s: panic %v, want one containing %q", tt.name, r, tt.want)
				}
			}()
			tt.fn()
		}()
	}
}
