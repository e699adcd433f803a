package dataplane

import (
	"sync"
	"sync/atomic"
	"time"
)

// Serve-stale with a failing upstream (RFC 8767): a query with a stale
// answer waits for its upstream at most cache.serveStale.maxWait, the
// client response timer. Once an upstream group has just failed, waiting
// that long again for every query helps nobody: for upstreamDownFor the
// group is remembered as failing and stale answers go out at once, while
// one query at a time (the probe) still refreshes in the background; the
// first answer the group gives ends it. This is what BIND's
// stale-refresh-time does per record set, here per upstream group.
const (
	// upstreamDownAfter consecutive failures (no answer within maxWait, a
	// timeout, a network error) mark a group failing. One: a single
	// missed maxWait already cost a client 1.8 s, and being wrong only
	// means a stale answer for a few seconds.
	upstreamDownAfter = 1
	// upstreamDownFor is how long a failing group is remembered without a
	// successful probe.
	upstreamDownFor = 5 * time.Second
)

// upstreamHealth remembers the groups that failed recently. Only groups
// with failures have an entry; an answer removes it.
type upstreamHealth struct {
	mu sync.Mutex
	g  map[string]*groupFailures
	// n is len(g): with no failures anywhere, the answer of every cache
	// miss is recorded without taking mu.
	n atomic.Int32
}

type groupFailures struct {
	fails   int
	until   time.Time // failing until then, when fails >= upstreamDownAfter
	probing bool      // a probe is in flight
}

// check reports whether group is failing now and, if so, whether the
// caller is to send the probe (at most one in flight).
func (h *upstreamHealth) check(group string, now time.Time) (down, probe bool) {
	if h.n.Load() == 0 {
		return false, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	f := h.g[group]
	if f == nil || f.fails < upstreamDownAfter || !now.Before(f.until) {
		return false, false
	}
	if f.probing {
		return true, false
	}
	f.probing = true
	return true, true
}

// result records the outcome of a query to group; probe says it was the
// probe check handed out.
func (h *upstreamHealth) result(group string, ok, probe bool, now time.Time) {
	if ok && h.n.Load() == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if ok {
		delete(h.g, group)
		h.n.Store(int32(len(h.g)))
		return
	}
	if h.g == nil {
		h.g = make(map[string]*groupFailures)
	}
	f := h.g[group]
	if f == nil {
		f = &groupFailures{}
		h.g[group] = f
		h.n.Store(int32(len(h.g)))
	}
	f.fails++
	if f.fails >= upstreamDownAfter {
		f.until = now.Add(upstreamDownFor)
	}
	if probe {
		f.probing = false
	}
}
