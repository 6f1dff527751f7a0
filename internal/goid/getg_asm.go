//go:build amd64 || arm64

package goid

import "unsafe"

const haveGetg = true

// getg returns the current goroutine's runtime structure (assembly).
func getg() unsafe.Pointer
