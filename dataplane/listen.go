package dataplane

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/svcdns/svc/dataplane/cache"
	"github.com/svcdns/svc/dataplane/proxyproto"
	"github.com/svcdns/svc/dataplane/ratelimit"
	"github.com/svcdns/svc/dataplane/upstream"
	"github.com/svcdns/svc/dataplane/wire"
)

// Start opens the configured listeners and serves until Shutdown.
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return errors.New("dataplane: already started")
	}
	s.started = true
	for _, l := range s.cfg.Listeners {
		protos := l.Protocols
		if len(protos) == 0 {
			protos = []string{"udp", "tcp"}
		}
		for _, p := range protos {
			if p != "udp" && p != "tcp" {
				s.closeLocked()
				return fmt.Errorf("listener %s: unknown protocol %q", l.Address, p)
			}
		}
		if err := s.listenOne(ctx, l.Address, slices.Contains(protos, "udp"), slices.Contains(protos, "tcp")); err != nil {
			s.closeLocked()
			go func() {
				s.wg.Wait()
				s.closeRaw()
			}()
			return err
		}
	}
	return nil
}

func reusePort(network, address string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
	})
	if err != nil {
		return err
	}
	return serr
}

// listenOne binds one address. With port 0 the UDP port is chosen first and
// TCP binds the same port, retrying a few times if another process holds it.
func (s *Server) listenOne(ctx context.Context, address string, udp, tcp bool) error {
	lc := net.ListenConfig{Control: reusePort}
	sockets := s.cfg.Sockets
	if sockets <= 0 {
		sockets = runtime.NumCPU()
	}
	for attempt := 0; ; attempt++ {
		bound := address
		var conns []*net.UDPConn
		var err error
		if udp {
			for i := 0; i < sockets; i++ {
				var pc net.PacketConn
				pc, err = lc.ListenPacket(ctx, "udp", bound)
				if err != nil {
					break
				}
				uc := pc.(*net.UDPConn)
				growReadBuffer(uc)
				setDontFragment(uc)
				// Set before the loop starts, so no early query misses it.
				if err := enablePktInfo(uc); err != nil {
					s.log.Warn("udp listener: answers leave from the routed address, not the query's", "address", bound, "err", err)
				}
				conns = append(conns, uc)
				bound = uc.LocalAddr().String()
			}
		}
		var ln net.Listener
		if err == nil && tcp {
			ln, err = lc.Listen(ctx, "tcp", bound)
		}
		if err != nil {
			for _, c := range conns {
				c.Close()
			}
			_, port, _ := net.SplitHostPort(address)
			if port == "0" && udp && tcp && attempt < 5 {
				continue
			}
			return fmt.Errorf("listen %s: %w", address, err)
		}
		for _, c := range conns {
			if !s.cfg.DisableUDPBatch {
				u, err := newRawUDP(c)
				if err == nil {
					s.rawUDP = append(s.rawUDP, u)
					s.wg.Add(1)
					go s.serveRawUDP(u)
					continue
				}
				if !errors.Is(err, errNoRawUDP) {
					s.log.Warn("udp listener: served through the Go poller", "address", c.LocalAddr().String(), "err", err)
				}
			}
			s.udp = append(s.udp, c)
			s.wg.Add(1)
			go s.serveUDP(c)
		}
		if ln != nil {
			// Trusted peers start with a PROXY header; others must not.
			ln = &proxyproto.Listener{Listener: ln, Policy: s.cfg.ProxyProtocol, OnReject: s.proxyReject}
			s.tcp = append(s.tcp, ln)
			s.wg.Add(1)
			go s.acceptTCP(ln)
		}
		return nil
	}
}

// UDPAddrs returns the bound UDP addresses, one per listener item.
func (s *Server) UDPAddrs() []netip.AddrPort {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []netip.AddrPort
	for _, c := range s.udp {
		a := c.LocalAddr().(*net.UDPAddr).AddrPort()
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	for _, u := range s.rawUDP {
		if !slices.Contains(out, u.local) {
			out = append(out, u.local)
		}
	}
	return out
}

// TCPAddrs returns the bound TCP addresses.
func (s *Server) TCPAddrs() []netip.AddrPort {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []netip.AddrPort
	for _, l := range s.tcp {
		out = append(out, l.Addr().(*net.TCPAddr).AddrPort())
	}
	return out
}

// Shutdown closes the listeners, lets in-flight queries finish until ctx
// ends, then cancels what is left.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closeLocked()
	for c := range s.conns {
		// Wake readers; in-flight answers still get written.
		_ = c.SetReadDeadline(time.Now())
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	defer s.cancel()
	defer s.workers.stopAll()
	select {
	case <-done:
		s.closeRaw()
		return nil
	case <-ctx.Done():
		s.cancel()
		s.mu.Lock()
		for c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		<-done
		s.closeRaw()
		return fmt.Errorf("dataplane shutdown: %w", ctx.Err())
	}
}

// closeRaw closes the sockets served outside the poller, once; only when
// nothing serves or answers on them any more (s.wg done).
func (s *Server) closeRaw() {
	s.rawOnce.Do(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, u := range s.rawUDP {
			u.close()
		}
	})
}

func (s *Server) closeLocked() {
	s.closed = true
	for _, c := range s.udp {
		c.Close()
	}
	for _, u := range s.rawUDP {
		u.wake() // closed by Shutdown once nothing writes to it
	}
	for _, l := range s.tcp {
		l.Close()
	}
}

// serveUDP serves one socket: batched with recvmmsg/sendmmsg where the
// platform has them (udp_linux.go), else one datagram per syscall.
func (s *Server) serveUDP(c *net.UDPConn) {
	defer s.wg.Done()
	r := newUDPReplier(s, c)
	r.pkt = wantsPktInfo(c)
	if !s.cfg.DisableUDPBatch && s.serveUDPBatch(c, r) {
		return
	}
	s.serveUDPSingle(c, r)
}

// serveUDPSingle is the portable read loop: the query value owns the read
// and write buffers, so the common query allocates nothing.
func (s *Server) serveUDPSingle(c *net.UDPConn, r *udpReplier) {
	lc := udpLoop{reply: r}
	// Control messages only on wildcard sockets: one bound to an address
	// answers from it anyway.
	var oobIn, oobOut []byte
	if r.pkt {
		oobIn, oobOut = new(oobBuf).bytes(), new(oobBuf).bytes()
	}
	for {
		q := getQuery()
		buf := q.in[:cap(q.in)]
		var (
			n     int
			addr  netip.AddrPort
			err   error
			local pktInfo
		)
		if r.pkt {
			var oobn, flags int
			n, oobn, flags, addr, err = c.ReadMsgUDPAddrPort(buf, oobIn)
			if err == nil && flags&msgCtrunc == 0 {
				local = parsePktInfo(oobIn[:oobn])
			}
		} else {
			n, addr, err = c.ReadFromUDPAddrPort(buf)
		}
		if err != nil {
			putQuery(q)
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		lc.begin(s, time.Now())
		out, detached := s.udpPacket(&lc, q, n, addr, local)
		lc.batch.Flush()
		if detached {
			continue
		}
		if out != nil {
			writeUDP(c, out, oobOut[:putPktInfo(oobOut, local)], addr)
		}
		putQuery(q)
	}
}

// pktInfo is where a datagram arrived on a wildcard socket: its destination
// address (and interface, for link-local IPv6). The answer is sent from
// it, as NSD, Knot and Unbound do, since a client's connected socket (every
// stub resolver's) drops an answer from any other address, such as the
// host's primary address that routing would pick for a VIP or 127.0.0.2.
type pktInfo struct {
	addr    [16]byte // an IPv4 address in the first 4 bytes unless v6
	ifindex uint32   // kept only where the address needs it (link-local)
	v6      bool     // an IPV6_PKTINFO (IPv4-mapped on dual-stack sockets)
	ok      bool
}

// oobBuf holds one datagram's control messages; uint64 words keep the
// cmsghdr aligned.
type oobBuf [8]uint64

func (o *oobBuf) bytes() []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(o)), len(o)*8)
}

// udpLoop is what one read loop loads once per batch instead of per query.
type udpLoop struct {
	now   time.Time
	snap  *Snapshot
	cache *cache.Cache
	lim   *ratelimit.Limiter
	proxy bool
	ecs   bool        // listeners.ecsClientFrom is set
	reply *udpReplier // answers of detached queries
	// The async lane's misses of this batch: their queries, flushed after
	// the batch, and whether the query just run went on that lane.
	batch   upstream.AsyncBatch
	started bool
	// The datagram being answered: where a lane query's answer goes.
	addr  netip.AddrPort
	local pktInfo
}

func (l *udpLoop) begin(s *Server, now time.Time) {
	l.now = now
	l.snap = s.snap.Load()
	l.cache = s.cache.Load()
	l.lim = s.limiter.Load()
	l.proxy = s.cfg.ProxyProtocol != nil
	l.ecs = len(s.cfg.ECSClientFrom) > 0
}

// udpPacket answers the datagram in q.in[:n] from addr (as the socket
// reported it). It returns the bytes to send back (nil: nothing), or
// detached=true when the query went on to its own goroutine, which then
// owns q and writes the answer itself.
//
// local is the query's destination on a wildcard socket (see pktInfo): a
// detached query's answer is sent from it too.
func (s *Server) udpPacket(l *udpLoop, q *Query, n int, addr netip.AddrPort, local pktInfo) (out []byte, detached bool) {
	buf := q.in[:cap(q.in)]
	client, clientID := addr, "" // clientID: from svc edge's PROXY TLV
	if client.Addr().Is4In6() {
		client = netip.AddrPortFrom(client.Addr().Unmap(), client.Port())
	}
	if l.proxy {
		// PROXY v2 from trusted peers: the header names the real client,
		// which every later stage (rate limit, identify, log) sees.
		real, id, payload, perr := s.cfg.ProxyProtocol.DatagramID(client, buf[:n])
		if perr != nil {
			s.proxyReject(client, perr)
			return nil, false
		}
		if len(payload) != n {
			n = copy(buf, payload)
		}
		client, clientID = real, id
	}
	ecsChecked, ecsClient := false, false
	if l.ecs && s.ecsTrusted(client.Addr()) {
		// A cluster DNS forwarder: the client its ECS option names is the
		// one rate limited, identified and logged.
		ecsChecked = true
		if e, ok, _ := wire.FindECS(buf[:n]); ok {
			client, ecsClient = s.ecsIdentity(client, e)
		}
	}
	if l.lim != nil {
		if act := l.lim.Check(client.Addr(), buf[:n]); act != ratelimit.Allow {
			if act == ratelimit.Slip {
				if b, ok := ratelimit.AppendTruncated(q.out[:0], buf[:n]); ok {
					q.out = b
					return b, false
				}
			}
			return nil, false
		}
	}
	q.in = buf[:n]
	q.Client, q.Transport, q.Node = client, TransportUDP, s.cfg.Node
	q.ClientID = clientID
	q.ecsChecked, q.ecsClient = ecsChecked, ecsClient
	q.Start = l.now
	q.snap = l.snap
	q.cache = l.cache
	q.detachable = true
	q.lane, l.addr, l.local = l, addr, local
	if !s.run(q) {
		if l.started {
			// Sent upstream on the async lane, which answers it.
			l.started = false
			return nil, true
		}
		// The query needs an upstream: a worker finishes it and writes the
		// answer, so this loop keeps reading.
		s.wg.Add(1)
		if s.dispatch(job{q: q, r: l.reply, addr: addr, local: local}) {
			return nil, true
		}
		s.wg.Done()
		s.shed(q)
		return nil, false
	}
	return s.encode(q), false
}

// proxyReject counts datagrams and connections refused by the PROXY
// protocol policy.
func (s *Server) proxyReject(peer netip.AddrPort, err error) {
	if s.proxyRejected.Add(1) <= 10 {
		s.log.Warn("proxy protocol: rejected", "peer", peer, "err", err)
	}
}

// ProxyRejected counts what the PROXY protocol policy refused.
func (s *Server) ProxyRejected() uint64 { return s.proxyRejected.Load() }

// finishUDP runs a detached query on from the upstream stage and hands its
// answer to the socket's replier, which releases q and its s.wg count once
// the answer is sent. The job's pending budget is given back once the
// answer is ready, before the client can see it and ask again.
func (s *Server) finishUDP(j *job) {
	if b := s.finishDetached(j); b != nil {
		j.r.reply(j.q, b, j.addr, j.local)
	}
}

// finishDetached runs j's query on from where it detached, gives its
// budget back and returns its answer for j.r; with none, q and its s.wg
// count are released here.
func (s *Server) finishDetached(j *job) []byte {
	q := j.q
	q.detachable = false
	s.run(q)
	s.workers.release(j.prefix, j.cost)
	b := s.encode(q)
	if b == nil {
		putQuery(q)
		s.wg.Done()
	}
	return b
}

func (s *Server) acceptTCP(ln net.Listener) {
	defer s.wg.Done()
	for {
		conn, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(5 * time.Millisecond) // EMFILE and friends: back off, bounded
			continue
		}
		select {
		case s.tcpSlots <- struct{}{}:
		default:
			conn.Close() // over TCPMaxConns
			continue
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			conn.Close()
			<-s.tcpSlots
			continue
		}
		s.conns[conn] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serveTCP(conn)
	}
}

// serveTCP reads length-framed queries (RFC 1035 4.2.2) and answers each on
// a worker, out of order, with writes serialized (RFC 7766 6.2.1.1).
func (s *Server) serveTCP(conn net.Conn) {
	defer func() {
		s.mu.Lock()
		delete(s.conns, conn)
		s.mu.Unlock()
		conn.Close()
		<-s.tcpSlots
		s.wg.Done()
	}()
	client := netip.AddrPort{}
	if a, ok := conn.RemoteAddr().(*net.TCPAddr); ok {
		client = a.AddrPort()
		client = netip.AddrPortFrom(client.Addr().Unmap(), client.Port())
	}
	clientID := "" // a DoT/DoH client ID svc edge carries in its PROXY header
	if pc, ok := conn.(*proxyproto.Conn); ok {
		clientID = pc.ClientID()
	}
	tc := &tcpConn{conn: conn, inflight: make(chan struct{}, s.cfg.TCPMaxInflight)}
	var lenb [2]byte
	defer tc.pending.Wait()
	for {
		_ = conn.SetReadDeadline(time.Now().Add(s.cfg.TCPIdleTimeout))
		if _, err := io.ReadFull(conn, lenb[:]); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint16(lenb[:]))
		q := s.begin(client, TransportTCP)
		q.ClientID = clientID
		if cap(q.in) < n {
			q.in = make([]byte, n)
		}
		q.in = q.in[:n]
		if _, err := io.ReadFull(conn, q.in); err != nil {
			putQuery(q)
			return
		}
		q.Start = time.Now()
		tc.inflight <- struct{}{}
		tc.pending.Add(1)
		if s.HandlesTransfers() && IsTransfer(q.in) {
			// A zone transfer is many messages: it gets a goroutine of
			// its own, writing each message under the connection's lock.
			go tc.transfer(s, q, client)
			continue
		}
		if !s.dispatch(job{q: q, tc: tc}) {
			// The pool is full of queries waiting for upstreams; TCP is
			// bounded by TCPMaxConns x TCPMaxInflight, so run it anyway.
			go tc.answer(s, q)
		}
	}
}

// errNoRawUDP: this platform serves UDP sockets through the Go poller only.
var errNoRawUDP = errors.New("no raw udp sockets on this platform")

// writeUDP sends one answer, from the address in oob when it holds one; an
// answer larger than the interface's MTU (setDontFragment) is sent again
// cut to its question with TC set.
func writeUDP(c *net.UDPConn, b, oob []byte, addr netip.AddrPort) {
	for {
		var err error
		if len(oob) > 0 {
			_, _, err = c.WriteMsgUDPAddrPort(b, oob, addr)
		} else {
			_, err = c.WriteToUDPAddrPort(b, addr)
		}
		if err == nil || !errors.Is(err, syscall.EMSGSIZE) {
			return
		}
		n := wire.TruncateAnswer(b)
		if n >= len(b) {
			return
		}
		b = b[:n]
	}
}
