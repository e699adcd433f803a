package blocklist

import (
	"hash/maphash"
	"sync/atomic"
	"unsafe"

	"github.com/svcdns/svc/dataplane/prefetch"
)

// A large list keeps the verdicts it gave recently in a small table
// (issue #27 item 2). Deciding on a name in a million-name list reads the
// filter, a slot and the record, three lines scattered over 30 MiB that a
// server's socket calls evict between queries (with their page walks: the
// prefetch instructions of a batch stalled on them for 4% of the server's
// time in the block workload), and hashes every suffix. Clients ask the
// same names over and over (ads, trackers, the names of the sites they
// use); a cached verdict is one line of a 512 KiB table.
//
// The table is keyed by a seeded hash of the name as given (Match ignores
// case and a trailing dot, so names that differ only in case are cached
// apart, each with the verdict Match gives it): the seed, drawn once per
// process, keeps a client from crafting a name whose key is a blocked
// name's, which would let it cache a verdict for that name. Entries are
// written without locks by every goroutine that matches; a torn entry
// fails its check and counts as a miss. A List is immutable, so a verdict
// stays true for the List's life, and Replace makes a new List with an
// empty table.

// cacheMinBytes: lists smaller than this stay in the CPU's caches and a
// lookup is as cheap as the table's.
const cacheMinBytes = 1 << 20

// cacheSets of cacheWays entries, one cache line a set: 32,768 verdicts in
// 512 KiB, so that 10,000 names asked in turn hit 99% of the time.
const (
	cacheSets = 8192
	cacheWays = 4
)

// cacheSeed keys every list's table; immutable after start.
var cacheSeed = maphash.MakeSeed()

// CacheKey is the key of name (as Match takes it, after the trailing dot
// is cut) in every list's verdict table.
func CacheKey(name []byte) uint64 { return maphash.Bytes(cacheSeed, name) }

func cacheKeyString(name string) uint64 { return maphash.String(cacheSeed, name) }

// cacheEntry holds key^v and v: a reader that finds kv^v == key has v as
// written for key, even if another writer was halfway through the entry.
type cacheEntry struct {
	kv, v atomic.Uint64
}

type cacheSet [cacheWays]cacheEntry

type matchCache struct {
	sets []cacheSet
}

func newMatchCache() *matchCache {
	return &matchCache{sets: make([]cacheSet, cacheSets)}
}

// Packed verdicts: a valid bit (an empty entry has none), the flags, the
// rule kind, the source index plus one, the rule's offset.
const (
	cvValid     = 1 << 63
	cvMatched   = 1 << 62
	cvException = 1 << 61
	cvPlain     = 1 << 60
	cvWhole     = 1 << 59
)

func packMatch(m Match) (uint64, bool) {
	src := m.Source + 1
	if src < 0 || src > 0xffff {
		return 0, false
	}
	v := uint64(cvValid) | uint64(m.Rule.kind)<<48 | uint64(src)<<32 | uint64(m.Rule.off)
	if m.Matched {
		v |= cvMatched
	}
	if m.Exception {
		v |= cvException
	}
	if m.Rule.plain {
		v |= cvPlain
	}
	if m.Whole {
		v |= cvWhole
	}
	return v, true
}

func unpackMatch(v uint64) Match {
	return Match{
		Matched:   v&cvMatched != 0,
		Exception: v&cvException != 0,
		Source:    int(v>>32&0xffff) - 1,
		Rule:      RuleID{kind: uint8(v >> 48), plain: v&cvPlain != 0, off: uint32(v)},
		Whole:     v&cvWhole != 0,
	}
}

func (c *matchCache) set(key uint64) *cacheSet { return &c.sets[key&(cacheSets-1)] }

func (c *matchCache) get(key uint64) (Match, bool) {
	s := c.set(key)
	for i := range s {
		v := s[i].v.Load()
		if v&cvValid != 0 && s[i].kv.Load()^v == key {
			return unpackMatch(v), true
		}
	}
	return Match{}, false
}

func (c *matchCache) has(key uint64) bool {
	_, ok := c.get(key)
	return ok
}

// put stores m for key in an empty way of its set, or over the way the
// key's top bits pick: no recency is kept, so a hit writes nothing.
func (c *matchCache) put(key uint64, m Match) {
	v, ok := packMatch(m)
	if !ok {
		return
	}
	s := c.set(key)
	w := int(key >> 62)
	for i := range s {
		if s[i].v.Load() == 0 {
			w = i
			break
		}
	}
	s[w].v.Store(v)
	s[w].kv.Store(key ^ v)
}

// Cached reports whether the list has its verdict on the name whose
// CacheKey is key: Prefetch and PrefetchRecord have nothing to load for
// it. A list without a table has no verdicts.
func (l *List) Cached(key uint64) bool {
	return l != nil && l.cache != nil && l.cache.has(key)
}

// PrefetchCache starts loading the set of the verdict table that key
// falls in (the first stage of a cached lookup).
func (l *List) PrefetchCache(key uint64) {
	if l != nil && l.cache != nil {
		prefetch.Line(unsafe.Pointer(l.cache.set(key)))
	}
}

// PrefetchVerdict reports whether the list has its verdict on the name
// whose CacheKey is key and, when that verdict names a rule stored in a
// table, starts loading the rule's record, which the caller reads for the
// rule's text (RuleParts), unless the rule is the name itself and the
// caller says it takes the text from the name (nameRule; see NameRule).
func (l *List) PrefetchVerdict(key uint64, nameRule bool) bool {
	if l == nil || l.cache == nil {
		return false
	}
	m, ok := l.cache.get(key)
	if !ok {
		return false
	}
	if nameRule && m.Whole {
		return true
	}
	if k := m.Rule.kind; k != 0 && k&(kindBlockRe|kindExceptRe) == 0 && m.Source >= 0 && m.Source < len(l.sources) {
		if t := l.sources[m.Source].tab; t != nil {
			c, p := t.rec(m.Rule.off)
			prefetch.Line(unsafe.Pointer(&c[p]))
		}
	}
	return true
}
