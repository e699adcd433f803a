package dataplane

import (
	"context"
	"net/netip"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/dataplane/upstream"
	"github.com/svcdns/svc/dataplane/wire"
)

// The async lane of a UDP cache miss (docs/dataplane.md, "Async misses").
// The read loop sends the miss's query upstream itself (StartRaw, queued
// and written with the batch's other misses) and reads on; no goroutine
// waits for the answer. The upstream socket's reader gets it and, for a
// light answer (the common case), finishes the query right there
// (Query.AsyncLight): the rest of the pipeline, the encoding, and the
// answer queued on the listener's replier, sent with the other answers
// read in the same wake-up. Anything else is handed to a worker
// (Query.AsyncHandoff), which goes on with upstream.Resolver.Resume as
// the synchronous path would have after the first attempt. A query on the
// lane holds the same pending budget (workers.admit) and s.wg count as a
// worker's.

// AsyncForwarder is a RawForwarder that can also start a query without
// waiting for its answer (upstream.Resolver).
type AsyncForwarder interface {
	RawForwarder
	StartRaw(root context.Context, deadline time.Time, group string, req *dns.Msg, client netip.Addr, batch *upstream.AsyncBatch, cb upstream.AsyncCallback) bool
	Resume(ctx context.Context, h *upstream.Handoff, raw []byte) (resp *dns.Msg, rawOut []byte, up string, err error)
}

var _ AsyncForwarder = (*upstream.Resolver)(nil)

// startAsync sends q upstream on the async lane; false when q cannot go
// that way (it is then detached to a worker as before). Once it reports
// true, q belongs to the lane: the caller must not touch it again.
func (s *Server) startAsync(q *Query) bool {
	l := q.lane
	if l == nil || l.reply == nil || q.stale != nil || q.chase != nil || s.cfg.SyncMisses {
		return false
	}
	af, ok := q.snap.in.Forwarder.(AsyncForwarder)
	if !ok {
		return false
	}
	lower := q.fwdLower()
	var nb [4 * wire.MaxNameLen]byte // escapes are at most 4 bytes per byte
	name := string(wire.AppendPresentation(nb[:0], lower))
	if r := q.snap.in.Router; r != nil {
		if _, cond := r.Route(name); cond {
			return false // not cached: the synchronous path handles it
		}
	}
	w := s.workers
	prefix, cost := prefixOf(q.Client.Addr()), pendingCost(q)
	w.mu.Lock()
	ok = w.admit(prefix, cost)
	w.mu.Unlock()
	if !ok {
		return false // the worker's dispatch sheds it
	}
	group, client := q.forwardGroup, q.Client.Addr()
	q.UpstreamGroup = group
	q.next, q.detachable, q.srv, q.replier = s.upIdx, false, s, l.reply
	q.jobPrefix, q.jobCost = prefix, cost
	q.upDeadline = q.Start.Add(s.cfg.UpstreamTimeout)
	rm := reqMsgs.Get().(*reqMsg)
	req := q.upstreamRequest(name, rm)
	s.wg.Add(1)
	started := af.StartRaw(s.ctx, q.upDeadline, group, req, client, &l.batch, q)
	rm.putRaw()
	if !started {
		s.wg.Done()
		w.release(prefix, cost)
		q.detachable = true
		return false
	}
	l.started = true
	return true
}

// AsyncLight finishes q with its upstream's light answer, on the upstream
// socket's reader (upstream.AsyncCallback); the answer is queued on the
// listener's replier, which the reader flushes once it has read what came.
func (q *Query) AsyncLight(raw []byte, up string) upstream.Flusher {
	s, r := q.srv, q.replier
	q.asyncRaw, q.asyncUp = raw, up
	s.run(q) // from the upstream stage
	q.asyncRaw = nil
	s.workers.release(q.jobPrefix, q.jobCost)
	b := s.encode(q)
	if b == nil {
		putQuery(q)
		s.wg.Done()
		return nil
	}
	if r.enqueue(q, b, q.replyAddr, q.replyLocal) {
		return r
	}
	return nil
}

// AsyncHandoff gives q to a worker, which resumes its forward
// (upstream.AsyncCallback).
func (q *Query) AsyncHandoff(h *upstream.Handoff) {
	q.handoff = h
	q.srv.hand(job{q: q, r: q.replier, addr: q.replyAddr, local: q.replyLocal, prefix: q.jobPrefix, cost: q.jobCost})
}

// hand gives j, already admitted, to an idle worker or a new one; unlike
// dispatch it cannot refuse: the job holds its budget and an s.wg count.
func (s *Server) hand(j job) {
	w := s.workers
	select {
	case w.work <- j:
		return
	default:
	}
	w.mu.Lock()
	w.n++
	w.peak = max(w.peak, w.n)
	w.wg.Add(1)
	w.mu.Unlock()
	go s.worker(j)
}
