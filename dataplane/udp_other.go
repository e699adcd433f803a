//go:build !linux

package dataplane

import (
	"net"
	"net/netip"
)

// serveUDPBatch reports false: no recvmmsg/sendmmsg here, the portable
// loop serves the socket.
func (s *Server) serveUDPBatch(c *net.UDPConn, r *udpReplier) bool { return false }

// growReadBuffer asks for a 4 MiB receive buffer (see udp_linux.go).
func growReadBuffer(c *net.UDPConn) { _ = c.SetReadBuffer(4 << 20) }

// No destination-address control messages here: a wildcard socket's
// answers leave from the address routing picks (see pktInfo).
const msgCtrunc = 0

func wantsPktInfo(c *net.UDPConn) bool     { return false }
func enablePktInfo(c *net.UDPConn) error   { return nil }
func parsePktInfo(oob []byte) pktInfo      { return pktInfo{} }
func putPktInfo(oob []byte, p pktInfo) int { return 0 }

// rawUDP: sockets are served through the Go poller here.
type rawUDP struct {
	local netip.AddrPort
	pkt   bool
}

func newRawUDP(c *net.UDPConn) (*rawUDP, error) { return nil, errNoRawUDP }
func (s *Server) serveRawUDP(u *rawUDP)         {}
func (u *rawUDP) wake()                         {}
func (u *rawUDP) close()                        {}

// setDontFragment: answers keep the platform's default (see udp_linux.go).
func setDontFragment(c *net.UDPConn) {}
