package cluster

import (
	"net"
	"testing"

	"godist/internal/leakcheck"
)

// TestServerListensOnTaskHost: a task's server listens on the host of its cluster address
// (gRPC and data port), and on all interfaces with ServerOptions.BindAll or GODIST_BIND_ALL.
func TestServerListensOnTaskHost(t *testing.T) {
	leakcheck.Check(t)
	for _, tc := range []struct {
		name    string
		env     string
		bindAll bool
		wantAll bool
	}{
		{"task host", "", false, false},
		{"BindAll option", "", true, true},
		{"GODIST_BIND_ALL=1", "1", false, true},
		{"GODIST_BIND_ALL=0", "0", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(BindAllEnv, tc.env)
			addrs := make([]string, 2)
			for i := range addrs {
				l, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Skipf("no loopback TCP: %v", err)
				}
				addrs[i] = l.Addr().String()
				l.Close()
			}
			spec, err := NewClusterSpec(map[string][]string{"worker": addrs})
			if err != nil {
				t.Fatal(err)
			}
			r, err := NewSimpleClusterResolver(spec, "worker", 1, "grpc")
			if err != nil {
				t.Fatal(err)
			}
			s, err := NewServer(r, ServerOptions{Token: "k", BindAll: tc.bindAll})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			for _, a := range []net.Addr{s.Transport().Addr(), s.Transport().DataAddr()} {
				ip := a.(*net.TCPAddr).IP
				if ip.IsUnspecified() != tc.wantAll || !tc.wantAll && !ip.Equal(net.IPv4(127, 0, 0, 1)) {
					t.Errorf("server of worker 1 at %s (%s) listens on %v; want all interfaces: %v", addrs[1], tc.name, a, tc.wantAll)
				}
			}
		})
	}
}

func TestEnvSwitches(t *testing.T) {
	tests := []struct {
		bindAll, shm        string
		wantBind, wantNoShm bool
	}{
		{"", "", false, false},
		{"1", "0", true, true},
		{"true", "false", true, true},
		{"0", "1", false, false},
		{"yes", "off", false, true}, // BindAll takes Go's booleans only
		{"", "No", false, true},
		{"", "on", false, false},
	}
	for _, tc := range tests {
		t.Setenv(BindAllEnv, tc.bindAll)
		t.Setenv(SharedMemoryEnv, tc.shm)
		if got := BindAllFromEnv(); got != tc.wantBind {
			t.Errorf("%s=%q: BindAllFromEnv = %v, want %v", BindAllEnv, tc.bindAll, got, tc.wantBind)
		}
		if got := NoSharedMemoryFromEnv(); got != tc.wantNoShm {
			t.Errorf("%s=%q: NoSharedMemoryFromEnv = %v, want %v", SharedMemoryEnv, tc.shm, got, tc.wantNoShm)
		}
	}
}
