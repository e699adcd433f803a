//go:build !linux

package dataplane

import (
	"net"
	"net/netip"
)

// udpReplier writes each detached answer with its own syscall here.
type udpReplier struct {
	s   *Server
	c   *net.UDPConn
	pkt bool
}

func newUDPReplier(s *Server, c *net.UDPConn) *udpReplier { return &udpReplier{s: s, c: c} }

// reply sends b to addr, then releases q and its s.wg count. local is
// never set here (see udp_other.go).
func (r *udpReplier) reply(q *Query, b []byte, addr netip.AddrPort, local pktInfo) {
	_, _ = r.c.WriteToUDPAddrPort(b, addr)
	putQuery(q)
	r.s.wg.Done()
}

// enqueue is reply here: nothing is left to flush.
func (r *udpReplier) enqueue(q *Query, b []byte, addr netip.AddrPort, local pktInfo) bool {
	r.reply(q, b, addr, local)
	return false
}

// Flush has nothing to do here.
func (r *udpReplier) Flush() {}
