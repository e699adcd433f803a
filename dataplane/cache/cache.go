// Package cache keeps upstream answers as pre-encoded wire sections so a hit
// is one copy with TTLs rewritten in place. It is sharded, bounded (CLOCK
// eviction), caches negative answers per RFC 2308, prefetches popular names
// before they expire and can serve stale answers per RFC 8767.
package cache

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/dataplane/wire"
)

// Config holds the cache.* settings. Zero durations mean what the spec says.
type Config struct {
	MaxEntries        int           // 0 turns the cache off
	MinTTL            time.Duration // 0 honours record TTLs
	MaxTTL            time.Duration // 0 no limit
	NegativeTTL       time.Duration // cap for NXDOMAIN/NODATA
	PrefetchThreshold int           // hits inside PrefetchWindow; 0 off
	PrefetchWindow    time.Duration
	StaleTTL          time.Duration // how long past expiry an entry may be served; 0 off
	StaleAnswerTTL    time.Duration // TTL of stale answers; 0 means 30s
	StaleMaxWait      time.Duration // wait for upstream before serving stale; 0 means 1800ms
	// Now replaces the clock in tests; nil uses time.Now.
	Now func() time.Time
}

// DefaultConfig returns the spec's defaults.
func DefaultConfig() Config {
	return Config{
		MaxEntries:        200000,
		MinTTL:            5 * time.Second,
		MaxTTL:            24 * time.Hour,
		NegativeTTL:       5 * time.Minute,
		PrefetchThreshold: 5,
		PrefetchWindow:    2 * time.Hour,
		StaleTTL:          72 * time.Hour,
		StaleAnswerTTL:    30 * time.Second,
		StaleMaxWait:      1800 * time.Millisecond,
	}
}

// servfailTTL bounds how long an upstream failure is remembered (RFC 2308 7.1
// allows 5 minutes; a short time keeps a flapping upstream from pinning it).
const servfailTTL = 5 * time.Second

// maxSections bounds the bytes one entry may hold.
const maxSections = 16 << 10

// Flags are the request bits that are part of the key.
type Flags uint8

const (
	FlagDO Flags = 1 << iota // DNSSEC OK
	FlagCD                   // checking disabled
)

// State is the outcome of Get.
type State uint8

const (
	Miss State = iota
	Fresh
	Stale
)

// RefreshFunc re-resolves a name in the background for prefetch. name is the
// lower-cased wire name.
type RefreshFunc func(name string, qtype, qclass uint16, flags Flags)

// Entry is an immutable cached answer; only its counters change.
type Entry struct {
	name       string
	qtype      uint16
	qclass     uint16
	flags      Flags
	hash       uint64
	rcode      int
	ad         bool
	servfail   bool
	caseLoose  bool // see CaseLoose
	sections   []byte
	counts     [3]uint16
	ttl        []uint32  // per record: its TTL at 2i, its TTL's offset in sections at 2i+1
	ttlBuf     [8]uint32 // ttl for up to 4 records, saving an allocation
	stored     int64     // nanoseconds on the cache clock
	expires    int64
	staleUntil int64
	origTTL    int64

	slot        int
	ref         atomic.Bool
	hits        atomic.Int32
	windowStart atomic.Int64
	prefetching atomic.Bool
}

// Rcode returns the response code of the cached answer.
func (e *Entry) Rcode() int { return e.rcode }

// AD reports whether the upstream set Authenticated Data.
func (e *Entry) AD() bool { return e.ad }

// CaseLoose reports whether the sections are an upstream's bytes in which
// a name may keep its own case where the packed records would read in the
// question's (the upstream did not compress as miekg/dns does): a client
// whose question is not in lower case must get them unpacked and packed
// again (Unpack keeps the case, the packing then gives the question's).
func (e *Entry) CaseLoose() bool { return e.caseLoose }

// Sections returns the encoded sections with the TTLs the upstream gave
// (AppendSections rewrites them), for the answer to the query that
// stored the entry. The bytes are the entry's: read only.
func (e *Entry) Sections() []byte { return e.sections }

// Counts returns the answer, authority and additional counts (OPT excluded).
func (e *Entry) Counts() (an, ns, ar uint16) { return e.counts[0], e.counts[1], e.counts[2] }

// SectionsLen is the number of bytes AppendSections appends.
func (e *Entry) SectionsLen() int { return len(e.sections) }

// AppendSections appends the encoded sections with TTLs decremented by the
// time spent in the cache, or set to staleTTL for a stale answer. The bytes
// assume the question (same length as the cached one) sits at offset 12.
func (e *Entry) AppendSections(dst []byte, now time.Time, c *Cache, stale bool) []byte {
	base := len(dst)
	dst = append(dst, e.sections...)
	// now may be a little earlier than the entry was stored (NowOr: the
	// query's receive time, and another query stored the entry since):
	// that is no time elapsed, not a wrapped-around age.
	elapsed := uint32(max(c.clock(now)-e.stored, 0) / int64(time.Second))
	staleTTL := uint32(c.staleAnswerTTL / time.Second)
	for i := 0; i+1 < len(e.ttl); i += 2 {
		t := staleTTL
		if !stale {
			t = 0
			if e.ttl[i] > elapsed {
				t = e.ttl[i] - elapsed
			}
		}
		binary.BigEndian.PutUint32(dst[base+int(e.ttl[i+1]):], t)
	}
	return dst
}

type shard struct {
	mu   sync.RWMutex
	m    map[uint64]*Entry
	ring []*Entry
	hand int
	max  int
}

// Cache is safe for concurrent use.
type Cache struct {
	cfg            Config
	staleAnswerTTL time.Duration
	seed           maphash.Seed
	shards         []shard
	mask           uint64
	base           time.Time
	refresh        RefreshFunc
}

// New builds a cache; it returns nil when cfg.MaxEntries is 0, and every
// method of a nil *Cache is a no-op miss.
func New(cfg Config, refresh RefreshFunc) *Cache {
	if cfg.MaxEntries <= 0 {
		return nil
	}
	if cfg.StaleAnswerTTL <= 0 {
		cfg.StaleAnswerTTL = 30 * time.Second
	}
	if cfg.StaleMaxWait <= 0 {
		cfg.StaleMaxWait = 1800 * time.Millisecond
	}
	n := 1
	for n < 4*runtime.GOMAXPROCS(0) && n < 256 && cfg.MaxEntries/(n*2) >= 64 {
		n *= 2
	}
	c := &Cache{
		cfg:            cfg,
		staleAnswerTTL: cfg.StaleAnswerTTL,
		seed:           maphash.MakeSeed(),
		shards:         make([]shard, n),
		mask:           uint64(n - 1),
		base:           time.Now(),
		refresh:        refresh,
	}
	per := (cfg.MaxEntries + n - 1) / n
	for i := range c.shards {
		c.shards[i] = shard{m: make(map[uint64]*Entry, min(per, 1024)), max: per}
	}
	return c
}

// Config returns the effective configuration.
func (c *Cache) Config() Config {
	if c == nil {
		return Config{}
	}
	return c.cfg
}

// Now reads the cache clock.
func (c *Cache) Now() time.Time { return c.NowOr(time.Time{}) }

// NowOr is the cache's own clock when it has one (Config.Now, for tests),
// else t, or the time now when t is zero: the pipeline passes the time its
// query was received, read once per receive batch, instead of reading the
// clock again for every cache hit (two clock reads per hit were 1.9% of a
// server's core on the cache workload).
func (c *Cache) NowOr(t time.Time) time.Time {
	if c != nil && c.cfg.Now != nil {
		return c.cfg.Now()
	}
	if t.IsZero() {
		return time.Now()
	}
	return t
}

func (c *Cache) clock(t time.Time) int64 { return t.Sub(c.base).Nanoseconds() }

func (c *Cache) hash(name []byte, qtype, qclass uint16, flags Flags) uint64 {
	h := maphash.Bytes(c.seed, name)
	h ^= (uint64(qtype)<<24 | uint64(qclass)<<8 | uint64(flags)) * 0x9E3779B97F4A7C15
	return h
}

// Get looks a question up. name is the lower-cased wire name. A Fresh hit may
// start a background prefetch.
func (c *Cache) Get(name []byte, qtype, qclass uint16, flags Flags, now time.Time) (*Entry, State) {
	if c == nil {
		return nil, Miss
	}
	h := c.hash(name, qtype, qclass, flags)
	sh := &c.shards[h&c.mask]
	sh.mu.RLock()
	e := sh.m[h]
	sh.mu.RUnlock()
	if e == nil || e.name != string(name) || e.qtype != qtype || e.qclass != qclass || e.flags != flags {
		return nil, Miss
	}
	t := c.clock(now)
	if t >= e.expires {
		if t < e.staleUntil {
			e.ref.Store(true)
			return e, Stale
		}
		return nil, Miss
	}
	e.ref.Store(true)
	c.countHit(e, t)
	return e, Fresh
}

// countHit implements prefetch: an entry hit PrefetchThreshold times inside
// PrefetchWindow is refreshed once it is in the last tenth of its TTL.
func (c *Cache) countHit(e *Entry, t int64) {
	if c.cfg.PrefetchThreshold <= 0 || c.refresh == nil || e.servfail {
		return
	}
	ws := e.windowStart.Load()
	if t-ws > int64(c.cfg.PrefetchWindow) && e.windowStart.CompareAndSwap(ws, t) {
		e.hits.Store(0)
	}
	hits := e.hits.Add(1)
	remaining := e.expires - t
	if int(hits) >= c.cfg.PrefetchThreshold && (remaining*10 <= e.origTTL || remaining <= int64(time.Second)) &&
		e.prefetching.CompareAndSwap(false, true) {
		go c.refresh(e.name, e.qtype, e.qclass, e.flags)
	}
}

// Put stores an upstream answer for the question. Answers other than
// NOERROR, NXDOMAIN and SERVFAIL are not cached; a SERVFAIL never replaces an
// answer that may still be served stale.
func (c *Cache) Put(name []byte, qtype, qclass uint16, flags Flags, resp *dns.Msg, now time.Time) error {
	_, err := c.Store(name, qtype, qclass, flags, resp, now)
	return err
}

// Store is Put returning the entry made (nil when the answer is not
// cached), so that the caller can answer from its encoded sections
// (Sections) instead of packing resp again.
func (c *Cache) Store(name []byte, qtype, qclass uint16, flags Flags, resp *dns.Msg, now time.Time) (*Entry, error) {
	return c.StoreWire(name, qtype, qclass, flags, resp, nil, now)
}

// StoreWire is Store given also the answer's bytes as the upstream sent
// them (nil: not at hand): when they can be kept as they are
// (rawSections), the entry keeps them instead of packing resp again.
// resp must have been unpacked from raw (its ID and OPT may differ).
func (c *Cache) StoreWire(name []byte, qtype, qclass uint16, flags Flags, resp *dns.Msg, raw []byte, now time.Time) (*Entry, error) {
	if c == nil || resp == nil {
		return nil, nil
	}
	if len(name) == 0 || len(name) > wire.MaxNameLen {
		return nil, fmt.Errorf("cache put: bad name length %d", len(name))
	}
	e := &Entry{
		qtype:  qtype,
		qclass: qclass,
		flags:  flags,
		rcode:  resp.Rcode,
		ad:     resp.AuthenticatedData,
	}
	var extra []dns.RR
	for _, rr := range resp.Extra {
		if rr.Header().Rrtype != dns.TypeOPT {
			extra = append(extra, rr)
		}
	}
	var ttl time.Duration
	switch {
	case resp.Rcode == dns.RcodeServerFailure:
		e.servfail = true
		ttl = servfailTTL
		resp = &dns.Msg{MsgHdr: resp.MsgHdr}
		extra = nil
		raw = nil
	case resp.Rcode == dns.RcodeNameError || (resp.Rcode == dns.RcodeSuccess && len(resp.Answer) == 0):
		ttl = c.negativeTTL(resp)
	case resp.Rcode == dns.RcodeSuccess:
		ttl = c.positiveTTL(resp, extra)
	default:
		return nil, nil
	}
	if ttl <= 0 {
		return nil, nil
	}
	qend := wire.HeaderLen + len(name) + 4
	var buf []byte
	if end, ok, exact := rawSections(raw, name, qtype, qclass, len(resp.Answer), len(resp.Ns), len(extra)); ok {
		buf = raw[:end] // the upstream's bytes, no packing
		e.caseLoose = !exact
	} else {
		// Packed into a pooled buffer: the entry keeps a copy of the
		// sections.
		bp := packBufs.Get().(*[]byte)
		defer packBufs.Put(bp)
		var err error
		if buf, err = pack(bp, name, qtype, qclass, resp, extra); err != nil {
			return nil, fmt.Errorf("cache put: pack answer: %w", err)
		}
	}
	if len(buf)-qend > maxSections {
		return nil, nil
	}
	var ob [16]uint16
	offs, _, err := wire.TTLOffsets(buf, qend, len(resp.Answer)+len(resp.Ns)+len(extra), ob[:0])
	if err != nil {
		return nil, fmt.Errorf("cache put: walk answer: %w", err)
	}
	e.counts = [3]uint16{uint16(len(resp.Answer)), uint16(len(resp.Ns)), uint16(len(extra))}
	c.finish(e, name, buf, qend, offs, ttl, now)
	return e, nil
}

// ErrNotRaw is StoreRaw's answer for bytes the cache cannot keep as they
// are: unpack them and call StoreWire.
var ErrNotRaw = errors.New("cache: answer bytes not kept as they are")

// StoreRaw is StoreWire for an answer left unparsed: a NOERROR or NXDOMAIN
// whose bytes raw wire.ScanAnswer accepted (the upstream package checked
// them; StoreRaw reads the header and counts from the bytes instead of
// walking them again). When the bytes can be kept as they are
// (rawSections) it stores them, with the TTLs read from the records (the
// SOA's for a negative answer), exactly as StoreWire would from the
// unpacked message; a nil entry with a nil error means the answer is not
// cached (TTL 0, too large). ErrNotRaw: nothing was stored.
func (c *Cache) StoreRaw(name []byte, qtype, qclass uint16, flags Flags, raw []byte, now time.Time) (*Entry, error) {
	if c == nil {
		return nil, nil
	}
	if len(name) == 0 || len(name) > wire.MaxNameLen {
		return nil, fmt.Errorf("cache put: bad name length %d", len(name))
	}
	if len(raw) < wire.HeaderLen {
		return nil, ErrNotRaw
	}
	rcode := int(raw[3] & 0xF)
	if rcode != dns.RcodeSuccess && rcode != dns.RcodeNameError {
		return nil, ErrNotRaw
	}
	an, ns, ex := int(binary.BigEndian.Uint16(raw[6:])), int(binary.BigEndian.Uint16(raw[8:])), int(binary.BigEndian.Uint16(raw[10:]))
	if ex > 0 && lastIsOPT(raw, wire.HeaderLen+len(name)+4, an+ns+ex) {
		ex--
	}
	end, ok, exact := rawSections(raw, name, qtype, qclass, an, ns, ex)
	if !ok {
		return nil, ErrNotRaw
	}
	buf := raw[:end]
	qend := wire.HeaderLen + len(name) + 4
	if len(buf)-qend > maxSections {
		return nil, nil
	}
	var ob [16]uint16
	offs, _, err := wire.TTLOffsets(buf, qend, an+ns+ex, ob[:0])
	if err != nil {
		return nil, fmt.Errorf("cache put: walk answer: %w", err)
	}
	var ttl time.Duration
	if rcode == dns.RcodeNameError || an == 0 {
		// negativeTTL on the wire: the authority section's SOA records.
		ttl = c.cfg.NegativeTTL
		for _, off := range offs[an : an+ns] {
			typ := binary.BigEndian.Uint16(buf[off-4:])
			if typ != dns.TypeSOA {
				continue
			}
			next := int(off) + 6 + int(binary.BigEndian.Uint16(buf[off+4:]))
			soa := min(binary.BigEndian.Uint32(buf[off:]), binary.BigEndian.Uint32(buf[next-4:]))
			ttl = min(ttl, time.Duration(soa)*time.Second)
		}
		ttl = c.negativeFloor(ttl)
	} else {
		// positiveTTL on the wire: the smallest TTL of every record.
		least := uint32(1<<31 - 1)
		for _, off := range offs {
			least = min(least, binary.BigEndian.Uint32(buf[off:]))
		}
		ttl = c.clamp(time.Duration(least) * time.Second)
	}
	if ttl <= 0 {
		return nil, nil
	}
	e := &Entry{
		qtype:     qtype,
		qclass:    qclass,
		flags:     flags,
		rcode:     rcode,
		ad:        binary.BigEndian.Uint16(raw[2:])&wire.FlagAD != 0,
		caseLoose: !exact,
		counts:    [3]uint16{uint16(an), uint16(ns), uint16(ex)},
	}
	c.finish(e, name, buf, qend, offs, ttl, now)
	return e, nil
}

// finish fills in e's sections (buf from qend, the records whose TTL
// fields are at offs), TTLs and times, and inserts it under name.
func (c *Cache) finish(e *Entry, name, buf []byte, qend int, offs []uint16, ttl time.Duration, now time.Time) {
	secs := uint32(ttl / time.Second)
	// One allocation for the name and the sections, which are never
	// written again: e.name reads the first bytes.
	b := make([]byte, len(name)+len(buf)-qend)
	copy(b, name)
	copy(b[len(name):], buf[qend:])
	e.name = unsafe.String(&b[0], len(name))
	e.sections = b[len(name):]
	if 2*len(offs) <= len(e.ttlBuf) {
		e.ttl = e.ttlBuf[:2*len(offs)]
	} else {
		e.ttl = make([]uint32, 2*len(offs))
	}
	for i, off := range offs {
		// Records keep their own TTL, raised to MinTTL and never past the
		// entry's lifetime, which is the smallest clamped TTL.
		t := max(binary.BigEndian.Uint32(buf[off:]), uint32(c.cfg.MinTTL/time.Second))
		e.ttl[2*i] = min(t, secs)
		e.ttl[2*i+1] = uint32(off) - uint32(qend)
	}
	t := c.clock(now)
	e.stored = t
	e.origTTL = int64(ttl)
	e.expires = t + int64(ttl)
	e.staleUntil = e.expires
	if !e.servfail {
		e.staleUntil += int64(c.cfg.StaleTTL)
	}
	e.windowStart.Store(t)
	e.hash = c.hash(name, e.qtype, e.qclass, e.flags)
	c.insert(e, t)
}

// pack packs the question and records into *bp (grown if need be).
func pack(bp *[]byte, name []byte, qtype, qclass uint16, resp *dns.Msg, extra []dns.RR) ([]byte, error) {
	pm := packMsgs.Get().(*packMsg)
	defer pm.put()
	msg := &pm.m
	var nb [4 * wire.MaxNameLen]byte // escapes are at most 4 bytes per byte
	pm.q[0] = dns.Question{Name: string(wire.AppendPresentation(nb[:0], name)), Qtype: qtype, Qclass: qclass}
	msg.Question = pm.q[:]
	msg.Answer, msg.Ns, msg.Extra = resp.Answer, resp.Ns, extra
	buf, err := msg.PackBuffer((*bp)[:cap(*bp)])
	if cap(buf) > cap(*bp) && cap(buf) <= maxPackKeep {
		*bp = buf[:0] // grown: keep the larger one
	}
	return buf, err
}

// packMsg is the message Store packs, with room for its question.
type packMsg struct {
	m dns.Msg
	q [1]dns.Question
}

var packMsgs = sync.Pool{New: func() any { return &packMsg{m: dns.Msg{Compress: true}} }}

// put drops the references to the answer's records and pools pm.
func (pm *packMsg) put() {
	pm.m = dns.Msg{Compress: true}
	pm.q[0] = dns.Question{}
	packMsgs.Put(pm)
}

// packBufs recycles the buffers Put packs answers into.
var packBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// maxPackKeep bounds a buffer packBufs keeps after a large answer.
const maxPackKeep = 16 << 10

func (c *Cache) positiveTTL(resp *dns.Msg, extra []dns.RR) time.Duration {
	minTTL := uint32(1<<31 - 1)
	for _, sec := range [][]dns.RR{resp.Answer, resp.Ns, extra} {
		for _, rr := range sec {
			minTTL = min(minTTL, rr.Header().Ttl)
		}
	}
	return c.clamp(time.Duration(minTTL) * time.Second)
}

// negativeTTL follows RFC 2308 5: the lesser of the SOA's TTL and MINIMUM,
// capped by NegativeTTL; without a SOA the cap itself is used.
func (c *Cache) negativeTTL(resp *dns.Msg) time.Duration {
	ttl := c.cfg.NegativeTTL
	for _, rr := range resp.Ns {
		if soa, ok := rr.(*dns.SOA); ok {
			ttl = min(ttl, time.Duration(min(soa.Hdr.Ttl, soa.Minttl))*time.Second)
		}
	}
	return c.negativeFloor(ttl)
}

// negativeFloor raises a negative answer's TTL (NegativeTTL or below, from
// the SOA) to MinTTL, never past NegativeTTL: StoreWire's rule and
// StoreRaw's.
func (c *Cache) negativeFloor(ttl time.Duration) time.Duration {
	if ttl < c.cfg.MinTTL {
		return min(c.cfg.MinTTL, c.cfg.NegativeTTL)
	}
	return ttl
}

func (c *Cache) clamp(ttl time.Duration) time.Duration {
	if c.cfg.MinTTL > 0 && ttl < c.cfg.MinTTL {
		ttl = c.cfg.MinTTL
	}
	if c.cfg.MaxTTL > 0 && ttl > c.cfg.MaxTTL {
		ttl = c.cfg.MaxTTL
	}
	return ttl
}

func (c *Cache) insert(e *Entry, t int64) {
	sh := &c.shards[e.hash&c.mask]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if old := sh.m[e.hash]; old != nil {
		if e.servfail && !old.servfail && t < old.staleUntil && old.name == e.name {
			return
		}
		e.slot = old.slot
		sh.ring[e.slot] = e
		sh.m[e.hash] = e
		return
	}
	if len(sh.ring) < sh.max {
		e.slot = len(sh.ring)
		sh.ring = append(sh.ring, e)
		sh.m[e.hash] = e
		return
	}
	// CLOCK: give referenced entries a second chance; two sweeps always find one.
	for range 2 * len(sh.ring) {
		victim := sh.ring[sh.hand]
		if victim.ref.Swap(false) && t < victim.staleUntil {
			sh.hand = (sh.hand + 1) % len(sh.ring)
			continue
		}
		break
	}
	victim := sh.ring[sh.hand]
	delete(sh.m, victim.hash)
	e.slot = sh.hand
	sh.ring[sh.hand] = e
	sh.m[e.hash] = e
	sh.hand = (sh.hand + 1) % len(sh.ring)
}

// Flush removes every entry (name nil) or every entry of one lower-cased
// wire name.
func (c *Cache) Flush(name []byte) {
	if c == nil {
		return
	}
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		if name == nil {
			clear(sh.m)
			clear(sh.ring)
			sh.ring = sh.ring[:0]
			sh.hand = 0
		} else {
			for j := 0; j < len(sh.ring); j++ {
				e := sh.ring[j]
				if e.name != string(name) {
					continue
				}
				delete(sh.m, e.hash)
				last := len(sh.ring) - 1
				sh.ring[j] = sh.ring[last]
				sh.ring[j].slot = j
				sh.ring[last] = nil
				sh.ring = sh.ring[:last]
				j--
			}
			if sh.hand >= len(sh.ring) {
				sh.hand = 0
			}
		}
		sh.mu.Unlock()
	}
}

// Len returns the number of entries held.
func (c *Cache) Len() int {
	if c == nil {
		return 0
	}
	n := 0
	for i := range c.shards {
		c.shards[i].mu.RLock()
		n += len(c.shards[i].m)
		c.shards[i].mu.RUnlock()
	}
	return n
}
