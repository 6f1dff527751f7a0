package collective

import "context"

// SharedMemory is memory that every rank of a group can read: each rank allocates buffers in
// its own region and reads the regions of the others. Processes on one host share it through
// files in /dev/shm (transport.GRPC); ranks in one process share their heap
// (transport.NewSharedMem). When every rank's buffer lies in it, AllReduce reads the other
// ranks' values where they are, with no message carrying them (see AllReduce).
type SharedMemory interface {
	// Alloc returns n zeroed float32s in this rank's region, 64-byte aligned, or an error when
	// the region has no room for them. Free gives them back.
	Alloc(n int) ([]float32, error)
	// Free gives back a slice Alloc returned; other slices are ignored.
	Free(b []float32)
	// Offset reports where b starts in this rank's region, counted in float32s; ok is false
	// when b does not lie wholly inside the region.
	Offset(b []float32) (off int, ok bool)
	// View returns n float32s of rank's region from offset off (rank may be this rank). It
	// fails when the range lies outside the region. Another rank's values are to be read,
	// never written.
	View(rank, off, n int) ([]float32, error)
}

// Sharer is an optional upgrade of Transport for ranks that can read each other's memory.
type Sharer interface {
	// SharedMemory returns the group's shared memory, or nil (and no error) when some rank
	// cannot read some other rank's region; then the algorithms move every byte with Send and
	// Recv. The first call agrees on the answer with the other ranks over the transport, so
	// every rank must make it (AllReduce does, before anything else) and every rank gets the
	// same answer; later calls return the first call's. An error (the context ended, a peer
	// was lost) is returned by every later call too.
	SharedMemory(ctx context.Context) (SharedMemory, error)
}
