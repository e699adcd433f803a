package transport

import "syscall"

// quickAck sends the TCP acknowledgement the kernel is holding back
// (delayed ACK) now. A client with Nagle's algorithm on (dnsperf) sends a
// POST's body only once its headers are acknowledged; with nothing to
// answer yet the server's ACK would wait up to 40 ms for each request.
func quickAck(rc syscall.RawConn) {
	if rc == nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		_ = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_QUICKACK, 1)
	})
}
