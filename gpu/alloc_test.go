package gpu

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// fakeDevice hands out addresses from a counter within a capacity, like cuMemAlloc, and
// checks that every address freed was allocated and is freed once.
type fakeDevice struct {
	next, capacity, used uint64
	live                 map[Addr]uint64
	allocs, frees        int
}

func newFake(capacity uint64) *fakeDevice {
	return &fakeDevice{next: 1 << 32, capacity: capacity, live: map[Addr]uint64{}}
}

func (f *fakeDevice) alloc(n uint64) (Addr, error) {
	if f.used+n > f.capacity {
		return 0, errors.New("CUDA_ERROR_OUT_OF_MEMORY")
	}
	a := Addr(f.next)
	f.next += n
	f.used += n
	f.live[a] = n
	f.allocs++
	return a, nil
}

func (f *fakeDevice) free(a Addr) error {
	n, ok := f.live[a]
	if !ok {
		return fmt.Errorf("double or foreign free %#x", uint64(a))
	}
	delete(f.live, a)
	f.used -= n
	f.frees++
	return nil
}

func TestRoundSize(t *testing.T) {
	tests := []struct{ in, want uint64 }{
		{1, 256}, {256, 256}, {257, 512}, {1000, 1024}, {1 << 20, 1 << 20}, {1<<20 + 1, 2 << 20}, {5 << 20, 6 << 20},
	}
	for _, tc := range tests {
		if got := roundSize(tc.in); got != tc.want {
			t.Errorf("roundSize(%d) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestPoolGrowthReusesAndReleases(t *testing.T) {
	dev := newFake(8 << 20)
	p := newPool("/device:GPU:0", dev, 6<<20, true)
	a, err := p.Alloc(1000)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Free(a); err != nil {
		t.Fatal(err)
	}
	b, err := p.Alloc(600) // same class (1024): the freed block comes back
	if err != nil || b != a {
		t.Fatalf("Alloc after Free = %#x, %v; want the freed block %#x", uint64(b), err, uint64(a))
	}
	if dev.allocs != 1 {
		t.Fatalf("device allocations = %d, want 1 (pooled)", dev.allocs)
	}
	if err := p.Free(b); err != nil {
		t.Fatal(err)
	}
	if err := p.Free(b); err == nil || !strings.Contains(err.Error(), "did not allocate or already freed") {
		t.Fatalf("double Free = %v, want an error", err)
	}
	// 4 MiB + 2 MiB fill the 6 MiB limit; the free 1 KiB block is given back to make room.
	big, err := p.Alloc(4 << 20)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Alloc(2 << 20); err != nil {
		t.Fatalf("Alloc filling the limit: %v", err)
	}
	if len(dev.live) != 2 {
		t.Fatalf("device holds %d blocks, want 2 (the free one released)", len(dev.live))
	}
	_, err = p.Alloc(1)
	var oom *OOMError
	if !errors.As(err, &oom) || !strings.Contains(err.Error(), "out of memory on /device:GPU:0") ||
		!strings.Contains(err.Error(), "6.0 MiB limit") {
		t.Fatalf("Alloc past the limit = %v, want an OOMError naming the device and limit", err)
	}
	if err := p.Free(big); err != nil {
		t.Fatal(err)
	}
	if s := p.Stats(); s.InUse != 2<<20 || s.Peak != 6<<20 || !s.Growth {
		t.Fatalf("Stats = %+v", s)
	}
	if err := p.Close(); err == nil || !strings.Contains(err.Error(), "1 blocks") {
		t.Fatalf("Close with a live block = %v, want an error counting it", err)
	}
	if len(dev.live) != 0 {
		t.Fatalf("device still holds %d blocks after Close", len(dev.live))
	}
}

func TestPoolGrowthDeviceFull(t *testing.T) {
	dev := newFake(3 << 20) // the device is smaller than the limit
	p := newPool("/device:GPU:1", dev, 100<<20, true)
	a, _ := p.Alloc(2 << 20)
	b, err := p.Alloc(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	p.Free(a)
	// 2 MiB free in the pool, 0 on the device: a 1 MiB request needs the free block released.
	if _, err := p.Alloc(1 << 20); err != nil {
		t.Fatalf("Alloc needing a release: %v", err)
	}
	_, err = p.Alloc(2 << 20)
	var oom *OOMError
	if !errors.As(err, &oom) || oom.DeviceErr == nil || !strings.Contains(err.Error(), "CUDA_ERROR_OUT_OF_MEMORY") {
		t.Fatalf("Alloc on a full device = %v, want an OOMError carrying the driver's error", err)
	}
	p.Free(b)
}

func TestPoolReserve(t *testing.T) {
	tests := []struct {
		name     string
		capacity uint64
		limit    uint64
		allocs   []uint64
		wantErr  string // for the last alloc
	}{
		{"fits", 16 << 20, 4 << 20, []uint64{1 << 20, 1 << 20, 2 << 20}, ""},
		{"over the limit", 16 << 20, 4 << 20, []uint64{2 << 20, 2 << 20, 256}, "memory growth off"},
		{"device smaller than the limit", 1 << 20, 4 << 20, []uint64{256}, "CUDA_ERROR_OUT_OF_MEMORY"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dev := newFake(tc.capacity)
			p := newPool("/device:GPU:0", dev, tc.limit, false)
			var err error
			seen := map[Addr]bool{}
			for _, n := range tc.allocs {
				var a Addr
				if a, err = p.Alloc(n); err == nil {
					if seen[a] {
						t.Fatalf("address %#x handed out twice", uint64(a))
					}
					seen[a] = true
				}
			}
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if dev.allocs != 1 {
					t.Fatalf("device allocations = %d, want 1 reservation", dev.allocs)
				}
				if s := p.Stats(); s.Held != tc.limit {
					t.Fatalf("Held = %d, want the limit %d reserved", s.Held, tc.limit)
				}
			} else if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("last Alloc = %v, want an error containing %q", err, tc.wantErr)
			}
			for a := range seen {
				if err := p.Free(a); err != nil {
					t.Fatal(err)
				}
			}
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			if len(dev.live) != 0 {
				t.Fatalf("reservation not returned: %d blocks", len(dev.live))
			}
		})
	}
}
