//go:build !linux

package upstream

import "net"

// udpWriter has no state where there is no sendmmsg.
type udpWriter struct{}

func (w *udpWriter) init(c *net.UDPConn) {}

// writeBatch writes the queued queries one by one; each one the kernel
// refuses fails its query.
func (s *udpSock) writeBatch(batch []udpOut, arena []byte) {
	for _, o := range batch {
		if _, err := s.c.Write(arena[o.off : o.off+o.n]); err != nil {
			s.failSend(o, err)
		}
	}
}

// readDatagram reads the next datagram on c into a largest-message buffer
// taken from ans (no portable way to learn its size first).
func readDatagram(c net.Conn, ans *msgBuf) ([]byte, error) {
	return readDatagramFull(c, ans)
}

// readNext reads the next datagram on s into buf, after flushing the work
// fl holds (no way here to learn that a read would block).
func (s *udpSock) readNext(buf []byte, fl *flushers) (int, error) {
	fl.flush()
	return s.c.Read(buf)
}
