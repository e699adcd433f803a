// Package verdicts caches authentication verdicts by the sha256 of the
// credential: accepted ones until min(the credential's expiry, an accept
// TTL), rejections for a reject TTL. Outages are not verdicts and are never
// stored. The cache is bounded: when full, expired entries go first, and
// if none has expired the cache starts over (an attacker spraying tokens
// costs re-verification, never unbounded memory).
package verdicts

import (
	"crypto/sha256"
	"sync"
	"time"
)

// Cache holds verdicts of type V. Safe for concurrent use.
type Cache[V any] struct {
	acceptTTL, rejectTTL time.Duration
	max                  int

	mu   sync.Mutex
	m    map[[32]byte]entry[V]
	hits int
}

type entry[V any] struct {
	v       V
	err     error
	expires time.Time
}

// New returns a cache of at most max verdicts.
func New[V any](acceptTTL, rejectTTL time.Duration, max int) *Cache[V] {
	return &Cache[V]{acceptTTL: acceptTTL, rejectTTL: rejectTTL, max: max, m: map[[32]byte]entry[V]{}}
}

// Key is the cache key of a credential.
func Key(credential string) [32]byte { return sha256.Sum256([]byte(credential)) }

// Get returns the verdict of key still valid at now; keep, when not nil,
// can refuse a cached verdict (e.g. one of another issuer).
func (c *Cache[V]) Get(key [32]byte, now time.Time, keep func(V, error) bool) (V, error, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	if !ok || !now.Before(e.expires) || keep != nil && !keep(e.v, e.err) {
		var zero V
		return zero, nil, false
	}
	c.hits++
	return e.v, e.err, true
}

// Put stores a verdict: err == nil accepts until min(exp, now+acceptTTL)
// (a zero exp means no expiry of its own); otherwise it is a rejection
// kept for rejectTTL.
func (c *Cache[V]) Put(key [32]byte, v V, err error, exp, now time.Time) {
	e := entry[V]{v: v, err: err, expires: now.Add(c.rejectTTL)}
	if err == nil {
		e.expires = now.Add(c.acceptTTL)
		if !exp.IsZero() && exp.Before(e.expires) {
			e.expires = exp
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= c.max {
		for k, old := range c.m {
			if !now.Before(old.expires) {
				delete(c.m, k)
			}
		}
		if len(c.m) >= c.max {
			clear(c.m)
		}
	}
	c.m[key] = e
}

// Clear forgets every verdict (the configuration that gave them changed).
func (c *Cache[V]) Clear() {
	c.mu.Lock()
	clear(c.m)
	c.mu.Unlock()
}

// Hits is how many Gets were answered from the cache.
func (c *Cache[V]) Hits() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hits
}
