//go:build !linux

package transport

import (
	"fmt"
	"runtime"
)

var errNoShm = fmt.Errorf("transport: shared memory between processes needs Linux, not %s", runtime.GOOS)

func mapOwn(rank, size int) (*shmFile, error) { return nil, errNoShm }

func mapPeer(path string, rank int, nonce []byte) (*shmFile, error) { return nil, errNoShm }

func (f *shmFile) unlink() error { return nil }

func (f *shmFile) close() error { return nil }

func (f *shmFile) retire() error { return nil }

func mapPeerWritable(path string, rank int, nonce []byte) (*shmFile, error) { return nil, errNoShm }
