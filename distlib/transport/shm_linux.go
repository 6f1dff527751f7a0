package transport

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// shmDir holds the regions' files; a variable so that tests can take the path of a machine
// without /dev/shm.
var shmDir = "/dev/shm"

// mapOwn creates this rank's region: a file in /dev/shm of shmHeader+bytes bytes (sparse),
// mapped read-write, its header written. Its arena commits pages with fallocate, so that a
// full /dev/shm fails an Alloc rather than raising SIGBUS at a later write.
func mapOwn(rank, size int) (*shmFile, error) {
	var rnd [8]byte
	f := &shmFile{fd: -1, own: true}
	if _, err := rand.Read(rnd[:]); err != nil {
		return nil, err
	}
	if _, err := rand.Read(f.nonce[:]); err != nil {
		return nil, err
	}
	f.path = filepath.Join(shmDir, fmt.Sprintf("%s%d-%s", shmPrefix, os.Getpid(), hex.EncodeToString(rnd[:])))
	fd, err := unix.Open(f.path, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, &os.PathError{Op: "create", Path: f.path, Err: err}
	}
	f.fd = fd
	fail := func(op string, err error) (*shmFile, error) {
		f.close()
		return nil, &os.PathError{Op: op, Path: f.path, Err: err}
	}
	total := int64(shmHeader) + int64(size)
	if err := unix.Ftruncate(fd, total); err != nil {
		return fail("truncate", err)
	}
	if err := unix.Fallocate(fd, 0, 0, shmHeader); err != nil {
		return fail("fallocate", err)
	}
	if f.data, err = unix.Mmap(fd, 0, int(total), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
		return fail("mmap", err)
	}
	copy(f.data, shmMagic)
	binary.LittleEndian.PutUint64(f.data[len(shmMagic):], uint64(rank))
	copy(f.data[len(shmMagic)+8:], f.nonce[:])
	f.floats = floatsOf(f.data[shmHeader:])
	if f.arena, err = newArena(f.floats, func(off, n int) error {
		return unix.Fallocate(fd, 0, int64(shmHeader)+4*int64(off), 4*int64(n))
	}); err != nil {
		return fail("map", err)
	}
	return f, nil
}

// mapPeer maps a peer's region read-only and checks that its header carries the rank and
// nonce the peer offered: only then is it the peer's memory (a file of the same name on
// another host or in another container fails the check).
func mapPeer(path string, rank int, nonce []byte) (*shmFile, error) {
	return mapPeerMode(path, rank, nonce, false)
}

// mapPeerWritable is mapPeer mapping the region read-write (a parameter server writes the
// values a co-located client reads into the client's region).
func mapPeerWritable(path string, rank int, nonce []byte) (*shmFile, error) {
	return mapPeerMode(path, rank, nonce, true)
}

func mapPeerMode(path string, rank int, nonce []byte, writable bool) (*shmFile, error) {
	if filepath.Dir(path) != shmDir || !strings.HasPrefix(filepath.Base(path), shmPrefix) {
		return nil, fmt.Errorf("transport: shared memory: rank %d offered %q, not a godist file in %s", rank, path, shmDir)
	}
	flags, prot := unix.O_RDONLY, unix.PROT_READ
	if writable {
		flags, prot = unix.O_RDWR, unix.PROT_READ|unix.PROT_WRITE
	}
	fd, err := unix.Open(path, flags|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size < shmHeader {
		return nil, fmt.Errorf("transport: shared memory: %s of rank %d is not a region", path, rank)
	}
	data, err := unix.Mmap(fd, 0, int(st.Size), prot, unix.MAP_SHARED)
	if err != nil {
		return nil, &os.PathError{Op: "mmap", Path: path, Err: err}
	}
	if !bytes.Equal(data[:len(shmMagic)], []byte(shmMagic)) ||
		binary.LittleEndian.Uint64(data[len(shmMagic):]) != uint64(rank) ||
		!bytes.Equal(data[len(shmMagic)+8:len(shmMagic)+8+32], nonce) {
		_ = unix.Munmap(data)
		return nil, fmt.Errorf("transport: shared memory: %s does not hold rank %d's region (another host or container?)", path, rank)
	}
	return &shmFile{path: path, fd: -1, writable: writable, data: data, floats: floatsOf(data[shmHeader:])}, nil
}

func floatsOf(b []byte) []float32 {
	if len(b) < 4 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/4)
}

// unlink removes an own region's file; the mappings stay.
func (f *shmFile) unlink() error {
	if !f.own || f.unlinked {
		return nil
	}
	f.unlinked = true
	if err := unix.Unlink(f.path); err != nil && !errors.Is(err, unix.ENOENT) {
		return &os.PathError{Op: "remove", Path: f.path, Err: err}
	}
	return nil
}

// retire ends a region whose slices may still be held (buckets of a Bucketer, a view in an
// all-reduce that a Close interrupts): it lays fresh anonymous pages over the mapping, so
// the shared pages are given back and those slices read zeros rather than fault, closes the
// file and removes it if it is this rank's own. The address range stays reserved (address
// space, no memory) until the process exits.
func (f *shmFile) retire() error {
	err := f.unlink()
	if len(f.data) > 0 {
		prot := unix.PROT_READ
		if f.own || f.writable {
			prot |= unix.PROT_WRITE
		}
		if _, e := unix.MmapPtr(-1, 0, unsafe.Pointer(unsafe.SliceData(f.data)), uintptr(len(f.data)), prot,
			unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_FIXED|unix.MAP_NORESERVE); e != nil && err == nil {
			err = fmt.Errorf("transport: shared memory: retire %s: %w", f.path, e)
		}
		f.data, f.floats = nil, nil
	}
	if f.fd >= 0 {
		_ = unix.Close(f.fd)
		f.fd = -1
	}
	return err
}

// close unmaps the region, closes its file and removes it if it is this rank's own. Only for
// a region none of whose memory was handed out (an agreement that failed or said no).
func (f *shmFile) close() error {
	err := f.unlink()
	if f.data != nil {
		if e := unix.Munmap(f.data); e != nil && err == nil {
			err = e
		}
		f.data, f.floats = nil, nil
	}
	if f.fd >= 0 {
		_ = unix.Close(f.fd)
		f.fd = -1
	}
	return err
}

// The futex operations (linux/futex.h). The words lie in mappings shared between processes,
// so the operations are not the private ones.
const (
	futexWaitOp = 0
	futexWakeOp = 1
)

// futexWait sleeps while *w holds v, at most d; it returns nil also when woken, when *w no
// longer holds v, on a signal and at the timeout: the caller looks at the word again.
func futexWait(w *uint32, v uint32, d time.Duration) error {
	ts := unix.NsecToTimespec(d.Nanoseconds())
	_, _, e := unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w)), futexWaitOp, uintptr(v), uintptr(unsafe.Pointer(&ts)), 0, 0)
	switch e {
	case 0, unix.EAGAIN, unix.EINTR, unix.ETIMEDOUT:
		return nil
	}
	return e
}

// futexWake wakes every waiter sleeping on w.
func futexWake(w *uint32) error {
	if _, _, e := unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w)), futexWakeOp, math.MaxInt32, 0, 0, 0); e != 0 {
		return e
	}
	return nil
}
