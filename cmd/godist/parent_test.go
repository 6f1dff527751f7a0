//go:build unix

package main

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestWatchParent(t *testing.T) {
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Skipf("cannot run true: %v", err)
	}
	tests := []struct {
		name     string
		jpy      string
		wantGone string // "" : must not fire
	}{
		{"front end alive", strconv.Itoa(os.Getpid()), ""},
		{"no JPY_PARENT_PID", "", ""},
		{"front end gone", strconv.Itoa(dead.Process.Pid), "JPY_PARENT_PID"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("JPY_PARENT_PID", tt.jpy)
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			got := make(chan string, 1)
			returned := make(chan struct{})
			go func() {
				defer close(returned)
				watchParent(ctx, 10*time.Millisecond, func(r string) { got <- r })
			}()
			select {
			case <-returned:
			case <-time.After(10 * time.Second):
				t.Fatal("watchParent did not return after its context ended")
			}
			var reason string
			select {
			case reason = <-got:
			default:
			}
			if tt.wantGone == "" && reason != "" {
				t.Errorf("watchParent reported %q, want nothing", reason)
			}
			if tt.wantGone != "" && !strings.Contains(reason, tt.wantGone) {
				t.Errorf("watchParent reported %q, want a reason naming %s", reason, tt.wantGone)
			}
		})
	}
}
