package upstream

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/svcdns/svc/dataplane/wire"
)

// errRcode marks an answer that counts as a failure (SERVFAIL, REFUSED).
var errRcode = errors.New("upstream failure rcode")

// upstream is one server of a group.
type upstream struct {
	name   string // as configured; reported to the caller and in metrics
	t      transport
	zeroID bool // DoH and DoQ carry message ID 0 on the wire
	m      upstreamMetrics
	srtt   atomic.Int64 // smoothed RTT in ns for rtt_weighted; 0 = unknown
}

// initialRTT is assumed for a server not yet measured, so new servers get
// a fair share of queries; penalties stack failures on top of the timeout.
const (
	initialRTT = 50 * time.Millisecond
	maxSRTT    = 30 * time.Second
)

func (u *upstream) rtt() time.Duration {
	if v := u.srtt.Load(); v > 0 {
		return time.Duration(v)
	}
	return initialRTT
}

// observe folds a sample into the smoothed RTT (weight 1/4, like TCP's
// SRTT); a failure counts as a sample of the timeout plus the current
// value, so a failing server loses weight quickly and regains it slowly.
func (u *upstream) observe(sample time.Duration, failed bool, timeout time.Duration) {
	for range 4 { // bounded CAS retries; losing an update under contention is harmless
		old := u.srtt.Load()
		cur := time.Duration(old)
		if cur <= 0 {
			cur = initialRTT
		}
		var next time.Duration
		if failed {
			next = min(cur+timeout, maxSRTT)
		} else {
			next = cur - cur/4 + sample/4
		}
		if u.srtt.CompareAndSwap(old, int64(max(next, time.Microsecond))) {
			return
		}
	}
}

// group is one upstream group.
type group struct {
	name     string
	strategy Strategy
	timeout  time.Duration
	ups      []*upstream
	bufs     *bufPool
	// coalesced counts queries answered by another's identical question
	// in flight (flights).
	coalesced prometheus.Counter
}

// result of one attempt: resp may be set with err (a SERVFAIL answer).
// raw says whether the answer's bytes were copied to the caller's raw
// buffer (forward).
type result struct {
	resp *dns.Msg
	up   *upstream
	err  error
	raw  bool
	// light: a good answer left unparsed (resp nil): its bytes, copied to
	// the caller's raw buffer, passed wire.ScanAnswer (see exchangeBuf).
	light bool
}

func (r result) ok() bool { return r.err == nil && (r.resp != nil || r.light) }

// forward sends the packed query to the group's servers by its strategy.
// When every server fails it returns the last answer received (such as a
// SERVFAIL) without error, or else the last error. With raw not nil, a
// good answer's bytes as received are also copied to *raw (result.raw),
// except from a race.
func (g *group) forward(ctx context.Context, wire []byte, q dns.Question, raw *[]byte) result {
	var order []*upstream
	var last result
	switch g.strategy {
	case ParallelBest:
		if len(g.ups) >= 2 {
			i, j := g.racePair()
			r := g.race(ctx, g.ups[i], g.ups[j], wire, q)
			if r.ok() {
				return r
			}
			last = r
			if ctx.Err() != nil {
				break // the caller gave up: no point asking the others
			}
			order = make([]*upstream, 0, len(g.ups)-2)
			for k, u := range g.ups {
				if k != i && k != j {
					order = append(order, u)
				}
			}
		} else {
			order = g.ups
		}
	case Strict:
		order = g.ups
	case Random:
		order = make([]*upstream, len(g.ups))
		copy(order, g.ups)
		rand.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
	case RTTWeighted:
		order = weightedOrder(g.ups)
	}
	return g.try(ctx, order, wire, q, raw, last)
}

// try asks the servers of order in turn until one gives a good answer;
// last is the outcome of what was asked before (none: the zero result).
func (g *group) try(ctx context.Context, order []*upstream, wire []byte, q dns.Question, raw *[]byte, last result) result {
	for _, u := range order {
		actx, dc := withDeadline(ctx, time.Now().Add(g.timeout))
		r := g.attempt(actx, u, g.bufs.fill(wire), q, raw)
		dc.Release()
		if r.ok() {
			return r
		}
		last = keepAnswer(last, r)
		if ctx.Err() != nil {
			break
		}
	}
	if last.resp != nil {
		last.err = nil
		return last
	}
	if last.err == nil {
		last.err = ctx.Err()
	}
	if last.err == nil {
		last.err = errors.New("no servers")
	}
	last.err = fmt.Errorf("upstream group %q: every server failed, last: %w", g.name, last.err)
	return last
}

// keepAnswer prefers a failed answer (it can be given to the client) over
// a later error.
func keepAnswer(last, r result) result {
	if r.resp == nil && last.resp != nil {
		return last
	}
	return r
}

// racePair draws the two distinct servers a parallel_best race asks.
func (g *group) racePair() (i, j int) {
	i = rand.IntN(len(g.ups))
	j = rand.IntN(len(g.ups) - 1)
	if j >= i {
		j++
	}
	return i, j
}

// race asks a and b at once within one timeout and returns the first good
// answer; the loser is cancelled.
func (g *group) race(ctx context.Context, a, b *upstream, wire []byte, q dns.Question) result {
	rctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	ch := make(chan result, 2) // buffered: the loser never blocks
	// The copies are made here: the loser may run on after this returns,
	// when wire already belongs to another query.
	ba, bb := g.bufs.fill(wire), g.bufs.fill(wire)
	go func() { ch <- g.attempt(rctx, a, ba, q, nil) }()
	go func() { ch <- g.attempt(rctx, b, bb, q, nil) }()
	var last result
	for range 2 {
		r := <-ch
		if r.ok() {
			return r
		}
		last = keepAnswer(last, r)
	}
	return last
}

// weightedOrder draws servers without replacement, each with probability
// proportional to 1/srtt.
func weightedOrder(ups []*upstream) []*upstream {
	rest := make([]*upstream, len(ups))
	copy(rest, ups)
	out := make([]*upstream, 0, len(ups))
	for len(rest) > 0 {
		total := 0.0
		for _, u := range rest {
			total += 1 / u.rtt().Seconds()
		}
		x := rand.Float64() * total
		k := len(rest) - 1
		for i, u := range rest {
			x -= 1 / u.rtt().Seconds()
			if x < 0 {
				k = i
				break
			}
		}
		out = append(out, rest[k])
		rest = append(rest[:k], rest[k+1:]...)
	}
	return out
}

// attempt sends the query in b (which it returns to the pool) to one
// server and accounts for the outcome; a good answer's bytes are copied
// to *raw when raw is not nil.
func (g *group) attempt(ctx context.Context, u *upstream, b *attemptBuf, q dns.Question, raw *[]byte) result {
	defer g.bufs.put(b)
	id := uint16(0)
	if !u.zeroID {
		id = uint16(rand.Uint32()) // fresh random ID per attempt against spoofing
	}
	start := time.Now()
	resp, wire, err := exchangeBuf(ctx, u.t, b, id, q, raw != nil)
	return g.judge(u, resp, wire, err, time.Since(start), raw)
}

// judge accounts for the outcome of one exchange with u that took elapsed
// and makes it a result; a good answer's bytes are copied to *raw when raw
// is not nil.
func (g *group) judge(u *upstream, resp *dns.Msg, wire []byte, err error, elapsed time.Duration, raw *[]byte) result {
	if err != nil {
		if reason := classify(err); reason != "" {
			u.m.errors[reason].Inc()
			u.observe(elapsed, true, g.timeout)
		}
		return result{up: u, err: fmt.Errorf("%s: %w", u.name, err)}
	}
	u.m.latency.Observe(elapsed.Seconds())
	if resp == nil { // light: a NOERROR or NXDOMAIN answer, unparsed
		u.observe(elapsed, false, g.timeout)
		*raw = append((*raw)[:0], wire...)
		return result{up: u, raw: true, light: true}
	}
	switch resp.Rcode {
	case dns.RcodeServerFailure, dns.RcodeRefused:
		reason := reasonServfail
		if resp.Rcode == dns.RcodeRefused {
			reason = reasonRefused
		}
		u.m.errors[reason].Inc()
		u.observe(elapsed, true, g.timeout)
		return result{resp: resp, up: u, err: fmt.Errorf("%s: %w %s", u.name, errRcode, dns.RcodeToString[resp.Rcode])}
	}
	u.observe(elapsed, false, g.timeout)
	if raw != nil {
		*raw = append((*raw)[:0], wire...)
	}
	return result{resp: resp, up: u, raw: raw != nil}
}

// classify maps an exchange error to a metric reason; "" for a cancelled
// race, which is not the server's fault.
func classify(err error) string {
	switch {
	case errors.Is(err, context.Canceled):
		return ""
	case errors.Is(err, context.DeadlineExceeded):
		return reasonTimeout
	case errors.Is(err, errBootstrap):
		return reasonBootstrap
	case errors.Is(err, errMismatch):
		return reasonMismatch
	case errors.Is(err, errMalformed):
		return reasonMalformed
	case errors.Is(err, errHTTP):
		return reasonHTTP
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return reasonTimeout
	}
	return reasonNetwork
}

// bufPool recycles the per-attempt buffers: the query copy, and the
// answer's buffer (a msgBuf, taken from a size class once the answer's
// size is known and released with the attemptBuf).
type bufPool struct{ p sync.Pool }

type attemptBuf struct {
	q []byte
	a msgBuf
}

func newBufPool() *bufPool {
	return &bufPool{p: sync.Pool{New: func() any {
		return &attemptBuf{q: make([]byte, 0, 512)}
	}}}
}

// put releases b's answer buffer and returns b to the pool.
func (bp *bufPool) put(b *attemptBuf) {
	b.a.release()
	bp.p.Put(b)
}

// fill returns a pooled buffer holding a copy of wire.
func (bp *bufPool) fill(wire []byte) *attemptBuf {
	b := bp.p.Get().(*attemptBuf)
	b.q = append(b.q[:0], wire...)
	return b
}

// exchangeWire sends wire with the given ID and returns the parsed answer,
// refused unless it answers exactly this ID and question.
func exchangeWire(ctx context.Context, t transport, bp *bufPool, wire []byte, id uint16, q dns.Question) (*dns.Msg, error) {
	b := bp.fill(wire)
	defer bp.put(b)
	m, _, err := exchangeBuf(ctx, t, b, id, q, false)
	return m, err
}

// exchangeBuf is exchangeWire on a filled buffer; it also returns the
// answer's bytes, b's until it is put back.
//
// With light, a NOERROR or NXDOMAIN answer to exactly this ID and question
// whose bytes wire.ScanAnswer accepts (records of the common types, well
// formed, no extended RCODE, not truncated) is returned unparsed, with a
// nil message: a cache miss's answer is then kept as bytes and never
// unpacked (miekg/dns's Unpack was about 6% of the server's CPU on a miss),
// and what ScanAnswer accepts unpacks without error should the caller
// need the records after all.
func exchangeBuf(ctx context.Context, t transport, b *attemptBuf, id uint16, q dns.Question, light bool) (*dns.Msg, []byte, error) {
	binary.BigEndian.PutUint16(b.q, id)
	raw, err := t.exchange(ctx, b.q, &b.a)
	if err != nil {
		return nil, nil, err
	}
	return checkAnswer(b.q, raw, q, light)
}

// checkAnswer is exchangeBuf's verdict on raw, the answer to query (whose
// ID is the one sent).
func checkAnswer(query, raw []byte, q dns.Question, light bool) (*dns.Msg, []byte, error) {
	id := binary.BigEndian.Uint16(query) // the transport may have drawn another
	if light {
		if a, ok := wire.ScanAnswer(raw); ok && a.Flags&(wire.FlagQR|wire.FlagTC) == wire.FlagQR &&
			(a.Rcode == dns.RcodeSuccess || a.Rcode == dns.RcodeNameError) &&
			binary.BigEndian.Uint16(raw) == id && sameQuestion(query, raw) {
			return nil, raw, nil
		}
	}
	resp := new(dns.Msg)
	if err := resp.Unpack(raw); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", errMalformed, err)
	}
	if resp.Id != id || !resp.Response || len(resp.Question) != 1 {
		return nil, nil, fmt.Errorf("%w: id %d, %d questions", errMismatch, resp.Id, len(resp.Question))
	}
	rq := resp.Question[0]
	if rq.Qtype != q.Qtype || rq.Qclass != q.Qclass || !strings.EqualFold(rq.Name, q.Name) {
		return nil, nil, fmt.Errorf("%w: %s %s for %s %s", errMismatch, rq.Name, dns.TypeToString[rq.Qtype], q.Name, dns.TypeToString[q.Qtype])
	}
	return resp, raw, nil
}
