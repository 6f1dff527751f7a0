package transport

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"godist/distlib/collective"
)

// TestShmMapPeerChecksHeader: a peer's file is taken only when its header holds the rank
// and nonce offered, and only from /dev/shm.
func TestShmMapPeerChecksHeader(t *testing.T) {
	needShm(t)
	own, err := mapOwn(2, 1<<16)
	if err != nil {
		t.Fatal(err)
	}
	defer own.close()
	info, err := os.Stat(own.path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 || info.Size() != shmHeader+1<<16 {
		t.Errorf("region file mode %v size %d, want 0600 and %d", info.Mode().Perm(), info.Size(), shmHeader+1<<16)
	}
	wrong := append([]byte{}, own.nonce[:]...)
	wrong[0] ^= 1
	for _, c := range []struct {
		name  string
		path  string
		rank  int
		nonce []byte
		want  string
	}{
		{"wrong nonce", own.path, 2, wrong, "does not hold rank 2's region"},
		{"wrong rank", own.path, 1, own.nonce[:], "does not hold rank 1's region"},
		{"outside /dev/shm", "/etc/passwd", 2, own.nonce[:], "not a godist file"},
		{"relative escape", "/dev/shm/../etc/godist-shm-1", 2, own.nonce[:], "not a godist file"},
		{"missing", "/dev/shm/godist-shm-0-none", 2, own.nonce[:], "no such file"},
	} {
		if f, err := mapPeer(c.path, c.rank, c.nonce); err == nil || !strings.Contains(err.Error(), c.want) {
			if f != nil {
				f.close()
			}
			t.Errorf("%s: mapPeer = %v, want an error containing %q", c.name, err, c.want)
		}
	}
	b, err := own.arena.Alloc(3)
	if err != nil {
		t.Fatal(err)
	}
	b[2] = 42
	peer, err := mapPeer(own.path, 2, own.nonce[:])
	if err != nil {
		t.Fatal(err)
	}
	defer peer.close()
	if peer.floats[2] != 42 || len(peer.floats) != 1<<14 {
		t.Errorf("peer mapping reads %v (of %d floats), want 42 (of %d)", peer.floats[2], len(peer.floats), 1<<14)
	}
	if binary.LittleEndian.Uint64(peer.data[len(shmMagic):]) != 2 {
		t.Error("header rank is not 2")
	}
	if err := own.close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(own.path); !os.IsNotExist(err) {
		t.Errorf("own region's file still there after close: %v", err)
	}
}

// TestGRPCSharedMemoryTwoProcesses: rank 1 runs in a child process (this test binary run
// again); rank 0 reads what it wrote through its shared memory, then the two all-reduce
// through it (allReduceAcross).
func TestGRPCSharedMemoryTwoProcesses(t *testing.T) {
	needShm(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if os.Getenv("GODIST_SHM_CHILD") != "" {
		shmChild(ctx, t, strings.Split(os.Getenv("GODIST_SHM_CHILD"), ","))
		return
	}
	addrs := freePorts(t, 2)
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestGRPCSharedMemoryTwoProcesses$", "-test.count=1")
	cmd.Env = append(os.Environ(), "GODIST_SHM_CHILD="+strings.Join(addrs, ","))
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := false
	defer func() {
		if !waited {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()
	g, err := NewGRPC(0, addrs, GRPCOptions{Token: "k", SharedMemoryBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	sm, err := g.SharedMemory(ctx)
	if err != nil || sm == nil {
		t.Fatalf("SharedMemory across processes = %v, %v; want shared memory (child: %s)", sm, err, out)
	}
	msg, err := g.Recv(ctx, 1, "where")
	if err != nil {
		t.Fatal(err)
	}
	off, _ := strconv.Atoi(string(msg))
	v, err := sm.View(1, off, 500)
	if err != nil {
		t.Fatal(err)
	}
	for i, x := range v {
		if x != float32(i)*0.5 {
			t.Fatalf("element %d of the child's buffer reads %v, want %v", i, x, float32(i)*0.5)
		}
	}
	if err := allReduceAcross(ctx, g, sm); err != nil {
		t.Fatal(err)
	}
	if err := pingPong(ctx, g, sm); err != nil {
		t.Fatal(err)
	}
	if err := g.Send(ctx, 1, "done", nil); err != nil {
		t.Fatal(err)
	}
	waited = true
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if m, _ := os.ReadDir("/dev/shm"); m != nil {
		for _, e := range m {
			if strings.HasPrefix(e.Name(), shmPrefix+strconv.Itoa(cmd.Process.Pid)+"-") {
				t.Errorf("the child's region file %s is left in /dev/shm", e.Name())
			}
		}
	}
}

func shmChild(ctx context.Context, t *testing.T, addrs []string) {
	g, err := NewGRPC(1, addrs, GRPCOptions{Token: "k", SharedMemoryBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	sm, err := g.SharedMemory(ctx)
	if err != nil || sm == nil {
		t.Fatalf("child: SharedMemory = %v, %v", sm, err)
	}
	b, err := sm.Alloc(500)
	if err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] = float32(i) * 0.5
	}
	off, _ := sm.Offset(b)
	if err := g.Send(ctx, 0, "where", []byte(strconv.Itoa(off))); err != nil {
		t.Fatal(err)
	}
	if err := allReduceAcross(ctx, g, sm); err != nil {
		t.Fatal(err)
	}
	if err := pingPong(ctx, g, sm); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Recv(ctx, 0, "done"); err != nil {
		t.Fatal(err)
	}
}

// allReduceAcross all-reduces, between the two processes, a buffer in shared memory (read in
// place by the other rank, its later rounds through the ranks' signal words), a small one
// (sent inline) and an ordinary large one (the ring), three times over, and checks the sums.
func allReduceAcross(ctx context.Context, g *GRPC, sm collective.SharedMemory) error {
	shared, err := sm.Alloc(100_003)
	if err != nil {
		return err
	}
	defer sm.Free(shared)
	bufs := [][]float32{shared, make([]float32, 1000), make([]float32, 100_003)}
	for _, buf := range append(append(bufs, bufs...), bufs...) {
		for i := range buf {
			buf[i] = float32((g.Rank() + 1) * (i%7 + 1))
		}
		if err := collective.AllReduce(ctx, g, buf, collective.Sum); err != nil {
			return fmt.Errorf("rank %d: AllReduce of %d values: %w", g.Rank(), len(buf), err)
		}
		for i, v := range buf {
			if want := float32(3 * (i%7 + 1)); v != want {
				return fmt.Errorf("rank %d: AllReduce of %d values: [%d] = %v, want %v", g.Rank(), len(buf), i, v, want)
			}
		}
	}
	return nil
}

// pingPong rings each other's doorbell (collective.Doorbell) between the two processes: 100
// rounds back and forth, then 5 where rank 1 rings only after rank 0 has gone to sleep on
// the futex (past its spin; awaitPoll is a minute there, so only the ring wakes it).
func pingPong(ctx context.Context, g *GRPC, sm collective.SharedMemory) error {
	db := sm.(collective.Doorbell)
	word, err := sm.Alloc(16)
	if err != nil {
		return err
	}
	defer sm.Free(word)
	own, _ := sm.Offset(word)
	other := 1 - g.Rank()
	if err := g.Send(ctx, other, "bell", []byte(strconv.Itoa(own))); err != nil {
		return err
	}
	msg, err := g.Recv(ctx, other, "bell")
	if err != nil {
		return err
	}
	off, _ := strconv.Atoi(string(msg))
	defer func(d time.Duration) { awaitPoll = d }(awaitPoll)
	awaitPoll = time.Minute
	for i := uint32(1); i <= 105; i++ {
		if g.Rank() == 1 && i > 100 {
			time.Sleep(10*time.Millisecond + awaitSpinMax)
		}
		if g.Rank() == 0 {
			if err := db.Ring(own, i); err != nil {
				return err
			}
		}
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := db.Await(wctx, other, off, i)
		cancel()
		if err != nil {
			return fmt.Errorf("rank %d: round %d: Await: %w", g.Rank(), i, err)
		}
		if g.Rank() == 1 {
			if err := db.Ring(own, i); err != nil {
				return err
			}
		}
	}
	return nil
}

// TestGRPCSharedMemoryFull: an allocation larger than /dev/shm can hold fails at Alloc, with
// an error saying so, rather than raising SIGBUS at a later write; the region stays usable.
// (tmpfs refuses at once a fallocate larger than the whole file system, so this test uses no
// memory.)
func TestGRPCSharedMemoryFull(t *testing.T) {
	needShm(t)
	var st unix.Statfs_t
	if err := unix.Statfs("/dev/shm", &st); err != nil || st.Type != unix.TMPFS_MAGIC || st.Blocks == 0 {
		t.Skip("/dev/shm is not a tmpfs with a size limit")
	}
	total := int(st.Blocks) * int(st.Bsize)
	g := startGroupOpts(t, 1, GRPCOptions{Token: "k", SharedMemoryBytes: 2 * total})
	sm, err := g[0].SharedMemory(context.Background())
	if err != nil || sm == nil {
		t.Fatalf("SharedMemory = %v, %v", sm, err)
	}
	n := total/4 + 1<<20
	_, err = sm.Alloc(n)
	if err == nil || !strings.Contains(err.Error(), "is /dev/shm full?") || !errors.Is(err, unix.ENOSPC) {
		t.Fatalf("Alloc of %d bytes in a /dev/shm of %d bytes = %v, want ENOSPC from the commit", 4*n, total, err)
	}
	b, err := sm.Alloc(1000)
	if err != nil {
		t.Fatalf("Alloc after a failed commit: %v", err)
	}
	b[999] = 1 // committed: no SIGBUS
	if off, ok := sm.Offset(b); !ok || off != 0 {
		t.Errorf("Offset after a failed commit = %d, %v; want 0 (nothing lost)", off, ok)
	}
}

// hideShm points the regions at a directory that does not exist, as on a machine without
// /dev/shm, until the test ends.
func hideShm(t *testing.T) {
	old := shmDir
	shmDir = filepath.Join(t.TempDir(), "no-shm")
	t.Cleanup(func() { shmDir = old })
}
