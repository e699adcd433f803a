package authority

import (
	"encoding/binary"
	"net/netip"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/miekg/dns"
)

// Table is the compiled, immutable set of zones. It is safe for concurrent
// use; derived tables (WithSync) share everything but the zone headers.
type Table struct {
	zones      map[string]*zone // key: lower-cased wire name of the apex
	list       []*zone          // sorted by name, for Zones and ZoneFile
	nextChange time.Time
	// apexLens holds the lengths of the apexes' wire names: a query's
	// suffixes of other lengths are no zone, and are not looked up in the
	// map (a string hash and probe each, for every query).
	apexLens lenSet
	// bigApexLens is apexLens of the zones large enough to prefetch.
	bigApexLens lenSet
}

// lenSet is a set of wire-name lengths (0 to 255), one bit each: a name of
// a length not in the set is not looked up.
type lenSet [4]uint64

func (s *lenSet) add(l int) {
	if l < 256 {
		s[l>>6] |= 1 << (l & 63)
	}
}

func (s *lenSet) has(l int) bool { return l < 256 && s[l>>6]&(1<<(l&63)) != 0 }

// indexApexes fills apexLens from zones.
func (t *Table) indexApexes() {
	t.apexLens = lenSet{}
	for w := range t.zones {
		t.apexLens.add(len(w))
	}
}

type zoneType uint8

const (
	primary zoneType = iota
	forward
)

type zone struct {
	name     string // presentation, lower case, trailing dot
	wire     string
	object   string // DNSZone metadata.name
	typ      zoneType
	group    string // forward zones
	root     bool   // the default zone "."
	unsynced bool
	access   *access
	xfrKeys  []string // spec.policy.transferTSIGKeyRefs: keys allowed to transfer the zone

	serial  uint32
	soa     *dns.SOA
	negSOA  []dns.RR // the SOA with TTL min(TTL, minimum), for negative answers
	negTTL  uint32
	nodes   nodeTable // by lower-cased wire owner name
	records int

	hasCuts  bool // some non-apex node has NS: Lookup must walk ancestors
	hasDNAME bool // some node has DNAME: likewise
	// plainRoot: the default zone "." with its apex node and no wildcard,
	// delegation or DNAME, so that a name it does not hold is answered by
	// nothing (forwarded) without the walk up its ancestors; nameLens holds
	// the lengths of its nodes' wire names. Every query
	// the node forwards or answers from cache or a block list was looked
	// up in the default zone first: four hashed probes, 1.5% of the
	// server's busy samples under dnsperf's cache workload.
	plainRoot bool
	nameLens  lenSet

	nxdomain response // shared by every absent name (no wire: qname varies)

	nodata [][]byte // NODATA sections, indexed by node.nodata

	// What the zone was compiled from and what compiling it reported, so an
	// unchanged zone is taken over by the next table (CompileReusing).
	fingerprint string
	problems    []Problem
	nextChange  time.Time // earliest expiresAt of its records, zero for none

	// Compile-time only: NODATA blobs shared by question length.
	soaTops     []string // labels right below the apex of the SOA's mname and rname
	nodataByLen map[int]uint32
}

type access struct {
	prefixes []netip.Prefix
	groups   []string
}

func (a *access) allows(c Client) bool {
	addr := c.Addr.Unmap()
	for _, p := range a.prefixes {
		if p.Contains(addr) {
			return true
		}
	}
	for _, g := range a.groups {
		if c.in(g) {
			return true
		}
	}
	return false
}

// node is one owner name. A million-record zone holds a million of them, so
// nodes are carved from slabs, the presentation name is derived from wire on
// demand and rarely used parts sit behind pointers.
type node struct {
	wire     string    // lower-cased wire name (shares the map key's bytes)
	sets     []rrset   // sorted by type
	wild     *node     // the "*" child, source of wildcard synthesis
	referral *response // pre-encoded referral when cut
	nodata   uint32    // index in zone.nodata of the NODATA sections
	cut      bool      // NS below the apex: a delegation point
	below    bool      // strictly below a cut: occluded, glue only
	views    bool      // some record is limited to a client group
	cname    int8      // index of the CNAME set, -1 if none
	dname    int8      // index of the DNAME set, -1 if none
}

// name is the node's presentation name (lower case).
func (n *node) name() string { return presentation([]byte(n.wire)) }

// rrset is kept small: a million-record zone holds a million of them.
//
// A and AAAA sets are compact: their records live only in wire (each one
// 0xc00c, type, class, TTL, length, address, exactly the pre-encoded answer),
// and the dns.RR objects of the slow path are built from it the first time a
// query needs them, then kept (rrs is set once, atomically). Other sets hold
// their dns.RR objects from compile time.
type rrset struct {
	rtype  uint16
	minTTL uint32
	rrs    unsafe.Pointer // *[]dns.RR; nil until a compact set is materialised
	wire   []byte         // pre-encoded exact answer for this type (when no views)
	more   *rrsetMore
}

// compactType reports whether sets of type t are stored as wire records.
func compactType(t uint16) bool { return t == dns.TypeA || t == dns.TypeAAAA }

// compactLen is the length of one compact record of type t in wire.
func compactLen(t uint16) int {
	if t == dns.TypeA {
		return 2 + 10 + 4
	}
	return 2 + 10 + 16
}

// records returns the set's dns.RR objects, building (once) those of a
// compact set with n's name as owner.
func (s *rrset) records(n *node) []dns.RR {
	if p := atomic.LoadPointer(&s.rrs); p != nil {
		return *(*[]dns.RR)(p)
	}
	if !compactType(s.rtype) {
		return nil
	}
	rrs := s.build(n.name())
	if atomic.CompareAndSwapPointer(&s.rrs, nil, unsafe.Pointer(&rrs)) {
		return rrs
	}
	return *(*[]dns.RR)(atomic.LoadPointer(&s.rrs))
}

// count is the number of records in the set.
func (s *rrset) count() int {
	if p := atomic.LoadPointer(&s.rrs); p != nil {
		return len(*(*[]dns.RR)(p))
	}
	if compactType(s.rtype) {
		return len(s.wire) / compactLen(s.rtype)
	}
	return 0
}

// build makes dns.RR objects of a compact set with the given owner, in one
// allocation for a single record. The addresses share the wire's bytes
// (callers must not modify them).
func (s *rrset) build(owner string) []dns.RR {
	rl := compactLen(s.rtype)
	k := len(s.wire) / rl
	if s.rtype == dns.TypeA {
		if k == 1 {
			one := &struct {
				rr [1]dns.RR
				a  dns.A
			}{}
			one.rr[0] = s.fillA(&one.a, owner, 0)
			return one.rr[:]
		}
		rrs, as := make([]dns.RR, k), make([]dns.A, k)
		for i := range as {
			rrs[i] = s.fillA(&as[i], owner, i*rl)
		}
		return rrs
	}
	if k == 1 {
		one := &struct {
			rr [1]dns.RR
			a  dns.AAAA
		}{}
		one.rr[0] = s.fillAAAA(&one.a, owner, 0)
		return one.rr[:]
	}
	rrs, as := make([]dns.RR, k), make([]dns.AAAA, k)
	for i := range as {
		rrs[i] = s.fillAAAA(&as[i], owner, i*rl)
	}
	return rrs
}

func (s *rrset) fillA(a *dns.A, owner string, off int) *dns.A {
	w := s.wire[off : off+16 : off+16]
	*a = dns.A{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: be32(w[6:])}, A: w[12:16:16]}
	return a
}

func (s *rrset) fillAAAA(a *dns.AAAA, owner string, off int) *dns.AAAA {
	w := s.wire[off : off+28 : off+28]
	*a = dns.AAAA{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: be32(w[6:])}, AAAA: w[12:28:28]}
	return a
}

func be32(b []byte) uint32 { return binary.BigEndian.Uint32(b) }

// setRecords stores the dns.RR objects of a set at compile time.
func (s *rrset) setRecords(rrs []dns.RR) { s.rrs = unsafe.Pointer(&rrs) }

// rrsetMore holds what few sets have.
type rrsetMore struct {
	views []string // parallel to rrs; "" serves everyone
	extra []dns.RR // additional-section records of the exact answer
}

func (s *rrset) views() []string {
	if s.more == nil {
		return nil
	}
	return s.more.views
}

func (s *rrset) extra() []dns.RR {
	if s.more == nil {
		return nil
	}
	return s.more.extra
}

// answerWire is the pre-encoded answer of the set, nil if there is none. A
// compact set's wire is also its storage, so it is only served when it fits
// in a message.
func (s *rrset) answerWire() []byte {
	if len(s.wire) > maxBlob {
		return nil
	}
	return s.wire
}

// answer writes the exact answer of the set into *a, which is zero. A
// compact set's dns.RR objects are left to Answer.Fill when the set has
// not built them yet and its wire can be served: building them for every
// name asked kept 128 bytes more per answered name on the heap (two thirds
// of a compact record's share), which the pre-encoded answer never reads.
func (s *rrset) answer(z *zone, n *node, a *Answer) {
	ex := s.extra()
	a.Kind, a.Authoritative, a.Extra = Answered, true, ex
	a.Zone, a.MinTTL, a.Wire = z.name, s.minTTL, s.answerWire()
	a.Counts = [3]uint16{uint16(s.count()), 0, uint16(len(ex))}
	if p := atomic.LoadPointer(&s.rrs); p != nil || a.Wire == nil {
		a.Answer = s.records(n)
	} else {
		a.set, a.owner = s, n
	}
}

func (n *node) nodataAnswer(z *zone) Answer {
	return Answer{
		Kind: NoData, Authoritative: true, Ns: z.negSOA, Zone: z.name,
		MinTTL: z.negTTL, Wire: z.nodata[n.nodata], Counts: [3]uint16{0, 1, 0},
	}
}

// response is a complete, pre-built answer. wire is nil when it could not be
// encoded (it is then built per query).
type response struct {
	kind   Kind
	rcode  int
	aa     bool
	answer []dns.RR
	ns     []dns.RR
	extra  []dns.RR
	minTTL uint32
	wire   []byte
	counts [3]uint16
}

func (r *response) toAnswer(z *zone) Answer {
	return Answer{
		Kind: r.kind, Rcode: r.rcode, Authoritative: r.aa,
		Answer: r.answer, Ns: r.ns, Extra: r.extra,
		Zone: z.name, MinTTL: r.minTTL, Wire: r.wire, Counts: r.counts,
	}
}

func (n *node) set(t uint16) *rrset {
	for i := range n.sets {
		if n.sets[i].rtype == t {
			return &n.sets[i]
		}
	}
	return nil
}

// NextChange is the earliest future expiresAt of a compiled record, or the
// zero time. The caller recompiles then; records are served until it does.
func (t *Table) NextChange() time.Time { return t.nextChange }

// Zones lists the compiled zones sorted by name.
func (t *Table) Zones() []ZoneInfo {
	out := make([]ZoneInfo, 0, len(t.list))
	for _, z := range t.list {
		typ := "primary"
		if z.typ == forward {
			typ = "forward"
		}
		out = append(out, ZoneInfo{
			Name: z.name, Object: z.object, Type: typ, Serial: z.serial,
			Records: z.records, Synced: !z.unsynced, ForwardGroup: z.group,
		})
	}
	return out
}

// WithSync returns a table whose primary zones answer SERVFAIL when synced
// returns false for their name (presentation, trailing dot) or object name.
// It shares all record data with t.
func (t *Table) WithSync(synced func(zoneName, object string) bool) *Table {
	nt := &Table{zones: make(map[string]*zone, len(t.zones)), list: make([]*zone, 0, len(t.list)), nextChange: t.nextChange}
	for _, z := range t.list {
		cp := *z
		cp.unsynced = z.typ == primary && !synced(z.name, z.object)
		nt.zones[cp.wire] = &cp
		nt.list = append(nt.list, &cp)
	}
	nt.apexLens, nt.bigApexLens = t.apexLens, t.bigApexLens
	return nt
}
