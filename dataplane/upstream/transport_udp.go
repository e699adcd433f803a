package upstream

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Limits of the UDP socket pool of one plain-DNS upstream. See
// docs/upstreams.md for the reasoning.
const (
	// udpPoolSockets is how many sockets (source ports) an upstream uses
	// at once, or one per CPU (GOMAXPROCS) up to udpPoolMaxSockets where
	// there are more: each socket's reader finishes the async lane's
	// misses (async.go), so the sockets are what spreads them over the
	// cores. Queries go to them in turn.
	udpPoolSockets    = 4
	udpPoolMaxSockets = 32
	// udpMaxPending bounds the queries outstanding on one socket. Against
	// 65536 IDs it keeps a random ID free with probability > 99.6%.
	udpMaxPending = 256
	// udpRotateQueries and udpRotateAge retire a socket after this many
	// queries or this long, whichever comes first: its slot gets a new
	// socket on a new kernel-chosen port, and the old one closes once its
	// outstanding queries are answered or timed out.
	udpRotateQueries = 2048
	udpRotateAge     = 10 * time.Second
	// udpIDTries bounds the draws of a free random ID on one socket.
	udpIDTries = 8
	// udpAbandoned is how many IDs of given-up or retransmitted queries a
	// socket remembers, to tell their late answers from unsolicited ones
	// and not to reuse those IDs while such answers may still come. A set
	// of 65536 bits beside the ring makes the check O(1).
	udpAbandoned = 1024
	// udpMaxWait bounds a pooled query whose context has no deadline.
	udpMaxWait = 30 * time.Second
	// A pooled query not answered within the retransmission timeout (RTO)
	// is sent again with the same ID, the RTO doubling each time, until
	// the attempt's deadline. The RTO follows the upstream's measured
	// round trip (RFC 6298: srtt + 4*rttvar), within these bounds; the
	// minimum is Unbound's (infra-cache-min-rtt) so that queueing delay
	// under load does not read as loss.
	udpInitialRTO = 200 * time.Millisecond
	udpMinRTO     = 50 * time.Millisecond
	udpMaxRTO     = time.Second
	// udpMaxSends bounds the sends of one query on a fresh socket, where a
	// context without a deadline would otherwise resend forever.
	udpMaxSends = 16
)

// Reasons of service_upstream_udp_dropped_total: datagrams read from a
// pooled socket and thrown away.
const (
	dropUnsolicited = "unsolicited" // no query waits or waited for this ID: forged, or very late
	dropLate        = "late"        // the ID of a query just given up (timeout, lost race)
	dropMismatch    = "mismatch"    // the ID of a waiting query, another question
	dropMalformed   = "malformed"   // shorter than a header, or not a response
)

// dropReasons index udpPool.drops.
var dropReasons = [...]string{dropUnsolicited, dropLate, dropMismatch, dropMalformed}

const (
	iUnsolicited = iota
	iLate
	iMismatch
	iMalformed
)

// errPoolBusy means every pooled socket is full or unusable; the query goes
// out on a socket of its own instead.
var errPoolBusy = errors.New("udp pool busy")

// udpPool multiplexes the queries to one upstream over a few long-lived
// connected UDP sockets. The kernel only delivers datagrams from the
// upstream's address and port to a connected socket; the reader of each
// socket hands a datagram to the query waiting for its ID only when it is a
// response carrying that query's question, and drops the rest.
type udpPool struct {
	addr  Address
	fixed netip.AddrPort // the address of an IP literal upstream; else invalid
	d     *dialer
	drops [len(dropReasons)]prometheus.Counter // by dropReasons

	// Limits, the udp* constants; tests lower them.
	maxPending    int
	rotateQueries int
	rotateAge     time.Duration

	next atomic.Uint32
	// srtt and rttvar (nanoseconds) estimate the upstream's round trip from
	// answers to queries sent once (Karn); 0 until the first.
	srtt, rttvar atomic.Int64
	// retransmits counts queries sent again after their RTO.
	retransmits prometheus.Counter
	// newestAnswered is the last send time (UnixNano) of the most recently
	// sent query answered: a query sent before it and still waiting was
	// most likely lost, not queued (RACK, RFC 8985).
	newestAnswered atomic.Int64

	// slots hold the sockets taking new queries; nil until first used.
	// Stored under mu.
	slots  []atomic.Pointer[udpSock]
	mu     sync.Mutex            // guards slot replacement, live and closed
	live   map[*udpSock]struct{} // every open socket, retired ones too
	closed bool
	wg     sync.WaitGroup // readers
}

func newUDPPool(a Address, d *dialer, m *metrics) *udpPool {
	p := &udpPool{
		addr:          a,
		d:             d,
		maxPending:    udpMaxPending,
		rotateQueries: udpRotateQueries,
		rotateAge:     udpRotateAge,
		slots:         make([]atomic.Pointer[udpSock], min(max(udpPoolSockets, runtime.GOMAXPROCS(0)), udpPoolMaxSockets)),
		live:          make(map[*udpSock]struct{}),
	}
	if ip, err := netip.ParseAddr(a.Host); err == nil {
		p.fixed = netip.AddrPortFrom(ip, a.Port)
	}
	for i, r := range dropReasons {
		p.drops[i] = m.udpDropped.WithLabelValues(a.String(), r)
	}
	p.retransmits = m.udpRetransmits.WithLabelValues(a.String())
	return p
}

// rto is the retransmission timeout of a query sent now.
func (p *udpPool) rto() time.Duration {
	srtt := p.srtt.Load()
	if srtt == 0 {
		return udpInitialRTO
	}
	return min(max(time.Duration(srtt+4*p.rttvar.Load()), udpMinRTO), udpMaxRTO)
}

// observe folds one round-trip sample into srtt and rttvar (RFC 6298
// 2.2-2.3). Concurrent readers may lose an update; an estimate needs no
// more.
func (p *udpPool) observe(r time.Duration) {
	srtt := p.srtt.Load()
	if srtt == 0 {
		p.srtt.Store(max(int64(r), 1))
		p.rttvar.Store(int64(r) / 2)
		return
	}
	d := srtt - int64(r)
	if d < 0 {
		d = -d
	}
	p.rttvar.Store((3*p.rttvar.Load() + d) / 4)
	p.srtt.Store(max((7*srtt+int64(r))/8, 1))
}

// jitter spreads retransmissions of a burst over a quarter of their RTO,
// so that they do not arrive at the upstream together again.
func jitter(d time.Duration) time.Duration {
	return d + rand.N(d/4+1)
}

// udpSock is one pooled socket and its outstanding queries.
type udpSock struct {
	p      *udpPool
	c      *net.UDPConn
	remote netip.AddrPort // the upstream address c is connected to
	born   time.Time

	mu      sync.Mutex
	pending map[uint16]*udpQuery
	used    int // queries sent, for rotation
	// abandoned holds the IDs of the last queries given up (ring), each
	// once; abandonedSet has their bits.
	abandoned    [udpAbandoned]uint16
	abandonedSet [65536 / 64]uint64
	nAband       int  // entries written to abandoned, ever
	retired      bool // takes no new queries; closes when pending is empty
	dead         bool // closed
	// While async queries are pending, sweepT runs sweep every udpSweep
	// (sweeping: armed).
	sweeping bool
	sweepT   *time.Timer

	// Queries queued for sending (send); wmu guards the w* fields.
	wmu       sync.Mutex
	wq        []udpOut
	warena    []byte // the queued queries' bytes, copied
	wspareQ   []udpOut
	wspareA   []byte
	wflushing bool
	w         udpWriter // the flusher's sendmmsg state (platform)
}

// udpOut is one query queued for sending: its bytes are
// warena[off:off+n].
type udpOut struct {
	id     uint16
	uq     *udpQuery
	off, n int
}

// sendError is the error of a failed write delivered to a query; it
// matches errSend.
type sendError struct{ err error }

func (e *sendError) Error() string   { return e.err.Error() }
func (e *sendError) Unwrap() error   { return e.err }
func (e *sendError) Is(t error) bool { return t == errSend }

var errSend = errors.New("udp send failed")

// udpSendKeep bounds the send buffers a socket keeps after a burst.
const udpSendKeep = 64 << 10

// send queues q (copied) for writing on s. The caller that finds no flush
// going on becomes the flusher: it yields once, so that the other queries
// made runnable in the same wake-up (a batch of cache misses read by the
// data plane) queue theirs, then writes everything queued with as few
// syscalls as the platform allows (sendmmsg on Linux) until the queue is
// empty. A datagram the kernel refuses fails its query with the error
// (failSend), as the write of its own would have.
func (s *udpSock) send(id uint16, uq *udpQuery, q []byte) {
	if s.queue(id, uq, q) {
		runtime.Gosched()
		s.flush()
	}
}

// queue adds q (copied) to s's send queue. It reports whether the caller
// must flush: no flush was going on, and the caller now owns it (an
// AsyncBatch flushes after the data plane's batch instead of yielding).
func (s *udpSock) queue(id uint16, uq *udpQuery, q []byte) (flush bool) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.wq = append(s.wq, udpOut{id: id, uq: uq, off: len(s.warena), n: len(q)})
	s.warena = append(s.warena, q...)
	if s.wflushing {
		return false
	}
	s.wflushing = true
	return true
}

// flush writes what is queued on s until the queue is empty; only the
// owner of the flush (queue returned true) calls it.
func (s *udpSock) flush() {
	for {
		s.wmu.Lock()
		batch, arena := s.wq, s.warena
		if len(batch) == 0 {
			s.wflushing = false
			s.wmu.Unlock()
			return
		}
		s.wq, s.warena = s.wspareQ[:0], s.wspareA[:0]
		s.wspareQ, s.wspareA = nil, nil
		s.wmu.Unlock()
		s.writeBatch(batch, arena)
		clear(batch) // do not pin finished queries
		s.wmu.Lock()
		if cap(arena) <= udpSendKeep {
			s.wspareQ, s.wspareA = batch[:0], arena[:0]
		}
		s.wmu.Unlock()
	}
}

// failSend delivers a write error to o's query if it still waits.
func (s *udpSock) failSend(o udpOut, err error) {
	s.mu.Lock()
	if s.pending[o.id] != o.uq {
		s.mu.Unlock()
		return // given up meanwhile
	}
	delete(s.pending, o.id)
	if o.uq.async != nil {
		s.closeIfDrainedLocked()
		s.mu.Unlock()
		s.p.handoff(o.uq, &sendError{err})
		return
	}
	o.uq.err = &sendError{err}
	o.uq.done <- struct{}{}
	s.closeIfDrainedLocked()
	s.mu.Unlock()
}

// udpQuery is one outstanding query. done receives exactly once per
// delivery, under the socket's lock, after n or err is set.
type udpQuery struct {
	q        []byte  // the query as sent, for matching the answer's question
	ans      *msgBuf // the answer is copied into a buffer taken here, sized to it
	n        int
	err      error
	mismatch bool // an answer with this ID for another question was dropped
	done     chan struct{}
	sent     time.Time   // first sent, for the round-trip estimate
	lastSent int64       // UnixNano of the latest send, for newestAnswered
	resent   int         // times sent again after the RTO
	ticks    int         // RTO expiries, for resend
	timer    *time.Timer // the RTO; kept with the query in udpQueries
	// async: a query started by Resolver.StartRaw, which no goroutine
	// waits for: its answer goes to the callback (deliver), its RTO and
	// deadline are kept by the socket's sweep (due: UnixNano).
	async *Handoff
	leg   uint8         // which of h's legs (a race has two)
	due   int64         // UnixNano of the next RTO expiry
	rto   time.Duration // the RTO of that expiry
}

// putUDPQuery returns a finished query to the pool.
func putUDPQuery(uq *udpQuery) {
	uq.q, uq.ans, uq.async = nil, nil, nil
	udpQueries.Put(uq)
}

var udpQueries = sync.Pool{New: func() any { return &udpQuery{done: make(chan struct{}, 1)} }}

// readBufs recycles the readers' buffers across socket rotations: one
// largest-message buffer per socket, not per waiting query.
var readBufs = sync.Pool{New: func() any { b := make([]byte, maxMsgSize); return &b }}

// exchange sends q on a pooled socket and waits for its answer, copied into
// a buffer ans takes when it arrives. It may replace q's ID (q is the
// caller's copy) to keep IDs unique per socket. errPoolBusy means no socket
// could take the query.
func (p *udpPool) exchange(ctx context.Context, q []byte, ans *msgBuf) ([]byte, error) {
	if len(q) < 12 {
		return nil, fmt.Errorf("udp: query of %d bytes", len(q))
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, udpMaxWait)
		defer cancel()
	}
	s, uq, _, err := p.register(ctx, q, ans, nil, 0)
	if err != nil {
		return nil, err
	}
	id := binary.BigEndian.Uint16(q)
	// A failed write is delivered to uq like an answer (failSend).
	s.send(id, uq, q)
	// A datagram lost on the way (an upstream's full receive buffer under
	// a burst drops queries silently) is sent again after the RTO instead
	// of failing the query at the attempt's deadline. The same timer ends
	// the wait at ctx's deadline: a forwarded query's context
	// (DeadlineContext) has no timer of its own, only its root's cancellation.
	cancelled, deadline := deadlineOf(ctx) // ctx has a deadline (above)
	rto := p.rto()
	next := func(d time.Duration) time.Duration { return min(d, time.Until(deadline)) }
	if uq.timer == nil {
		uq.timer = time.NewTimer(next(jitter(rto)))
	} else {
		uq.timer.Reset(next(jitter(rto)))
	}
wait:
	for {
		select {
		case <-uq.done:
			break wait
		case <-uq.timer.C:
			if !time.Now().Before(deadline) {
				err = context.DeadlineExceeded
				break
			}
			send, waiting := s.resend(id, uq)
			if send {
				p.retransmits.Inc()
				s.send(id, uq, q)
			}
			if waiting {
				rto = min(2*rto, udpMaxRTO)
				uq.timer.Reset(next(jitter(rto)))
			} else {
				uq.timer.Reset(next(udpMaxWait)) // the deadline still ends the wait
			}
			continue
		case <-cancelled:
			uq.timer.Stop()
		}
		// Cancelled, or past the deadline.
		if s.cancel(id, uq, true) {
			err = ioErr(ctx, "udp read", err)
			if uq.mismatch && !errors.Is(err, context.Canceled) {
				err = fmt.Errorf("udp read: %w: an answer to another question came with this ID", errMismatch)
			}
			uq.q, uq.ans = nil, nil
			udpQueries.Put(uq)
			return nil, err
		}
		<-uq.done // delivered meanwhile: the answer is in ans
		break wait
	}
	uq.timer.Stop()
	n, err := uq.n, uq.err
	uq.q, uq.ans = nil, nil
	udpQueries.Put(uq)
	if err != nil {
		if errors.Is(err, errSend) {
			return nil, ioErr(ctx, "udp write", errors.Unwrap(err))
		}
		return nil, err
	}
	return (*ans.p)[:n], nil
}

// register finds a socket with room, draws an ID free on it (rewriting q)
// and records the query as outstanding.
//
// h, when set, makes it an async query (Resolver.StartRaw), queued for
// sending at once; flush then says the caller must flush the socket.
func (p *udpPool) register(ctx context.Context, q []byte, ans *msgBuf, h *Handoff, leg uint8) (*udpSock, *udpQuery, bool, error) {
	var aps []netip.AddrPort // current addresses of a named upstream
	if !p.fixed.IsValid() {
		// Every query consults the bootstrap cache, so an expired entry is
		// refreshed and a changed address gets new sockets.
		var err error
		if aps, err = p.d.addrs(ctx, p.addr); err != nil {
			return nil, nil, false, err
		}
	}
	n := uint32(len(p.slots))
	start := p.next.Add(1)
	for k := range n {
		i := (start + k) % n
		s := p.slots[i].Load()
		for range 2 { // at most one replacement per slot
			if s == nil {
				var err error
				if s, err = p.replace(ctx, i, nil); err != nil {
					return nil, nil, false, err
				}
			}
			var uq *udpQuery
			var flush bool
			stale := aps != nil && !slices.Contains(aps, s.remote) // address changed
			if !stale {
				uq, stale, flush = s.add(q, ans, h, leg)
			}
			if uq != nil {
				return s, uq, flush, nil
			}
			if !stale {
				break // full: try the next slot
			}
			var err error
			if s, err = p.replace(ctx, i, s); err != nil {
				return nil, nil, false, err
			}
		}
	}
	return nil, nil, false, errPoolBusy
}

// replace puts a new socket in slot i unless another query already did,
// retiring old.
func (p *udpPool) replace(ctx context.Context, i uint32, old *udpSock) (*udpSock, error) {
	aps := []netip.AddrPort{p.fixed}
	if !p.fixed.IsValid() {
		// The address lookup may wait on the bootstrap servers: outside
		// the lock.
		var err error
		if aps, err = p.d.addrs(ctx, p.addr); err != nil {
			return nil, err
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errClosed
	}
	if cur := p.slots[i].Load(); cur != old && cur != nil {
		return cur, nil // replaced by a concurrent query
	}
	var c *net.UDPConn
	var remote netip.AddrPort
	var last error
	for _, ap := range aps { // bounded by the lookup result
		// Port 0: the kernel picks a random ephemeral source port.
		if c, last = net.DialUDP(udpNet(ap), nil, net.UDPAddrFromAddrPort(ap)); last == nil {
			remote = ap
			break
		}
	}
	if c == nil {
		if last == nil {
			last = errors.New("no address")
		}
		return nil, fmt.Errorf("dial udp %s: %w", p.addr.HostPort(), last)
	}
	s := &udpSock{p: p, c: c, remote: remote, born: time.Now(), pending: make(map[uint16]*udpQuery, 16)}
	s.w.init(c)
	p.slots[i].Store(s)
	p.live[s] = struct{}{}
	p.wg.Add(1)
	go s.read()
	if old != nil {
		old.retire()
	}
	return s, nil
}

func udpNet(ap netip.AddrPort) string {
	if ap.Addr().Unmap().Is4() {
		return "udp4"
	}
	return "udp6"
}

// add records q as outstanding on s with an ID no other outstanding query
// of s uses. It returns nil when s cannot take it: stale when s is due for
// rotation or closed, else s is full or out of free IDs.
func (s *udpSock) add(q []byte, ans *msgBuf, h *Handoff, leg uint8) (uq *udpQuery, stale, flush bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.retired || s.dead || s.used >= s.p.rotateQueries || time.Since(s.born) >= s.p.rotateAge {
		return nil, true, false
	}
	if len(s.pending) >= s.p.maxPending {
		return nil, false, false
	}
	id := binary.BigEndian.Uint16(q)
	for try := 0; ; try++ {
		if _, taken := s.pending[id]; !taken && !s.wasAbandoned(id) {
			break
		}
		if try == udpIDTries {
			return nil, false, false
		}
		id = uint16(rand.Uint32())
	}
	binary.BigEndian.PutUint16(q, id)
	uq = udpQueries.Get().(*udpQuery)
	uq.q, uq.ans, uq.n, uq.err, uq.mismatch = q, ans, 0, nil, false
	uq.sent, uq.resent, uq.ticks = time.Now(), 0, 0
	uq.lastSent = uq.sent.UnixNano()
	s.pending[id] = uq
	s.used++
	if h != nil {
		uq.async, uq.leg, uq.rto = h, leg, s.p.rto()
		uq.due = uq.lastSent + int64(min(jitter(uq.rto), h.deadline.Sub(uq.sent)))
		s.armSweepLocked()
		flush = s.queue(id, uq, q)
	}
	return uq, false, flush
}

// cancel withdraws uq; false when the reader delivered it first (done then
// holds or will hold a value). sent records the ID as abandoned: its
// answer may still come.
func (s *udpSock) cancel(id uint16, uq *udpQuery, sent bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending[id] != uq {
		return false
	}
	delete(s.pending, id)
	if sent {
		s.abandon(id)
	}
	s.closeIfDrainedLocked()
	return true
}

// resend is called when uq's RTO expired: waiting reports whether uq still
// waits on s, send whether to send it again now (counted).
func (s *udpSock) resend(id uint16, uq *udpQuery) (send, waiting bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead || s.pending[id] != uq {
		return false, false
	}
	return s.expiredLocked(uq, time.Now().UnixNano()), true
}

// expiredLocked counts an RTO expiry of uq at now (UnixNano) and reports
// whether to send it again now (lost); then it is counted as resent.
func (s *udpSock) expiredLocked(uq *udpQuery, now int64) bool {
	uq.ticks++
	if !s.p.lost(uq.lastSent, uq.ticks) {
		return false
	}
	uq.resent++
	uq.lastSent = now
	return true
}

// lost reports whether a query last sent at sent (UnixNano) whose RTO
// expired ticks times was most likely lost rather than queued behind
// others at a busy upstream: a query sent after it was answered (RACK), or
// it expired twice (3 RTOs with the doubling) as a lone query does. Without
// this, a burst queued at a slow upstream would be sent again whole after
// the first RTO, doubling the upstream's load when it can least take it.
func (p *udpPool) lost(sent int64, ticks int) bool {
	return ticks >= 2 || p.newestAnswered.Load() > sent
}

// answered records the send time of an answered query for lost.
func (p *udpPool) answered(sent int64) {
	for { // bounded by concurrent increases
		cur := p.newestAnswered.Load()
		if sent <= cur || p.newestAnswered.CompareAndSwap(cur, sent) {
			return
		}
	}
}

// wasAbandoned reports whether id belongs to a recently given-up query.
func (s *udpSock) wasAbandoned(id uint16) bool {
	return s.abandonedSet[id/64]&(1<<(id%64)) != 0
}

// abandon remembers id (s.mu held), forgetting the oldest when full.
func (s *udpSock) abandon(id uint16) {
	if s.wasAbandoned(id) {
		return
	}
	i := s.nAband % udpAbandoned
	if s.nAband >= udpAbandoned {
		old := s.abandoned[i]
		s.abandonedSet[old/64] &^= 1 << (old % 64)
	}
	s.abandoned[i] = id
	s.abandonedSet[id/64] |= 1 << (id % 64)
	s.nAband++
}

// retire stops new queries on s; it closes once nothing is outstanding.
func (s *udpSock) retire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.retired = true
	s.closeIfDrainedLocked()
}

func (s *udpSock) closeIfDrainedLocked() {
	if s.retired && !s.dead && len(s.pending) == 0 {
		s.dead = true
		_ = s.c.Close() // the reader sees net.ErrClosed and ends
	}
}

// failAll delivers err to every outstanding query.
func (s *udpSock) failAll(err error) {
	var async []*udpQuery
	s.mu.Lock()
	for id, uq := range s.pending {
		delete(s.pending, id)
		if uq.async != nil {
			async = append(async, uq)
			continue
		}
		uq.err = err
		uq.done <- struct{}{}
	}
	s.closeIfDrainedLocked()
	s.mu.Unlock()
	for _, uq := range async {
		s.p.handoff(uq, err)
	}
}

// read is the socket's only reader: it delivers answers to waiting queries
// until the socket closes.
func (s *udpSock) read() {
	defer s.p.wg.Done()
	defer s.p.forget(s)
	bp := readBufs.Get().(*[]byte)
	defer readBufs.Put(bp)
	buf := *bp
	var fl flushers // async answers' work, flushed before the reader blocks
	for {
		n, err := s.readNext(buf, &fl)
		if err != nil {
			fl.flush()
			if errors.Is(err, net.ErrClosed) {
				s.failAll(fmt.Errorf("udp read: %w", errClosed))
				return
			}
			// An ICMP error (port unreachable and the like) is reported on
			// a connected socket: the upstream is not answering, so the
			// queries waiting on it fail now instead of at their timeout.
			s.failAll(fmt.Errorf("udp read: %w", err))
			if !isICMPError(err) {
				s.retire()
				s.mu.Lock()
				if !s.dead { // queries were failed above; nothing can wait
					s.dead = true
					_ = s.c.Close()
				}
				s.mu.Unlock()
				return
			}
			continue
		}
		fl.add(s.deliver(buf[:n]))
	}
}

func isICMPError(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) ||
		errors.Is(err, syscall.ENETUNREACH) || errors.Is(err, syscall.EHOSTDOWN)
}

// deliver hands an answer to the query waiting for it, or drops it. An
// async query's answer goes to its callback, which may return work to
// flush before the reader next blocks.
func (s *udpSock) deliver(m []byte) Flusher {
	if len(m) < 12 || m[2]&0x80 == 0 {
		s.p.drops[iMalformed].Inc()
		return nil
	}
	id := binary.BigEndian.Uint16(m)
	s.mu.Lock()
	uq := s.pending[id]
	if uq == nil {
		late := s.wasAbandoned(id)
		s.mu.Unlock()
		if late {
			s.p.drops[iLate].Inc()
		} else {
			s.p.drops[iUnsolicited].Inc()
		}
		return nil
	}
	if !sameQuestion(uq.q, m) {
		uq.mismatch = true
		s.mu.Unlock()
		s.p.drops[iMismatch].Inc()
		return nil
	}
	delete(s.pending, id)
	s.p.answered(uq.lastSent)
	if uq.resent == 0 {
		s.p.observe(time.Since(uq.sent))
	} else {
		// The answer to which send is unknown (Karn): no sample. Another
		// answer may still come for this ID: a late one, not unsolicited.
		s.abandon(id)
	}
	if uq.async != nil {
		s.closeIfDrainedLocked()
		s.mu.Unlock()
		return s.p.completeAsync(uq, m)
	}
	uq.n = copy(uq.ans.take(len(m)), m)
	uq.done <- struct{}{} // buffered, empty: never blocks
	s.closeIfDrainedLocked()
	s.mu.Unlock()
	return nil
}

// sameQuestion reports whether answer a carries exactly one question equal
// to the one question of query q: the same name (ASCII case ignored) and
// the same type and class, compared on the wire.
func sameQuestion(q, a []byte) bool {
	if len(q) < 12 || len(a) < 12 || q[4] != 0 || q[5] != 1 || a[4] != 0 || a[5] != 1 {
		return false
	}
	end := 12
	for end < len(q) { // each step consumes at least one byte
		l := int(q[end])
		if l == 0 {
			break
		}
		if l&0xC0 != 0 {
			return false // our queries never compress the question
		}
		end += 1 + l
	}
	end += 5 // root label, type, class
	if end > len(q) || end > len(a) {
		return false
	}
	name := end - 4
	for i := 12; i < name; i++ {
		x, y := q[i], a[i]
		if x != y && lower(x) != lower(y) {
			return false
		}
	}
	// Length bytes (< 64) are never letters, so folding cannot make a
	// different label layout match; type and class compare exactly.
	return string(q[name:end]) == string(a[name:end])
}

func lower(b byte) byte {
	if 'A' <= b && b <= 'Z' {
		return b + 'a' - 'A'
	}
	return b
}

// forget drops a closed socket from the pool's books.
func (p *udpPool) forget(s *udpSock) {
	p.mu.Lock()
	delete(p.live, s)
	for i := range p.slots {
		if p.slots[i].Load() == s {
			p.slots[i].Store(nil)
		}
	}
	p.mu.Unlock()
}

// close closes every socket and waits for the readers; queries still
// waiting fail with errClosed.
func (p *udpPool) close() {
	p.mu.Lock()
	p.closed = true
	socks := make([]*udpSock, 0, len(p.live))
	for s := range p.live {
		socks = append(socks, s)
	}
	p.mu.Unlock()
	for _, s := range socks {
		s.mu.Lock()
		s.retired = true
		if !s.dead {
			s.dead = true
			_ = s.c.Close()
		}
		s.mu.Unlock()
	}
	p.wg.Wait()
}
