package dataplane

import (
	"net"
	"net/netip"
	"runtime"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/svcdns/svc/dataplane/mmsg"
)

// udpReplier sends the answers of detached queries (cache misses answered
// by workers) on one socket, batched: the worker that finds no flush going
// on becomes the flusher, yields once so that the other workers whose
// upstream answers arrived in the same wake-up queue theirs, then sends
// everything queued with sendmmsg until the queue is empty. The others only
// queue. A queued Query stays owned by the replier (its answer is in q.out)
// and is released, and its s.wg count dropped, once sent; so Shutdown still
// waits for every answer to be written.
type udpReplier struct {
	s  *Server
	c  *net.UDPConn
	rc syscall.RawConn

	mu       sync.Mutex
	queue    []queuedReply
	spare    []queuedReply
	flushing bool
	pkt      bool // a wildcard socket: answers carry their source (pktInfo)

	// The flusher's sendmmsg state; only the flusher touches it.
	hdrs  [udpBatch]unix.Mmsghdr
	iovs  [udpBatch]unix.Iovec
	names [udpBatch]unix.RawSockaddrInet6
	oobs  [udpBatch]oobBuf
	n     int
	sent  int
	err   error
	fn    func(fd uintptr) bool
}

type queuedReply struct {
	q     *Query
	addr  netip.AddrPort
	local pktInfo
}

func newUDPReplier(s *Server, c *net.UDPConn) *udpReplier {
	rc, _ := c.SyscallConn()
	r := newUDPReplierOn(s, rc, false)
	r.c = c
	return r
}

// newUDPReplierOn is a replier sending on rc (a rawUDP, or a poller's
// socket); pkt: answers carry their source.
func newUDPReplierOn(s *Server, rc syscall.RawConn, pkt bool) *udpReplier {
	r := &udpReplier{s: s, rc: rc, pkt: pkt}
	r.fn = r.send
	return r
}

// reply sends q's answer b (in q.out) to addr, from local when set, now or
// with the next batch, then releases q and its s.wg count.
func (r *udpReplier) reply(q *Query, b []byte, addr netip.AddrPort, local pktInfo) {
	if r.enqueue(q, b, addr, local) {
		// Let the other workers made runnable by the same upstream read
		// queue their answers first; with nothing else to run this
		// returns at once.
		runtime.Gosched()
		r.Flush()
	}
}

// enqueue is reply without the sending: it reports whether the caller now
// owns the flush (no flush was going on) and must call Flush. The async
// lane's answers are enqueued by the upstream socket's reader, which
// flushes once it has read every answer that came (upstream.Flusher).
func (r *udpReplier) enqueue(q *Query, b []byte, addr netip.AddrPort, local pktInfo) bool {
	if r.rc == nil {
		var o oobBuf
		oob := o.bytes()
		writeUDP(r.c, b, oob[:putPktInfo(oob, local)], addr)
		putQuery(q)
		r.s.wg.Done()
		return false
	}
	q.out = b
	r.mu.Lock()
	defer r.mu.Unlock()
	r.queue = append(r.queue, queuedReply{q, addr, local})
	if r.flushing {
		return false
	}
	r.flushing = true
	return true
}

// Flush sends the queued answers until the queue is empty; only the owner
// of the flush (enqueue reported true) calls it.
func (r *udpReplier) Flush() {
	for {
		r.mu.Lock()
		batch := r.queue
		if len(batch) == 0 {
			r.flushing = false
			r.mu.Unlock()
			return
		}
		r.queue, r.spare = r.spare[:0], nil
		r.mu.Unlock()
		all := batch
		for len(batch) > 0 {
			k := min(len(batch), udpBatch)
			r.flush(batch[:k])
			for i := range batch[:k] {
				putQuery(batch[i].q)
				batch[i] = queuedReply{}
				r.s.wg.Done()
			}
			batch = batch[k:]
		}
		r.mu.Lock()
		r.spare = all[:0]
		if cap(r.spare) > 4*udpBatch {
			r.spare = nil // a burst's backlog is not kept
		}
		r.mu.Unlock()
	}
}

// flush sends up to udpBatch answers with as few sendmmsg calls as the
// kernel allows; a datagram the kernel refuses is skipped, a lost answer.
func (r *udpReplier) flush(batch []queuedReply) {
	r.n = 0
	for _, e := range batch {
		b := e.q.out
		sa := &r.names[r.n]
		nl := putSockaddr(sa, e.addr)
		if nl == 0 || len(b) == 0 {
			continue
		}
		r.iovs[r.n].Base = &b[0]
		r.iovs[r.n].SetLen(len(b))
		h := &r.hdrs[r.n].Hdr
		h.Name = (*byte)(unsafe.Pointer(sa))
		h.Namelen = nl
		h.Iov = &r.iovs[r.n]
		h.SetIovlen(1)
		h.Control, h.Controllen = nil, 0
		if e.local.ok {
			oob := r.oobs[r.n].bytes()
			h.Control = &oob[0]
			h.SetControllen(putPktInfo(oob, e.local))
		}
		r.n++
	}
	r.sent = 0
	for r.sent < r.n {
		r.err = nil
		if err := r.rc.Write(r.fn); err != nil {
			break // closed
		}
		if r.err != nil {
			r.sent += refused(r.err, &r.hdrs[r.sent])
		}
	}
	for i := range r.n {
		r.iovs[i].Base = nil // do not pin answers of released queries
	}
}

func (r *udpReplier) send(fd uintptr) bool {
	n, errno := mmsg.Send(fd, r.hdrs[r.sent:r.n])
	switch errno {
	case 0:
		r.sent += n
		return true
	case unix.EAGAIN, unix.EINTR:
		return false
	}
	r.err = errno
	return true
}

// putSockaddr writes addr as the socket reported it (IPv4, or IPv6 with
// IPv4-mapped addresses on dual-stack sockets) and returns its length.
func putSockaddr(sa *unix.RawSockaddrInet6, addr netip.AddrPort) uint32 {
	*sa = unix.RawSockaddrInet6{}
	ip := addr.Addr()
	port := addr.Port()
	if ip.Is4() {
		v4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		v4.Family = unix.AF_INET
		p := (*[2]byte)(unsafe.Pointer(&v4.Port))
		p[0], p[1] = byte(port>>8), byte(port)
		v4.Addr = ip.As4()
		return unix.SizeofSockaddrInet4
	}
	if !ip.Is6() {
		return 0
	}
	sa.Family = unix.AF_INET6
	p := (*[2]byte)(unsafe.Pointer(&sa.Port))
	p[0], p[1] = byte(port>>8), byte(port)
	sa.Addr = ip.As16()
	return unix.SizeofSockaddrInet6
}
