package proxyproto

import (
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// HeaderTimeout bounds the wait for a trusted peer's header.
const HeaderTimeout = 5 * time.Second

// Listener wraps a stream listener: connections from trusted peers start
// with a header, read lazily on the connection's first Read or RemoteAddr
// (so a slow peer never stalls Accept); RemoteAddr then returns the real
// client. Connections from other peers that start with a header fail on
// their first Read.
//
// With TLS set (DoT and DoH listeners), a trusted peer may instead send
// the header as the first bytes inside TLS, as dnsdist does towards DoT and
// DoH backends (HAProxy and cloud load balancers send it before the
// handshake): a connection that starts with a TLS handshake record is
// passed on, and the transport reads the header after the handshake (see
// Conn.HeaderInside).
type Listener struct {
	net.Listener
	Policy *Policy
	TLS    bool
	// OnReject, if set, is told why a connection was refused.
	OnReject func(peer netip.AddrPort, err error)
}

// Accept returns the next connection, wrapped.
func (l *Listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	peer := addrPort(c.RemoteAddr())
	return &Conn{Conn: c, policy: l.Policy, peer: peer, trusted: l.Policy.Trusted(peer.Addr()), tls: l.TLS, onReject: l.OnReject}, nil
}

// Conn is a connection that may start with a PROXY header.
type Conn struct {
	net.Conn
	policy   *Policy
	peer     netip.AddrPort
	trusted  bool
	tls      bool // the header may come inside TLS
	onReject func(netip.AddrPort, error)

	once    sync.Once
	client  netip.AddrPort
	id      string // the header's client ID
	err     error
	first   bool
	pending []byte // read while looking for the header: the handshake's start
	inside  bool   // the header comes inside TLS and has not been read yet
}

// tlsHandshake is the content type of the record a TLS connection starts
// with (RFC 8446 5.1).
const tlsHandshake = 0x16

func (c *Conn) init() {
	c.once.Do(func() {
		c.client = c.peer
		if !c.trusted {
			return
		}
		_ = c.Conn.SetReadDeadline(time.Now().Add(HeaderTimeout))
		defer func() { _ = c.Conn.SetReadDeadline(time.Time{}) }()
		// Any ClientHello is longer than a header's fixed part.
		var buf [MaxHeaderLen]byte
		_, err := io.ReadFull(c.Conn, buf[:headerFixed])
		if err != nil {
			c.reject(fmt.Errorf("proxyproto: read header: %w", err))
			return
		}
		if c.tls && buf[0] == tlsHandshake {
			c.pending, c.inside = slices.Clone(buf[:headerFixed]), true
			return
		}
		h, err := readRest(c.Conn, &buf)
		if err == nil {
			c.client, err = c.policy.Client(c.peer, h)
			c.id = h.ClientID
		}
		if err != nil {
			c.reject(err)
		}
	})
}

// HeaderInside reports that the connection's header comes inside TLS and
// has not been read: the transport reads it with ReadInside after the
// handshake, before anything else.
func (c *Conn) HeaderInside() bool {
	c.init()
	return c.inside
}

// ReadInside reads the header from r, the TLS connection over c, and
// makes its client the connection's (RemoteAddr, Client). On an error the
// connection is refused and closed.
func (c *Conn) ReadInside(r io.Reader) error {
	c.inside = false
	h, err := Read(r)
	if err == nil {
		c.client, err = c.policy.Client(c.peer, h)
		c.id = h.ClientID
	}
	if err != nil {
		c.reject(err)
	}
	return err
}

func (c *Conn) reject(err error) {
	c.err = err
	if c.onReject != nil {
		c.onReject(c.peer, err)
	}
	_ = c.Conn.Close()
}

// Read reads past the header.
func (c *Conn) Read(b []byte) (int, error) {
	c.init()
	if c.err != nil {
		return 0, c.err
	}
	if len(c.pending) > 0 {
		n := copy(b, c.pending)
		if c.pending = c.pending[n:]; len(c.pending) == 0 {
			c.pending = nil
		}
		return n, nil
	}
	n, err := c.Conn.Read(b)
	if !c.first && !c.trusted && n > 0 {
		c.first = true
		if n >= 4 && LooksLikeHeader(b[:n]) {
			c.reject(ErrUntrusted)
			return 0, c.err
		}
	}
	return n, err
}

// RemoteAddr is the real client's address.
func (c *Conn) RemoteAddr() net.Addr {
	c.init()
	return net.TCPAddrFromAddrPort(c.client)
}

// Client is the real client's address.
func (c *Conn) Client() netip.AddrPort {
	c.init()
	return c.client
}

// ClientID is the client ID the header carried ("" for none).
func (c *Conn) ClientID() string {
	c.init()
	return c.id
}

// Peer is the address of the connection's peer (the proxy, if any).
func (c *Conn) Peer() netip.AddrPort { return c.peer }

func addrPort(a net.Addr) netip.AddrPort {
	switch a := a.(type) {
	case *net.TCPAddr:
		ap := a.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	case *net.UDPAddr:
		ap := a.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	ap, _ := netip.ParseAddrPort(a.String())
	return ap
}
