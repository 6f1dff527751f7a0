package transport

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"godist/distlib/collective"
)

// BenchmarkGRPCAllReduce times a 2-rank ring all-reduce over the TCP data path of the size
// of the peer CNN's gradients (346,112 float32 values, 1.4 MB: the Dense 5408x64 kernel's
// bucket), for several chunk sizes. Both ranks run in this process, so GOMAXPROCS >= 2 is
// closest to two worker processes.
func BenchmarkGRPCAllReduce(b *testing.B) {
	const length = 5408 * 64
	for _, chunk := range []int{16 << 10, 64 << 10, collective.DefaultChunkBytes} {
		b.Run(fmt.Sprintf("chunk=%dKiB", chunk>>10), func(b *testing.B) {
			g := startGroup(b, "secret", "secret")
			bufs := [][]float32{make([]float32, length), make([]float32, length)}
			b.SetBytes(4 * length)
			b.ResetTimer()
			for range b.N {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				errs := onRanks(2, func(r int) error {
					return collective.AllReduce(ctx, g[r], bufs[r], collective.Sum, collective.CommunicationOptions{ChunkBytes: chunk})
				})
				cancel()
				for r, err := range errs {
					if err != nil {
						b.Fatalf("AllReduce rank %d: %v", r, err)
					}
				}
			}
		})
	}
}

// BenchmarkGRPCBucketerKeptStep times a step of a 2-rank KeepTerms Bucketer over shared
// memory with the peer CNN's gradient sizes (what a MultiWorkerMirrored worker's step does
// between its backward pass and its optimizer): every tensor added, then WaitTerms. Both
// ranks run in this process, one goroutine each.
func BenchmarkGRPCBucketerKeptStep(b *testing.B) {
	sizes := []int{4, 10, 640, 64, 5408 * 64, 32, 288} // statistics, then the layers last first
	g := startGroup(b, "secret", "secret")
	bk := make([]*collective.Bucketer, 2)
	for r := range bk {
		var err error
		if bk[r], err = collective.NewBucketer(g[r], sizes, 256<<10, collective.Sum, collective.KeepTerms()); err != nil {
			b.Fatal(err)
		}
	}
	step := func(ctx context.Context, r int) error {
		for i := range sizes {
			if err := bk[r].Add(i, bk[r].Buffer(i)); err != nil {
				return err
			}
		}
		_, err := bk[r].WaitTerms(ctx)
		return err
	}
	run := func(n int) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		errs := onRanks(2, func(r int) error {
			for range n {
				if err := step(ctx, r); err != nil {
					return err
				}
			}
			return nil
		})
		for r, err := range errs {
			if err != nil {
				b.Fatalf("rank %d: %v", r, err)
			}
		}
	}
	run(3) // the ranks learn that they share memory, then where their postboxes lie
	b.ResetTimer()
	run(b.N)
}

// onRanks runs fn for ranks 0..n-1 at once and returns their errors, by rank.
func onRanks(n int, fn func(r int) error) []error {
	var wg sync.WaitGroup
	errs := make([]error, n)
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = fn(r)
		}()
	}
	wg.Wait()
	return errs
}
