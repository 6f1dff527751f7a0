package transport

import (
	"context"
	"fmt"
	"sync"

	"godist/distlib/collective"
)

// SharedMem is one rank's endpoint of an in-memory group made by NewSharedMem: a Mem whose
// ranks also share their memory (collective.Sharer), as ranks in one process do. Each rank's
// region is a heap slice allocated at its first SharedMemory call (or at a peer's first
// View of it).
type SharedMem struct {
	*Mem
	group []*SharedMem
	bytes int
	bell  *memBell // the group's, for collective.Doorbell

	regionOnce sync.Once
	region     *arena
}

var (
	_ collective.Transport    = (*SharedMem)(nil)
	_ collective.PeerWaiter   = (*SharedMem)(nil)
	_ collective.Sharer       = (*SharedMem)(nil)
	_ collective.SharedMemory = (*memShared)(nil)
)

// NewSharedMem returns the n endpoints of an in-memory group, like NewMem, whose ranks share
// memory: each rank has a region of bytesPerRank bytes (rounded down to 64) for Alloc, and
// View reads the other ranks' regions directly. NewMem's endpoints do not share memory.
func NewSharedMem(n int, bytesPerRank int) []*SharedMem {
	if bytesPerRank < 0 {
		panic(fmt.Sprintf("transport: NewSharedMem: bytes per rank %d, want at least 0", bytesPerRank))
	}
	mems := NewMem(n)
	g := make([]*SharedMem, n)
	bell := &memBell{}
	for i := range g {
		g[i] = &SharedMem{Mem: mems[i], group: g, bytes: bytesPerRank, bell: bell}
	}
	return g
}

func (m *SharedMem) arena() *arena {
	m.regionOnce.Do(func() { m.region = newHeapArena(m.bytes) })
	return m.region
}

// SharedMemory returns this rank's view of the group's shared memory; it never fails or
// says no unless ctx has ended, since all ranks live in one process.
func (m *SharedMem) SharedMemory(ctx context.Context) (collective.SharedMemory, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return &memShared{m: m, arena: m.arena()}, nil
}

type memShared struct {
	m *SharedMem
	*arena
}

func (s *memShared) View(rank, off, n int) ([]float32, error) {
	if rank < 0 || rank >= len(s.m.group) {
		return nil, fmt.Errorf("transport: shared memory: view of rank %d outside group of %d", rank, len(s.m.group))
	}
	return viewRegion(s.m.group[rank].arena().mem, rank, off, n)
}
