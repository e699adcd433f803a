package auth

import (
	"sync"
	"time"
)

// Lockout limits login failures: 5 per client IP lock the IP for 5 minutes,
// 10 per user lock the user for 15 minutes.
type Lockout struct {
	clock Clock

	mu   sync.Mutex
	ip   map[string]*failures
	user map[string]*failures
}

type failures struct {
	n           int
	first       time.Time
	lockedUntil time.Time
}

type lockPolicy struct {
	limit int
	lock  time.Duration
}

var (
	ipPolicy   = lockPolicy{limit: 5, lock: 5 * time.Minute}
	userPolicy = lockPolicy{limit: 10, lock: 15 * time.Minute}
)

// maxLockEntries bounds each table so that a spray of usernames or
// addresses cannot grow memory without limit.
const maxLockEntries = 50000

// NewLockout returns an empty lockout table.
func NewLockout(clock Clock) *Lockout {
	if clock == nil {
		clock = time.Now
	}
	return &Lockout{clock: clock, ip: map[string]*failures{}, user: map[string]*failures{}}
}

// Locked returns how long the IP or the user stays locked (0: not locked).
func (l *Lockout) Locked(ip, user string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock()
	var wait time.Duration
	for _, f := range []*failures{l.ip[ip], l.user[user]} {
		if f != nil && f.lockedUntil.After(now) {
			wait = max(wait, f.lockedUntil.Sub(now))
		}
	}
	return wait
}

// Fail records one failed login.
func (l *Lockout) Fail(ip, user string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock()
	record(l.ip, ip, ipPolicy, now)
	if user != "" {
		record(l.user, user, userPolicy, now)
	}
}

// Succeed clears the user's failures after a good login.
func (l *Lockout) Succeed(user string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.user, user)
}

func record(m map[string]*failures, k string, p lockPolicy, now time.Time) {
	f := m[k]
	if f == nil {
		if len(m) >= maxLockEntries {
			prune(m, now, p)
		}
		f = &failures{first: now}
		m[k] = f
	}
	// Failures older than the lock period are forgotten.
	if now.Sub(f.first) > p.lock {
		f.n, f.first = 0, now
	}
	f.n++
	if f.n >= p.limit {
		f.lockedUntil = now.Add(p.lock)
		f.n, f.first = 0, now
	}
}

func prune(m map[string]*failures, now time.Time, p lockPolicy) {
	for k, f := range m {
		if f.lockedUntil.Before(now) && now.Sub(f.first) > p.lock {
			delete(m, k)
		}
	}
	// Still full: forget unlocked entries rather than refuse to count.
	if len(m) >= maxLockEntries {
		for k, f := range m {
			if f.lockedUntil.Before(now) {
				delete(m, k)
			}
		}
	}
}
