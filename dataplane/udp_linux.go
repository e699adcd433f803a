package dataplane

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// udpBatch is how many datagrams one recvmmsg/sendmmsg moves at most.
const udpBatch = 64

// batchLoop is the state of one socket's batched read loop. Every slot owns
// a pooled Query whose buffers receive the datagram and hold the answer;
// the answer goes back to the very sockaddr the kernel filled in, so no
// address is converted on the way out. The syscall callbacks are bound
// once, so a batch allocates nothing.
//
// golang.org/x/net's ipv4/ipv6 ReadBatch would do the same syscalls but
// allocates a net.UDPAddr per datagram; this is the allocation-free form.
type batchLoop struct {
	s     *Server
	c     *net.UDPConn
	rc    syscall.RawConn
	hdrs  [udpBatch]unix.Mmsghdr
	iovs  [udpBatch]unix.Iovec
	names [udpBatch]unix.RawSockaddrInet6 // large enough for IPv4 too
	qs    [udpBatch]*Query

	out     [udpBatch]unix.Mmsghdr // answers to send
	outIovs [udpBatch]unix.Iovec
	nout    int
	sent    int

	got    int
	err    error
	readFn func(fd uintptr) bool
	sendFn func(fd uintptr) bool
}

func (s *Server) serveUDPBatch(c *net.UDPConn, r *udpReplier) bool {
	rc, err := c.SyscallConn()
	if err != nil {
		return false
	}
	b := &batchLoop{s: s, c: c, rc: rc}
	b.readFn = b.recv
	b.sendFn = b.send
	for i := range b.qs {
		b.arm(i, getQuery())
	}
	defer func() {
		for i, q := range b.qs {
			if q != nil {
				putQuery(q)
				b.qs[i] = nil
			}
		}
	}()
	lc := udpLoop{reply: r}
	for {
		b.got, b.err = 0, nil
		if err := rc.Read(b.readFn); err != nil || b.err != nil {
			if err == nil {
				err = b.err
			}
			if errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.EBADF) {
				return true
			}
			if b.got == 0 && errors.Is(err, syscall.ENOSYS) {
				return false // no recvmmsg: fall back
			}
			if b.got == 0 {
				continue // a deadline from Shutdown, ICMP errors, ...
			}
		}
		lc.begin(s, time.Now())
		b.nout = 0
		for i := 0; i < b.got; i++ {
			q := b.qs[i]
			peer, ok := sockaddrToAddrPort(&b.names[i], b.hdrs[i].Hdr.Namelen)
			if !ok {
				q.reset()
				b.arm(i, q)
				continue
			}
			out, detached := s.udpPacket(c, &lc, q, int(b.hdrs[i].Len), peer)
			if detached {
				b.arm(i, getQuery())
				continue
			}
			if out != nil {
				b.queue(i, out)
			}
		}
		b.flush()
		for i := 0; i < b.got; i++ {
			q := b.qs[i]
			q.reset()
			b.arm(i, q)
		}
	}
}

// arm makes slot i receive into q's input buffer.
func (b *batchLoop) arm(i int, q *Query) {
	b.qs[i] = q
	in := q.in[:cap(q.in)]
	b.iovs[i].Base = &in[0]
	b.iovs[i].SetLen(len(in))
	h := &b.hdrs[i].Hdr
	h.Name = (*byte)(unsafe.Pointer(&b.names[i]))
	h.Namelen = uint32(unsafe.Sizeof(b.names[i]))
	h.Iov = &b.iovs[i]
	h.SetIovlen(1)
	b.hdrs[i].Len = 0
}

// queue adds an answer to slot i's peer to the send batch.
func (b *batchLoop) queue(i int, out []byte) {
	k := b.nout
	b.outIovs[k].Base = &out[0]
	b.outIovs[k].SetLen(len(out))
	h := &b.out[k].Hdr
	h.Name = (*byte)(unsafe.Pointer(&b.names[i]))
	h.Namelen = b.hdrs[i].Hdr.Namelen
	h.Iov = &b.outIovs[k]
	h.SetIovlen(1)
	b.nout++
}

// flush sends the queued answers with as few sendmmsg calls as the kernel
// allows; a datagram the kernel refuses is skipped, as a lost answer.
func (b *batchLoop) flush() {
	b.sent = 0
	for b.sent < b.nout {
		b.err = nil
		if err := b.rc.Write(b.sendFn); err != nil {
			return // closed
		}
		if b.err != nil {
			b.sent++ // the first datagram failed (e.g. EPERM, EMSGSIZE): drop it
		}
	}
}

func (b *batchLoop) recv(fd uintptr) bool {
	for i := range udpBatch {
		b.hdrs[i].Hdr.Namelen = uint32(unsafe.Sizeof(b.names[i]))
	}
	n, _, errno := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&b.hdrs[0])), udpBatch, 0, 0, 0)
	switch errno {
	case 0:
		b.got = int(n)
		return true
	case unix.EAGAIN:
		return false // wait for the poller
	case unix.EINTR:
		return false
	}
	b.err = errno
	return true
}

func (b *batchLoop) send(fd uintptr) bool {
	n, _, errno := unix.Syscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&b.out[b.sent])), uintptr(b.nout-b.sent), 0, 0, 0)
	switch errno {
	case 0:
		b.sent += int(n)
		return true
	case unix.EAGAIN, unix.EINTR:
		return false
	}
	b.err = errno
	return true
}

// sockaddrToAddrPort reads the peer the kernel wrote, keeping its form
// (IPv4-mapped on dual-stack sockets).
func sockaddrToAddrPort(sa *unix.RawSockaddrInet6, n uint32) (netip.AddrPort, bool) {
	switch sa.Family {
	case unix.AF_INET:
		if n < unix.SizeofSockaddrInet4 {
			return netip.AddrPort{}, false
		}
		v4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		port := binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&v4.Port))[:])
		return netip.AddrPortFrom(netip.AddrFrom4(v4.Addr), port), true
	case unix.AF_INET6:
		if n < unix.SizeofSockaddrInet6 {
			return netip.AddrPort{}, false
		}
		port := binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:])
		// Scope IDs only matter for link-local peers; answers go back to
		// the raw sockaddr anyway.
		return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr), port), true
	}
	return netip.AddrPort{}, false
}

// udpReadBuffer is the receive buffer each UDP listener socket asks for.
// The kernel's default (net.core.rmem_default, ~208 KB: about 200 queries)
// overflowed under dnsperf whenever the reader was off the CPU for a moment
// (GC, the other goroutines of a node on one CPU): a few queries in 400,000
// were lost. Memory is used only while datagrams wait.
const udpReadBuffer = 4 << 20

// growReadBuffer asks for udpReadBuffer; past net.core.rmem_max it needs
// SO_RCVBUFFORCE (CAP_NET_ADMIN), tried quietly.
func growReadBuffer(c *net.UDPConn) {
	_ = c.SetReadBuffer(udpReadBuffer)
	rc, err := c.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		// The kernel reports twice what was set (its bookkeeping share).
		if n, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF); err == nil && n < udpReadBuffer {
			_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, udpReadBuffer/2)
		}
	})
}
