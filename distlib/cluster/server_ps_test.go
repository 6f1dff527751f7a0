package cluster

import (
	"context"
	"net"
	"reflect"
	"testing"
	"time"

	"godist/distlib/transport"
	"godist/internal/leakcheck"
)

// TestServerServesPS: in an in-process cluster made of servers (TF's
// create_in_process_cluster), the server of a ps task is the parameter server's variable
// store, reachable at its cluster address (before, the ps served only the collective
// transport, and the first variable failed at Fit with "unknown service
// godist.transport.ParameterServer").
func TestServerServesPS(t *testing.T) {
	leakcheck.Check(t)
	addrs := make([]string, 3)
	for i := range addrs {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Skipf("no loopback TCP: %v", err)
		}
		addrs[i] = l.Addr().String()
		l.Close()
	}
	spec, err := NewClusterSpec(map[string][]string{"worker": addrs[:1], "ps": addrs[1:]})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		index int
	}{{"ps 0", 0}, {"ps 1", 1}} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := NewSimpleClusterResolver(spec, PS, tc.index, "grpc")
			if err != nil {
				t.Fatal(err)
			}
			s, err := NewServer(r, ServerOptions{Token: "k"})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if got, want := s.Addr().String(), addrs[1+tc.index]; got != want {
				t.Errorf("ps %d listens on %s, want its cluster address %s", tc.index, got, want)
			}
			if s.Transport() != nil {
				t.Errorf("ps %d has a collective transport; its server is the variable store", tc.index)
			}
			c, err := transport.DialPS(addrs[1+tc.index], transport.PSClientOptions{Token: "k", Timeout: 30 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx := context.Background()
			if err := c.Create(ctx, "v", []int{2}, []float32{1, 2}, false); err != nil {
				t.Fatalf("create a variable on ps %d's server: %v", tc.index, err)
			}
			shape, data, err := c.Read(ctx, "v")
			if err != nil || !reflect.DeepEqual(shape, []int{2}) || !reflect.DeepEqual(data, []float32{1, 2}) {
				t.Errorf("read back: %v %v %v, want [2] [1 2]", shape, data, err)
			}
		})
	}
}
