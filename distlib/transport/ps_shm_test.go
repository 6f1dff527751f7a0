//go:build linux

package transport

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"godist/distlib/optim"
	"godist/internal/leakcheck"
)

func randFloats(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

func (s *PSServer) mappedRegions() int {
	s.shm.mu.Lock()
	defer s.shm.mu.Unlock()
	return len(s.shm.regions)
}

// attachedClient starts a ps and a client (caller) whose variable "v" of n values was read
// once, through the client's region.
func attachedClient(t *testing.T, caller, n int) (context.Context, *PSServer, *PSClient) {
	t.Helper()
	ctx := testCtx(t)
	s := startPSWith(t, PSServerOptions{Token: "tok"})
	c := dialPSWith(t, s, PSClientOptions{Token: "tok", Caller: caller})
	if err := c.Create(ctx, "v", []int{n}, make([]float32, n), false); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ReadInto(ctx, "v", make([]float32, n)); err != nil {
		t.Fatal(err)
	}
	return ctx, s, c
}

// forgetRegions makes the server forget its clients' regions, as a restarted ps has.
func (s *PSServer) forgetRegions() {
	s.shm.mu.Lock()
	defer s.shm.mu.Unlock()
	s.retireAll()
}

// current returns the client's region (nil when it has none).
func (c *PSClient) current() *psRegion {
	c.shm.mu.Lock()
	defer c.shm.mu.Unlock()
	return c.shm.cur
}

// A co-located client's calls through shared memory give the payload path's values bit for
// bit (Adam on the ps, reads, plain updates), and move the large values outside the messages.
func TestPSSharedMemoryMatchesPayloads(t *testing.T) {
	needShm(t)
	leakcheck.Check(t)
	ctx := testCtx(t)
	shared := startPSWith(t, PSServerOptions{Token: "tok"})
	plain := startPSWith(t, PSServerOptions{Token: "tok"})
	cs := dialPSWith(t, shared, PSClientOptions{Token: "tok", Caller: 1})
	cp := dialPSWith(t, plain, PSClientOptions{Token: "tok", Caller: 1, NoSharedMemory: true})
	r := rand.New(rand.NewPCG(1, 2))
	big, small := randFloats(r, 5000), randFloats(r, 10)
	for _, c := range []*PSClient{cs, cp} {
		if err := c.Create(ctx, "w", []int{50, 100}, big, false); err != nil {
			t.Fatal(err)
		}
		if err := c.Create(ctx, "b", []int{10}, small, false); err != nil {
			t.Fatal(err)
		}
	}
	adam := optim.NewAdam(0.01, 0.9, 0.999, 1e-7)
	for step := uint64(1); step <= 6; step++ {
		gw, gb := randFloats(r, 5000), randFloats(r, 10)
		var vals [2][2][]float32
		for i, c := range []*PSClient{cs, cp} {
			dst := make([]float32, 5000)
			if step%2 == 0 {
				dst = nil // a new slice for the answer
			}
			applied, w, err := c.UpdateRead(ctx, "w", Update{ID: UpdateID{step, 0}, Kind: UpdateOptimizer, Rule: adam, Value: gw}, dst)
			if err != nil || !applied {
				t.Fatalf("step %d: UpdateRead(w) = %v, %v", step, applied, err)
			}
			if dst != nil && &w[0] != &dst[0] {
				t.Errorf("step %d: UpdateRead did not answer into dst", step)
			}
			_, b, err := c.UpdateRead(ctx, "b", Update{ID: UpdateID{step, 1}, Kind: UpdateOptimizer, Rule: adam, Value: gb}, nil)
			if err != nil {
				t.Fatal(err)
			}
			vals[i] = [2][]float32{w, b}
		}
		if !slices.Equal(vals[0][0], vals[1][0]) || !slices.Equal(vals[0][1], vals[1][1]) {
			t.Fatalf("step %d: the values read through shared memory differ from the payload path's", step)
		}
	}
	// A retried step is refused through shared memory too, and answers the current value.
	applied, w, err := cs.UpdateRead(ctx, "w", Update{ID: UpdateID{6, 0}, Kind: UpdateOptimizer, Rule: adam, Value: make([]float32, 5000)}, nil)
	if err != nil || applied {
		t.Fatalf("retried UpdateRead = %v, %v, want not applied", applied, err)
	}
	want, err := cp.ReadInto(ctx, "w", nil)
	if err != nil || !slices.Equal(w, want) {
		t.Fatalf("the retried push answered another value (err %v)", err)
	}
	// Update and ReadInto.
	delta := randFloats(r, 5000)
	for _, c := range []*PSClient{cs, cp} {
		if _, err := c.Update(ctx, "w", Update{ID: UpdateID{7, 0}, Kind: UpdateAssignAdd, Value: delta}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := cs.ReadInto(ctx, "w", make([]float32, 5000))
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := cp.ReadInto(ctx, "w", nil); !slices.Equal(got, want) {
		t.Fatal("ReadInto through shared memory differs from the payload path's after an AssignAdd")
	}
	st, sp := shared.Stats(), plain.Stats()
	// 8 values of w in (6 pushes, the retry, the AssignAdd), 8 out (7 answers, a read);
	// b's 10 values travel in the messages.
	if wantIn, wantOut := int64(4*5000*8), int64(4*5000*8); st.SharedIn != wantIn || st.SharedOut != wantOut {
		t.Errorf("shared ps: SharedIn %d, SharedOut %d, want %d, %d", st.SharedIn, st.SharedOut, wantIn, wantOut)
	}
	if sp.SharedIn != 0 || sp.SharedOut != 0 {
		t.Errorf("payload ps moved %d + %d bytes through shared memory", sp.SharedIn, sp.SharedOut)
	}
	if st.BytesIn+st.BytesOut > (sp.BytesIn+sp.BytesOut)/4 {
		t.Errorf("shared ps: %d message bytes, payload ps %d: the values did not leave the messages", st.BytesIn+st.BytesOut, sp.BytesIn+sp.BytesOut)
	}
	cs.Close()
	if n := shared.mappedRegions(); n != 0 {
		t.Errorf("%d regions still mapped after the client closed", n)
	}
}

// Calls in flight at once share the region without overlapping.
func TestPSSharedMemoryConcurrentCalls(t *testing.T) {
	needShm(t)
	leakcheck.Check(t)
	ctx := testCtx(t)
	s := startPSWith(t, PSServerOptions{Token: "tok"})
	c := dialPSWith(t, s, PSClientOptions{Token: "tok", Caller: 2})
	const vars, n = 8, 3000
	for i := range vars {
		if err := c.Create(ctx, fmt.Sprint("v", i), []int{n}, make([]float32, n), false); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, vars)
	for i := range vars {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for step := 1; step <= 20; step++ {
				val := make([]float32, n)
				for j := range val {
					val[j] = float32(1000*i + step)
				}
				_, got, err := c.UpdateRead(ctx, fmt.Sprint("v", i), Update{Kind: UpdateAssign, Value: val}, nil)
				if err == nil && !slices.Equal(got, val) {
					err = fmt.Errorf("v%d step %d: read back %v..., want %v", i, step, got[:2], val[0])
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if st := s.Stats(); st.SharedIn == 0 {
		t.Error("no value went through shared memory")
	}
}

// A ps that no longer knows the client's region (it restarted) refuses the call before it
// changes anything; the client sends it again as a payload (applied once), and offers a new
// region at its next call.
func TestPSSharedMemoryForgottenRegion(t *testing.T) {
	needShm(t)
	leakcheck.Check(t)
	ctx := testCtx(t)
	s := startPSWith(t, PSServerOptions{Token: "tok"})
	c := dialPSWith(t, s, PSClientOptions{Token: "tok", Caller: 3})
	const n = 2048
	if err := c.Create(ctx, "v", []int{n}, make([]float32, n), false); err != nil {
		t.Fatal(err)
	}
	one := make([]float32, n)
	for i := range one {
		one[i] = 1
	}
	add := func(step uint64) []float32 {
		t.Helper()
		applied, got, err := c.UpdateRead(ctx, "v", Update{ID: UpdateID{step, 0}, Kind: UpdateAssignAdd, Value: one}, make([]float32, n))
		if err != nil || !applied {
			t.Fatalf("step %d: UpdateRead = %v, %v", step, applied, err)
		}
		return got
	}
	add(1)
	if s.mappedRegions() != 1 {
		t.Fatalf("%d regions mapped after the first call, want 1", s.mappedRegions())
	}
	s.forgetRegions()
	in := s.Stats().SharedIn
	if got := add(2); got[0] != 2 || got[n-1] != 2 {
		t.Fatalf("after the ps forgot the region: value %v...%v, want 2 (the push applied once)", got[0], got[n-1])
	}
	if st := s.Stats(); st.SharedIn != in || st.Applied != 2 || st.Duplicates != 0 {
		t.Errorf("the refused call: SharedIn %d -> %d, applied %d updates, %d duplicates; want SharedIn unchanged, 2, 0", in, st.SharedIn, st.Applied, st.Duplicates)
	}
	if got := add(3); got[0] != 3 {
		t.Fatalf("value %v, want 3", got[0])
	}
	if s.mappedRegions() != 1 || s.Stats().SharedIn == in {
		t.Errorf("the client did not offer a new region: %d mapped, SharedIn %d", s.mappedRegions(), s.Stats().SharedIn)
	}
}

// A ps that refuses shared memory gets payloads, and is not asked again.
func TestPSSharedMemoryRefused(t *testing.T) {
	leakcheck.Check(t)
	ctx := testCtx(t)
	s := startPSWith(t, PSServerOptions{Token: "tok", NoSharedMemory: true})
	c := dialPSWith(t, s, PSClientOptions{Token: "tok", Caller: 4})
	const n = 4096
	if err := c.Create(ctx, "v", []int{n}, make([]float32, n), false); err != nil {
		t.Fatal(err)
	}
	val := randFloats(rand.New(rand.NewPCG(3, 4)), n)
	for step := range 3 {
		_, got, err := c.UpdateRead(ctx, "v", Update{Kind: UpdateAssign, Value: val}, nil)
		if err != nil || !slices.Equal(got, val) {
			t.Fatalf("step %d: UpdateRead = %v, want the value assigned", step, err)
		}
	}
	c.shm.mu.Lock()
	no := c.shm.no
	c.shm.mu.Unlock()
	if st := s.Stats(); st.SharedIn != 0 || !no {
		t.Errorf("SharedIn %d, client gave up shared memory: %v; want 0, true", st.SharedIn, no)
	}
}

// Places outside the region, and regions the ps does not map, are refused with errors that
// say so.
func TestPSSharedMemoryBadPlaces(t *testing.T) {
	needShm(t)
	leakcheck.Check(t)
	ctx, _, c := attachedClient(t, 5, 2048)
	r := c.current()
	if r == nil {
		t.Fatal("no region after a large read")
	}
	size := uint64(len(r.f.floats))
	for _, tc := range []struct {
		name           string
		key            psRegionKey
		outOff, outLen uint64
		want           string
	}{
		{"past the end", r.key, size - 10, 20, "outside the shared region"},
		{"wrapping offset", r.key, 1<<64 - 4, 8, "outside the shared region"},
		{"unknown region", psRegionKey{1, 2, 3}, 0, 16, psUnknownRegion},
	} {
		var e psEncoder
		e.b = append(e.b, tc.key[:]...)
		e.u64(0)
		e.u64(0)
		e.u64(tc.outOff)
		e.u64(tc.outLen)
		if _, err := c.invoke(ctx, "ReadShm", "v", e.b, false); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one saying %q", tc.name, err, tc.want)
		}
	}
}

// A worker process and a ps process on one host: the large values go through the worker's
// region; when the ps process is killed and a new one serves at its address, the worker's
// next call (naming a region the new ps never mapped) is sent again as a payload, and the
// call after it offers a new region.
func TestPSSharedMemoryTwoProcesses(t *testing.T) {
	needShm(t)
	if addr := os.Getenv("GODIST_PS_SHM_CHILD"); addr != "" {
		lis, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		s, err := NewPSServer(lis, PSServerOptions{Token: "tok"})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		time.Sleep(30 * time.Second) // until the parent kills this process
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	addr := freePorts(t, 1)[0]
	startChild := func() *exec.Cmd {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestPSSharedMemoryTwoProcesses$", "-test.count=1")
		cmd.Env = append(os.Environ(), "GODIST_PS_SHM_CHILD="+addr)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	child := startChild()
	c, err := DialPS(addr, PSClientOptions{Token: "tok", Caller: 1, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const n = 10000
	ref := startPSWith(t, PSServerOptions{Token: "tok", NoSharedMemory: true})
	cref := dialPSWith(t, ref, PSClientOptions{Token: "tok", Caller: 1})
	rng := rand.New(rand.NewPCG(5, 6))
	init := randFloats(rng, n)
	sgd := optim.NewSGD(0.1, 0.9, false)
	create := func() {
		t.Helper()
		if err := c.WaitReady(ctx); err != nil {
			t.Fatal(err)
		}
		if err := c.Create(ctx, "v", []int{n}, init, true); err != nil {
			t.Fatal(err)
		}
	}
	create()
	if err := cref.Create(ctx, "v", []int{n}, init, false); err != nil {
		t.Fatal(err)
	}
	shared := func() int64 {
		t.Helper()
		st, err := c.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st.SharedIn
	}
	step := func(k uint64) {
		t.Helper()
		g := randFloats(rng, n)
		_, got, err := c.UpdateRead(ctx, "v", Update{ID: UpdateID{k, 0}, Kind: UpdateOptimizer, Rule: sgd, Value: g}, make([]float32, n))
		if err != nil {
			t.Fatalf("step %d: %v", k, err)
		}
		_, want, err := cref.UpdateRead(ctx, "v", Update{ID: UpdateID{k, 0}, Kind: UpdateOptimizer, Rule: sgd, Value: g}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("step %d: the ps process answered other values than the payload path", k)
		}
	}
	step(1)
	step(2)
	if got := shared(); got != 2*4*n {
		t.Fatalf("the ps process got %d bytes through shared memory, want %d", got, 2*4*n)
	}
	_ = child.Process.Kill()
	_ = child.Wait()
	startChild()
	create()
	// The new ps starts from init again, and so does the reference.
	if err := cref.Create(ctx, "v", []int{n}, init, true); err != nil {
		t.Fatal(err)
	}
	step(3)
	if got := shared(); got != 0 {
		t.Fatalf("the restarted ps got %d bytes through a region it never mapped", got)
	}
	step(4)
	if got := shared(); got != 4*n {
		t.Fatalf("after the restart: %d bytes through shared memory, want %d (a new region)", got, 4*n)
	}
}

// A call that fails without an answer (here: its context ended before it was sent; in
// general a timeout while the ps still works on it) leaves its buffers allocated, since the
// ps may still write into them, and retires the region: the next call offers a new one.
func TestPSSharedMemoryAbandonedCall(t *testing.T) {
	needShm(t)
	leakcheck.Check(t)
	const n = 2048
	ctx, s, c := attachedClient(t, 6, n)
	c.shm.mu.Lock()
	old := c.shm.cur
	old.refs++ // keep it mapped to look at it
	c.shm.mu.Unlock()
	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := c.UpdateRead(done, "v", Update{Kind: UpdateAssign, Value: make([]float32, n)}, make([]float32, n)); err == nil {
		t.Fatal("UpdateRead with an ended context succeeded")
	}
	if allocs, _ := old.f.arena.inUse(); allocs != 2 {
		t.Errorf("the failed call's region holds %d allocations, want its 2 buffers kept", allocs)
	}
	c.shm.mu.Lock()
	cur, dead := c.shm.cur, old.dead
	c.shm.mu.Unlock()
	if cur != nil || !dead {
		t.Errorf("after the failed call: current region %v, old one dead %v; want none and true", cur, dead)
	}
	if s.mappedRegions() != 0 {
		t.Errorf("the ps still maps %d regions, want the abandoned one unmapped", s.mappedRegions())
	}
	val := randFloats(rand.New(rand.NewPCG(7, 8)), n)
	if _, got, err := c.UpdateRead(ctx, "v", Update{Kind: UpdateAssign, Value: val}, nil); err != nil || !slices.Equal(got, val) {
		t.Fatalf("the next call: %v", err)
	}
	if cur = c.current(); cur == nil || cur == old || s.mappedRegions() != 1 {
		t.Errorf("the next call did not offer a new region (mapped: %d)", s.mappedRegions())
	}
	c.release(old)
}

// A ps at its limit of regions maps a new client's in the place of the one used longest
// ago that no call uses; that client's next call goes as payloads and the one after offers
// a new region. With every region in use, the new client sends payloads.
func TestPSSharedMemoryEvictsLeastRecentlyUsed(t *testing.T) {
	needShm(t)
	leakcheck.Check(t)
	ctx := testCtx(t)
	s := startPSWith(t, PSServerOptions{Token: "tok"})
	s.shm.mu.Lock()
	s.shm.max = 2
	s.shm.mu.Unlock()
	const n = 2048
	clients := make([]*PSClient, 3)
	for i := range clients {
		clients[i] = dialPSWith(t, s, PSClientOptions{Token: "tok", Caller: 10 + i})
		if err := clients[i].Create(ctx, fmt.Sprint("v", i), []int{n}, make([]float32, n), false); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(9, 10))
	assign := func(i int) {
		t.Helper()
		val := randFloats(rng, n)
		if _, got, err := clients[i].UpdateRead(ctx, fmt.Sprint("v", i), Update{Kind: UpdateAssign, Value: val}, nil); err != nil || !slices.Equal(got, val) {
			t.Fatalf("client %d: UpdateRead: %v (or another value read back)", i, err)
		}
	}
	region := func(i int) *psRegion { return clients[i].current() }
	assign(0)
	assign(1)
	assign(0) // client 1's region is now the one used longest ago
	assign(2)
	if s.mappedRegions() != 2 || !s.maps(region(0)) || !s.maps(region(2)) || s.maps(region(1)) {
		t.Fatalf("after a third client: want clients 0 and 2 mapped, 1 evicted (mapped: %d)", s.mappedRegions())
	}
	in := s.Stats().SharedIn
	assign(1) // the ps does not know its region: payloads
	if s.Stats().SharedIn != in {
		t.Error("client 1's call after the eviction went through shared memory")
	}
	assign(1) // a new region, in the place of client 0's
	if !s.maps(region(1)) || s.Stats().SharedIn == in {
		t.Error("client 1 did not get a new region")
	}
	// Every region in use: a new client is told no and sends payloads.
	s.shm.mu.Lock()
	for _, r := range s.shm.regions {
		r.refs++
	}
	s.shm.mu.Unlock()
	c := dialPSWith(t, s, PSClientOptions{Token: "tok", Caller: 20})
	val := randFloats(rng, n)
	if _, got, err := c.UpdateRead(ctx, "v0", Update{Kind: UpdateAssign, Value: val}, nil); err != nil || !slices.Equal(got, val) {
		t.Fatalf("a fourth client while every region is in use: %v", err)
	}
	c.shm.mu.Lock()
	no := c.shm.no
	c.shm.mu.Unlock()
	if !no || s.mappedRegions() != 2 {
		t.Errorf("a fourth client while every region is in use: told no %v, %d mapped; want true, 2", no, s.mappedRegions())
	}
	s.shm.mu.Lock()
	for _, r := range s.shm.regions {
		r.refs--
	}
	s.shm.mu.Unlock()
}

// maps reports whether the server maps region r (a client's) now.
func (s *PSServer) maps(r *psRegion) bool {
	if r == nil {
		return false
	}
	s.shm.mu.Lock()
	defer s.shm.mu.Unlock()
	_, ok := s.shm.regions[r.key]
	return ok
}
