package upstream

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/dataplane/wire"
)

// The async lane of a cache miss (docs/upstreams.md, "Async misses"). A
// forwarded query used to hold a goroutine for its whole round trip: the
// data plane handed it to a worker, which sent it and parked until the
// socket's reader woke it with the answer. With StartRaw the caller (the
// data plane's UDP read loop) sends the query and goes on; the socket's
// reader hands a light answer (a NOERROR or NXDOMAIN that wire.ScanAnswer
// accepts, the common case) straight to the caller's callback, which
// finishes the query there. Everything else (another answer, a
// retransmission that ran out, a send or socket error, the root context
// ending) is handed off: the caller resumes the query on a goroutine that
// may block (Resume), which goes on exactly as Forward would have after
// that first attempt: TCP after a truncated answer, the group's next
// servers after a failure. No query is sent twice for it.

// AsyncCallback receives the outcome of a query StartRaw started: exactly
// one of its methods is called, once, from whichever goroutine ends the
// query: a socket's reader or sweep, or a flusher whose write failed (which
// may be the StartRaw caller's AsyncBatch.Flush, or StartRaw itself
// without a batch). Neither may block.
type AsyncCallback interface {
	// AsyncLight gets a NOERROR or NXDOMAIN answer from upstream whose
	// bytes passed wire.ScanAnswer, with the query's ID and question;
	// raw is valid only during the call. Work the callback queued for a
	// batch (an answer to send) is returned as a Flusher, flushed before
	// the reader next waits; nil if none.
	AsyncLight(raw []byte, upstream string) Flusher
	// AsyncHandoff: the query must go on with Resume, on a goroutine that
	// may block. Resume must be called, even when the caller gave up: it
	// releases what the query holds and answers the queries coalesced
	// with it.
	AsyncHandoff(h *Handoff)
}

// Flusher is work queued by callbacks for one batch, such as answers to
// send with one sendmmsg.
type Flusher interface{ Flush() }

// flushers are the distinct Flushers of one reader's batch.
type flushers struct{ fs []Flusher }

func (f *flushers) add(x Flusher) {
	if x == nil || slices.Contains(f.fs, x) {
		return
	}
	f.fs = append(f.fs, x)
}

func (f *flushers) flush() {
	for i, x := range f.fs {
		x.Flush()
		f.fs[i] = nil
	}
	f.fs = f.fs[:0]
}

// AsyncBatch collects the sockets holding queries StartRaw queued, so the
// caller sends those of one batch together (Flush). The zero value is
// ready; one goroutine uses it, and must call Flush after each batch:
// until then no other query is written on those sockets.
type AsyncBatch struct{ socks []*udpSock }

// Flush writes the queued queries.
func (b *AsyncBatch) Flush() {
	for i, s := range b.socks {
		s.flush()
		b.socks[i] = nil
	}
	b.socks = b.socks[:0]
}

// udpSweep is how often a socket with async queries checks their RTO and
// deadline: a granularity well below the smallest RTO (udpMinRTO).
const udpSweep = 20 * time.Millisecond

// Handoff is a query StartRaw started: its state while it is in flight,
// and the outcome of its first attempt (or race) when it is handed off to
// Resume.
type Handoff struct {
	r     *Resolver
	g     *group
	q     dns.Question
	reqID uint16 // the caller's message ID, which Forward's answers carry
	// From prepare, for the answer Resume returns.
	addedOPT, stripResp bool
	f                   *flight // led for the question; nil if not coalesced
	fh                  uint64
	cb                  AsyncCallback
	root                context.Context
	deadline            time.Time // of the attempt (the race)
	// legs[0] is the server asked; a race (parallel_best) asks legs[1]
	// too, and the first good answer wins.
	legs [2]asyncLeg
	n    int
	// A race's state, under mu (a single leg needs no lock: one
	// goroutine ends it): the legs still out, whether one won, and the
	// order in which legs ended without winning.
	mu    sync.Mutex
	out   int
	won   bool
	ended []uint8
}

// asyncLeg is one server's attempt of a Handoff.
type asyncLeg struct {
	u *upstream
	b *attemptBuf // the query as sent (b.q); a handed-off answer (b.a)
	// While out, for cancelling a race's loser.
	s  *udpSock
	id uint16
	uq *udpQuery
	// How it ended: an answer that is not light (in b.a), or an error.
	ans     []byte
	err     error
	elapsed time.Duration
}

var handoffs = sync.Pool{New: func() any { return new(Handoff) }}

// release returns h's buffers, and h itself unless it raced: a race's
// loser may still be ending on another goroutine, which reads h (not its
// buffers) after the winner is done, so a race's Handoff is left to the
// garbage collector.
func (h *Handoff) release() {
	for i := range h.n {
		h.r.bufs.put(h.legs[i].b)
	}
	if h.n == 1 {
		*h = Handoff{}
		handoffs.Put(h)
	}
}

// StartRaw sends req to the named upstream group (as Forward) without
// waiting for the answer, which goes to cb. It reports false, having sent
// nothing and kept nothing, when the query cannot go this way: then the
// caller forwards it with ForwardRaw. It goes this way when the servers
// the group asks first (one by its strategy, or the two a parallel_best
// group races) are plain DNS servers given by IP address, and the same
// question is not already in flight (the caller then waits for that
// answer with ForwardRaw).
//
// The query ends with root (the server's lifetime) and at deadline; the
// first attempt (or race) ends after the group's timeout. With batch set,
// the query is written when the caller flushes the batch.
func (r *Resolver) StartRaw(root context.Context, deadline time.Time, group string, req *dns.Msg, client netip.Addr, batch *AsyncBatch, cb AsyncCallback) bool {
	if req == nil || len(req.Question) != 1 || root.Err() != nil {
		return false
	}
	if group == "" {
		group = DefaultGroup
		if g, ok := r.router.route(req.Question[0].Name); ok {
			group = g
		}
	}
	g := r.groups[group]
	if g == nil {
		return false
	}
	var ups [2]*upstream
	n := 1
	if g.strategy == ParallelBest && len(g.ups) >= 2 {
		i, j := g.racePair()
		ups, n = [2]*upstream{g.ups[i], g.ups[j]}, 2
	} else if ups[0] = g.first(); ups[0] == nil {
		return false
	}
	for _, u := range ups[:n] {
		if u.zeroID {
			return false
		}
		if ut, ok := u.t.(*udpTransport); !ok || ut.pool == nil || !ut.pool.fixed.IsValid() {
			return false
		}
	}
	p := r.prepare(req, client)
	b := r.bufs.p.Get().(*attemptBuf)
	w, err := p.msg.PackBuffer(b.q[:cap(b.q)])
	if err != nil || len(w) < 12 {
		r.bufs.put(b)
		return false
	}
	b.q = w
	fh := r.fl.hash(g.name, w)
	f, ok := r.fl.lead(fh, g.name, w)
	if !ok {
		r.bufs.put(b)
		return false
	}
	var h *Handoff
	if n == 1 {
		h = handoffs.Get().(*Handoff)
	} else {
		h = new(Handoff) // not pooled (release)
	}
	*h = Handoff{r: r, g: g, q: req.Question[0], reqID: req.Id,
		addedOPT: p.addedOPT, stripResp: p.stripResp, f: f, fh: fh, cb: cb, root: root,
		deadline: minTime(deadline, time.Now().Add(g.timeout)), n: n, out: n}
	h.legs[0] = asyncLeg{u: ups[0], b: b}
	if n == 2 {
		h.legs[1] = asyncLeg{u: ups[1], b: g.bufs.fill(w)}
		// Until both legs are registered, a leg that ends already waits
		// here (raceEnd).
		h.mu.Lock()
	}
	// Each query is queued for sending as it is registered: from then on
	// the reader, the sweep or a socket error may end it on another
	// goroutine, so a single leg's h is not touched after this.
	var regErr error
	var flushNow [2]*udpSock // written after h.mu is released: a failed write ends its leg (raceEnd)
	for k := range n {
		l := &h.legs[k]
		bq := l.b.q
		binary.BigEndian.PutUint16(bq, uint16(rand.Uint32()))
		s, uq, flush, err := l.u.t.(*udpTransport).pool.register(root, bq, &l.b.a, h, uint8(k))
		if err != nil {
			if n == 1 {
				regErr = err
				break
			}
			// The race goes on with one leg; this one failed at once.
			l.err = err
			h.out--
			h.ended = append(h.ended, uint8(k))
			continue
		}
		if n == 2 {
			l.s, l.id, l.uq = s, binary.BigEndian.Uint16(bq), uq
		}
		if flush {
			if batch != nil {
				batch.socks = append(batch.socks, s)
			} else {
				flushNow[k] = s
			}
		}
	}
	if n == 2 {
		if h.out == 0 { // neither could be registered
			regErr = h.legs[1].err
		}
		h.mu.Unlock()
	}
	for _, s := range flushNow {
		if s != nil {
			s.flush()
		}
	}
	if regErr != nil {
		if f != nil {
			// A question that joined meanwhile cannot be answered.
			r.fl.land(fh, f, nil, nil, "", fmt.Errorf("upstream group %q: %w", g.name, regErr))
		}
		h.release()
		return false
	}
	return true
}

// Resume finishes a query StartRaw handed off, as ForwardRaw would have
// finished it after its first attempt or race: the answers that came, the
// next servers, the same results. raw is the buffer for the answer's
// bytes (ForwardRaw's). ctx bounds what is left to do; h is released.
func (r *Resolver) Resume(ctx context.Context, h *Handoff, raw []byte) (resp *dns.Msg, rawOut []byte, up string, err error) {
	defer h.release()
	g := h.g
	var res result
	ended := h.ended
	if h.n == 1 {
		ended = []uint8{0}
	}
	for _, k := range ended {
		l := &h.legs[k]
		w, err, elapsed := l.ans, l.err, l.elapsed
		if err == nil {
			start := time.Now()
			w, err = l.u.t.(*udpTransport).followTC(ctx, l.b.q, &l.b.a, w)
			elapsed += time.Since(start)
		} else if errors.Is(err, errSend) {
			err = fmt.Errorf("udp write: %w", errors.Unwrap(err))
		} else if err != nil {
			err = fmt.Errorf("udp read: %w", err)
		}
		var m *dns.Msg
		if err == nil {
			m, w, err = checkAnswer(l.b.q, w, h.q, true)
		}
		lr := g.judge(l.u, m, w, err, elapsed, &raw)
		if lr.ok() {
			res = lr
			break
		}
		res = keepAnswer(res, lr)
	}
	if !res.ok() {
		var order []*upstream
		if ctx.Err() == nil {
			order = g.rest(h.legs[0].u, h.legs[1].u)
		}
		res = g.try(ctx, order, h.legs[0].b.q, h.q, &raw, res)
	}
	return r.finish(res, h.f, h.fh, &prepared{addedOPT: h.addedOPT, stripResp: h.stripResp}, h.reqID, raw)
}

// first is the server a query asks first, by the group's strategy; nil
// when the group races two (parallel_best).
func (g *group) first() *upstream {
	if len(g.ups) == 0 {
		return nil
	}
	switch g.strategy {
	case Strict:
		return g.ups[0]
	case ParallelBest:
		if len(g.ups) == 1 {
			return g.ups[0]
		}
	case Random:
		return g.ups[rand.IntN(len(g.ups))]
	case RTTWeighted:
		return weightedPick(g.ups)
	}
	return nil
}

// rest is the order of the servers to ask after tried (nil entries
// ignored) failed.
func (g *group) rest(tried ...*upstream) []*upstream {
	var order []*upstream
	switch g.strategy {
	case RTTWeighted:
		order = weightedOrder(g.ups)
	default:
		order = slices.Clone(g.ups)
		if g.strategy == Random {
			rand.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
		}
	}
	return slices.DeleteFunc(order, func(x *upstream) bool { return slices.Contains(tried, x) })
}

// weightedPick is weightedOrder's first draw, without its allocations.
func weightedPick(ups []*upstream) *upstream {
	total := 0.0
	for _, u := range ups {
		total += 1 / u.rtt().Seconds()
	}
	x := rand.Float64() * total
	for _, u := range ups {
		x -= 1 / u.rtt().Seconds()
		if x < 0 {
			return u
		}
	}
	return ups[len(ups)-1]
}

// completeAsync ends the async query uq with answer m (deliver matched its
// ID and question): a light answer goes to the callback, anything else is
// handed off (or, in a race, waits for the other leg).
func (p *udpPool) completeAsync(uq *udpQuery, m []byte) Flusher {
	h, k := uq.async, uq.leg
	elapsed := time.Since(uq.sent)
	putUDPQuery(uq)
	a, ok := wire.ScanAnswer(m)
	light := ok && a.Flags&(wire.FlagQR|wire.FlagTC) == wire.FlagQR &&
		(a.Rcode == dns.RcodeSuccess || a.Rcode == dns.RcodeNameError)
	if h.n == 2 {
		return h.raceEnd(k, m, light, nil, elapsed)
	}
	if light {
		return h.answer(0, m, elapsed)
	}
	l := &h.legs[0]
	l.ans = l.b.a.take(len(m))
	copy(l.ans, m)
	l.elapsed = elapsed
	h.cb.AsyncHandoff(h)
	return nil
}

// answer gives leg k's light answer m to the callback.
func (h *Handoff) answer(k uint8, m []byte, elapsed time.Duration) Flusher {
	u, cb := h.legs[k].u, h.cb
	u.m.latency.Observe(elapsed.Seconds())
	u.observe(elapsed, false, h.g.timeout)
	if h.f != nil {
		h.r.fl.land(h.fh, h.f, nil, m, u.name, nil)
	}
	h.release()
	return cb.AsyncLight(m, u.name)
}

// raceEnd ends leg k of a race with answer m (light or not) or err. A
// light answer wins; so does any other answer but SERVFAIL or REFUSED,
// which goes to Resume as the race's result (a race's attempt takes the
// first good answer, and such an answer is good unless it does not
// parse). The winner cancels the other leg. A leg that does not win waits
// for the other; when both failed, the race is handed off.
func (h *Handoff) raceEnd(k uint8, m []byte, light bool, err error, elapsed time.Duration) Flusher {
	h.mu.Lock()
	if h.won {
		h.mu.Unlock()
		return nil // the loser, ended before it could be cancelled
	}
	h.out--
	l, o := &h.legs[k], &h.legs[1-k]
	l.s, l.uq = nil, nil
	win := light || (err == nil && m[3]&0xF != dns.RcodeServerFailure && m[3]&0xF != dns.RcodeRefused)
	if err == nil && !light {
		l.ans = l.b.a.take(len(m))
		copy(l.ans, m)
	}
	l.err, l.elapsed = err, elapsed
	if !win {
		h.ended = append(h.ended, k)
		done := h.out == 0
		h.mu.Unlock()
		if done {
			h.cb.AsyncHandoff(h)
		}
		return nil
	}
	h.won = true
	os, oid, ouq := o.s, o.id, o.uq
	o.s, o.uq = nil, nil
	h.mu.Unlock()
	if ouq != nil && os.cancelAsync(oid, ouq) {
		putUDPQuery(ouq)
	}
	if light {
		return h.answer(k, m, elapsed)
	}
	h.ended = append(h.ended[:0], k) // only the winner's answer is judged
	h.cb.AsyncHandoff(h)
	return nil
}

// handoff ends the async query uq with err (it is no longer pending).
func (p *udpPool) handoff(uq *udpQuery, err error) {
	h, k := uq.async, uq.leg
	elapsed := time.Since(uq.sent)
	putUDPQuery(uq)
	if h.n == 2 {
		h.raceEnd(k, nil, false, err, elapsed)
		return
	}
	l := &h.legs[0]
	l.ans, l.err, l.elapsed = nil, err, elapsed
	h.cb.AsyncHandoff(h)
}

// cancelAsync withdraws a race's losing leg; false when it is ending
// already (delivered or failed meanwhile).
func (s *udpSock) cancelAsync(id uint16, uq *udpQuery) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending[id] != uq {
		return false
	}
	delete(s.pending, id)
	s.abandon(id)
	s.closeIfDrainedLocked()
	return true
}

// armSweepLocked starts the sweep of s's async queries if it is not
// running (s.mu held); the sweep runs again while any are pending.
func (s *udpSock) armSweepLocked() {
	if s.sweeping || s.dead {
		return
	}
	s.sweeping = true
	if s.sweepT == nil {
		s.sweepT = time.AfterFunc(udpSweep, s.sweep)
	} else {
		s.sweepT.Reset(udpSweep)
	}
}

// sweep does for s's async queries what udpPool.exchange's timer does for
// a waiting one: at each expired RTO it sends the query again if it was
// most likely lost (lost), and doubles the RTO; at the attempt's deadline,
// or when the root context ends, it hands the query off. One timer per
// socket, not one per query.
func (s *udpSock) sweep() {
	now := time.Now()
	nowN := now.UnixNano()
	var failed []*udpQuery
	flush := false
	waiting := false // an async query stays pending: sweep again
	s.mu.Lock()
	for id, uq := range s.pending { // bounded by maxPending
		h := uq.async
		if h == nil {
			continue
		}
		err := h.root.Err()
		if err == nil && uq.due > nowN {
			waiting = true
			continue
		}
		if err == nil && !now.Before(h.deadline) {
			err = context.DeadlineExceeded
			if uq.mismatch {
				err = fmt.Errorf("%w: an answer to another question came with this ID", errMismatch)
			}
		}
		if err != nil {
			delete(s.pending, id)
			s.abandon(id)
			uq.err = err
			failed = append(failed, uq)
			continue
		}
		waiting = true
		if s.expiredLocked(uq, nowN) {
			s.p.retransmits.Inc()
			flush = s.queue(id, uq, uq.q) || flush
		}
		uq.rto = min(2*uq.rto, udpMaxRTO)
		uq.due = nowN + int64(min(jitter(uq.rto), h.deadline.Sub(now)))
	}
	s.closeIfDrainedLocked()
	s.sweeping = false
	if waiting {
		s.armSweepLocked()
	}
	s.mu.Unlock()
	if flush {
		s.flush()
	}
	for _, uq := range failed {
		s.p.handoff(uq, uq.err)
	}
}
