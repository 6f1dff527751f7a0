//go:build !unix

package main

import (
	"context"
	"time"
)

const parentPoll = time.Second

// watchParent does nothing where the parent cannot be polled; it returns when ctx is done.
func watchParent(ctx context.Context, _ time.Duration, _ func(string)) { <-ctx.Done() }
