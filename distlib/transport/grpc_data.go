package transport

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strconv"
	"sync"
	"time"
)

// The data path: besides its gRPC server, every rank listens on a plain TCP port for bulk
// messages. A peer learns the port from the authenticated gRPC Hello, dials it, and both ends
// prove that they hold the cluster token with HMAC-SHA256 over fresh nonces before any
// message passes, so a process without the token can neither inject messages into the data
// port nor pose as a rank's data port. Messages then travel as
// [2-byte tag length][tag][8-byte payload length][payload], written with one writev from the
// caller's slice and read straight into the receive buffer: no HTTP/2 framing, no copies in
// user space.

const (
	nonceSize        = 32
	macSize          = sha256.Size
	handshakeTimeout = 10 * time.Second
	dataBufferSize   = 4 << 20 // socket buffers: a few chunks in flight
	maxPayload       = 1 << 40 // a length beyond this means a corrupt stream
	clientHelloSize  = 4 + 4 + nonceSize + macSize
	serverHelloSize  = 1 + macSize
)

// dataMAC is the proof of the token for one handshake: side is "client" or "server", the
// nonces are the server's then the client's, from and to the dialing and the listening rank.
func dataMAC(token, side string, serverNonce, clientNonce []byte, from, to uint32) []byte {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("godist-data-" + side))
	m.Write(serverNonce)
	m.Write(clientNonce)
	var r [8]byte
	binary.LittleEndian.PutUint32(r[:], from)
	binary.LittleEndian.PutUint32(r[4:], to)
	m.Write(r[:])
	return m.Sum(nil)
}

// listenData opens the data port on the host of the gRPC listener (all interfaces when that
// listens on all of them), on a port the system picks.
func listenData(grpcLis net.Listener) (net.Listener, error) {
	host := ""
	if a, ok := grpcLis.Addr().(*net.TCPAddr); ok && !a.IP.IsUnspecified() {
		host = a.IP.String()
	}
	return net.Listen("tcp", net.JoinHostPort(host, "0"))
}

// serveData accepts data connections until the listener closes.
func (g *GRPC) serveData() {
	defer g.dataWG.Done()
	for {
		c, err := g.dataLis.Accept()
		if err != nil {
			return
		}
		if !g.trackConn(c) {
			c.Close()
			return
		}
		g.dataWG.Add(1)
		go func() {
			defer g.dataWG.Done()
			defer g.untrackConn(c)
			g.serveDataConn(c)
		}()
	}
}

func (g *GRPC) trackConn(c net.Conn) bool {
	g.connMu.Lock()
	defer g.connMu.Unlock()
	if g.conns == nil {
		return false
	}
	g.conns[c] = struct{}{}
	return true
}

func (g *GRPC) untrackConn(c net.Conn) {
	c.Close()
	g.connMu.Lock()
	delete(g.conns, c)
	g.connMu.Unlock()
}

// serveDataConn authenticates one dialing peer, then delivers its messages to the mailbox.
func (g *GRPC) serveDataConn(c net.Conn) {
	from, err := g.acceptHandshake(c)
	if err != nil {
		return
	}
	g.markSeen(from)
	g.foundAgain(from)
	if err := g.readData(c, from); err != errCut {
		g.linkLost(from, "its data connection closed", err)
	}
}

// errCut ends a data connection that this rank cut itself (Unpost of a message in flight):
// the peer is not lost, it connects again for its next message.
var errCut = errors.New("transport: data connection cut by Unpost")

// readData delivers the messages of rank from's data connection until it ends.
func (g *GRPC) readData(c net.Conn, from int) error {
	tuneConn(c)
	// A small buffer for headers: payloads bypass it (bufio reads large requests directly),
	// so at most a few KiB of each payload are copied twice.
	br := bufio.NewReaderSize(c, 4<<10)
	var hdr [10]byte
	for {
		if _, err := io.ReadFull(br, hdr[:2]); err != nil {
			return err
		}
		tag := make([]byte, binary.LittleEndian.Uint16(hdr[:2]))
		if _, err := io.ReadFull(br, tag); err != nil {
			return err
		}
		if _, err := io.ReadFull(br, hdr[2:10]); err != nil {
			return err
		}
		n := binary.LittleEndian.Uint64(hdr[2:10])
		if n > maxPayload {
			return fmt.Errorf("corrupt stream: message of %d bytes", n)
		}
		t := string(tag)
		if p := g.claim(from, t, int(n), c); p != nil {
			b := p.dst[:n]
			_, err := io.ReadFull(br, b)
			g.unclaim(p, from, t, err == nil)
			if err != nil && p.cut.Load() {
				return errCut
			}
			if err != nil {
				return err
			}
			g.box.put(from, t, b)
			continue
		}
		b := g.bufs.get(int(n))
		if _, err := io.ReadFull(br, b); err != nil {
			return err
		}
		g.deliver(from, t, b)
	}
}

// acceptHandshake runs the listening side of the handshake and returns the peer's rank. A peer
// that does not prove the token gets a refusal byte and the connection closes.
func (g *GRPC) acceptHandshake(c net.Conn) (int, error) {
	_ = c.SetDeadline(time.Now().Add(handshakeTimeout))
	defer c.SetDeadline(time.Time{})
	sn := make([]byte, nonceSize)
	if _, err := rand.Read(sn); err != nil {
		return 0, err
	}
	if _, err := c.Write(sn); err != nil {
		return 0, err
	}
	in := make([]byte, clientHelloSize)
	if _, err := io.ReadFull(c, in); err != nil {
		return 0, err
	}
	from, to := binary.LittleEndian.Uint32(in), binary.LittleEndian.Uint32(in[4:])
	cn, mac := in[8:8+nonceSize], in[8+nonceSize:]
	want := dataMAC(g.token, "client", sn, cn, from, to)
	if !hmac.Equal(mac, want) || int(to) != g.rank || int(from) >= len(g.addrs) || int(from) == g.rank {
		_, _ = c.Write([]byte{0})
		return 0, errors.New("transport: data handshake refused")
	}
	out := append([]byte{1}, dataMAC(g.token, "server", sn, cn, from, to)...)
	if _, err := c.Write(out); err != nil {
		return 0, err
	}
	return int(from), nil
}

// dialData connects to rank to's data port and runs the dialing side of the handshake.
func (g *GRPC) dialData(ctx context.Context, to int, port uint32) (net.Conn, error) {
	host, _, _ := net.SplitHostPort(g.addrs[to])
	addr := net.JoinHostPort(host, strconv.Itoa(int(port)))
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("transport: rank %d data port %s: %w", to, addr, err)
	}
	if err := g.dialHandshake(ctx, c, to); err != nil {
		c.Close()
		return nil, err
	}
	tuneConn(c)
	if !g.trackConn(c) {
		c.Close()
		return nil, ErrClosed
	}
	return c, nil
}

func (g *GRPC) dialHandshake(ctx context.Context, c net.Conn, to int) error {
	dl := time.Now().Add(handshakeTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(dl) {
		dl = d
	}
	_ = c.SetDeadline(dl)
	defer c.SetDeadline(time.Time{})
	sn := make([]byte, nonceSize)
	if _, err := io.ReadFull(c, sn); err != nil {
		return fmt.Errorf("transport: rank %d data port %s: handshake: %w", to, c.RemoteAddr(), err)
	}
	cn := make([]byte, nonceSize)
	if _, err := rand.Read(cn); err != nil {
		return err
	}
	out := make([]byte, 8, clientHelloSize)
	binary.LittleEndian.PutUint32(out, uint32(g.rank))
	binary.LittleEndian.PutUint32(out[4:], uint32(to))
	out = append(append(out, cn...), dataMAC(g.token, "client", sn, cn, uint32(g.rank), uint32(to))...)
	if _, err := c.Write(out); err != nil {
		return fmt.Errorf("transport: rank %d data port %s: handshake: %w", to, c.RemoteAddr(), err)
	}
	in := make([]byte, serverHelloSize)
	if _, err := io.ReadFull(c, in[:1]); err == nil && in[0] == 0 {
		return fmt.Errorf("%w by rank %d's data port %s (every task must have the same GODIST_CLUSTER_TOKEN)", ErrBadToken, to, c.RemoteAddr())
	}
	if _, err := io.ReadFull(c, in[1:]); err != nil {
		return fmt.Errorf("transport: rank %d data port %s: handshake: %w", to, c.RemoteAddr(), err)
	}
	if !hmac.Equal(in[1:], dataMAC(g.token, "server", sn, cn, uint32(g.rank), uint32(to))) {
		return fmt.Errorf("%w: rank %d's data port %s did not prove the cluster token (every task must have the same GODIST_CLUSTER_TOKEN)",
			ErrBadToken, to, c.RemoteAddr())
	}
	return nil
}

func tuneConn(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
		if fixBuffers(socketBufferMax("rmem_max")) {
			_ = tc.SetReadBuffer(dataBufferSize)
		}
		if fixBuffers(socketBufferMax("wmem_max")) {
			_ = tc.SetWriteBuffer(dataBufferSize)
		}
	}
}

// fixBuffers reports whether a data connection's socket buffer is set to dataBufferSize,
// given the system's cap on a set size (max, -1: unknown). Setting a size turns off the
// kernel's buffer autotuning, which grows the buffers to the link's bandwidth-delay
// product; where the cap is below dataBufferSize (Linux's default cap is about 208 KiB)
// a set size would be clamped to it and lock the buffer small, so autotuning is kept.
func fixBuffers(max int) bool { return max < 0 || max >= dataBufferSize }

// sendData writes one message on l's data connection with a single writev, the payload
// straight from b. A send that ctx ends midway leaves the stream cut, so the link is closed.
func (g *GRPC) sendData(ctx context.Context, l *link, tag string, b []byte) error {
	hdr := l.hdr[:0]
	hdr = binary.LittleEndian.AppendUint16(hdr, uint16(len(tag)))
	hdr = append(hdr, tag...)
	hdr = binary.LittleEndian.AppendUint64(hdr, uint64(len(b)))
	l.hdr = hdr
	c := l.data
	stop := context.AfterFunc(ctx, func() { _ = c.SetWriteDeadline(time.Unix(1, 0)) })
	bufs := net.Buffers{hdr, b}
	_, err := bufs.WriteTo(c)
	if !stop() {
		err = ctx.Err()
	}
	if err != nil {
		g.untrackConn(c)
		l.data = nil
	}
	return err
}

// bufPool keeps receive buffers that Release handed back, so that a steady stream of
// same-sized chunks allocates (and zeroes) nothing.
type bufPool struct {
	mu    sync.Mutex
	free  [][]byte
	bytes int
}

const (
	poolMaxBuffers = 32
	poolMaxBytes   = 256 << 20
)

// get returns a slice of length n, reused when a free buffer fits without wasting more than half.
func (p *bufPool) get(n int) []byte {
	p.mu.Lock()
	for i := len(p.free) - 1; i >= 0; i-- {
		b := p.free[i]
		if cap(b) >= n && cap(b) <= 2*n {
			p.free[i] = p.free[len(p.free)-1]
			p.free[len(p.free)-1] = nil
			p.free = p.free[:len(p.free)-1]
			p.bytes -= cap(b)
			p.mu.Unlock()
			return b[:n]
		}
	}
	p.mu.Unlock()
	return make([]byte, n)
}

func (p *bufPool) put(b []byte) {
	if cap(b) < 4<<10 || cap(b) > math.MaxInt32 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.free) >= poolMaxBuffers || p.bytes+cap(b) > poolMaxBytes {
		return
	}
	p.free = append(p.free, b[:cap(b)])
	p.bytes += cap(b)
}
