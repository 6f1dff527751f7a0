package driver

import (
	"fmt"
	"sync"
	"unsafe"
)

// NCCL constants (nccl.h).
const (
	NCCLFloat32 = 7
	NCCLSum     = 0
)

// UniqueID is an ncclUniqueId: 128 opaque bytes made by rank 0 and shared with every rank.
type UniqueID [128]byte

type ncclAPI struct {
	ncclGetUniqueId          func(id *UniqueID) Result
	ncclCommInitRankScalable func(comm *uintptr, nranks, rank, nID int32, ids *UniqueID, config unsafe.Pointer) Result
	ncclCommInitAll          func(comms *uintptr, ndev int32, devlist *int32) Result
	ncclAllReduce            func(send, recv uint64, count uint64, dtype int32, op int32, comm uintptr, stream uintptr) Result
	ncclGroupStart           func() Result
	ncclGroupEnd             func() Result
	ncclCommDestroy          func(comm uintptr) Result
	ncclGetErrorString       func(r Result) *byte
}

var (
	nccl     ncclAPI
	ncclOnce sync.Once
	ncclErr  error
	ncclPath string
)

func (n *ncclAPI) symbols() symtab {
	return symtab{{&n.ncclGetUniqueId, "ncclGetUniqueId"}, {&n.ncclCommInitRankScalable, "ncclCommInitRankScalable"},
		{&n.ncclCommInitAll, "ncclCommInitAll"}, {&n.ncclAllReduce, "ncclAllReduce"},
		{&n.ncclGroupStart, "ncclGroupStart"}, {&n.ncclGroupEnd, "ncclGroupEnd"},
		{&n.ncclCommDestroy, "ncclCommDestroy"}, {&n.ncclGetErrorString, "ncclGetErrorString"}}
}

// LoadNCCL loads libnccl.so.2 once.
func LoadNCCL() (string, error) {
	ncclOnce.Do(func() {
		l, err := Load(withDirs(NCCLLib, "nccl"))
		if err != nil {
			ncclErr = err
			return
		}
		ncclPath = l.Path
		ncclErr = bind(l.Handle, l.Path, nccl.symbols())
	})
	return ncclPath, ncclErr
}

func checkNCCL(call string, r Result) error {
	if r == 0 {
		return nil
	}
	return fmt.Errorf("gpu/driver: %s failed (ncclResult %d): %s", call, r, goString(nccl.ncclGetErrorString(r)))
}

// NCCLUniqueID makes a new unique id (on rank 0) to share with the other ranks.
func NCCLUniqueID() (UniqueID, error) {
	var id UniqueID
	if _, err := LoadNCCL(); err != nil {
		return id, err
	}
	return id, checkNCCL("ncclGetUniqueId", nccl.ncclGetUniqueId(&id))
}

// Comm is an NCCL communicator of one rank on one device.
type Comm struct {
	d *Device
	c uintptr
}

// NCCLInitRank joins rank of nranks on device d. It calls ncclCommInitRankScalable (NCCL
// 2.23 and later) with one id, which is ncclCommInitRank: ncclCommInitRank takes its
// 128-byte ncclUniqueId by value, which the x86-64 ABI passes as 16 stack words, more than
// purego's 15-argument calls can carry; the scalable form takes a pointer to it.
func NCCLInitRank(d *Device, nranks, rank int, id UniqueID) (*Comm, error) {
	if _, err := LoadNCCL(); err != nil {
		return nil, err
	}
	c := &Comm{d: d}
	err := d.Do(func() error {
		return checkNCCL("ncclCommInitRankScalable", nccl.ncclCommInitRankScalable(&c.c, int32(nranks), int32(rank), 1, &id, nil))
	})
	return c, err
}

// NCCLInitAll makes one communicator per device in one process (devices are Open ordinals).
func NCCLInitAll(devs []*Device) ([]*Comm, error) {
	if _, err := LoadNCCL(); err != nil {
		return nil, err
	}
	if len(devs) == 0 {
		return nil, fmt.Errorf("gpu/driver: NCCLInitAll of no devices; pass at least one")
	}
	raw := make([]uintptr, len(devs))
	ords := make([]int32, len(devs))
	for i, d := range devs {
		ords[i] = int32(d.Ordinal)
	}
	if err := checkNCCL("ncclCommInitAll", nccl.ncclCommInitAll(&raw[0], int32(len(devs)), &ords[0])); err != nil {
		return nil, err
	}
	out := make([]*Comm, len(devs))
	for i := range raw {
		out[i] = &Comm{d: devs[i], c: raw[i]}
	}
	return out, nil
}

// AllReduceSum queues a float32 sum all-reduce of count elements on the stream.
func (c *Comm) AllReduceSum(send, recv Ptr, count int, s *Stream) error {
	return c.d.Do(func() error {
		return checkNCCL("ncclAllReduce", nccl.ncclAllReduce(uint64(send), uint64(recv), uint64(count), NCCLFloat32, NCCLSum, c.c, s.Handle()))
	})
}

// NCCLGroup runs f between ncclGroupStart and ncclGroupEnd, as one process driving several
// GPUs must for their all-reduces.
func NCCLGroup(f func() error) error {
	if err := checkNCCL("ncclGroupStart", nccl.ncclGroupStart()); err != nil {
		return err
	}
	ferr := f()
	if err := checkNCCL("ncclGroupEnd", nccl.ncclGroupEnd()); err != nil && ferr == nil {
		ferr = err
	}
	return ferr
}

// Destroy frees the communicator.
func (c *Comm) Destroy() error {
	return c.d.Do(func() error { return checkNCCL("ncclCommDestroy", nccl.ncclCommDestroy(c.c)) })
}
