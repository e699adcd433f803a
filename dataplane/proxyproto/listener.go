package proxyproto

import (
	"net"
	"net/netip"
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
type Listener struct {
	net.Listener
	Policy *Policy
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
	return &Conn{Conn: c, policy: l.Policy, peer: peer, trusted: l.Policy.Trusted(peer.Addr()), onReject: l.OnReject}, nil
}

// Conn is a connection that may start with a PROXY header.
type Conn struct {
	net.Conn
	policy   *Policy
	peer     netip.AddrPort
	trusted  bool
	onReject func(netip.AddrPort, error)

	once   sync.Once
	client netip.AddrPort
	err    error
	first  bool
}

func (c *Conn) init() {
	c.once.Do(func() {
		c.client = c.peer
		if !c.trusted {
			return
		}
		_ = c.Conn.SetReadDeadline(time.Now().Add(HeaderTimeout))
		h, err := Read(c.Conn)
		_ = c.Conn.SetReadDeadline(time.Time{})
		if err == nil {
			c.client, err = c.policy.Client(c.peer, h)
		}
		if err != nil {
			c.reject(err)
		}
	})
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
