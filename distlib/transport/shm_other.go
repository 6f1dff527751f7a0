//go:build !linux

package transport

import (
	"fmt"
	"runtime"
	"time"
)

var errNoShm = fmt.Errorf("transport: shared memory between processes needs Linux, not %s", runtime.GOOS)

func mapOwn(rank, size int) (*shmFile, error) { return nil, errNoShm }

func mapPeer(path string, rank int, nonce []byte) (*shmFile, error) { return nil, errNoShm }

func (f *shmFile) unlink() error { return nil }

func (f *shmFile) close() error { return nil }

func (f *shmFile) retire() error { return nil }

func mapPeerWritable(path string, rank int, nonce []byte) (*shmFile, error) { return nil, errNoShm }

// No region is mapped off Linux (mapOwn fails), so no word is ever waited on.
func futexWait(w *uint32, v uint32, d time.Duration) error { return errNoShm }

func futexWake(w *uint32) error { return errNoShm }
