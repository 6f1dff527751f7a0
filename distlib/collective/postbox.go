package collective

import (
	"context"
	"encoding/binary"
	"fmt"
	"unsafe"
)

// Doorbell is an optional upgrade of SharedMemory for ranks that can wait on a word of each
// other's memory: a rank stores a counter in its region and the others wait until it has
// moved, with no message between them. The words are uint32s in memory from Alloc.
type Doorbell interface {
	// Ring stores v in the word at offset off (counted in float32s) of this rank's region and
	// wakes the ranks waiting on it.
	Ring(off int, v uint32) error
	// Await returns once the word at offset off of rank's region has reached want, counted
	// modulo 2^32 (the word minus want, as an int32, is not negative). It fails when ctx
	// ends, when the transport closes, or when it has lost rank, as a Recv from rank would.
	Await(ctx context.Context, rank, off int, want uint32) error
	// Signal lends the caller this rank's signal word: a word of its region (at offset off)
	// that only the borrower rings, with values that only grow, until it calls release.
	// ok is false while another caller holds it, or when the region had no room for it.
	Signal() (off int, release func(), ok bool)
}

// A postbox carries the first messages of a KeepTerms Bucketer's steps (sumSharedKept)
// through shared memory once every rank has one: each rank writes its message into its own
// box and rings (a step counter in the box, Doorbell.Ring), and reads each other rank's from
// that rank's box once its counter shows the step (Doorbell.Await). A round of TCP messages
// costs each worker system calls and a wake-up through the kernel; this costs a copy of the
// message and, when the other rank is already waiting, nothing more than the cache line it
// watches (bench/RESULTS.md, multiworker, "the per-step round through postboxes").
//
// The ranks learn where the boxes lie from one round of messages (each rank's message
// starts with its box's offset, or -1: no box, and the size of its slots), and use them from
// the next step on when every rank has one. A box holds the counter's word, then two slots,
// each the message's length in bytes (a uint32) and the message: step k's message goes
// into slot k%2, which its readers are done with by then, since a rank starts step k only
// after it has read every rank's message of step k-1, and the others start step k+1 only
// after they have read its message of step k. A failed exchange leaves the ranks' counters
// out of step, so the postbox then fails every later step with that error. A Bucketer makes
// its postbox at its first sumSharedKept, after an all-reduce that every rank took part in
// (its first step's), so a box that takes memory another Bucketer freed writes there only
// once every peer is past its last read of it (as Bucketer.place does for the buckets).
type postbox struct {
	db    Doorbell
	sm    SharedMemory
	mem   []float32 // this rank's box (nil: none)
	off   int       // its offset in this rank's region (-1: none)
	slot  int       // float32s per slot
	offs  []int     // every rank's box, by rank, once all have one
	slots []int     // every rank's slot size in float32s, by rank, with offs
	seq   uint32    // the last step posted
	err   error     // an exchange failed
	msg   []byte    // this rank's message, kept from step to step
	acc   []float32 // sumSharedKept's scratch for the sums of small buffers
}

// postboxHead is the float32s before a box's first slot: the counter's word, alone on its
// cache line.
const postboxHead = 16

// newPostbox allocates this rank's box for messages of msgBytes bytes, when sm is a Doorbell
// and has room; otherwise the postbox has no box and its steps exchange messages.
func newPostbox(sm SharedMemory, msgBytes int) *postbox {
	pb := &postbox{sm: sm, off: -1, msg: make([]byte, 0, msgBytes), acc: make([]float32, sharedChunk)}
	db, ok := sm.(Doorbell)
	if !ok {
		return pb
	}
	slot := ((msgBytes+3)/4 + 1 + postboxHead - 1) &^ (postboxHead - 1) // the length, the message: whole cache lines
	mem, err := sm.Alloc(postboxHead + 2*slot)
	if err != nil {
		return pb
	}
	off, ok := sm.Offset(mem)
	if !ok {
		sm.Free(mem)
		return pb
	}
	pb.db, pb.mem, pb.off, pb.slot = db, mem, off, slot
	return pb
}

// postboxHeadBytes is the size of what starts a rank's messages before the ranks use their
// boxes: the box's offset and its slots' size.
const postboxHeadBytes = 16

// head returns what starts this rank's message: its box's offset in its region, or -1, and
// the size of its slots in float32s.
func (pb *postbox) head() []byte {
	h := binary.LittleEndian.AppendUint64(nil, uint64(int64(pb.off)))
	return binary.LittleEndian.AppendUint64(h, uint64(pb.slot))
}

// exchange is peer.exchange for a step's first messages: through the boxes once every rank
// has one, else as messages, learning from them where the boxes lie. It returns what each
// rank sent, by rank, without the head (this rank's entry is nil), and what the caller
// releases once done with them (the messages, not the boxes).
func (pb *postbox) exchange(ctx context.Context, p *peer, msg []byte) (got, release [][]byte, err error) {
	if pb.err != nil {
		return nil, nil, pb.err
	}
	if pb.offs != nil {
		got, err = pb.post(ctx, p, msg)
		if err != nil {
			pb.err = fmt.Errorf("%w (a step failed while the workers exchanged through shared memory, so they are out of step: start the workers again)", err)
		}
		return got, nil, err
	}
	msgs, err := p.exchange(ctx, "/shm", append(pb.head(), msg...))
	if err != nil {
		return nil, msgs, err
	}
	n, r := p.t.Size(), p.t.Rank()
	got = make([][]byte, n)
	offs, slots := make([]int, n), make([]int, n)
	if pb.off >= 0 {
		offs[r], slots[r] = pb.off, pb.slot
	} else {
		offs = nil
	}
	for q, b := range msgs {
		if q == r {
			continue
		}
		if len(b) < postboxHeadBytes {
			return nil, msgs, &PeerError{Rank: q, Op: p.op, Err: fmt.Errorf("shared memory: a first message of %d bytes, want at least %d", len(b), postboxHeadBytes)}
		}
		o, sl := int64(binary.LittleEndian.Uint64(b)), int64(binary.LittleEndian.Uint64(b[8:]))
		got[q] = b[postboxHeadBytes:]
		switch {
		case o == -1:
			offs = nil
		case o < 0 || sl < 1:
			return nil, msgs, &PeerError{Rank: q, Op: p.op, Err: fmt.Errorf("shared memory: a box at offset %d with slots of %d", o, sl)}
		case offs != nil:
			offs[q], slots[q] = int(o), int(sl)
		}
	}
	pb.offs, pb.slots = offs, slots
	return got, msgs, nil
}

// post writes msg into this rank's box for the next step, rings, and reads every other
// rank's message of that step from its box.
func (pb *postbox) post(ctx context.Context, p *peer, msg []byte) ([][]byte, error) {
	n, r := p.t.Size(), p.t.Rank()
	if len(msg) > 4*(pb.slot-1) {
		return nil, fmt.Errorf("%w: %s: a first message of %d bytes for a box slot of %d", ErrBadArgument, p.op, len(msg), 4*(pb.slot-1))
	}
	step := pb.seq + 1
	at := postboxHead + int(step%2)*pb.slot
	slot := bytesOf(pb.mem[at : at+pb.slot])
	binary.LittleEndian.PutUint32(slot, uint32(len(msg)))
	copy(slot[4:], msg)
	if err := pb.db.Ring(pb.off, step); err != nil {
		return nil, fmt.Errorf("collective: %s: shared memory: %w", p.op, err)
	}
	pb.seq = step
	if p.c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.c.timeout)
		defer cancel()
	}
	got := make([][]byte, n)
	for q := range n {
		if q == r {
			continue
		}
		if err := pb.db.Await(ctx, q, pb.offs[q], step); err != nil {
			return nil, p.wrap(q, err)
		}
		sl := pb.slots[q]
		v, err := pb.sm.View(q, pb.offs[q]+postboxHead+int(step%2)*sl, sl)
		if err != nil {
			return nil, &PeerError{Rank: q, Op: p.op, Err: fmt.Errorf("shared memory: %w", err)}
		}
		b := bytesOf(v)
		m := int64(binary.LittleEndian.Uint32(b))
		if m > int64(len(b)-4) {
			return nil, &PeerError{Rank: q, Op: p.op, Err: fmt.Errorf("shared memory: a first message of %d bytes in a box slot of %d", m, len(b)-4)}
		}
		got[q] = b[4 : 4+m]
	}
	return got, nil
}

// bytesOf returns f's memory as bytes.
func bytesOf(f []float32) []byte {
	if len(f) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), 4*len(f))
}
