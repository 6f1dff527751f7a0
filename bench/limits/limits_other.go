//go:build !amd64

package main

func fmaLoops() []fmaLoop { return nil }

func streamRead(buf []float32) float32 { return streamReadGo(buf) }
