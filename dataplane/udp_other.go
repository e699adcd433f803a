//go:build !linux

package dataplane

import "net"

// serveUDPBatch reports false: no recvmmsg/sendmmsg here, the portable
// loop serves the socket.
func (s *Server) serveUDPBatch(c *net.UDPConn, r *udpReplier) bool { return false }
