package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"godist/distlib/collective"
	"godist/internal/leakcheck"
)

func TestSharedMemInProcess(t *testing.T) {
	var plain any = NewMem(1)[0]
	if _, ok := plain.(collective.Sharer); ok {
		t.Fatal("NewMem's endpoint is a collective.Sharer; only NewSharedMem's may be")
	}
	g := NewSharedMem(3, 4096)
	ctx := context.Background()
	sm := make([]collective.SharedMemory, len(g))
	for i, m := range g {
		var err error
		if sm[i], err = m.SharedMemory(ctx); err != nil || sm[i] == nil {
			t.Fatalf("rank %d: SharedMemory = %v, %v", i, sm[i], err)
		}
	}
	b, err := sm[0].Alloc(100)
	if err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] = float32(i + 1)
	}
	off, ok := sm[0].Offset(b)
	if !ok {
		t.Fatal("Offset of an allocation: not in the region")
	}
	for r := 1; r < 3; r++ {
		v, err := sm[r].View(0, off, len(b))
		if err != nil || len(v) != 100 || v[0] != 1 || v[99] != 100 {
			t.Fatalf("rank %d: View of rank 0 = %v, %v", r, v, err)
		}
	}
	if _, err := sm[1].Alloc(1025); err == nil || !strings.Contains(err.Error(), "region of 4096 bytes") {
		t.Errorf("Alloc past the region = %v, want an error naming its size", err)
	}
	for _, c := range []struct{ rank, off, n int }{{3, 0, 1}, {-1, 0, 1}, {0, 1000, 100}, {0, -1, 1}, {0, 0, -1}} {
		if _, err := sm[1].View(c.rank, c.off, c.n); err == nil {
			t.Errorf("View(%d, %d, %d) succeeded, want an error", c.rank, c.off, c.n)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := g[0].SharedMemory(cctx); !errors.Is(err, context.Canceled) {
		t.Errorf("SharedMemory with an ended context = %v, want context.Canceled", err)
	}
	// The embedded Mem still moves messages.
	if err := g[0].Send(ctx, 1, "t", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if m, err := g[1].Recv(ctx, 0, "t"); err != nil || string(m) != "x" {
		t.Fatalf("Recv = %q, %v", m, err)
	}
}

// shmFiles lists this process's region files in /dev/shm.
func shmFiles(t *testing.T) []string {
	t.Helper()
	m, err := filepath.Glob(fmt.Sprintf("/dev/shm/%s%d-*", shmPrefix, os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func needShm(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("shared memory between processes needs Linux")
	}
	if st, err := os.Stat("/dev/shm"); err != nil || !st.IsDir() {
		t.Skip("no /dev/shm")
	}
}

// agreeAll calls SharedMemory on every rank at once, twice per rank concurrently.
func agreeAll(ctx context.Context, g []*GRPC) ([]collective.SharedMemory, []error) {
	sm := make([]collective.SharedMemory, 2*len(g))
	errs := make([]error, 2*len(g))
	var wg sync.WaitGroup
	for i := range sm {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sm[i], errs[i] = g[i%len(g)].SharedMemory(ctx)
		}()
	}
	wg.Wait()
	return sm, errs
}

func TestGRPCSharedMemory(t *testing.T) {
	needShm(t)
	leakcheck.Check(t)
	g := startGroupOpts(t, 3, GRPCOptions{Token: "k", SharedMemoryBytes: 1 << 20})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sm, errs := agreeAll(ctx, g)
	for i := range sm {
		if errs[i] != nil || sm[i] == nil {
			t.Fatalf("call %d (rank %d): SharedMemory = %v, %v; want shared memory", i, i%3, sm[i], errs[i])
		}
		if sm[i] != sm[i%3] {
			t.Errorf("rank %d: concurrent calls got different answers", i%3)
		}
	}
	if f := shmFiles(t); len(f) != 0 {
		t.Errorf("files left in /dev/shm after the agreement: %v", f)
	}
	if again, err := g[1].SharedMemory(ctx); err != nil || again != sm[1] {
		t.Errorf("a later call = %v, %v; want the first answer", again, err)
	}
	// Each rank writes in its own region; every other rank reads it through View.
	offs := make([]int, 3)
	bufs := make([][]float32, 3)
	for r := range 3 {
		b, err := sm[r].Alloc(1000 + r)
		if err != nil {
			t.Fatal(err)
		}
		for i := range b {
			b[i] = float32(100*r + i)
		}
		var ok bool
		if offs[r], ok = sm[r].Offset(b); !ok {
			t.Fatalf("rank %d: Offset of its allocation: not in the region", r)
		}
		bufs[r] = b
	}
	for r := range 3 {
		for p := range 3 {
			v, err := sm[r].View(p, offs[p], len(bufs[p]))
			if err != nil {
				t.Fatalf("rank %d: View(%d): %v", r, p, err)
			}
			if v[0] != float32(100*p) || v[len(v)-1] != float32(100*p+len(v)-1) {
				t.Fatalf("rank %d: View(%d) reads %v..%v, want %v..%v", r, p, v[0], v[len(v)-1], 100*p, 100*p+len(v)-1)
			}
		}
	}
	bufs[0][5] = -1 // a later write is seen too: it is the same memory, not a copy
	if v, _ := sm[2].View(0, offs[0]+5, 1); v[0] != -1 {
		t.Errorf("rank 2 reads %v after rank 0 wrote -1", v[0])
	}
	if _, err := sm[1].View(0, (1<<20)/4-10, 11); err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Errorf("View past the region = %v, want out of range", err)
	}
	if _, err := sm[1].View(3, 0, 1); err == nil {
		t.Error("View of rank 3 in a group of 3 succeeded")
	}
	peerView, _ := sm[1].View(0, offs[0], len(bufs[0]))
	for _, x := range g {
		if err := x.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}
	if f := shmFiles(t); len(f) != 0 {
		t.Errorf("files left in /dev/shm after Close: %v", f)
	}
	// Slices still held after Close (a model's gradient buckets) read zeros and take writes
	// instead of faulting.
	bufs[0][1] = 7
	if bufs[0][1] != 7 || bufs[0][2] != 0 || peerView[3] != 0 {
		t.Errorf("after Close: own slice %v %v, peer's view %v; want 7, 0 and 0", bufs[0][1], bufs[0][2], peerView[3])
	}
	if _, err := sm[0].Alloc(10); err == nil {
		t.Error("Alloc after Close succeeded")
	}
	if _, err := g[0].SharedMemory(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("SharedMemory after Close = %v, want ErrClosed", err)
	}
}

// TestGRPCSharedMemoryRefused: one rank with NoSharedMemory makes the answer nil on every
// rank, without an error and without a hang; the transport still works afterwards.
func TestGRPCSharedMemoryRefused(t *testing.T) {
	leakcheck.Check(t)
	const n = 3
	addrs := make([]string, n)
	lis := make([]net.Listener, n)
	for i := range lis {
		lis[i] = mustListen(t)
		addrs[i] = lis[i].Addr().String()
	}
	g := make([]*GRPC, n)
	for i := range g {
		var err error
		if g[i], err = NewGRPC(i, addrs, GRPCOptions{Token: "k", Listener: lis[i], SharedMemoryBytes: 1 << 16,
			NoSharedMemory: i == 1}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g[i].Close() })
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sm, errs := agreeAll(ctx, g)
	for i := range sm {
		if errs[i] != nil || sm[i] != nil {
			t.Fatalf("call %d (rank %d): SharedMemory = %v, %v; want nil, nil", i, i%n, sm[i], errs[i])
		}
	}
	if f := shmFiles(t); len(f) != 0 {
		t.Errorf("files left in /dev/shm after a refused agreement: %v", f)
	}
	var wg sync.WaitGroup
	bufs := make([][]float32, n)
	for i := range g {
		bufs[i] = []float32{float32(i + 1)}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = collective.AllReduce(ctx, g[i], bufs[i], collective.Sum)
		}()
	}
	wg.Wait()
	for i := range g {
		if errs[i] != nil || bufs[i][0] != 6 {
			t.Fatalf("rank %d: AllReduce after the agreement = %v, %v; want 6", i, bufs[i], errs[i])
		}
	}
	l := mustListen(t)
	defer l.Close()
	if _, err := NewGRPC(0, addrs, GRPCOptions{Token: "k", Listener: l, SharedMemoryBytes: -1}); err == nil ||
		!strings.Contains(err.Error(), "SharedMemoryBytes -1") {
		t.Errorf("NewGRPC with negative SharedMemoryBytes = %v, want an error naming it", err)
	}
}

func TestGRPCSharedMemorySmall(t *testing.T) {
	needShm(t)
	leakcheck.Check(t)
	g := startGroupOpts(t, 2, GRPCOptions{Token: "k", SharedMemoryBytes: 4096})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sm, errs := agreeAll(ctx, g)
	if errs[0] != nil || errs[1] != nil || sm[0] == nil || sm[1] == nil {
		t.Fatalf("SharedMemory = %v, %v", sm, errs)
	}
	if _, err := sm[0].Alloc(1000); err != nil {
		t.Fatal(err)
	}
	_, err := sm[0].Alloc(100)
	if err == nil || !strings.Contains(err.Error(), "no room for 100 float32s (400 bytes) in a region of 4096 bytes") {
		t.Fatalf("Alloc past a 4096-byte region = %v, want an error naming both sizes", err)
	}
}

func TestGRPCSharedMemorySingle(t *testing.T) {
	needShm(t)
	leakcheck.Check(t)
	g := startGroupOpts(t, 1, GRPCOptions{Token: "k", SharedMemoryBytes: 1 << 16})
	sm, err := g[0].SharedMemory(context.Background())
	if err != nil || sm == nil {
		t.Fatalf("SharedMemory of a group of 1 = %v, %v", sm, err)
	}
	b, err := sm.Alloc(10)
	if err != nil {
		t.Fatal(err)
	}
	b[3] = 7
	off, _ := sm.Offset(b)
	if v, err := sm.View(0, off+3, 1); err != nil || v[0] != 7 {
		t.Fatalf("View of its own region = %v, %v", v, err)
	}
	if f := shmFiles(t); len(f) != 0 {
		t.Errorf("files left in /dev/shm: %v", f)
	}
}

func TestGRPCSharedMemoryCancelled(t *testing.T) {
	leakcheck.Check(t)
	g := startGroupOpts(t, 2, GRPCOptions{Token: "k", SharedMemoryBytes: 1 << 16})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := g[0].SharedMemory(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("SharedMemory with an ended context = %v, want context.Canceled", err)
	}
	// Rank 1 never answers: the agreement ends with the context, and the error stays.
	g = startGroupOpts(t, 2, GRPCOptions{Token: "k", SharedMemoryBytes: 1 << 16})
	tctx, tcancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer tcancel()
	_, err := g[0].SharedMemory(tctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("SharedMemory with a silent peer = %v, want context.DeadlineExceeded", err)
	}
	if _, again := g[0].SharedMemory(context.Background()); !errors.Is(again, context.DeadlineExceeded) {
		t.Errorf("a later call = %v, want the first call's error", again)
	}
	if f := shmFiles(t); len(f) != 0 {
		t.Errorf("files left in /dev/shm after a failed agreement: %v", f)
	}
}

func TestGRPCSharedMemoryCloseDuringAgreement(t *testing.T) {
	leakcheck.Check(t)
	g := startGroupOpts(t, 2, GRPCOptions{Token: "k", SharedMemoryBytes: 1 << 16})
	done := make(chan error, 1)
	go func() {
		_, err := g[0].SharedMemory(context.Background()) // rank 1 never calls
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	g[0].Close()
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Errorf("agreement ended by Close = %v, want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end the agreement")
	}
	if f := shmFiles(t); len(f) != 0 {
		t.Errorf("files left in /dev/shm after Close: %v", f)
	}
}
