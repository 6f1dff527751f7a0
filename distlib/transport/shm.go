package transport

import (
	"context"
	"errors"
	"fmt"

	"godist/distlib/collective"
)

const (
	shmPrefix   = "godist-shm-"
	shmMagic    = "godist-shm-v1\x00\x00\x00" // 16 bytes
	shmHeader   = 4096                        // magic, rank (uint64 LE), 32 nonce bytes, zeros; from byte 64 the doorbell's counters (shmSleepers)
	shmDefault  = 1 << 30
	tagShmOffer = "godist/shm/offer"
	tagShmOK    = "godist/shm/ok"
)

// shmFile is a mapped region: this rank's own (read-write, with its arena and open file)
// or a peer's (read-only, or read-write for a parameter server's co-located clients).
type shmFile struct {
	path     string
	nonce    [32]byte
	fd       int
	own      bool
	writable bool // a peer's region mapped read-write
	unlinked bool
	data     []byte    // the whole mapping, header included
	floats   []float32 // the region after the header
	arena    *arena    // own only
}

// shmState is a GRPC's shared memory: agreed once, under sem.
type shmState struct {
	sem    chan struct{} // a lock that waits with a context
	no     bool          // GRPCOptions.NoSharedMemory
	bytes  int
	done   bool
	closed bool
	mem    *grpcShared // the answer; nil for no
	err    error
	files  []*shmFile // by rank; kept while the answer is yes
}

var (
	_ collective.Sharer       = (*GRPC)(nil)
	_ collective.SharedMemory = (*grpcShared)(nil)
)

type grpcShared struct {
	rank int
	*arena
	// Every rank's region and its header, by rank, as mapped at the agreement. Close lays
	// fresh pages over the mappings (shmFile.retire) and forgets the files, but the
	// addresses stay reserved, so these stay valid for calls that race with it.
	regions [][]float32
	headers [][]byte
	lost    func(rank int) error // why the transport lost rank, or nil (Await)
	done    chan struct{}        // closed by Close (Await)
	spin    spinBudget           // how long Await watches its word (Await)
}

// newGRPCShared is the group's shared memory once every rank has mapped files (by rank).
func (g *GRPC) newGRPCShared(files []*shmFile, own *shmFile) *grpcShared {
	s := &grpcShared{rank: g.rank, arena: own.arena, lost: g.box.lostErr, done: g.done,
		regions: make([][]float32, len(files)), headers: make([][]byte, len(files))}
	for q, f := range files {
		s.regions[q] = f.floats
		s.headers[q] = f.data[:min(shmHeader, len(f.data))]
	}
	return s
}

func (s *grpcShared) View(rank, off, n int) ([]float32, error) {
	if rank < 0 || rank >= len(s.regions) {
		return nil, fmt.Errorf("transport: shared memory: view of rank %d outside group of %d", rank, len(s.regions))
	}
	return viewRegion(s.regions[rank], rank, off, n)
}

// SharedMemory agrees with the other ranks, at the first call, whether every rank can map
// every other rank's region (files in /dev/shm of one host), and returns the group's shared
// memory or nil; see collective.Sharer. Every rank must call it. A rank with
// GRPCOptions.NoSharedMemory, or one that cannot create its region, or one not on Linux,
// takes part and says no, which makes the answer nil on every rank. Concurrent first calls
// wait for one agreement. Once agreed, each rank's file is removed from /dev/shm (the
// mappings stay until Close).
func (g *GRPC) SharedMemory(ctx context.Context) (collective.SharedMemory, error) {
	s := &g.shm
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-s.sem }()
	if s.closed {
		return nil, ErrClosed
	}
	if !s.done {
		actx, cancel := context.WithCancel(ctx)
		stopped := make(chan struct{})
		go func() { // Close ends an agreement in progress
			defer close(stopped)
			select {
			case <-g.done:
				cancel()
			case <-actx.Done():
			}
		}()
		s.mem, s.err = g.agreeShm(actx)
		cancel()
		<-stopped
		if s.err != nil && ctx.Err() == nil && isClosed(g.done) {
			s.err = fmt.Errorf("%w (during the shared memory agreement)", ErrClosed)
		}
		s.done = true
	}
	if s.err != nil {
		return nil, s.err
	}
	if s.mem == nil {
		return nil, nil // an interface holding a nil *grpcShared would not be nil
	}
	return s.mem, nil
}

func (g *GRPC) agreeShm(ctx context.Context) (_ *grpcShared, err error) {
	s := &g.shm
	n := len(g.addrs)
	files := make([]*shmFile, n)
	var own *shmFile
	if !s.no {
		own, _ = mapOwn(g.rank, s.bytes) // a rank that cannot create one says "none"
	}
	files[g.rank] = own
	answer := false
	defer func() {
		if own != nil {
			if e := own.unlink(); e != nil && err == nil {
				err = fmt.Errorf("transport: shared memory: %w", e)
			}
		}
		if err != nil || !answer {
			for _, f := range files {
				if f != nil {
					_ = f.close()
				}
			}
			return
		}
		s.files = files
	}()
	if own != nil && n == 1 {
		answer = true
		return g.newGRPCShared(files, own), nil
	}
	if n == 1 {
		return nil, nil
	}

	offer := []byte{0}
	if own != nil {
		offer = append(append([]byte{1}, own.nonce[:]...), own.path...)
	}
	for p := 0; p < n; p++ {
		if p != g.rank {
			if err := g.Send(ctx, p, tagShmOffer, offer); err != nil {
				return nil, shmPeerError(p, "offer to", err)
			}
		}
	}
	mapped := own != nil
	for p := 0; p < n; p++ {
		if p == g.rank {
			continue
		}
		b, err := g.Recv(ctx, p, tagShmOffer)
		if err != nil {
			return nil, shmPeerError(p, "offer from", err)
		}
		switch {
		case len(b) == 1 && b[0] == 0:
			mapped = false
		case len(b) > 33 && b[0] == 1:
			if mapped {
				f, err := mapPeer(string(b[33:]), p, b[1:33])
				if err != nil {
					mapped = false
				} else {
					files[p] = f
				}
			}
		default:
			g.Release(b)
			return nil, fmt.Errorf("transport: shared memory: malformed offer of %d bytes from rank %d", len(b), p)
		}
		g.Release(b)
	}
	ok := []byte{0}
	if mapped {
		ok[0] = 1
	}
	for p := 0; p < n; p++ {
		if p != g.rank {
			if err := g.Send(ctx, p, tagShmOK, ok); err != nil {
				return nil, shmPeerError(p, "answer to", err)
			}
		}
	}
	all := mapped
	for p := 0; p < n; p++ {
		if p == g.rank {
			continue
		}
		b, err := g.Recv(ctx, p, tagShmOK)
		if err != nil {
			return nil, shmPeerError(p, "answer from", err)
		}
		if len(b) != 1 || b[0] > 1 {
			g.Release(b)
			return nil, fmt.Errorf("transport: shared memory: malformed answer of %d bytes from rank %d", len(b), p)
		}
		all = all && b[0] == 1
		g.Release(b)
	}
	if !all {
		return nil, nil
	}
	answer = true
	return g.newGRPCShared(files, own), nil
}

// shmPeerError names the peer whose message of the agreement could not be sent or received,
// as the collectives do, so that a strategy can say which task was lost.
func shmPeerError(rank int, what string, err error) error {
	var pe *collective.PeerError
	if errors.As(err, &pe) {
		return err
	}
	return &collective.PeerError{Rank: rank, Op: "shared memory agreement", Err: fmt.Errorf("%s rank %d: %w", what, rank, err)}
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// closeShm retires every region (slices of it that are still held read zeros from then on)
// and removes this rank's file if it is still there; it waits for an agreement in progress
// (which fails, the transport being closed).
func (g *GRPC) closeShm() error {
	s := &g.shm
	s.sem <- struct{}{}
	defer func() { <-s.sem }()
	s.closed = true
	var errs []error
	for _, f := range s.files {
		if f != nil {
			errs = append(errs, f.retire())
		}
	}
	s.files, s.mem = nil, nil
	return errors.Join(errs...)
}
