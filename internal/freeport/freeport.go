// Package freeport finds TCP ports for processes that are told their port before they
// listen (cluster tasks, Slurm daemons). A port the kernel handed out for ":0" and that was
// closed again is in the ephemeral range, where the kernel also picks the local ports of
// outgoing connections: on a busy machine another process's connection can take it before
// the task binds it ("address already in use"). The ports here lie below that range, at a
// random place, and each was listened on just before it is returned.
package freeport

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
)

// first is the lowest port handed out (above the well-known and most registered services).
const first = 10000

// Consecutive returns n consecutive ports that can all be listened on at host now, below
// the kernel's ephemeral range.
func Consecutive(host string, n int) ([]int, error) {
	if n < 1 {
		return nil, fmt.Errorf("free ports: %d asked for, want at least 1", n)
	}
	lo := ephemeralLow()
	if lo-first < 2*n {
		return nil, fmt.Errorf("free ports: the ephemeral range starts at %d, too low to keep %d ports below it", lo, n)
	}
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("free ports: %w", err)
	}
	span := lo - first - n
	start := int(binary.LittleEndian.Uint32(b[:]) % uint32(span))
	for try := 0; try < span; try += n {
		base := first + (start+try)%span
		if free(host, base, n) {
			ports := make([]int, n)
			for i := range ports {
				ports[i] = base + i
			}
			return ports, nil
		}
	}
	return nil, fmt.Errorf("free ports: no %d consecutive free ports on %s in [%d, %d)", n, host, first, lo)
}

// free reports whether ports base..base+n-1 can all be listened on at host now.
func free(host string, base, n int) bool {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for p := base; p < base+n; p++ {
		l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p)))
		if err != nil {
			return false
		}
		ls = append(ls, l)
	}
	return true
}

// ephemeralLow is the first port of the kernel's ephemeral range (32768 when it cannot be
// read: Linux's default).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) < 1 {
		return 32768
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return lo
}

// LoopbackAddrs returns n "127.0.0.1:port" addresses with consecutive free ports (Consecutive).
func LoopbackAddrs(n int) ([]string, error) {
	ports, err := Consecutive("127.0.0.1", n)
	if err != nil {
		return nil, err
	}
	addrs := make([]string, n)
	for i, p := range ports {
		addrs[i] = net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
	}
	return addrs, nil
}
