package authority

import (
	"net/netip"
	"time"

	"github.com/miekg/dns"
)

// Table is the compiled, immutable set of zones. It is safe for concurrent
// use; derived tables (WithSync) share everything but the zone headers.
type Table struct {
	zones      map[string]*zone // key: lower-cased wire name of the apex
	list       []*zone          // sorted by name, for Zones and ZoneFile
	nextChange time.Time
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

	serial  uint32
	soa     *dns.SOA
	negSOA  []dns.RR // the SOA with TTL min(TTL, minimum), for negative answers
	negTTL  uint32
	nodes   map[string]*node // key: lower-cased wire owner name
	records int

	hasCuts  bool // some non-apex node has NS: Lookup must walk ancestors
	hasDNAME bool // some node has DNAME: likewise

	nxdomain response // shared by every absent name (no wire: qname varies)

	// Compile-time only: NODATA blobs shared by question length.
	soaTops     []string // labels right below the apex of the SOA's mname and rname
	nodataByLen map[int][]byte
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

type node struct {
	name  string // presentation
	wire  string
	sets  []rrset // sorted by type
	cut   bool    // NS below the apex: a delegation point
	below bool    // strictly below a cut: occluded, glue only
	views bool    // some record is limited to a client group
	wild  *node   // the "*" child, source of wildcard synthesis
	cname int8    // index of the CNAME set, -1 if none
	dname int8    // index of the DNAME set, -1 if none

	nodata   []byte    // pre-encoded NODATA sections for the exact name
	referral *response // pre-encoded referral when cut
}

// rrset is kept small: a million-record zone holds a million of them.
type rrset struct {
	rtype  uint16
	minTTL uint32
	rrs    []dns.RR
	wire   []byte // pre-encoded exact answer for this type (when no views)
	more   *rrsetMore
}

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

func (s *rrset) toAnswer(z *zone) Answer {
	ex := s.extra()
	return Answer{
		Kind: Answered, Authoritative: true, Answer: s.rrs, Extra: ex,
		Zone: z.name, MinTTL: s.minTTL, Wire: s.wire,
		Counts: [3]uint16{uint16(len(s.rrs)), 0, uint16(len(ex))},
	}
}

func (n *node) nodataAnswer(z *zone) Answer {
	return Answer{
		Kind: NoData, Authoritative: true, Ns: z.negSOA, Zone: z.name,
		MinTTL: z.negTTL, Wire: n.nodata, Counts: [3]uint16{0, 1, 0},
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
	return nt
}
