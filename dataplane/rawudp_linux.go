package dataplane

import (
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// rawUDP is a listening UDP socket served outside Go's network poller.
//
// The poller registers every socket for EPOLLOUT as well as EPOLLIN, so
// each datagram the kernel frees after sending it (at once on loopback, on
// transmit completion on a NIC) runs the socket's write-space callback into
// epoll: a spin lock taken with interrupts off and a wake-up of the
// poller's thread, 10-16% of a core answering at full rate (perf, issue
// #27). Knot and NSD never ask for writability on UDP. Here the batch loop
// owns a blocking descriptor no poller knows: recvmmsg waits for the first
// datagram (MSG_WAITFORONE) and sendmmsg blocks only while the send buffer
// is full, as theirs do.
//
// The descriptor is closed by Server.Shutdown once every goroutine that
// may still write to it (the read loop, the replier of detached queries)
// is done, so its number is never reused under a late write.
type rawUDP struct {
	fd      int
	local   netip.AddrPort
	pkt     bool // a wildcard socket: answers carry their source (pktInfo)
	closing atomic.Bool
}

// newRawUDP takes c's socket out of the poller: the socket is duplicated,
// c closed (which removes it from epoll), and the copy made blocking. On
// error c is left as it was.
func newRawUDP(c *net.UDPConn) (*rawUDP, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	fd := -1
	var derr error
	if err := rc.Control(func(f uintptr) {
		// recvmmsg must exist (gVisor and old kernels may lack it):
		// peek without waiting, which consumes nothing.
		var h [1]unix.Mmsghdr
		var b [1]byte
		iov := unix.Iovec{Base: &b[0]}
		iov.SetLen(1)
		h[0].Hdr.Iov = &iov
		h[0].Hdr.SetIovlen(1)
		_, _, errno := unix.Syscall6(unix.SYS_RECVMMSG, f, uintptr(unsafe.Pointer(&h[0])), 1, unix.MSG_PEEK|unix.MSG_DONTWAIT, 0, 0)
		if errno == unix.ENOSYS {
			derr = fmt.Errorf("recvmmsg: %w", errno)
			return
		}
		fd, derr = unix.FcntlInt(f, unix.F_DUPFD_CLOEXEC, 0)
	}); err != nil {
		return nil, err
	}
	if derr != nil {
		return nil, derr
	}
	r := &rawUDP{fd: fd, local: c.LocalAddr().(*net.UDPAddr).AddrPort(), pkt: wantsPktInfo(c)}
	if err := c.Close(); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("blocking udp socket: %w", err)
	}
	return r, nil
}

// wake ends the read loop: a reader blocked in recvmmsg returns once the
// socket's read side is shut (the kernel answers ENOTCONN for an
// unconnected socket but shuts it all the same). Sending still works, so
// answers in flight are written.
func (r *rawUDP) wake() {
	r.closing.Store(true)
	_ = unix.Shutdown(r.fd, unix.SHUT_RD)
}

func (r *rawUDP) close() { _ = unix.Close(r.fd) }

// Control, Read and Write make r a syscall.RawConn for the batch loop and
// the replier: f runs on the descriptor until it reports done. A blocking
// descriptor answers EAGAIN only when a syscall was interrupted.
func (r *rawUDP) Control(f func(fd uintptr)) error {
	f(uintptr(r.fd))
	return nil
}

func (r *rawUDP) Read(f func(fd uintptr) bool) error {
	for !f(uintptr(r.fd)) {
		if r.closing.Load() {
			return net.ErrClosed
		}
	}
	if r.closing.Load() {
		return net.ErrClosed
	}
	return nil
}

func (r *rawUDP) Write(f func(fd uintptr) bool) error {
	for !f(uintptr(r.fd)) {
	}
	return nil
}

// serveRawUDP serves one socket taken out of the poller.
func (s *Server) serveRawUDP(u *rawUDP) {
	defer s.wg.Done()
	s.serveUDPBatchOn(u, newUDPReplierOn(s, u, u.pkt))
}
