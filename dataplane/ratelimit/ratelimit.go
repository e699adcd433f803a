// Package ratelimit limits DNS queries over UDP per client prefix with token
// buckets (settings ratelimit.*). TCP and the encrypted transports are never
// limited: they prove the source address, so they are where a limited client
// goes (slip answers with TC=1 send it there).
package ratelimit

import (
	"encoding/binary"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Defaults of ratelimit.ipv4 and ratelimit.ipv6 in queries per minute per
// prefix length.
var (
	DefaultIPv4 = map[int]int{24: 6000, 32: 600}
	DefaultIPv6 = map[int]int{128: 600, 64: 6000, 56: 12000}
)

// DefaultMaxBuckets is used when Config.MaxBuckets is 0.
const DefaultMaxBuckets = 65536

// Config mirrors the ratelimit.* settings.
type Config struct {
	Enabled bool
	// IPv4 and IPv6 map a prefix length to queries per minute; they merge
	// with the defaults and 0 turns a level off.
	IPv4, IPv6 map[int]int
	Slip       int // 0 to 100: percent of limited queries answered TC=1
	MaxBuckets int // 0 means 65536
	Exempt     []netip.Prefix

	// LimitLoopback turns off the loopback exemption. Tests only (the test
	// machines have no other addresses); no setting maps to it.
	LimitLoopback bool
}

// Action is what to do with a query.
type Action uint8

const (
	Allow Action = iota
	Drop         // send nothing
	Slip         // answer with an empty truncated response
)

func (a Action) String() string {
	return [...]string{"allow", "drop", "slip"}[a]
}

// Metrics are the limiter's counters, made once per registry and shared by
// every Limiter built when the settings change.
type Metrics struct {
	limited *prometheus.CounterVec
	drop    prometheus.Counter
	slip    prometheus.Counter
}

// NewMetrics registers service_dns_ratelimited_total{action}; reg may be nil.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{limited: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "service_dns_ratelimited_total",
		Help: "UDP queries over the rate limit, by action (drop or slip: answered TC=1).",
	}, []string{"action"})}
	if reg != nil {
		if err := reg.Register(m.limited); err != nil {
			return nil, fmt.Errorf("ratelimit metrics: %w", err)
		}
	}
	m.drop, m.slip = m.limited.WithLabelValues("drop"), m.limited.WithLabelValues("slip")
	return m, nil
}

type level struct {
	bits     uint8
	perNanos float64 // tokens per nanosecond
	burst    float64
}

type key struct {
	addr [16]byte
	bits uint8
	v6   bool
}

type bucket struct {
	tokens float64
	last   int64 // unix nanos
}

const numShards = 16

type shard struct {
	mu  sync.Mutex
	m   map[key]bucket
	max int
}

// Limiter is safe for concurrent use. Build a new one when settings change.
type Limiter struct {
	v4, v6  []level
	slip    uint64
	exempt  []netip.Prefix
	noLoop  bool
	shards  [numShards]shard
	metrics *Metrics
	n       atomic.Uint64
	now     func() int64
}

func levels(def, user map[int]int, maxBits int) ([]level, error) {
	merged := maps.Clone(def)
	for k, v := range user {
		if k < 0 || k > maxBits {
			return nil, fmt.Errorf("prefix length %d out of range 0 to %d", k, maxBits)
		}
		if v < 0 {
			return nil, fmt.Errorf("prefix length %d: negative rate %d", k, v)
		}
		merged[k] = v
	}
	var out []level
	for _, k := range slices.Sorted(maps.Keys(merged)) {
		qpm := merged[k]
		if qpm == 0 {
			continue
		}
		// One second's worth of queries as burst, at least one.
		out = append(out, level{bits: uint8(k), perNanos: float64(qpm) / float64(time.Minute), burst: max(1, float64(qpm)/60)})
	}
	return out, nil
}

// New builds a limiter; nil when cfg.Enabled is false (nothing is limited).
func New(cfg Config, m *Metrics) (*Limiter, error) {
	if !cfg.Enabled {
		return nil, nil
	}
	if cfg.Slip < 0 || cfg.Slip > 100 {
		return nil, fmt.Errorf("ratelimit.slip %d: want 0 to 100", cfg.Slip)
	}
	if cfg.MaxBuckets < 0 {
		return nil, fmt.Errorf("ratelimit.maxBuckets %d: want >= 0", cfg.MaxBuckets)
	}
	v4, err := levels(DefaultIPv4, cfg.IPv4, 32)
	if err != nil {
		return nil, fmt.Errorf("ratelimit.ipv4: %w", err)
	}
	v6, err := levels(DefaultIPv6, cfg.IPv6, 128)
	if err != nil {
		return nil, fmt.Errorf("ratelimit.ipv6: %w", err)
	}
	if m == nil {
		if m, err = NewMetrics(nil); err != nil {
			return nil, err
		}
	}
	maxB := cfg.MaxBuckets
	if maxB == 0 {
		maxB = DefaultMaxBuckets
	}
	per := max(1, maxB/numShards)
	l := &Limiter{v4: v4, v6: v6, slip: uint64(cfg.Slip), noLoop: cfg.LimitLoopback, metrics: m, now: func() int64 { return time.Now().UnixNano() }}
	for _, p := range cfg.Exempt {
		l.exempt = append(l.exempt, p.Masked())
	}
	for i := range l.shards {
		// Not sized to per up front: the maps grow with the clients seen
		// (at most per each), so an idle node does not hold ~7 MiB of
		// empty buckets (issue #27 item 4).
		l.shards[i].m = make(map[key]bucket)
		l.shards[i].max = per
	}
	return l, nil
}

// Check decides one UDP query from client. query is the DNS message: the
// health name is never limited. Nil limiter allows everything. It does not
// allocate.
func (l *Limiter) Check(client netip.Addr, query []byte) Action {
	if l == nil {
		return Allow
	}
	client = client.Unmap()
	if !l.noLoop && client.IsLoopback() {
		return Allow
	}
	for _, p := range l.exempt {
		if p.Contains(client) {
			return Allow
		}
	}
	lv := l.v4
	if !client.Is4() {
		lv = l.v6
	}
	now := l.now()
	ok := true
	for _, v := range lv {
		if !l.take(client, v, now) {
			ok = false
		}
	}
	if ok || IsHealthQuery(query) {
		return Allow
	}
	// The slip share is spread evenly (slip 50: every other limited
	// query), not as the first slip of each hundred: floor(n*slip/100)
	// steps once per answered one.
	if n := l.n.Add(1); l.slip > 0 && n*l.slip/100 != (n-1)*l.slip/100 {
		l.metrics.slip.Inc()
		return Slip
	}
	l.metrics.drop.Inc()
	return Drop
}

// take spends a token from the bucket of client's prefix at level v.
func (l *Limiter) take(client netip.Addr, v level, now int64) bool {
	p, _ := client.Prefix(int(v.bits))
	k := key{addr: p.Addr().As16(), bits: v.bits, v6: !client.Is4()}
	h := uint64(14695981039346656037)
	for _, b := range k.addr {
		h = (h ^ uint64(b)) * 1099511628211
	}
	h = (h ^ uint64(k.bits)) * 1099511628211
	s := &l.shards[h%numShards]
	s.mu.Lock()
	defer s.mu.Unlock()
	b, found := s.m[k]
	if !found {
		if len(s.m) >= s.max {
			s.evict(now)
		}
		b = bucket{tokens: v.burst, last: now}
	} else if el := now - b.last; el > 0 {
		b.tokens = min(v.burst, b.tokens+float64(el)*v.perNanos)
		b.last = now
	}
	allowed := b.tokens >= 1
	if allowed {
		b.tokens--
	}
	s.m[k] = b
	return allowed
}

// evict removes full or idle buckets, or failing that a few arbitrary ones
// (map iteration order is random), so memory stays bounded.
func (s *shard) evict(now int64) {
	removed := 0
	for k, b := range s.m {
		if now-b.last > int64(time.Minute) || removed == 0 {
			delete(s.m, k)
			removed++
		}
		if removed >= 8 {
			return
		}
	}
}

// Buckets returns the number of live buckets (tests, debugging).
func (l *Limiter) Buckets() int {
	n := 0
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		n += len(s.m)
		s.mu.Unlock()
	}
	return n
}

// healthName is health.service.internal. in wire form.
var healthName = []byte("\x06health\x07service\x08internal\x00")

// IsHealthQuery reports whether the message asks for the health name.
func IsHealthQuery(msg []byte) bool {
	if len(msg) < 12+len(healthName) {
		return false
	}
	for i, c := range healthName {
		d := msg[12+i]
		if 'A' <= d && d <= 'Z' {
			d += 'a' - 'A'
		}
		if c != d {
			return false
		}
	}
	return true
}

// AppendTruncated appends the slip answer to query: its header with QR and
// TC set, the question echoed, no records. ok is false when the query is
// too broken to answer (then drop it).
func AppendTruncated(out, query []byte) ([]byte, bool) {
	if len(query) < 12 || query[2]&0x80 != 0 || binary.BigEndian.Uint16(query[4:6]) != 1 {
		return out, false
	}
	i := 12
	for {
		if i >= len(query) {
			return out, false
		}
		n := int(query[i])
		if n == 0 {
			i++
			break
		}
		if n&0xC0 != 0 {
			return out, false
		}
		i += 1 + n
	}
	if i+4 > len(query) {
		return out, false
	}
	qend := i + 4
	start := len(out)
	out = append(out, query[:qend]...)
	h := out[start:]
	h[2] = h[2]&0x79 | 0x80 | 0x02 // QR, keep opcode and RD, TC; clear AA
	h[3] = 0                       // RA=0, rcode NOERROR
	binary.BigEndian.PutUint16(h[6:], 0)
	binary.BigEndian.PutUint16(h[8:], 0)
	binary.BigEndian.PutUint16(h[10:], 0)
	return out, true
}
