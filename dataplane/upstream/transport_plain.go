package upstream

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"time"
)

// maxMsgSize bounds every answer read: the largest DNS message.
const maxMsgSize = 65535

// transport sends one query in wire format (ID already set) and returns the
// raw answer, held in a buffer ans takes sized to it (see msgBuf). A
// transport may rewrite the ID in q (to keep IDs unique on a shared
// socket); the answer must carry the ID q holds on return.
type transport interface {
	exchange(ctx context.Context, q []byte, ans *msgBuf) ([]byte, error)
	close() error
}

// Sentinel errors, classified into metric reasons.
var (
	errMalformed = errors.New("malformed answer")
	errMismatch  = errors.New("answer does not match the question")
	errBootstrap = errors.New("bootstrap lookup failed")
	errHTTP      = errors.New("unexpected HTTP response")
	errClosed    = errors.New("upstream resolver closed")
)

// maxStrayPackets bounds how many unrelated UDP packets are skipped while
// waiting for the answer.
const maxStrayPackets = 16

// dialer connects to an upstream address, resolving host names through the
// bootstrap servers instead of the system resolver.
type dialer struct {
	boot *bootstrap
}

func (d *dialer) addrs(ctx context.Context, a Address) ([]netip.AddrPort, error) {
	if ip, err := netip.ParseAddr(a.Host); err == nil {
		return []netip.AddrPort{netip.AddrPortFrom(ip, a.Port)}, nil
	}
	ips, err := d.boot.lookup(ctx, a.Host)
	if err != nil {
		return nil, err
	}
	out := make([]netip.AddrPort, len(ips))
	for i, ip := range ips {
		out[i] = netip.AddrPortFrom(ip, a.Port)
	}
	return out, nil
}

func (d *dialer) dial(ctx context.Context, network string, a Address) (net.Conn, error) {
	aps, err := d.addrs(ctx, a)
	if err != nil {
		return nil, err
	}
	var nd net.Dialer
	var last error
	for _, ap := range aps { // tried in order; bounded by the lookup result
		c, err := nd.DialContext(ctx, network, ap.String())
		if err == nil {
			return c, nil
		}
		last = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("dial %s %s: %w", network, a.HostPort(), last)
}

// longAgo is a deadline in the past, which interrupts blocked I/O.
var longAgo = time.Unix(1, 0)

// watch applies ctx's deadline to c and interrupts c when ctx ends. The
// returned stop reports false when the interruption already happened.
func watch(ctx context.Context, c interface{ SetDeadline(time.Time) error }) func() bool {
	if d, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(d)
	}
	return context.AfterFunc(ctx, func() { _ = c.SetDeadline(longAgo) })
}

// ioErr prefers the context's error, so a deadline reads as a timeout and
// a cancelled race as a cancellation.
func ioErr(ctx context.Context, op string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", op, ctx.Err())
	}
	// Deadlines on sockets come only from ctx, whose own timer may not
	// have fired yet.
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("%s: %w", op, context.DeadlineExceeded)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// udpTransport sends queries over UDP and retries truncated answers over
// TCP. With a pool (every configured upstream) the queries share a few
// long-lived sockets (see udpPool); without one (bootstrap servers, and a
// pool with no room) each query gets a fresh socket of its own.
type udpTransport struct {
	addr Address
	d    *dialer
	tcp  *streamTransport
	pool *udpPool // nil: a fresh socket per query
}

func (t *udpTransport) exchange(ctx context.Context, q []byte, ans *msgBuf) ([]byte, error) {
	var resp []byte
	var err error
	if t.pool != nil {
		resp, err = t.pool.exchange(ctx, q, ans)
		if errors.Is(err, errPoolBusy) {
			resp, err = t.exchangeFresh(ctx, q, ans)
		}
	} else {
		resp, err = t.exchangeFresh(ctx, q, ans)
	}
	if err != nil {
		return nil, err
	}
	return t.followTC(ctx, q, ans, resp)
}

// followTC returns resp, the UDP answer to q, or asks again over TCP when
// it is truncated.
func (t *udpTransport) followTC(ctx context.Context, q []byte, ans *msgBuf, resp []byte) ([]byte, error) {
	if resp[2]&0x02 != 0 {
		return t.tcp.exchange(ctx, q, ans)
	}
	return resp, nil
}

// exchangeFresh sends q from a fresh socket (a random source port per
// query) and returns the first response with q's ID.
func (t *udpTransport) exchangeFresh(ctx context.Context, q []byte, ans *msgBuf) ([]byte, error) {
	c, err := t.dialUDP(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	stop := watch(ctx, c)
	defer stop()
	if _, err := c.Write(q); err != nil {
		return nil, ioErr(ctx, "udp write", err)
	}
	// Sent again after the RTO like a pooled query (see udpPool.exchange):
	// the read deadline is the next retransmission, or ctx's deadline.
	rto := udpInitialRTO
	if t.pool != nil {
		rto = t.pool.rto()
	}
	end, hasEnd := ctx.Deadline()
	lastSent := time.Now()
	resend := lastSent.Add(jitter(rto))
	for strays, sends, ticks := 0, 1, 0; strays < maxStrayPackets; {
		dl := resend
		if hasEnd && (end.Before(dl) || sends >= udpMaxSends) {
			dl = end
		}
		_ = c.SetReadDeadline(dl)
		if ctx.Err() != nil { // cancelled before the deadline above was set
			return nil, ioErr(ctx, "udp read", ctx.Err())
		}
		// The buffer is taken once a datagram is there, sized to it.
		buf, err := readDatagram(c, ans)
		if errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() == nil && !time.Now().Before(resend) && sends < udpMaxSends {
			ticks++
			if t.pool == nil || t.pool.lost(lastSent.UnixNano(), ticks) {
				if t.pool != nil {
					t.pool.retransmits.Inc()
				}
				if _, err := c.Write(q); err != nil {
					return nil, ioErr(ctx, "udp write", err)
				}
				sends++
				lastSent = time.Now()
			}
			rto = min(2*rto, udpMaxRTO)
			resend = time.Now().Add(jitter(rto))
			continue
		}
		if err != nil {
			return nil, ioErr(ctx, "udp read", err)
		}
		strays++
		n := len(buf)
		// Skip what is not an answer to this ID: late answers to earlier
		// queries cannot arrive on a fresh socket, forged ones can.
		if n < 12 || buf[0] != q[0] || buf[1] != q[1] || buf[2]&0x80 == 0 {
			continue
		}
		if t.pool != nil {
			t.pool.answered(lastSent.UnixNano())
		}
		return buf[:n], nil
	}
	return nil, fmt.Errorf("udp read: %w: too many unrelated packets", errMalformed)
}

// dialUDP connects a UDP socket; an IP literal skips the name-based dial
// path and its allocations (connecting UDP sends nothing, so it cannot
// block).
func (t *udpTransport) dialUDP(ctx context.Context) (net.Conn, error) {
	if ip, err := netip.ParseAddr(t.addr.Host); err == nil {
		c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(ip, t.addr.Port)))
		if err != nil {
			return nil, fmt.Errorf("dial udp %s: %w", t.addr.HostPort(), err)
		}
		return c, nil
	}
	return t.d.dial(ctx, "udp", t.addr)
}

func (t *udpTransport) close() error {
	if t.pool != nil {
		t.pool.close()
	}
	return t.tcp.close()
}

// Pool limits of TCP and DoT connections.
const (
	poolSize    = 4
	idleTimeout = 10 * time.Second
)

type idleConn struct {
	c     net.Conn
	since time.Time
}

// streamTransport speaks length-prefixed DNS over TCP or TLS, one query at
// a time per connection, keeping up to poolSize idle connections.
type streamTransport struct {
	dial   func(ctx context.Context) (net.Conn, error)
	idle   chan idleConn
	closed atomic.Bool
}

func newStreamTransport(dial func(ctx context.Context) (net.Conn, error)) *streamTransport {
	return &streamTransport{dial: dial, idle: make(chan idleConn, poolSize)}
}

func tcpDial(d *dialer, a Address) func(ctx context.Context) (net.Conn, error) {
	return func(ctx context.Context) (net.Conn, error) { return d.dial(ctx, "tcp", a) }
}

func tlsDial(d *dialer, a Address, base *tls.Config) func(ctx context.Context) (net.Conn, error) {
	cfg := base.Clone()
	cfg.ServerName = a.Host // SNI, or IP SAN verification for an IP literal
	return func(ctx context.Context) (net.Conn, error) {
		raw, err := d.dial(ctx, "tcp", a)
		if err != nil {
			return nil, err
		}
		c := tls.Client(raw, cfg)
		if err := c.HandshakeContext(ctx); err != nil {
			raw.Close()
			return nil, fmt.Errorf("tls handshake with %s: %w", a.HostPort(), err)
		}
		return c, nil
	}
}

func (t *streamTransport) get(ctx context.Context) (net.Conn, bool, error) {
	for range poolSize {
		var ic idleConn
		select {
		case ic = <-t.idle:
		default:
			c, err := t.dial(ctx)
			return c, false, err
		}
		if time.Since(ic.since) < idleTimeout {
			return ic.c, true, nil
		}
		ic.c.Close() // idle too long: the server has likely dropped it
	}
	c, err := t.dial(ctx)
	return c, false, err
}

func (t *streamTransport) put(c net.Conn) {
	if t.closed.Load() {
		c.Close()
		return
	}
	select {
	case t.idle <- idleConn{c: c, since: time.Now()}:
		if t.closed.Load() { // raced with close: drain again
			t.drain()
		}
	default:
		c.Close()
	}
}

func (t *streamTransport) exchange(ctx context.Context, q []byte, ans *msgBuf) ([]byte, error) {
	if t.closed.Load() {
		return nil, errClosed
	}
	// A pooled connection may have been closed by the server while idle:
	// one retry on a fresh connection.
	for range 2 {
		c, reused, err := t.get(ctx)
		if err != nil {
			return nil, err
		}
		resp, ok, err := roundTrip(ctx, c, q, ans)
		if err == nil {
			if ok {
				t.put(c)
			} else {
				c.Close()
			}
			return resp, nil
		}
		c.Close()
		if !reused || ctx.Err() != nil {
			return nil, err
		}
	}
	return nil, errors.New("tcp: no usable connection")
}

// roundTrip writes q with its length prefix and reads one answer; reusable
// is false when the connection must not go back to the pool.
func roundTrip(ctx context.Context, c net.Conn, q []byte, ans *msgBuf) (resp []byte, reusable bool, err error) {
	if len(q) > maxMsgSize {
		return nil, false, fmt.Errorf("query of %d bytes too large", len(q))
	}
	stop := watch(ctx, c)
	// One write for prefix and message: some servers dislike split segments.
	buf := ans.take(2 + len(q))
	binary.BigEndian.PutUint16(buf, uint16(len(q)))
	copy(buf[2:], q)
	if _, err := c.Write(buf[:2+len(q)]); err != nil {
		stop()
		return nil, false, ioErr(ctx, "tcp write", err)
	}
	if _, err := io.ReadFull(c, buf[:2]); err != nil {
		stop()
		return nil, false, ioErr(ctx, "tcp read", err)
	}
	n := int(binary.BigEndian.Uint16(buf))
	if n < 12 {
		stop()
		return nil, false, fmt.Errorf("tcp read: %w: length %d", errMalformed, n)
	}
	buf = ans.take(n)
	if _, err := io.ReadFull(c, buf[:n]); err != nil {
		stop()
		return nil, false, ioErr(ctx, "tcp read", err)
	}
	if buf[0] != q[0] || buf[1] != q[1] {
		stop()
		return nil, false, fmt.Errorf("tcp read: %w: ID %d", errMismatch, binary.BigEndian.Uint16(buf))
	}
	reusable = stop() && c.SetDeadline(time.Time{}) == nil
	return buf[:n], reusable, nil
}

func (t *streamTransport) drain() {
	for range cap(t.idle) {
		select {
		case ic := <-t.idle:
			ic.c.Close()
		default:
			return
		}
	}
}

func (t *streamTransport) close() error {
	t.closed.Store(true)
	t.drain()
	return nil
}

// readDatagramFull reads the next datagram on c into a largest-message
// buffer taken from ans.
func readDatagramFull(c net.Conn, ans *msgBuf) ([]byte, error) {
	buf := ans.take(maxMsgSize)
	n, err := c.Read(buf)
	if err != nil {
		return nil, err
	}
	return buf[:n], nil
}
