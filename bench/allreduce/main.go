// Command allreduce measures godist's ring all-reduce bus bandwidth between processes over
// transport.GRPC on loopback (its TCP data path, or gRPC streams with --grpc-only), for 1, 16 and 64 MiB of float32, with the figures
// ../shared/peers/allreduce_gloo.py prints (algbw = bytes/time, busbw = algbw*2(n-1)/n, time
// per iteration the max over ranks, median over iterations).
//
// By default the ranks, being processes on one host, share memory (collective.Sharer) and the
// buffer is allocated in it, as the Bucketer allocates its buckets: each rank reads the
// others' values in place. --no-shm moves every byte over the TCP ring, as between hosts (and
// as for a buffer outside shared memory).
//
//	go run ./bench/allreduce [--world 2] [--iters 30] [--warmup 3] [--chunk BYTES] [--sizes 1,16,64]
//	    [--grpc-only] [--no-shm] [--cpuprofile PATH]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"godist/distlib/collective"
	"godist/distlib/transport"
)

var sizeBytes = []int{1 << 20, 16 << 20, 64 << 20}

func parseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		unit, num := 1<<20, f
		if k, ok := strings.CutSuffix(f, "K"); ok {
			unit, num = 1<<10, k
		}
		n, err := strconv.Atoi(num)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("--sizes: %q is not a positive number of MiB (or of KiB, with K after it)", f)
		}
		out = append(out, n*unit)
	}
	return out, nil
}

func main() {
	world := flag.Int("world", 2, "number of processes")
	iters := flag.Int("iters", 30, "timed iterations per size")
	warmup := flag.Int("warmup", 3, "untimed iterations per size")
	chunk := flag.Int("chunk", collective.DefaultChunkBytes, "ring chunk size in bytes")
	grpcOnly := flag.Bool("grpc-only", false, "send over gRPC streams instead of the TCP data path")
	noShm := flag.Bool("no-shm", false, "do not share memory between the ranks: every byte over the transport")
	sizes := flag.String("sizes", "1,16,64", "comma-separated buffer sizes in MiB, or in KiB with a K after the number (4K)")
	profile := flag.String("cpuprofile", "", "write each rank's CPU profile to this path plus .rankN")
	flag.Parse()
	var err error
	if sizeBytes, err = parseSizes(*sizes); err != nil {
		fmt.Fprintln(os.Stderr, "allreduce bench:", err)
		os.Exit(2)
	}
	if r := os.Getenv("ALLREDUCE_BENCH_RANK"); r != "" {
		rank, _ := strconv.Atoi(r)
		if *profile != "" {
			f, perr := os.Create(*profile + ".rank" + r)
			if perr == nil {
				perr = pprof.StartCPUProfile(f)
			}
			if perr != nil {
				fmt.Fprintln(os.Stderr, "allreduce bench:", perr)
				os.Exit(1)
			}
			defer func() { pprof.StopCPUProfile(); f.Close() }()
		}
		err = child(rank, strings.Split(os.Getenv("ALLREDUCE_BENCH_ADDRS"), ","), *iters, *warmup, *chunk, *grpcOnly, *noShm)
	} else {
		err = parent(*world)
	}
	if err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "allreduce bench:", err)
		os.Exit(1)
	}
}

// parent starts world copies of this program, one per rank.
func parent(world int) error {
	// Pick every port before freeing any, so that no two ranks get the same one.
	addrs := make([]string, world)
	lis := make([]net.Listener, world)
	for i := range addrs {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		addrs[i], lis[i] = l.Addr().String(), l
	}
	for _, l := range lis {
		l.Close()
	}
	cmds := make([]*exec.Cmd, world)
	for r := range cmds {
		cmds[r] = exec.Command(os.Args[0], os.Args[1:]...)
		cmds[r].Env = append(os.Environ(), "ALLREDUCE_BENCH_RANK="+strconv.Itoa(r),
			"ALLREDUCE_BENCH_ADDRS="+strings.Join(addrs, ","), "ALLREDUCE_BENCH_TOKEN=bench")
		cmds[r].Stderr = os.Stderr
		if r == 0 {
			cmds[r].Stdout = os.Stdout
		}
	}
	for _, c := range cmds {
		if err := c.Start(); err != nil {
			return err
		}
	}
	var first error
	for r, c := range cmds {
		if err := c.Wait(); err != nil && first == nil {
			first = fmt.Errorf("rank %d: %w", r, err)
		}
	}
	return first
}

func child(rank int, addrs []string, iters, warmup, chunk int, grpcOnly, noShm bool) error {
	t, err := listenRetry(rank, addrs, grpcOnly, noShm)
	if err != nil {
		return err
	}
	defer t.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	opts := collective.CommunicationOptions{Timeout: time.Minute, ChunkBytes: chunk}
	n := len(addrs)
	sm, err := t.SharedMemory(ctx)
	if err != nil {
		return err
	}
	path := "TCP data path"
	switch {
	case grpcOnly && sm == nil:
		path = "gRPC streams only"
	case sm != nil:
		path = "shared memory, buffers allocated there"
	}
	if rank == 0 {
		fmt.Printf("godist all-reduce over transport.GRPC (%s), world %d, chunk %d B | GB/s = 1e9 B/s\n", path, n, chunk)
	}
	for _, size := range sizeBytes {
		buf := make([]float32, size/4)
		if sm != nil {
			if buf, err = sm.Alloc(size / 4); err != nil {
				return err
			}
		}
		for i := range buf {
			buf[i] = 1
		}
		for range warmup {
			if err := collective.AllReduce(ctx, t, buf, collective.Sum, opts); err != nil {
				return err
			}
		}
		times := make([]float32, iters)
		for i := range iters {
			if err := collective.Barrier(ctx, t, opts); err != nil {
				return err
			}
			start := time.Now()
			if err := collective.AllReduce(ctx, t, buf, collective.Sum, opts); err != nil {
				return err
			}
			times[i] = float32(time.Since(start).Seconds())
		}
		if err := collective.AllReduce(ctx, t, times, collective.Max, opts); err != nil {
			return err
		}
		// check: after warmup+iters sums of ones the values are n^(warmup+iters)
		check := []float32{float32(rank + 1)}
		if err := collective.AllReduce(ctx, t, check, collective.Sum, opts); err != nil {
			return err
		}
		if check[0] != float32(n*(n+1)/2) {
			return fmt.Errorf("sum check: got %v, want %v", check[0], n*(n+1)/2)
		}
		if rank == 0 {
			slices.Sort(times)
			med := float64(times[len(times)/2])
			if len(times)%2 == 0 {
				med = (float64(times[len(times)/2-1]) + med) / 2
			}
			alg := float64(size) / med / 1e9
			out, _ := json.Marshal(map[string]any{"path": path, "size_MiB": float64(size) / (1 << 20), "size_bytes": size, "median_ms": round(med * 1e3), "algbw_GBps": round(alg),
				"busbw_GBps": round(alg * 2 * float64(n-1) / float64(n)), "min_ms": round(float64(times[0]) * 1e3)})
			fmt.Println(string(out))
		}
		if sm != nil {
			sm.Free(buf)
		}
	}
	return collective.Barrier(ctx, t, opts)
}

func listenRetry(rank int, addrs []string, grpcOnly, noShm bool) (*transport.GRPC, error) {
	var err error
	for range 100 {
		var l net.Listener
		if l, err = net.Listen("tcp", addrs[rank]); err == nil {
			return transport.NewGRPC(rank, addrs, transport.GRPCOptions{Token: os.Getenv("ALLREDUCE_BENCH_TOKEN"), Listener: l, GRPCOnly: grpcOnly, NoSharedMemory: noShm})
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil, err
}

func round(x float64) float64 { return float64(int64(x*1000+0.5)) / 1000 }
