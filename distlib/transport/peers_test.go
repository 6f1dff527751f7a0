package transport

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"godist/distlib/collective"
	"godist/internal/freeport"
	"godist/internal/leakcheck"
)

// freePorts returns n loopback addresses with ports nobody listens on (for a moment), below
// the ephemeral range (package freeport), so that no other process's connection takes them
// before a rank listens.
func freePorts(t *testing.T, n int) []string {
	t.Helper()
	addrs, err := freeport.LoopbackAddrs(n)
	if err != nil {
		t.Fatal(err)
	}
	return addrs
}

// TestGRPCListensOnOwnHost: without a Listener a rank listens on the host its own address
// names (gRPC and data port alike), or on all interfaces with BindAll.
func TestGRPCListensOnOwnHost(t *testing.T) {
	leakcheck.Check(t)
	for _, tc := range []struct {
		name     string
		bindAll  bool
		wantHost string
	}{
		{"own host", false, "127.0.0.1"},
		{"bind all", true, "::"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addrs := freePorts(t, 2)
			g, err := NewGRPC(0, addrs, GRPCOptions{Token: "k", BindAll: tc.bindAll})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			for _, a := range []net.Addr{g.Addr(), g.dataLis.Addr()} {
				ip := a.(*net.TCPAddr).IP
				if tc.bindAll && !ip.IsUnspecified() || !tc.bindAll && !ip.Equal(net.ParseIP(tc.wantHost)) {
					t.Errorf("NewGRPC(rank 0 at %s, BindAll %v) listens on %v, want host %s", addrs[0], tc.bindAll, a, tc.wantHost)
				}
			}
			if _, port, _ := net.SplitHostPort(addrs[0]); !strings.HasSuffix(g.Addr().String(), ":"+port) {
				t.Errorf("NewGRPC listens on %v, want port %s", g.Addr(), port)
			}
		})
	}
}

// TestGRPCListenForeignHost: a host that is not this machine's fails with an error naming
// the address and GODIST_BIND_ALL.
func TestGRPCListenForeignHost(t *testing.T) {
	_, err := NewGRPC(0, []string{"192.0.2.7:25456", "127.0.0.1:1"}, GRPCOptions{Token: "k"})
	if err == nil || !strings.Contains(err.Error(), "192.0.2.7:25456") || !strings.Contains(err.Error(), "GODIST_BIND_ALL=1") {
		t.Fatalf("NewGRPC(rank 0 at 192.0.2.7:25456) error = %v, want one naming the address and GODIST_BIND_ALL=1", err)
	}
}

// TestPeerLost: a peer whose endpoint closes is lost at once for the others, over either
// transport: what it sent before is still received, then Recv and Send fail with
// ErrPeerLost (not after the communication timeout), and a collective names its rank.
func TestPeerLost(t *testing.T) {
	leakcheck.Check(t)
	for _, tc := range []struct {
		name  string
		group func(t *testing.T) []collective.Transport
	}{
		// (GRPCOnly is left out of the "sent before Close" check: Close cancels its streams,
		// which may drop a message still in flight.)
		{"mem", func(t *testing.T) []collective.Transport {
			m := NewMem(2)
			t.Cleanup(func() { m[0].Close(); m[1].Close() })
			return []collective.Transport{m[0], m[1]}
		}},
		{"grpc data path", func(t *testing.T) []collective.Transport {
			g := startGroup(t, "k", "k")
			return []collective.Transport{g[0], g[1]}
		}},
		{"grpc only", func(t *testing.T) []collective.Transport {
			g := startGroupOpts(t, 2, GRPCOptions{Token: "k", GRPCOnly: true})
			return []collective.Transport{g[0], g[1]}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := tc.group(t)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			errs := make([]error, 2)
			var wg sync.WaitGroup
			for _, tr := range g {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs[tr.Rank()] = tr.(collective.PeerWaiter).WaitPeer(ctx, 1-tr.Rank())
				}()
			}
			wg.Wait()
			if errs[0] != nil || errs[1] != nil {
				t.Fatalf("WaitPeer each other = %v", errs)
			}
			if err := g[1].Send(ctx, 0, "t", []byte("last words")); err != nil {
				t.Fatal(err)
			}
			if tc.name == "grpc only" {
				if _, err := g[0].Recv(ctx, 1, "t"); err != nil {
					t.Fatal(err)
				}
			}
			g[1].(io.Closer).Close()
			if tc.name != "grpc only" {
				if b, err := g[0].Recv(ctx, 1, "t"); err != nil || string(b) != "last words" {
					t.Fatalf("Recv of the message sent before Close = %q, %v; want it", b, err)
				}
			}
			start := time.Now()
			_, err := g[0].Recv(ctx, 1, "t")
			if !errors.Is(err, ErrPeerLost) || !strings.Contains(err.Error(), "rank 1") {
				t.Fatalf("Recv from a closed peer = %v, want ErrPeerLost naming rank 1", err)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("Recv from a closed peer took %v, want prompt", d)
			}
			if err := g[0].Send(ctx, 1, "t", nil); !errors.Is(err, ErrPeerLost) {
				t.Errorf("Send to a lost peer = %v, want ErrPeerLost", err)
			}
			if err := g[0].(collective.PeerWaiter).WaitPeer(ctx, 1); err != nil {
				t.Errorf("WaitPeer of a peer up before it was lost = %v, want nil (it joined)", err)
			}
			err = collective.AllReduce(ctx, g[0], make([]float32, 64), collective.Sum)
			var pe *collective.PeerError
			if !errors.As(err, &pe) || pe.Rank != 1 || !errors.Is(err, ErrPeerLost) {
				t.Errorf("AllReduce with a lost peer = %v, want *PeerError for rank 1 wrapping ErrPeerLost", err)
			}
		})
	}
}

// TestMemWaitPeer: a Mem endpoint is up from its first call, and WaitPeer waits for it.
func TestMemWaitPeer(t *testing.T) {
	leakcheck.Check(t)
	m := NewMem(2)
	defer m[0].Close()
	defer m[1].Close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := m[0].WaitPeer(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitPeer of an endpoint not up yet = %v, want deadline exceeded", err)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	if err := m[1].WaitPeer(ctx2, 0); err != nil {
		t.Fatalf("WaitPeer of an endpoint that waited = %v, want nil", err)
	}
	if err := m[0].WaitPeer(ctx2, 1); err != nil {
		t.Fatalf("WaitPeer once the peer is up = %v, want nil", err)
	}
}

// frozenProxy forwards TCP to target until freeze, after which it moves no byte (a host
// that stopped, with its connections open).
type frozenProxy struct {
	lis    net.Listener
	mu     sync.Mutex
	frozen bool
	conns  []net.Conn
	wg     sync.WaitGroup
}

func newFrozenProxy(t *testing.T, target string) *frozenProxy {
	p := &frozenProxy{lis: mustListen(t)}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := p.lis.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			for _, pair := range [][2]net.Conn{{c, u}, {u, c}} {
				p.wg.Add(1)
				go func() {
					defer p.wg.Done()
					buf := make([]byte, 32<<10)
					for {
						n, err := pair[0].Read(buf)
						if err != nil {
							return
						}
						p.mu.Lock()
						frozen := p.frozen
						p.mu.Unlock()
						if frozen {
							continue // swallow: the peer looks alive but never answers
						}
						if _, err := pair[1].Write(buf[:n]); err != nil {
							return
						}
					}
				}()
			}
		}
	}()
	t.Cleanup(func() {
		p.lis.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *frozenProxy) freeze() { p.mu.Lock(); p.frozen = true; p.mu.Unlock() }

// TestGRPCHealthCheckSilentPeer: a peer that stops answering with its connections open is
// lost after one health-check timeout; a receive from it fails naming it.
func TestGRPCHealthCheckSilentPeer(t *testing.T) {
	leakcheck.Check(t)
	lis1 := mustListen(t)
	proxy := newFrozenProxy(t, lis1.Addr().String())
	lis0 := mustListen(t)
	hc := GRPCOptions{Token: "k", GRPCOnly: true, HealthCheckInterval: 50 * time.Millisecond, HealthCheckTimeout: 2 * time.Second}
	o0 := hc
	o0.Listener = lis0
	g0, err := NewGRPC(0, []string{lis0.Addr().String(), proxy.lis.Addr().String()}, o0)
	if err != nil {
		t.Fatal(err)
	}
	defer g0.Close()
	o1 := hc
	o1.Listener = lis1
	o1.HealthCheckInterval = 0
	g1, err := NewGRPC(1, []string{lis0.Addr().String(), lis1.Addr().String()}, o1)
	if err != nil {
		t.Fatal(err)
	}
	defer g1.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := g0.WaitPeer(ctx, 1); err != nil {
		t.Fatal(err)
	}
	// Healthy: checks pass for a while.
	rctx, rcancel := context.WithTimeout(ctx, 500*time.Millisecond)
	_, err = g0.Recv(rctx, 1, "t")
	rcancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Recv from a healthy silent-by-choice peer = %v, want deadline exceeded", err)
	}
	proxy.freeze()
	start := time.Now()
	_, err = g0.Recv(ctx, 1, "t")
	if !errors.Is(err, ErrPeerLost) || !strings.Contains(err.Error(), "health check") {
		t.Fatalf("Recv from a frozen peer = %v, want ErrPeerLost after a health check", err)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("frozen peer found lost after %v, want about the 2s health-check timeout", d)
	}
}

// TestGRPCSendToLostPeer: a peer this rank only sends to (it never connected back) is found
// lost by the sends themselves once it closes: its data connection breaks, and connecting
// again is refused at once instead of waiting for the peer to come back.
func TestGRPCSendToLostPeer(t *testing.T) {
	leakcheck.Check(t)
	g := startGroup(t, "k", "k")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := g[1].WaitPeer(ctx, 0); err != nil { // rank 0 sees rank 1, with no data connection from it
		t.Fatal(err)
	}
	if err := g[0].Send(ctx, 1, "t", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := g[1].Recv(ctx, 0, "t"); err != nil {
		t.Fatal(err)
	}
	g[1].Close()
	start := time.Now()
	var err error
	for err == nil && time.Since(start) < 15*time.Second {
		err = g[0].Send(ctx, 1, "t", make([]byte, 64<<10))
		time.Sleep(time.Millisecond)
	}
	if !errors.Is(err, ErrPeerLost) || !strings.Contains(err.Error(), "rank 1") {
		t.Fatalf("Send to a closed peer = %v after %v, want ErrPeerLost naming rank 1", err, time.Since(start))
	}
	start = time.Now()
	err = g[0].Send(ctx, 1, "t", []byte("x")) // connects again: refused
	if !errors.Is(err, ErrPeerLost) || !strings.Contains(err.Error(), "no longer accepts connections") {
		t.Errorf("Send after the link broke = %v, want ErrPeerLost: no longer accepts connections", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Send after the link broke took %v, want prompt", d)
	}
}
