package dataplane

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/svcdns/svc/dataplane/mmsg"
	"github.com/svcdns/svc/dataplane/prefetch"
	"github.com/svcdns/svc/dataplane/wire"
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
	rc    syscall.RawConn
	hdrs  [udpBatch]unix.Mmsghdr
	iovs  [udpBatch]unix.Iovec
	names [udpBatch]unix.RawSockaddrInet6 // large enough for IPv4 too
	qs    [udpBatch]*Query

	// On wildcard sockets only: each datagram's destination, received
	// and sent back as the answer's source (see pktInfo).
	pkt     bool
	oobs    [udpBatch]oobBuf
	outOobs [udpBatch]oobBuf

	out     [udpBatch]unix.Mmsghdr // answers to send
	outIovs [udpBatch]unix.Iovec
	nout    int
	sent    int

	got   int
	err   error
	stats statsBatch // the batch's answers, for the metrics
	// The prefetch state of the batch's queries, per Prefetcher of the
	// snapshot (see prefetchStep).
	pstate [maxPrefetchers][udpBatch]prefetch.State
	pnext  [maxPrefetchers][udpBatch]uint8 // the next stage to run
	readFn func(fd uintptr) bool
	sendFn func(fd uintptr) bool
}

func (s *Server) serveUDPBatch(c *net.UDPConn, r *udpReplier) bool {
	rc, err := c.SyscallConn()
	if err != nil {
		return false
	}
	return s.serveUDPBatchOn(rc, r)
}

// serveUDPBatchOn is the batched read loop on rc (a poller's socket, or a
// rawUDP). It reports false when the platform has no recvmmsg.
func (s *Server) serveUDPBatchOn(rc syscall.RawConn, r *udpReplier) bool {
	b := &batchLoop{s: s, rc: rc, pkt: r.pkt}
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
	var yielded time.Time
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
		pf := b.prefetchFirst(&lc)
		for i := 0; i < b.got; i++ {
			if pf != nil {
				b.prefetchStep(pf, i)
			}
			q := b.qs[i]
			q.logLater = true
			peer, ok := sockaddrToAddrPort(&b.names[i], b.hdrs[i].Hdr.Namelen)
			if !ok {
				q.reset()
				b.arm(i, q)
				continue
			}
			var local pktInfo
			if b.pkt && b.hdrs[i].Hdr.Flags&unix.MSG_CTRUNC == 0 {
				local = parsePktInfo(b.oobs[i].bytes()[:b.hdrs[i].Hdr.Controllen])
			}
			out, detached := s.udpPacket(&lc, q, int(b.hdrs[i].Len), peer, local)
			if detached {
				b.arm(i, getQuery())
				continue
			}
			if out != nil {
				b.queue(i, out, local)
			}
		}
		lc.batch.Flush() // the misses' queries first: their answers take longest
		// The batch's queries are logged before their answers leave, so a
		// client that has its answer finds it in the log (after a flush),
		// with one clock read for the batch.
		answered := time.Now()
		for i := 0; i < b.got; i++ {
			if q := b.qs[i]; q.logPending {
				s.logAnswered(q, answered, &b.stats)
			}
		}
		b.stats.flush(s.metrics, TransportUDP)
		b.flush()
		if pf != nil {
			b.prefetchDone(pf)
		}
		for i := 0; i < b.got; i++ {
			q := b.qs[i]
			q.reset()
			b.arm(i, q)
		}
		// The socket calls keep the P (mmsg), so a loop that always finds
		// datagrams waiting gives it up only when preempted, every 10 ms;
		// the goroutines the network poller readied (API, probes, TCP
		// clients) then waited up to twice that on one CPU. Yielding once
		// a millisecond lets them in sooner (ops p99 under a UDP flood on
		// one core: 25 -> 11-12 ms).
		if lc.now.Sub(yielded) > time.Millisecond {
			yielded = lc.now
			runtime.Gosched()
		}
	}
}

// Prefetching (see Prefetcher) runs ahead of the answers in a pipeline:
// before query v is answered, each of the next n queries (n: the
// prefetcher's stage count) moves on by one stage, so in a long batch
// query v+n starts stage 0 while query v+1 runs its last stage, and each
// stage's loads have had one query's time to land when the next stage
// reads them. At the batch's start the first n queries start stage 0
// together and then move on as the batch is answered (the batches of
// dnsperf's auth workload average 10 queries): running each one's stages
// back to back, as a first version did, stalled every stage on the loads
// of the one before before the next query's loads were even issued.
// Issuing the whole batch's loads at once filled the CPU's miss buffers,
// stalling the prefetches themselves.

// prefetchFirst starts the pipeline for the first queries of the batch.
// It returns nil when the snapshot has nothing to prefetch, and with PROXY
// headers in front of the queries.
func (b *batchLoop) prefetchFirst(lc *udpLoop) *Snapshot {
	snap := lc.snap
	if len(snap.prefetchers) == 0 || lc.proxy || b.got == 0 {
		return nil
	}
	b.prefetchStep(snap, -1)
	return snap
}

// prefetchStep moves the pipeline on before query v is answered (-1:
// before the batch's first answer): queries v+2 to v+n run their next
// stage, then query v+1, answered next, runs all the stages it has left
// (one, except at the start of a batch), its waits overlapping the loads
// just issued.
func (b *batchLoop) prefetchStep(snap *Snapshot, v int) {
	for k, pf := range snap.prefetchers {
		n, next := snap.stages[k], &b.pnext[k]
		for i := min(v+n, b.got-1); i > v+1; i-- {
			b.prefetchStage(pf, k, i, int(next[i])) // never its last: i > v+1
			next[i]++
		}
		if i := v + 1; i < b.got {
			for s := int(next[i]); s < n; s++ {
				b.prefetchStage(pf, k, i, s)
			}
			next[i] = uint8(n)
		}
	}
}

// prefetchStage runs stage s of prefetcher k for query i.
func (b *batchLoop) prefetchStage(pf Prefetcher, k, i, s int) {
	if s > 0 {
		pf.PrefetchStage(s, &b.pstate[k][i])
		return
	}
	in := b.qs[i].in
	name, qtype := question(in[:cap(in)][:b.hdrs[i].Len])
	pf.PrefetchStart(name, qtype, &b.pstate[k][i])
}

// prefetchDone clears the batch's prefetch states: they may point into
// tables that a later snapshot replaces.
func (b *batchLoop) prefetchDone(snap *Snapshot) {
	for k := range snap.prefetchers {
		clear(b.pstate[k][:b.got])
		clear(b.pnext[k][:b.got])
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
	if b.pkt {
		h.Control = &b.oobs[i].bytes()[0]
		h.SetControllen(len(b.oobs[i]) * 8)
	}
	b.hdrs[i].Len = 0
}

// queue adds an answer to slot i's peer to the send batch, from local
// when set.
func (b *batchLoop) queue(i int, out []byte, local pktInfo) {
	k := b.nout
	b.outIovs[k].Base = &out[0]
	b.outIovs[k].SetLen(len(out))
	h := &b.out[k].Hdr
	h.Name = (*byte)(unsafe.Pointer(&b.names[i]))
	h.Namelen = b.hdrs[i].Hdr.Namelen
	h.Iov = &b.outIovs[k]
	h.SetIovlen(1)
	h.Control, h.Controllen = nil, 0
	if local.ok {
		oob := b.outOobs[k].bytes()
		h.Control = &oob[0]
		h.SetControllen(putPktInfo(oob, local))
	}
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
			b.sent += refused(b.err, &b.out[b.sent])
		}
	}
}

func (b *batchLoop) recv(fd uintptr) bool {
	for i := range udpBatch {
		b.hdrs[i].Hdr.Namelen = uint32(unsafe.Sizeof(b.names[i]))
		if b.pkt {
			b.hdrs[i].Hdr.SetControllen(len(b.oobs[i]) * 8)
		}
	}
	// A blocking socket (rawUDP) waits for the first datagram only, then
	// takes what else is queued.
	n, errno := mmsg.Recv(fd, b.hdrs[:])
	switch errno {
	case 0:
		b.got = n
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
	n, errno := mmsg.Send(fd, b.out[b.sent:b.nout])
	switch errno {
	case 0:
		b.sent += n
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

// setDontFragment makes the socket's IPv4 answers leave with DF set and
// never fragmented here (IP_PMTUDISC_PROBE: the interface's MTU, not a
// path MTU an ICMP message could lower). RFC 9715 asks DNS responders for
// DF; an answer larger than the interface's MTU fails to send with
// EMSGSIZE and is sent again cut to its question with TC set (cutIov,
// writeUDP), so the client asks over TCP. It is also cheaper: without DF
// the kernel draws each datagram's IP ID from a shared hashed generator
// (__ip_select_ident and siphash: 2.2% of the server's CPU on make bench's
// auth workload; test/bench auth +2%, cache +1.9% with it). The default
// largest UDP answer (MaxUDPSize, 1232 bytes) fits any IPv4 interface of
// 1260 bytes or more. Set quietly: an unset option only costs that.
func setDontFragment(c *net.UDPConn) {
	rc, err := c.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		// On a dual-stack IPv6 socket this covers its IPv4-mapped peers.
		_ = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_PROBE)
		// IPv6 gets no fragment ID unless it fragments, which only the
		// sender does: not fragmenting either keeps the families alike
		// (an answer past the MTU is cut, never fragmented).
		if dom, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_DOMAIN); err == nil && dom == unix.AF_INET6 {
			_ = unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_MTU_DISCOVER, unix.IPV6_PMTUDISC_PROBE)
		}
	})
}

// refused handles the first datagram of a send the kernel refused with
// err and returns how far the send moves past it: 0 when it was an answer
// past the MTU (EMSGSIZE, setDontFragment), now cut to fit and sent again,
// else 1, dropping it (e.g. EPERM) as a lost answer.
func refused(err error, h *unix.Mmsghdr) int {
	if err == unix.EMSGSIZE && cutIov(h.Hdr.Iov) {
		return 0
	}
	return 1
}

// cutIov cuts the answer iov points at to its question with TC set
// (wire.TruncateAnswer); it reports false when there was nothing to cut.
func cutIov(iov *unix.Iovec) bool {
	if iov == nil || iov.Base == nil {
		return false
	}
	b := unsafe.Slice(iov.Base, iov.Len)
	n := wire.TruncateAnswer(b)
	if n >= len(b) {
		return false
	}
	iov.SetLen(n)
	return true
}

// msgCtrunc flags a datagram whose control messages did not fit.
const msgCtrunc = unix.MSG_CTRUNC

// wantsPktInfo reports whether c is bound to a wildcard address, the only
// sockets whose answers need an explicit source (see pktInfo).
func wantsPktInfo(c *net.UDPConn) bool {
	a, ok := c.LocalAddr().(*net.UDPAddr)
	return ok && a.AddrPort().Addr().IsUnspecified()
}

// enablePktInfo asks the kernel for each datagram's destination on a
// wildcard socket. Go binds "udp" wildcards (0.0.0.0 too) as dual-stack
// IPv6 sockets, where IPV6_RECVPKTINFO also reports IPv4 destinations,
// IPv4-mapped; a plain IPv4 socket takes IP_PKTINFO.
func enablePktInfo(c *net.UDPConn) error {
	if !wantsPktInfo(c) {
		return nil
	}
	rc, err := c.SyscallConn()
	if err != nil {
		return fmt.Errorf("pktinfo: %w", err)
	}
	var serr error
	err = rc.Control(func(fd uintptr) {
		dom, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_DOMAIN)
		if err != nil {
			serr = fmt.Errorf("socket domain: %w", err)
			return
		}
		if dom == unix.AF_INET6 {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_RECVPKTINFO, 1)
		} else {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_PKTINFO, 1)
		}
		if serr != nil {
			serr = fmt.Errorf("setsockopt pktinfo: %w", serr)
		}
	})
	if err != nil {
		return fmt.Errorf("pktinfo: %w", err)
	}
	return serr
}

// parsePktInfo finds the IP_PKTINFO or IPV6_PKTINFO message in oob without
// allocating. A multicast destination is not a usable source: its answer
// leaves as routing decides.
func parsePktInfo(oob []byte) pktInfo {
	var p pktInfo
	for len(oob) >= unix.SizeofCmsghdr {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
		l := int(h.Len)
		if l < unix.SizeofCmsghdr || l > len(oob) {
			break
		}
		data := oob[unix.CmsgLen(0):l]
		switch {
		case h.Level == unix.IPPROTO_IP && h.Type == unix.IP_PKTINFO && len(data) >= unix.SizeofInet4Pktinfo:
			pi := (*unix.Inet4Pktinfo)(unsafe.Pointer(&data[0]))
			// Spec_dst is the local address the kernel matched: the
			// destination itself for unicast.
			p = pktInfo{ok: true}
			copy(p.addr[:4], pi.Spec_dst[:])
		case h.Level == unix.IPPROTO_IPV6 && h.Type == unix.IPV6_PKTINFO && len(data) >= unix.SizeofInet6Pktinfo:
			pi := (*unix.Inet6Pktinfo)(unsafe.Pointer(&data[0]))
			a := netip.AddrFrom16(pi.Addr)
			if a.IsMulticast() {
				return pktInfo{}
			}
			p = pktInfo{addr: pi.Addr, v6: true, ok: true}
			if a.IsLinkLocalUnicast() {
				p.ifindex = pi.Ifindex
			}
		}
		if s := unix.CmsgSpace(l - unix.CmsgLen(0)); s < len(oob) {
			oob = oob[s:]
		} else {
			break
		}
	}
	return p
}

// putPktInfo writes p into oob as the control message that makes the
// kernel send from p's address, and returns its length (0: none).
func putPktInfo(oob []byte, p pktInfo) int {
	if !p.ok {
		return 0
	}
	clear(oob)
	h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
	if !p.v6 {
		h.Level, h.Type = unix.IPPROTO_IP, unix.IP_PKTINFO
		h.SetLen(unix.CmsgLen(unix.SizeofInet4Pktinfo))
		pi := (*unix.Inet4Pktinfo)(unsafe.Pointer(&oob[unix.CmsgLen(0)]))
		copy(pi.Spec_dst[:], p.addr[:4])
		return unix.CmsgSpace(unix.SizeofInet4Pktinfo)
	}
	h.Level, h.Type = unix.IPPROTO_IPV6, unix.IPV6_PKTINFO
	h.SetLen(unix.CmsgLen(unix.SizeofInet6Pktinfo))
	pi := (*unix.Inet6Pktinfo)(unsafe.Pointer(&oob[unix.CmsgLen(0)]))
	pi.Addr, pi.Ifindex = p.addr, p.ifindex
	return unix.CmsgSpace(unix.SizeofInet6Pktinfo)
}
