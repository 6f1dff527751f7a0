package freeport

import (
	"net"
	"strconv"
	"testing"
)

func TestConsecutive(t *testing.T) {
	lo := ephemeralLow()
	for _, n := range []int{1, 3} {
		ports, err := Consecutive("127.0.0.1", n)
		if err != nil {
			t.Fatal(err)
		}
		if len(ports) != n {
			t.Fatalf("Consecutive(%d) = %v", n, ports)
		}
		for i, p := range ports {
			if p != ports[0]+i || p < first || p >= lo {
				t.Errorf("Consecutive(%d) = %v: want consecutive ports in [%d, %d)", n, ports, first, lo)
			}
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
			if err != nil {
				t.Errorf("port %d of %v: %v", p, ports, err)
				continue
			}
			l.Close()
		}
	}
	if _, err := Consecutive("127.0.0.1", 0); err == nil {
		t.Error("Consecutive(0) succeeded")
	}
	// A port in use is never handed out.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if free("127.0.0.1", l.Addr().(*net.TCPAddr).Port, 1) {
		t.Error("free reports a port in use as free")
	}
}
