package transport

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Parameter-server calls of co-located clients through shared memory.
//
// A worker on the ps's host moves a step's gradients and the values that answer them
// through a region of its own (a sparse file in /dev/shm, as the collectives' regions): at
// its first large call a PSClient creates the region and offers it to the ps (AttachShm:
// the file's path, the nonce in its header and the caller's rank); the ps maps it
// read-write when the header proves it is that client's file on this host, and the client
// removes the file either way. A call (a part of a Do) then carries only where its value
// lies in the region (UpdateShm, UpdateReadShm, ReadShm): the client copies the gradient
// in, the ps applies the optimizer reading it where it lies and copies the variable's value
// into the place the call names, under the variable's lock, and the client copies it out.
// That is one copy each way on each side instead of the codec's encode, frame, socket and
// decode copies (bench/ps). A ps that cannot map the region (another host, another
// container, NoSharedMemory) answers no and the client sends payloads from then on; a ps
// that does not know the region a call names (it restarted) answers so before it changes
// anything, and the client sends that Do again as payloads and offers a new region at its
// next large call. Exactly-once is the payload path's: the same UpdateIDs.

const (
	// psShmMin is the smallest value, in float32s, that goes through shared memory;
	// smaller ones travel in the message.
	psShmMin = 1024
	// psShmBytes is a client region's size: sparse, only what the calls in flight use is
	// committed.
	psShmBytes = 1 << 30
	// psShmMaxRegions bounds the regions one ps maps. A client that dies without detaching
	// leaves its mapping behind; a new client then takes the place of the region used
	// longest ago (a live client whose region goes that way sends its next call again as
	// payloads and offers a new region), or sends payloads while every region is in use.
	psShmMaxRegions = 64
	// psUnknownRegion marks the ps's answer to a call naming a region it does not map.
	psUnknownRegion = "godist ps: unknown shared memory region"
)

// psRegionKey names a client's region on the ps: the first 16 bytes of its header's nonce.
type psRegionKey [16]byte

// psRegion is a mapped region and the calls using it; refs and dead are guarded by the
// owner's mutex (the client's or the server's). A dead region is closed when its last
// call ends.
type psRegion struct {
	f    *shmFile
	key  psRegionKey
	refs int
	dead bool
	used uint64 // the ps's call count at the region's last call (the server's side)
}

// view returns n float32s of the region from off, checked against its size.
func (r *psRegion) view(off, n uint64) ([]float32, error) {
	if off > uint64(len(r.f.floats)) || n > uint64(len(r.f.floats))-off {
		return nil, fmt.Errorf("%d float32s at offset %d lie outside the shared region of %d float32s", n, off, len(r.f.floats))
	}
	return r.f.floats[off : off+n : off+n], nil
}

// psShmClient is a PSClient's side: its region, once the ps has mapped it.
type psShmClient struct {
	mu        sync.Mutex
	no        bool // PSClientOptions.NoSharedMemory, or the ps or this host said no
	closed    bool
	attaching bool
	cur       *psRegion
}

// region returns the client's region for a call moving n float32s, attaching one at the
// first such call, or nil: the call sends payloads. A region returned must be released.
func (c *PSClient) region(ctx context.Context, n int) *psRegion {
	s := &c.shm
	if n < psShmMin {
		return nil
	}
	s.mu.Lock()
	if s.no || s.closed || s.attaching {
		s.mu.Unlock()
		return nil // calls racing with the attach send payloads
	}
	if r := s.cur; r != nil {
		r.refs++
		s.mu.Unlock()
		return r
	}
	s.attaching = true
	s.mu.Unlock()
	r, no := c.attach(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attaching = false
	s.no = s.no || no
	if r == nil {
		return nil
	}
	if s.closed {
		_ = r.f.close()
		return nil
	}
	s.cur = r
	r.refs++
	return r
}

// attach creates a region and offers it to the ps. no reports an answer that holds for
// good (no region can be made here, or the ps cannot or will not map it); a failed call
// (the ps unreachable) leaves the next call to try again.
func (c *PSClient) attach(ctx context.Context) (r *psRegion, no bool) {
	f, err := mapOwn(c.caller, psShmBytes)
	if err != nil {
		return nil, true
	}
	var e psEncoder
	e.b = append(e.b, f.nonce[:]...)
	e.u32(uint32(c.caller))
	e.str(f.path)
	b, err := c.invoke(ctx, "AttachShm", "", e.b, false)
	if uerr := f.unlink(); uerr != nil && err == nil {
		err = uerr
	}
	if err != nil || len(b) != 1 || b[0] != 1 {
		_ = f.close()
		return nil, !errors.Is(err, ErrPSUnavailable)
	}
	r = &psRegion{f: f}
	copy(r.key[:], f.nonce[:])
	return r, false
}

// release ends a call's use of r.
func (c *PSClient) release(r *psRegion) {
	s := &c.shm
	s.mu.Lock()
	r.refs--
	last := r.dead && r.refs == 0
	s.mu.Unlock()
	if last {
		_ = r.f.close()
	}
}

// drop forgets r after the ps answered that it does not map it: the calls using it send
// payloads, and the next large call offers a new region.
func (c *PSClient) drop(r *psRegion) {
	s := &c.shm
	s.mu.Lock()
	r.dead = true
	if s.cur == r {
		s.cur = nil
	}
	s.mu.Unlock()
}

// abandon retires r after a call through it failed without an answer (a timeout, a
// broken connection): the ps may still be reading the call's value or writing its answer
// into the call's buffers, so they are never handed out again. No new call uses r (the
// next large call offers a new region); r is unmapped here when its last call ends, and
// the ps is asked to unmap it once its own calls through it have ended.
func (c *PSClient) abandon(r *psRegion) {
	c.drop(r)
	c.detach(r)
}

// detach asks the ps to unmap r once its calls through it have ended (best effort: a ps
// that is gone has nothing to unmap).
func (c *PSClient) detach(r *psRegion) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	_, _ = c.invoke(ctx, "DetachShm", "", r.key[:], false)
	cancel()
}

// closeShm detaches the region and closes it once no call uses it.
func (c *PSClient) closeShm() {
	s := &c.shm
	s.mu.Lock()
	s.closed = true
	r := s.cur
	s.cur = nil
	if r != nil {
		r.dead = true
		r.refs++
	}
	s.mu.Unlock()
	if r != nil {
		c.detach(r)
		c.release(r)
	}
}

// isUnknownRegion reports whether err is the ps's answer to a call naming a region it
// does not map.
func isUnknownRegion(err error) bool {
	return err != nil && strings.Contains(err.Error(), psUnknownRegion)
}

// shmCall is one call's buffers in the client's region: the value it sends (copied in)
// and the place for the value it reads.
type shmCall struct {
	r       *psRegion
	in, out []float32
	inOff   uint64
	outOff  uint64
}

// prepare allocates the call's buffers and copies value in; ok is false when the region
// has no room (the call then sends payloads).
func (c *PSClient) prepare(r *psRegion, value []float32, outN int) (call shmCall, ok bool) {
	call.r = r
	a := r.f.arena
	if len(value) > 0 {
		in, err := a.allocDirty(len(value))
		if err != nil {
			return call, false
		}
		copy(in, value)
		call.in = in
		off, _ := a.Offset(in)
		call.inOff = uint64(off)
	}
	if outN > 0 {
		out, err := a.allocDirty(outN)
		if err != nil {
			a.Free(call.in)
			call.in = nil
			return call, false
		}
		call.out = out
		off, _ := a.Offset(out)
		call.outOff = uint64(off)
	}
	return call, true
}

func (call *shmCall) free() {
	a := call.r.f.arena
	a.Free(call.in)
	a.Free(call.out)
}

// encode appends the region's key and the call's two places.
func (call *shmCall) encode(e *psEncoder) {
	e.b = append(e.b, call.r.key[:]...)
	e.u64(call.inOff)
	e.u64(uint64(len(call.in)))
	e.u64(call.outOff)
	e.u64(uint64(len(call.out)))
}

// readAnswer reads a value the ps answered with: in the call's out buffer (copied into
// dst when it has the length, else into a new slice) or in the message.
func (call *shmCall) readAnswer(d *psDecoder, dst []float32) []float32 {
	if d.u8() == 0 {
		return d.floatsOrInto(dst)
	}
	n := d.u64()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(call.out)) {
		d.err = fmt.Errorf("transport: ps: answer of %d float32s in a place of %d", n, len(call.out))
		return nil
	}
	if uint64(len(dst)) != n {
		dst = make([]float32, n)
	}
	copy(dst, call.out[:n])
	return dst
}

// psShmServer is a PSServer's side: the clients' regions it maps.
type psShmServer struct {
	mu      sync.Mutex
	no      bool // PSServerOptions.NoSharedMemory
	closed  bool
	max     int    // regions mapped at most (psShmMaxRegions)
	calls   uint64 // calls through regions so far: the clock of psRegion.used
	regions map[psRegionKey]*psRegion
}

// evictOne unmaps the region whose last call is the oldest among those no call uses, and
// reports whether there was one; s.shm.mu is held.
func (s *PSServer) evictOne() bool {
	m := &s.shm
	var old *psRegion
	for _, r := range m.regions {
		if r.refs == 0 && (old == nil || r.used < old.used) {
			old = r
		}
	}
	if old == nil {
		return false
	}
	delete(m.regions, old.key)
	s.retireRegion(old)
	return true
}

// attachShm maps a client's region read-write when its header proves it is the caller's
// file on this host; it answers 1 when it did, 0 when the client is to send payloads.
func (s *PSServer) attachShm(d *psDecoder) ([]byte, error) {
	nonce := d.take(32)
	caller := d.u32()
	path := d.str()
	if err := d.done(); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	m := &s.shm
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.no || m.closed || (len(m.regions) >= m.max && !s.evictOne()) {
		return []byte{0}, nil
	}
	f, err := mapPeerWritable(path, int(caller), nonce)
	if err != nil {
		return []byte{0}, nil
	}
	m.calls++
	r := &psRegion{f: f, used: m.calls}
	copy(r.key[:], nonce)
	if old := m.regions[r.key]; old != nil {
		s.retireRegion(old)
	}
	m.regions[r.key] = r
	return []byte{1}, nil
}

// detachShm unmaps the region d names (once no call uses it).
func (s *PSServer) detachShm(d *psDecoder) ([]byte, error) {
	var key psRegionKey
	copy(key[:], d.take(len(key)))
	if err := d.done(); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	m := &s.shm
	m.mu.Lock()
	defer m.mu.Unlock()
	if r := m.regions[key]; r != nil {
		delete(m.regions, key)
		s.retireRegion(r)
	}
	return nil, nil
}

// retireRegion marks r dead and closes it unless a call uses it; s.shm.mu is held.
func (s *PSServer) retireRegion(r *psRegion) {
	r.dead = true
	if r.refs == 0 {
		_ = r.f.close()
	}
}

// closeShm unmaps every region once no call uses it.
func (s *PSServer) closeShm() {
	s.shm.mu.Lock()
	defer s.shm.mu.Unlock()
	s.shm.closed = true
	s.retireAll()
}

// retireAll forgets every region, each unmapped once no call uses it; s.shm.mu is held.
func (s *PSServer) retireAll() {
	for k, r := range s.shm.regions {
		delete(s.shm.regions, k)
		s.retireRegion(r)
	}
}

// shmPlaces reads a call's region key and places, and returns the region (held: release
// it) with views of the value sent and the place for the value read.
func (s *PSServer) shmPlaces(d *psDecoder) (r *psRegion, in, out []float32, err error) {
	var key psRegionKey
	copy(key[:], d.take(len(key)))
	inOff, inN, outOff, outN := d.u64(), d.u64(), d.u64(), d.u64()
	if d.err != nil {
		return nil, nil, nil, status.Error(codes.InvalidArgument, d.err.Error())
	}
	if r = s.holdRegion(key); r == nil {
		return nil, nil, nil, status.Error(codes.FailedPrecondition, psUnknownRegion+" (this ps restarted, or the client detached it)")
	}
	if in, err = r.view(inOff, inN); err == nil {
		out, err = r.view(outOff, outN)
	}
	if err != nil {
		s.releaseRegion(r)
		return nil, nil, nil, status.Errorf(codes.InvalidArgument, "transport: ps: %v", err)
	}
	return r, in, out, nil
}

// holdRegion returns the region named key, held for a call (release it), or nil when
// this ps does not map it.
func (s *PSServer) holdRegion(key psRegionKey) *psRegion {
	m := &s.shm
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.regions[key]
	if r != nil {
		r.refs++
		m.calls++
		r.used = m.calls
	}
	return r
}

func (s *PSServer) releaseRegion(r *psRegion) {
	m := &s.shm
	m.mu.Lock()
	defer m.mu.Unlock()
	r.refs--
	if r.dead && r.refs == 0 {
		_ = r.f.close()
	}
}

// answerShm appends where the value data went: into out when it fits (1, its length),
// else into the message (0, the floats). It counts the bytes moved through the region.
func (s *PSServer) answerShm(e *psEncoder, data, out []float32) {
	if len(data) <= len(out) {
		copy(out, data)
		e.u8(1)
		e.u64(uint64(len(data)))
		s.sharedOut.Add(4 * int64(len(data)))
		return
	}
	e.u8(0)
	e.floats(data)
}

// updateShm is update with the value in the caller's region.
func (s *PSServer) updateShm(key string, d *psDecoder) ([]byte, error) {
	return s.pushShm(key, d, false)
}

// updateReadShm is updateRead with the value sent and the value read in the caller's
// region.
func (s *PSServer) updateReadShm(key string, d *psDecoder) ([]byte, error) {
	return s.pushShm(key, d, true)
}

// pushShm is push with the update's value in the caller's region, and with read the
// value read into its place there.
func (s *PSServer) pushShm(key string, d *psDecoder, read bool) ([]byte, error) {
	r, in, out, err := s.shmPlaces(d)
	if err != nil {
		return nil, err
	}
	defer s.releaseRegion(r)
	u := decodeUpdateHead(d)
	u.Value = in
	s.sharedIn.Add(4 * int64(len(in)))
	if !read {
		return s.push(key, d, u, nil)
	}
	return s.push(key, d, u, func(e *psEncoder, data []float32) { s.answerShm(e, data, out) })
}

// readShm is read (without the shape) with the value in the caller's region.
func (s *PSServer) readShm(key string, d *psDecoder) ([]byte, error) {
	r, _, out, err := s.shmPlaces(d)
	if err != nil {
		return nil, err
	}
	defer s.releaseRegion(r)
	return s.readWith(key, d, func(e *psEncoder, v *psVar) { s.answerShm(e, v.data, out) })
}
