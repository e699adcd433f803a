//go:build !linux

package dataplane

import "net"

// serveUDPBatch reports false: no recvmmsg/sendmmsg here, the portable
// loop serves the socket.
func (s *Server) serveUDPBatch(c *net.UDPConn, r *udpReplier) bool { return false }

// growReadBuffer asks for a 4 MiB receive buffer (see udp_linux.go).
func growReadBuffer(c *net.UDPConn) { _ = c.SetReadBuffer(4 << 20) }
