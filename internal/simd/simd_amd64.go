//go:build !purego

package simd

import "golang.org/x/sys/cpu"

var hasAVX512 = cpu.X86.HasAVX512F

//go:noescape
func maxPool2x2RowAVX512(r0, r1, out *float32, code *uint8, ow, c int)

//go:noescape
func maxPool2x2GradRowAVX512(gr *float32, code *uint8, q0, q1 *float32, ow, c int)
