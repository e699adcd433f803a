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
	j := job{q: q, r: l.reply, addr: l.addr, local: l.local, prefix: prefixOf(q.Client.Addr()), cost: pendingCost(q)}
	w := s.workers
	w.mu.Lock()
	ok = w.admit(j.prefix, j.cost)
	w.mu.Unlock()
	if !ok {
		return false // the worker's dispatch sheds it
	}
	group, client := q.forwardGroup, q.Client.Addr()
	q.UpstreamGroup = group
	q.next, q.detachable = s.upIdx, false
	q.async.job, q.async.deadline = j, q.Start.Add(s.cfg.UpstreamTimeout)
	rm := reqMsgs.Get().(*reqMsg)
	req := q.upstreamRequest(name, rm)
	s.wg.Add(1)
	started := af.StartRaw(s.ctx, q.async.deadline, group, req, client, &l.batch, q)
	rm.putRaw()
	if !started {
		s.wg.Done()
		w.release(j.prefix, j.cost)
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
	j := &q.async.job
	r := j.r
	q.async.raw, q.async.up = raw, up
	b := r.s.finishDetached(j) // from the upstream stage
	if b != nil && r.enqueue(q, b, j.addr, j.local) {
		return r
	}
	return nil
}

// AsyncHandoff gives q to a worker, which resumes its forward
// (upstream.AsyncCallback).
func (q *Query) AsyncHandoff(h *upstream.Handoff) {
	q.async.handoff = h
	q.async.job.r.s.hand(q.async.job)
}

// asyncAnswer is the upstream stage of a query back from the async lane:
// its light answer (AsyncLight), or the rest of its forward on a worker
// after a handoff, within the query's first deadline.
func (s *Server) asyncAnswer(q *Query) stageResult {
	group := q.UpstreamGroup
	if raw := q.async.raw; raw != nil {
		q.async.raw = nil
		s.upHealth.result(group, true, false, time.Now())
		return s.upstreamAnswer(q, q.fwdLower(), "", nil, raw, q.async.up, nil)
	}
	h := q.async.handoff
	q.async.handoff = nil
	rm := reqMsgs.Get().(*reqMsg)
	defer rm.putRaw()
	ctx := upstream.NewDeadline(s.ctx, q.async.deadline)
	resp, raw, up, err := q.snap.in.Forwarder.(AsyncForwarder).Resume(ctx, h, rm.raw)
	ctx.Release()
	if raw != nil {
		rm.raw = raw[:0]
	}
	s.upHealth.result(group, err == nil && (resp != nil || raw != nil), false, time.Now())
	return s.upstreamAnswer(q, q.fwdLower(), "", resp, raw, up, err)
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
