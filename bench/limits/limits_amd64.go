//go:build amd64

package main

import "golang.org/x/sys/cpu"

func fmaAVX2(n int)
func fmaAVX512(n int)

//go:noescape
func readSum(p *float32, n int) float32

// fmaLoops are the unrolled FMA loops this CPU can run: name, FLOPs per iteration, loop.
func fmaLoops() []fmaLoop {
	var ls []fmaLoop
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		ls = append(ls, fmaLoop{"avx2", 24 * 8, fmaAVX2})
	}
	if cpu.X86.HasAVX512F {
		ls = append(ls, fmaLoop{"avx512", 24 * 16, fmaAVX512})
	}
	return ls
}

// streamRead sums buf (len a multiple of 64) with vector loads.
func streamRead(buf []float32) float32 {
	if !cpu.X86.HasAVX2 {
		return streamReadGo(buf)
	}
	return readSum(&buf[0], len(buf))
}
