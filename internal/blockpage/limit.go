package blockpage

import (
	"net/netip"
	"sync"
	"time"
)

// maxLimiterClients bounds the limiter's memory (about 100 bytes a client).
const maxLimiterClients = 100000

// limiter counts requests per client in a one-minute window that starts
// with the client's first request (blockPage.rateLimit).
type limiter struct {
	mu        sync.Mutex
	clients   map[netip.Addr]*window
	lastSweep time.Time
	max       int
}

type window struct {
	start time.Time
	n     int
}

func newLimiter() *limiter {
	return &limiter{clients: map[netip.Addr]*window{}, max: maxLimiterClients}
}

// allow counts one request of client against limit per minute; when over,
// it says how long until the client's window ends. limit <= 0 allows all.
func (l *limiter) allow(client netip.Addr, limit int, now time.Time) (bool, time.Duration) {
	if limit <= 0 {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	w, ok := l.clients[client]
	if ok && now.Sub(w.start) >= time.Minute {
		w.start, w.n = now, 0
	}
	if !ok {
		l.makeRoom(now)
		w = &window{start: now}
		l.clients[client] = w
	}
	if w.n >= limit {
		return false, w.start.Add(time.Minute).Sub(now)
	}
	w.n++
	return true, 0
}

// makeRoom keeps the map under max: expired windows go (a full sweep at
// most once a second, so a flood of new addresses cannot make every
// request scan the map), else one arbitrary client is forgotten.
func (l *limiter) makeRoom(now time.Time) {
	if len(l.clients) < l.max {
		return
	}
	if now.Sub(l.lastSweep) >= time.Second {
		l.lastSweep = now
		for a, w := range l.clients {
			if now.Sub(w.start) >= time.Minute {
				delete(l.clients, a)
			}
		}
	}
	for a := range l.clients {
		if len(l.clients) < l.max {
			break
		}
		delete(l.clients, a)
	}
}

func (l *limiter) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.clients)
}
