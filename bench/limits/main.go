// Command limits measures what one core of this machine allows, for the other benches to
// print their figures against: fp32 peak of one core with an unrolled FMA loop (AVX2 and,
// where the CPU has it, AVX-512; Go assembly, 12 independent accumulators), single-thread
// memory bandwidth (a vector streaming read and a copy of buffers far larger than the
// caches), the cache a core keeps (the largest working set whose dependent loads stay far
// below the memory's latency, alone and with the other core doing the same: cache.go), and
// the bandwidth of one loopback TCP stream (a Go writer and reader).
//
// The machine is shared, so the FMA and memory figures are rates per second of the
// measuring thread's own CPU time (what the core gave it; the CNN bench's samples per own
// CPU-second compare with them), each is measured -reps times and the best is the limit
// (other processes only ever lower a figure); the median is printed beside it. The TCP
// figure is bytes per wall-clock second (two threads and the kernel take part), so it is
// low when the machine is loaded: read it beside the load average. It prints
// one line per figure and then one JSON line with every figure:
//
//	{"fma_avx2_gflops": ..., "fma_avx512_gflops": ..., "peak_gflops": ..., "mem_read_GBps": ...,
//	 "mem_copy_GBps": ..., "cache_mib": ..., "cache_mib_both": ..., "tcp_loopback_GBps": ...,
//	 "loadavg": ...}
//
// peak_gflops is the best of the FMA loops. -only picks a subset (fma, mem, cache, tcp).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
)

type fmaLoop struct {
	name  string
	flops int // per iteration
	run   func(n int)
}

// measure runs fn reps times and returns the best and the median of the rates it returns.
func measure(reps int, fn func() float64) (best, median float64) {
	rs := make([]float64, reps)
	for i := range rs {
		rs[i] = fn()
	}
	slices.Sort(rs)
	return rs[len(rs)-1], rs[len(rs)/2]
}

// fmaRate returns GFLOP/s of l over about d.
func fmaRate(l fmaLoop, d time.Duration) float64 {
	n := 1 << 20
	l.run(n) // warm up (clock ramp, AVX-512 power state)
	for {
		t := threadCPU()
		l.run(n)
		if el := threadCPU() - t; el >= d {
			return float64(n) * float64(l.flops) / el.Seconds() / 1e9
		}
		n *= 2
	}
}

// streamReadGo is the portable read loop.
func streamReadGo(buf []float32) float32 {
	var s0, s1, s2, s3 float32
	for i := 0; i+4 <= len(buf); i += 4 {
		s0 += buf[i]
		s1 += buf[i+1]
		s2 += buf[i+2]
		s3 += buf[i+3]
	}
	return s0 + s1 + s2 + s3
}

// sink takes streamRead's sum so that the compiler keeps the read loop.
//
//lint:ignore U1000 written, never read, on purpose
var sink float32

// memRates returns read and copy GB/s (bytes read, plus bytes written for copy) of one
// thread over buffers of mib MiB.
func memRates(mib int) (read, cp float64) {
	n := mib << 20 / 4
	src := make([]float32, n)
	dst := make([]float32, n)
	for i := range src {
		src[i] = 1
	}
	copy(dst, src) // fault the pages in
	t := threadCPU()
	sink += streamRead(src)
	read = float64(4*n) / (threadCPU() - t).Seconds() / 1e9
	t = threadCPU()
	copy(dst, src)
	cp = float64(8*n) / (threadCPU() - t).Seconds() / 1e9
	return read, cp
}

// loopbackPair returns the two ends of a new loopback TCP connection.
func loopbackPair(ctx context.Context) (a, b net.Conn, err error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, fmt.Errorf("limits: loopback listen: %w", err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			c = nil
		}
		accepted <- c
	}()
	var dl net.Dialer
	a, err = dl.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		return nil, nil, fmt.Errorf("limits: loopback dial: %w", err)
	}
	if b = <-accepted; b == nil {
		a.Close()
		return nil, nil, fmt.Errorf("limits: loopback accept failed")
	}
	return a, b, nil
}

// writeUntil writes 4 MiB writes to c until end, then half-closes it so that the peer's
// reader sees EOF.
func writeUntil(c net.Conn, end time.Time) error {
	buf := make([]byte, 4<<20)
	for time.Now().Before(end) {
		if _, err := c.Write(buf); err != nil {
			return fmt.Errorf("limits: loopback write: %w", err)
		}
	}
	return c.(*net.TCPConn).CloseWrite()
}

// readAll reads c to EOF and returns its rate in GB/s over the reading time.
func readAll(c net.Conn) (float64, error) {
	buf := make([]byte, 4<<20)
	var total int64
	t := time.Now()
	for {
		k, err := c.Read(buf)
		total += int64(k)
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, fmt.Errorf("limits: loopback read: %w", err)
		}
	}
	return float64(total) / time.Since(t).Seconds() / 1e9, nil
}

// tcpRate returns GB/s of one loopback TCP stream: a writer sends 4 MiB writes for about d
// and the reader's bytes over its time are the figure.
func tcpRate(ctx context.Context, d time.Duration) (float64, error) {
	a, b, err := loopbackPair(ctx)
	if err != nil {
		return 0, err
	}
	defer a.Close()
	defer b.Close()
	done := make(chan error, 1)
	go func() { done <- writeUntil(b, time.Now().Add(d)) }()
	r, err := readAll(a)
	if werr := <-done; err == nil {
		err = werr
	}
	return r, err
}

// tcpExchangeRate returns GB/s per direction of one loopback TCP connection carrying a
// stream each way at once, as the two ranks of a ring all-reduce do (each sends its half
// while it receives the other's): both ends write 4 MiB writes for about d while reading
// what the other end writes; the figure is the slower direction's. This, not tcpRate,
// bounds a 2-rank all-reduce's busbw, which is the bytes each rank sends per second: on 2
// cores the four copies (two sends, two receives) share the cores that one stream has to
// itself.
func tcpExchangeRate(ctx context.Context, d time.Duration) (float64, error) {
	a, b, err := loopbackPair(ctx)
	if err != nil {
		return 0, err
	}
	defer a.Close()
	defer b.Close()
	end := time.Now().Add(d)
	type result struct {
		rate float64
		err  error
	}
	res := make(chan result, 4)
	for _, c := range []net.Conn{a, b} {
		go func() { res <- result{-1, writeUntil(c, end)} }()
		go func() { r, err := readAll(c); res <- result{r, err} }()
	}
	rate := -1.0
	for range 4 {
		r := <-res
		if r.err != nil {
			return 0, r.err
		}
		if r.rate >= 0 && (rate < 0 || r.rate < rate) {
			rate = r.rate
		}
	}
	return rate, nil
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

func main() {
	only := flag.String("only", "fma,mem,cache,tcp", "figures to measure: a comma-separated subset of fma, mem, cache, tcp")
	reps := flag.Int("reps", 5, "measurements of each figure (the best is the limit)")
	fmaTime := flag.Duration("fma-time", 200*time.Millisecond, "duration of one FMA measurement")
	memMiB := flag.Int("mem-mib", 256, "buffer size for the memory bandwidth, MiB (far above the caches)")
	tcpTime := flag.Duration("tcp-time", time.Second, "duration of one TCP measurement")
	flag.Parse()
	want := map[string]bool{}
	for _, f := range strings.Split(*only, ",") {
		switch f = strings.TrimSpace(f); f {
		case "fma", "mem", "cache", "tcp":
			want[f] = true
		default:
			fmt.Fprintf(os.Stderr, "limits: -only %q: unknown figure %q (use fma, mem, cache, tcp)\n", *only, f)
			os.Exit(2)
		}
	}
	if *reps < 1 {
		fmt.Fprintf(os.Stderr, "limits: -reps %d must be >= 1\n", *reps)
		os.Exit(2)
	}
	out := map[string]any{"loadavg": loadavg(), "reps": *reps}
	if want["fma"] {
		runtime.LockOSThread()
		peak := 0.0
		loops := fmaLoops()
		if len(loops) == 0 {
			fmt.Println("limit: fp32 FMA peak: not measured (no AVX2/AVX-512 loop for this CPU)")
		}
		for _, l := range loops {
			best, med := measure(*reps, func() float64 { return fmaRate(l, *fmaTime) })
			fmt.Printf("limit: fp32 peak, one core, %s FMA loop: %.1f GFLOP/s of %s (best of %d, median %.1f)\n", l.name, best, cpuClock, *reps, med)
			out["fma_"+l.name+"_gflops"] = round(best)
			peak = max(peak, best)
		}
		if peak > 0 {
			out["peak_gflops"] = round(peak)
		}
		runtime.UnlockOSThread()
	}
	if want["mem"] {
		runtime.LockOSThread()
		var reads, copies []float64
		for range *reps {
			r, c := memRates(*memMiB)
			reads, copies = append(reads, r), append(copies, c)
		}
		slices.Sort(reads)
		slices.Sort(copies)
		fmt.Printf("limit: memory bandwidth, one thread, streaming read of %d MiB: %.1f GB/s of %s (best of %d, median %.1f)\n", *memMiB, reads[len(reads)-1], cpuClock, *reps, reads[len(reads)/2])
		fmt.Printf("limit: memory bandwidth, one thread, copy of %d MiB (read+write bytes): %.1f GB/s of %s (best of %d, median %.1f)\n", *memMiB, copies[len(copies)-1], cpuClock, *reps, copies[len(copies)/2])
		out["mem_read_GBps"] = round(reads[len(reads)-1])
		out["mem_copy_GBps"] = round(copies[len(copies)-1])
		runtime.UnlockOSThread()
	}
	if want["cache"] {
		creps := min(*reps, 3) // a chain's loads wait on each other: slow, and steadier than the others
		alone, ok := cacheLatencies(false, creps)
		where := "CPU 0"
		if !ok {
			where = "an unbound thread"
		}
		fmt.Printf("limit: cache one core keeps, %s alone: %d MiB (ns per dependent load of %s: %s)\n", where, heldMiB(alone), cpuClock, fmtLatencies(alone))
		out["cache_mib"] = heldMiB(alone)
		if runtime.NumCPU() >= 2 {
			both, ok := cacheLatencies(true, creps)
			if ok {
				fmt.Printf("limit: cache one core keeps while CPU 1 loads as much: %d MiB (%s)\n", heldMiB(both), fmtLatencies(both))
				out["cache_mib_both"] = heldMiB(both)
			} else {
				fmt.Println("limit: cache one core keeps while another loads as much: not measured (threads cannot be bound to CPUs 0 and 1)")
			}
		}
	}
	if want["tcp"] {
		var rs []float64
		for range *reps {
			r, err := tcpRate(context.Background(), *tcpTime)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			rs = append(rs, r)
		}
		slices.Sort(rs)
		fmt.Printf("limit: loopback TCP, one stream (Go writer and reader): %.2f GB/s wall (best of %d, median %.2f)\n", rs[len(rs)-1], *reps, rs[len(rs)/2])
		out["tcp_loopback_GBps"] = round(rs[len(rs)-1])
		var xs []float64
		for range *reps {
			r, err := tcpExchangeRate(context.Background(), *tcpTime)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			xs = append(xs, r)
		}
		slices.Sort(xs)
		fmt.Printf("limit: loopback TCP, one connection carrying a stream each way at once: %.2f GB/s per direction wall (best of %d, median %.2f)\n", xs[len(xs)-1], *reps, xs[len(xs)/2])
		out["tcp_exchange_GBps"] = round(xs[len(xs)-1])
	}
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
}

func round(v float64) float64 { return float64(int64(v*100+0.5)) / 100 }
