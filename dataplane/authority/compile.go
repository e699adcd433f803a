package authority

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/api/v1alpha1"
)

// Defaults of DNSZone fields, as the types' markers declare them. A zero in
// an SOA field means the default, since Go objects built without the API
// server's defaulting carry zeros.
const (
	defaultTTL     = 3600
	defaultRefresh = 3600
	defaultRetry   = 600
	defaultExpire  = 604800
	defaultMinimum = 300
	maxTTL         = 1<<31 - 1
	maxChain       = 8 // CNAME/DNAME steps followed inside a zone
	maxBlob        = 65000
)

// Compile builds the table of all zones. Anything it cannot serve (a zone
// without a usable name, an endpoint whose target does not parse, ...) is
// skipped and reported as a Problem; the rest of the zone is still served.
// now decides which expiresAt records are already out of service.
func Compile(zones []v1alpha1.DNSZone, sets []v1alpha1.DNSRecordSet, now time.Time) (*Table, []Problem) {
	return CompileReusing(nil, zones, sets, now)
}

// CompileReusing is Compile that takes every zone whose DNSZone and record
// sets are unchanged since prev (same UIDs, generations and serial, and no
// record of it leaving or entering service since) from prev instead of
// encoding it again: a change to one small zone does not re-encode a
// million-record neighbour. Compiled zones are immutable, so two tables may
// share them. Objects without a UID or generation (never stored) are
// always compiled.
func CompileReusing(prev *Table, zones []v1alpha1.DNSZone, sets []v1alpha1.DNSRecordSet, now time.Time) (*Table, []Problem) {
	c := &compiler{now: now, t: &Table{zones: make(map[string]*zone, len(zones))}}
	var reuse map[string]*zone // by DNSZone object name
	if prev != nil {
		reuse = make(map[string]*zone, len(prev.list))
		for _, z := range prev.list {
			if z.fingerprint != "" && !z.unsynced {
				reuse[z.object] = z
			}
		}
	}
	byObject := make(map[string]*zone, len(zones))
	tenancy := make(map[string]*v1alpha1.RecordSetNamespaces, len(zones))

	sorted := make([]*v1alpha1.DNSZone, len(zones))
	for i := range zones {
		sorted[i] = &zones[i]
	}
	slices.SortFunc(sorted, func(a, b *v1alpha1.DNSZone) int { return cmp.Compare(a.Name, b.Name) })
	for _, obj := range sorted {
		z, err := c.zone(obj)
		if err != nil {
			c.problem("DNSZone", "", obj.Name, -1, -1, err.Error())
			continue
		}
		if other := c.t.zones[z.wire]; other != nil {
			c.problem("DNSZone", "", obj.Name, -1, -1, fmt.Sprintf("zone %s is already declared by DNSZone %s", z.name, other.object))
			continue
		}
		c.t.zones[z.wire] = z
		c.t.list = append(c.t.list, z)
		byObject[obj.Name] = z
		tenancy[obj.Name] = obj.Spec.RecordSetNamespaces
	}

	setsByZone := make(map[*zone][]*v1alpha1.DNSRecordSet)
	for i := range sets {
		rs := &sets[i]
		z := byObject[rs.Spec.ZoneRef.Name]
		if z == nil {
			c.refuse(rs, CodeZoneNotFound, fmt.Sprintf("zone %q does not exist", rs.Spec.ZoneRef.Name))
			continue
		}
		if z.typ == forward {
			c.refuse(rs, CodeForwardZone, fmt.Sprintf("zone %q is a forward zone; its records are not served", rs.Spec.ZoneRef.Name))
			continue
		}
		if rules := tenancy[rs.Spec.ZoneRef.Name]; !recordSetAllowed(rules, rs.Namespace) {
			c.refuse(rs, CodeNamespaceNotAllowed, fmt.Sprintf("namespace %q may not attach record sets to zone %q; its spec.recordSetNamespaces allows %s",
				namespaceOf(rs.Namespace), rs.Spec.ZoneRef.Name, describeNamespaces(rules)))
			continue
		}
		setsByZone[z] = append(setsByZone[z], rs)
	}

	for _, obj := range sorted {
		z := byObject[obj.Name]
		if z == nil || z.typ == forward {
			continue
		}
		rsets := setsByZone[z]
		slices.SortFunc(rsets, func(a, b *v1alpha1.DNSRecordSet) int {
			return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
		})
		fp := fingerprint(obj, rsets)
		if old := reuse[obj.Name]; old != nil && fp != "" && old.fingerprint == fp && old.wire == z.wire &&
			(old.nextChange.IsZero() || old.nextChange.After(now)) {
			c.t.zones[z.wire] = old // c.t.list is rebuilt from the map below
			c.problems = append(c.problems, old.problems...)
			c.noteChange(old.nextChange)
			continue
		}
		first, outer := len(c.problems), c.t.nextChange
		c.t.nextChange = time.Time{}
		c.fill(z, obj, rsets)
		z.fingerprint, z.nextChange = fp, c.t.nextChange
		z.problems = slices.Clip(c.problems[first:])
		c.t.nextChange = outer
		c.noteChange(z.nextChange)
	}
	c.t.list = c.t.list[:0]
	for _, z := range c.t.zones {
		c.t.list = append(c.t.list, z)
	}
	slices.SortFunc(c.t.list, func(a, b *zone) int { return cmp.Compare(a.name, b.name) })
	c.t.indexApexes()
	c.t.indexPrefetch()
	return c.t, c.problems
}

// noteChange keeps the table's next change the earliest of its zones'.
func (c *compiler) noteChange(t time.Time) {
	if !t.IsZero() && (c.t.nextChange.IsZero() || t.Before(c.t.nextChange)) {
		c.t.nextChange = t
	}
}

// fingerprint identifies what a zone was compiled from: the DNSZone's and
// its record sets' UIDs and generations (a generation grows with every spec
// change) and the serial. "" when an object was never stored.
func fingerprint(obj *v1alpha1.DNSZone, rsets []*v1alpha1.DNSRecordSet) string {
	if obj.UID == "" || obj.Generation == 0 {
		return ""
	}
	var serial int64
	if obj.Spec.SOA != nil {
		serial = obj.Spec.SOA.Serial
	}
	b := make([]byte, 0, 64+len(rsets)*64)
	b = fmt.Appendf(b, "%s/%s@%d#%d", obj.Name, obj.UID, obj.Generation, serial)
	for _, rs := range rsets {
		if rs.UID == "" || rs.Generation == 0 {
			return ""
		}
		b = fmt.Appendf(b, "|%s/%s/%s@%d", rs.Namespace, rs.Name, rs.UID, rs.Generation)
	}
	sum := sha256.Sum256(b)
	return string(sum[:])
}

type compiler struct {
	now      time.Time
	t        *Table
	problems []Problem
	arena    []byte // pre-encoded blobs are carved from shared chunks
	packBuf  []byte
	names    []byte  // owner names are interned into shared chunks
	sets     []rrset // first record sets of nodes are carved from slabs
	scratch  [256]byte
}

// intern returns a string holding b, carved from a shared chunk. The chunk's
// bytes are never written again once handed out.
func (c *compiler) intern(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if cap(c.names)-len(c.names) < len(b) {
		c.names = make([]byte, 0, max(min(2*cap(c.names), 64<<10), 1<<10, len(b)))
	}
	start := len(c.names)
	c.names = append(c.names, b...)
	return unsafe.String(&c.names[start], len(b))
}

// slabNext is the size of the next slab: small tables stay small, big ones
// get few large slabs.
func slabNext(prev int) int { return min(max(32, 2*prev), 8192) }

// newNode carves a node from the zone's slabs, which also give finish an
// iteration order that follows memory (and the order of the endpoints).
func (b *zoneBuilder) newNode(wire string) *node {
	if len(b.cur) == cap(b.cur) {
		if b.cur != nil {
			b.slabs = append(b.slabs, b.cur)
		}
		b.cur = make([]node, 0, slabNext(cap(b.cur)))
	}
	b.cur = append(b.cur, node{wire: wire, cname: -1, dname: -1})
	return &b.cur[len(b.cur)-1]
}

// forEach calls f for every node in creation order. Nodes created by f may
// or may not be visited.
func (b *zoneBuilder) forEach(f func(*node)) {
	for _, s := range b.slabs {
		for i := range s {
			f(&s[i])
		}
	}
	cur := b.cur
	for i := range cur {
		f(&cur[i])
	}
}

// newSets returns a one-element set slice for a node's first record set
// (a node with more sets grows it on the heap).
func (c *compiler) newSets(s rrset) []rrset {
	if len(c.sets) == cap(c.sets) {
		c.sets = make([]rrset, 0, slabNext(cap(c.sets)))
	}
	c.sets = append(c.sets, s)
	i := len(c.sets)
	return c.sets[i-1 : i : i]
}

func (c *compiler) problem(kind, ns, name string, ep, target int, reason string) {
	c.problems = append(c.problems, Problem{Kind: kind, Namespace: ns, Name: name, Endpoint: ep, Target: target, Reason: reason})
}

// refuse reports a record set none of whose records is served.
func (c *compiler) refuse(rs *v1alpha1.DNSRecordSet, code, reason string) {
	c.problems = append(c.problems, Problem{Kind: "DNSRecordSet", Namespace: rs.Namespace, Name: rs.Name, Endpoint: -1, Target: -1, Reason: reason, Code: code})
}

// namespaceOf is the namespace of a record set; objects built in Go without
// one (never stored) count as the default namespace.
func namespaceOf(ns string) string {
	if ns == "" {
		return v1alpha1.DefaultRecordSetNamespace
	}
	return ns
}

// recordSetAllowed is the zone's tenancy rule (spec.recordSetNamespaces).
func recordSetAllowed(r *v1alpha1.RecordSetNamespaces, ns string) bool {
	return r.Allows(namespaceOf(ns))
}

func describeNamespaces(r *v1alpha1.RecordSetNamespaces) string {
	switch {
	case r == nil:
		return fmt.Sprintf("only %q (the default)", v1alpha1.DefaultRecordSetNamespace)
	case r.From == v1alpha1.NamespacesFromAll:
		return "every namespace"
	case len(r.Names) == 0:
		return "no namespace"
	}
	return fmt.Sprintf("only %q", r.Names)
}

func ttlOf(v *int64, def uint32) uint32 {
	if v == nil {
		return def
	}
	return uint32(min(max(*v, 0), maxTTL))
}

func orDefault(v int64, def uint32) uint32 {
	if v <= 0 {
		return def
	}
	return uint32(min(v, maxTTL))
}

// zone builds the zone header (name, type, access, SOA and NS) of one object.
func (c *compiler) zone(obj *v1alpha1.DNSZone) (*zone, error) {
	name := obj.Spec.ZoneName
	if name == "" {
		name = obj.Name
	}
	wire, pres, err := canonicalName(name)
	if err != nil {
		return nil, fmt.Errorf("zone name: %w", err)
	}
	z := &zone{name: pres, wire: wire, object: obj.Name, root: pres == "."}
	if obj.Spec.Policy != nil {
		z.xfrKeys = slices.Clone(obj.Spec.Policy.TransferTSIGKeyRefs)
	}
	switch obj.Spec.Type {
	case "", "primary":
	case "forward":
		if obj.Spec.Forward == nil || obj.Spec.Forward.UpstreamGroup == "" {
			return nil, fmt.Errorf("a forward zone needs spec.forward.upstreamGroup")
		}
		z.typ, z.group = forward, obj.Spec.Forward.UpstreamGroup
	default:
		return nil, fmt.Errorf("unknown zone type %q", obj.Spec.Type)
	}
	if qa := obj.Spec.QueryAccess; qa != nil && (len(qa.AllowCIDRs) > 0 || len(qa.ClientGroups) > 0) {
		a := &access{groups: slices.Clone(qa.ClientGroups)}
		for _, s := range qa.AllowCIDRs {
			p, err := netip.ParsePrefix(s)
			if err != nil {
				addr, aerr := netip.ParseAddr(s)
				if aerr != nil {
					// Failing closed: a typo must not open the zone to everyone.
					c.problem("DNSZone", "", obj.Name, -1, -1, fmt.Sprintf("queryAccess.allowCIDRs: %q is not a CIDR; ignored", s))
					continue
				}
				p = netip.PrefixFrom(addr, addr.BitLen())
			}
			a.prefixes = append(a.prefixes, p.Masked())
		}
		z.access = a
	}
	return z, nil
}

// fill compiles the SOA, NS and record sets of a primary zone.
func (c *compiler) fill(z *zone, obj *v1alpha1.DNSZone, rsets []*v1alpha1.DNSRecordSet) {
	spec := obj.Spec
	zttl := uint32(defaultTTL)
	if spec.DefaultTTL != nil {
		zttl = ttlOf(spec.DefaultTTL, defaultTTL)
	}
	var soaSpec v1alpha1.SOA
	if spec.SOA != nil {
		soaSpec = *spec.SOA
	}
	nsNames := spec.NameServers
	if len(nsNames) == 0 {
		nsNames = []string{"ns." + z.name}
		if z.root {
			nsNames = []string{"ns."}
		}
	}
	size := 4
	for _, rs := range rsets {
		size += len(rs.Spec.Endpoints)
	}
	b := &zoneBuilder{c: c, z: z, nodes: newNodeTable(size)}
	apex := b.node([]byte(z.wire))
	var nsRRs []dns.RR
	for i, n := range nsNames {
		if _, ok := dns.IsDomainName(n); !ok || n == "" {
			c.problem("DNSZone", "", obj.Name, -1, -1, fmt.Sprintf("spec.nameServers[%d] %q is not a domain name", i, n))
			continue
		}
		nsRRs = append(nsRRs, &dns.NS{Hdr: dns.RR_Header{Name: z.name, Rrtype: dns.TypeNS, Class: dns.ClassINET, Ttl: zttl}, Ns: dns.Fqdn(n)})
	}
	mname := soaSpec.MName
	if mname == "" {
		mname = dns.Fqdn(nsNames[0])
	}
	rname := soaSpec.RName
	if rname == "" {
		rname = "hostmaster." + z.name
		if z.root {
			rname = "hostmaster."
		}
	} else if at := strings.IndexByte(rname, '@'); at >= 0 {
		rname = rname[:at] + "." + rname[at+1:]
	}
	serial := uint32(soaSpec.Serial)
	if soaSpec.Serial <= 0 {
		serial = derivedSerial(obj, rsets)
	}
	z.serial = serial
	z.soa = &dns.SOA{
		Hdr: dns.RR_Header{Name: z.name, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: ttlOf(soaSpec.TTL, zttl)},
		Ns:  dns.Fqdn(mname), Mbox: dns.Fqdn(rname), Serial: serial,
		Refresh: orDefault(soaSpec.Refresh, defaultRefresh), Retry: orDefault(soaSpec.Retry, defaultRetry),
		Expire: orDefault(soaSpec.Expire, defaultExpire), Minttl: orDefault(soaSpec.Minimum, defaultMinimum),
	}
	if _, ok := dns.IsDomainName(z.soa.Ns); !ok {
		z.soa.Ns = dns.Fqdn(nsNames[0])
	}
	if _, ok := dns.IsDomainName(z.soa.Mbox); !ok {
		z.soa.Mbox = "hostmaster." + z.name
	}
	neg := *z.soa
	neg.Hdr.Ttl = min(z.soa.Hdr.Ttl, z.soa.Minttl)
	z.negSOA = []dns.RR{&neg}
	z.nodataByLen = make(map[int]uint32)
	for _, n := range []string{z.soa.Ns, z.soa.Mbox} {
		if w, _, err := canonicalName(n); err == nil {
			if t := topLabel(w, z.wire); t != "" {
				z.soaTops = append(z.soaTops, t)
			}
		}
	}
	z.negTTL = neg.Hdr.Ttl
	soaSet := rrset{rtype: dns.TypeSOA}
	soaSet.setRecords([]dns.RR{z.soa})
	apex.sets = append(apex.sets, soaSet)
	if len(nsRRs) > 0 {
		nsSet := rrset{rtype: dns.TypeNS}
		nsSet.setRecords(nsRRs)
		apex.sets = append(apex.sets, nsSet)
	}

	for _, rs := range rsets {
		for ei := range rs.Spec.Endpoints {
			c.endpoint(b, rs, ei, zttl)
		}
	}
	b.finish(c)
}

// derivedSerial grows with content changes: every write to the zone or one
// of its record sets raises its resourceVersion (the zone reconciler rewrites
// the zone's status when a record set is deleted), so the largest numeric
// resourceVersion is used, folded into 32 bits. Without numeric versions the
// largest generation is used.
func derivedSerial(obj *v1alpha1.DNSZone, rsets []*v1alpha1.DNSRecordSet) uint32 {
	var rv, gen uint64
	note := func(v string, g int64) {
		if n, err := strconv.ParseUint(v, 10, 64); err == nil {
			rv = max(rv, n)
		}
		gen = max(gen, uint64(max(g, 0)))
	}
	note(obj.ResourceVersion, obj.Generation)
	for _, rs := range rsets {
		note(rs.ResourceVersion, rs.Generation)
	}
	s := uint32(rv)
	if rv == 0 {
		s = uint32(gen)
	}
	if s == 0 {
		s = 1
	}
	return s
}

type zoneBuilder struct {
	c     *compiler
	z     *zone
	nodes nodeTable
	slabs [][]node // full node slabs
	cur   []node   // the slab being filled
}

// node returns the node of a lower-cased wire name, creating it (with the
// name interned) if needed. wire may be a scratch buffer.
func (b *zoneBuilder) node(wire []byte) *node {
	n := b.nodes.get(wire)
	if n == nil {
		n = b.newNode(b.c.intern(wire))
		b.nodes.put(n)
	}
	return n
}

// ownerWire resolves an endpoint's dnsName against the zone (see ownerName)
// into the compiler's scratch buffer as a lower-cased wire name. Names made
// of letters, digits, '-', '_' and '*' are encoded directly; anything else
// goes through miekg/dns.
func (c *compiler) ownerWire(dnsName string, z *zone) (wire []byte, inZone bool, err error) {
	if dnsName == "@" {
		return append(c.scratch[:0], z.wire...), true, nil
	}
	abs := strings.HasSuffix(dnsName, ".") || z.root
	if !abs {
		bare := z.name[:len(z.name)-1]
		abs = strings.EqualFold(dnsName, bare) || (len(dnsName) > len(bare) && dnsName[len(dnsName)-len(bare)-1] == '.' && strings.EqualFold(dnsName[len(dnsName)-len(bare):], bare))
	}
	if w, ok := encodePlain(c.scratch[:0], strings.TrimSuffix(dnsName, "."), abs, z.wire); ok {
		return w, !abs, nil
	}
	cw, _, err := canonicalName(ownerName(dnsName, z.name))
	if err != nil {
		return nil, false, err
	}
	return append(c.scratch[:0], cw...), false, nil
}

// encodePlain appends the lower-cased wire form of a dotted name made of
// plain characters, followed by the root label (abs) or by apex. It reports
// false for anything it does not handle (escapes, empty labels, lengths).
func encodePlain(dst []byte, name string, abs bool, apex string) ([]byte, bool) {
	if name == "" {
		return nil, false
	}
	lp := len(dst)
	dst = append(dst, 0)
	for i := 0; i < len(name); i++ {
		ch := name[i]
		switch {
		case ch >= 'a' && ch <= 'z', ch >= '0' && ch <= '9', ch == '-', ch == '_', ch == '*':
		case ch >= 'A' && ch <= 'Z':
			ch += 'a' - 'A'
		case ch == '.':
			l := len(dst) - lp - 1
			if l == 0 || l > 63 {
				return nil, false
			}
			dst[lp] = byte(l)
			lp = len(dst)
			dst = append(dst, 0)
			continue
		default:
			return nil, false
		}
		dst = append(dst, ch)
	}
	l := len(dst) - lp - 1
	if l == 0 || l > 63 {
		return nil, false
	}
	dst[lp] = byte(l)
	if abs {
		dst = append(dst, 0)
	} else {
		dst = append(dst, apex...)
	}
	if len(dst) > 255 {
		return nil, false
	}
	return dst, true
}

func (c *compiler) endpoint(b *zoneBuilder, rs *v1alpha1.DNSRecordSet, ei int, zttl uint32) {
	ep := &rs.Spec.Endpoints[ei]
	badField := func(field string, target int, format string, args ...any) {
		c.problems = append(c.problems, Problem{Kind: "DNSRecordSet", Namespace: rs.Namespace, Name: rs.Name,
			Endpoint: ei, Target: target, Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	bad := func(target int, format string, args ...any) { badField("targets", target, format, args...) }
	view := ""
	if ext := ep.Service; ext != nil {
		if ext.Disabled || ext.View == "public" {
			return
		}
		if ext.ExpiresAt != nil {
			exp := ext.ExpiresAt.Time
			if !exp.After(c.now) {
				return
			}
			if c.t.nextChange.IsZero() || exp.Before(c.t.nextChange) {
				c.t.nextChange = exp
			}
		}
		if v := ext.View; v != "" {
			view = v
			if !strings.Contains(v, "/") && rs.Namespace != "" {
				view = rs.Namespace + "/" + v
			}
		}
	}
	rtype, err := recordType(ep.RecordType)
	if err != nil {
		badField("recordType", -1, "%v; %s", err, expectType)
		return
	}
	if why := unservable(rtype); why != "" {
		badField("recordType", -1, "%s", why)
		return
	}
	if err := checkOwnerSyntax(ep.DNSName); err != nil {
		badField("dnsName", -1, "dnsName %q: %v; %s", ep.DNSName, err, expectOwner)
		return
	}
	z := b.z
	wb, inZone, err := c.ownerWire(ep.DNSName, z)
	if err != nil {
		badField("dnsName", -1, "dnsName %q: %v; %s", ep.DNSName, err, expectOwner)
		return
	}
	wire := unsafe.String(unsafe.SliceData(wb), len(wb)) // scratch: not kept
	if !inZone && !isSubWire(wire, z.wire) {
		badField("dnsName", -1, "dnsName %q is outside zone %s; write it relative to the zone (e.g. www, @ for the apex) or absolute inside it (e.g. www.%s)",
			ep.DNSName, z.name, strings.TrimPrefix(z.name, "."))
		return
	}
	if rtype == dns.TypeNS && wire == z.wire {
		badField("recordType", -1, "NS at the apex comes from the zone's spec.nameServers")
		return
	}
	if (rtype == dns.TypeDNAME || rtype == dns.TypeCNAME) && len(ep.Targets) > 1 {
		bad(-1, "%s holds one target, %d given; the first is used", ep.RecordType, len(ep.Targets))
	}
	ttl := zttl
	if ep.RecordTTL != nil {
		ttl = ttlOf(ep.RecordTTL, zttl)
	}
	typeName := strings.ToUpper(ep.RecordType)
	apex := z.wire == wire
	n := b.node(wb)
	pres := ""
	for ti, target := range ep.Targets {
		var why string
		if rd, err := parseAddress(rtype, target); rd != nil || err != nil {
			if err != nil {
				bad(ti, "%v%s", err, expectTarget(typeName))
				continue
			}
			why = c.addCompact(n, rtype, ttl, rd, view, apex)
		} else {
			if pres == "" {
				pres = n.name()
			}
			rr, err := parseTarget(pres, ttl, rtype, typeName, target)
			if err != nil {
				bad(ti, "%v%s", err, expectTarget(typeName))
				continue
			}
			if compactType(rtype) {
				// RFC 3597 form of an address: store it compact too.
				rd, err := rdataOf(rr)
				if err != nil {
					bad(ti, "%s target %q: %v", typeName, target, err)
					continue
				}
				why = c.addCompact(n, rtype, ttl, rd, view, apex)
			} else {
				why = c.add(n, rr, rtype, view, apex)
			}
		}
		if why != "" {
			if strings.Contains(why, "CNAME") {
				why += "; a name with a CNAME holds no other records: remove one of them or use another name"
			}
			bad(ti, "%s", why)
			if rtype == dns.TypeCNAME || rtype == dns.TypeDNAME {
				return
			}
		}
	}
}

// check applies RFC 2181 rules before a record of rtype joins the node:
// CNAME stands alone, CNAME and DNAME are singletons. It returns the set of
// that type (nil if none yet) or why the record is refused.
func (n *node) check(rtype uint16, apex bool) (*rrset, string) {
	var s *rrset
	for i := range n.sets {
		if n.sets[i].rtype == rtype {
			s = &n.sets[i]
		}
	}
	switch {
	case rtype == dns.TypeCNAME && apex:
		return nil, "CNAME at the zone apex"
	case rtype == dns.TypeCNAME && s == nil && len(n.sets) > 0:
		return nil, fmt.Sprintf("CNAME and other data at %s", n.name())
	case rtype != dns.TypeCNAME && n.cname >= 0:
		return nil, fmt.Sprintf("CNAME and other data at %s", n.name())
	case (rtype == dns.TypeCNAME || rtype == dns.TypeDNAME) && s != nil:
		return nil, fmt.Sprintf("a second %s at %s", dns.Type(rtype), n.name())
	}
	return s, ""
}

// newSet adds an empty set of rtype to the node (from the slab if first).
func (c *compiler) newSet(n *node, rtype uint16) *rrset {
	if n.sets == nil {
		n.sets = c.newSets(rrset{rtype: rtype})
	} else {
		n.sets = append(n.sets, rrset{rtype: rtype})
	}
	if rtype == dns.TypeCNAME {
		// Marks the node while building; finish sets the final index.
		n.cname = int8(len(n.sets) - 1)
	}
	return &n.sets[len(n.sets)-1]
}

// noteView records the view of the record about to be appended as the
// set's k-th.
func (s *rrset) noteView(n *node, k int, view string) {
	if view != "" || s.views() != nil {
		if s.more == nil {
			s.more = &rrsetMore{}
		}
		if s.more.views == nil {
			s.more.views = make([]string, k)
		}
		s.more.views = append(s.more.views, view)
		n.views = true
	}
}

// add puts one record in the node, keeping RFC 2181 rules (see check); an
// RRset has one TTL (the lowest).
func (c *compiler) add(n *node, rr dns.RR, rtype uint16, view string, apex bool) string {
	s, why := n.check(rtype, apex)
	if why != "" {
		return why
	}
	if s == nil {
		s = c.newSet(n, rtype)
		s.rrs = unsafe.Pointer(new([]dns.RR))
	}
	p := (*[]dns.RR)(s.rrs)
	for _, old := range *p {
		if dns.IsDuplicate(old, rr) {
			return ""
		}
	}
	if len(*p) > 0 {
		if t := (*p)[0].Header().Ttl; t != rr.Header().Ttl {
			t = min(t, rr.Header().Ttl)
			for _, o := range *p {
				o.Header().Ttl = t
			}
			rr.Header().Ttl = t
		}
	}
	s.noteView(n, len(*p), view)
	*p = append(*p, rr)
	return ""
}

// addCompact puts one A or AAAA record (its address in rd) in the node's
// compact set, with the rules of add.
func (c *compiler) addCompact(n *node, rtype uint16, ttl uint32, rd []byte, view string, apex bool) string {
	s, why := n.check(rtype, apex)
	if why != "" {
		return why
	}
	rl := compactLen(rtype)
	if s == nil {
		s = c.newSet(n, rtype)
		s.wire = c.carve(rl)
	}
	k := len(s.wire) / rl
	for i := 0; i < k; i++ {
		if string(s.wire[i*rl+12:(i+1)*rl]) == string(rd) {
			return ""
		}
	}
	if k > 0 {
		if t := be32(s.wire[6:]); t != ttl {
			ttl = min(t, ttl)
			for i := 0; i < k; i++ {
				binary.BigEndian.PutUint32(s.wire[i*rl+6:], ttl)
			}
		}
	}
	s.noteView(n, k, view)
	s.wire = append(s.wire, 0xc0, 0x0c, byte(rtype>>8), byte(rtype), 0, dns.ClassINET,
		byte(ttl>>24), byte(ttl>>16), byte(ttl>>8), byte(ttl), 0, byte(len(rd)))
	s.wire = append(s.wire, rd...)
	return ""
}

// carve returns an empty slice with room for n bytes from the arena.
func (c *compiler) carve(n int) []byte {
	if cap(c.arena) < n {
		c.arena = make([]byte, 0, 64<<10)
	}
	b := c.arena[:0:n]
	c.arena = c.arena[n:cap(c.arena)]
	return b
}

// finish adds empty non-terminals, marks delegations and pre-encodes every
// answer that does not depend on the client or on the question's spelling.
func (b *zoneBuilder) finish(c *compiler) {
	z := b.z
	// Empty non-terminals: every ancestor up to the apex exists. The same
	// pass puts sets in type order and notes CNAME, DNAME and delegations.
	var offs [maxLabels]uint8
	b.forEach(func(n *node) {
		if len(n.sets) == 0 {
			return
		}
		w := n.wire
		k := labelOffsets(bytesOf(w), &offs)
		for i := 1; i < k; i++ {
			aw := w[offs[i]:]
			if len(aw) <= len(z.wire) {
				break
			}
			if b.nodes.getString(aw) != nil {
				break // its ancestors were (or will be) added by its own walk
			}
			b.nodes.put(b.newNode(aw))
		}
		if len(n.sets) > 1 {
			slices.SortFunc(n.sets, func(a, b rrset) int { return cmp.Compare(a.rtype, b.rtype) })
		}
		n.cname = -1
		for i := range n.sets {
			s := &n.sets[i]
			if p := (*[]dns.RR)(s.rrs); p != nil {
				*p = slices.Clip(*p)
			} else {
				s.wire = slices.Clip(s.wire)
			}
			z.records += s.count()
			switch s.rtype {
			case dns.TypeCNAME:
				n.cname = int8(i)
			case dns.TypeDNAME:
				n.dname = int8(i)
				z.hasDNAME = true
			case dns.TypeNS:
				if n.wire != z.wire {
					n.cut = true
					z.hasCuts = true
				}
			}
		}
	})
	wild := false
	b.forEach(func(n *node) {
		z.nameLens.add(len(n.wire))
		if w := n.wire; strings.HasPrefix(w, "\x01*") {
			if p := b.nodes.getString(w[2:]); p != nil {
				p.wild = n
				wild = true
			}
		}
		if !z.hasCuts {
			return
		}
		k := labelOffsets(bytesOf(n.wire), &offs)
		for i := 1; i < k && len(n.wire)-int(offs[i]) > len(z.wire); i++ {
			if a := b.nodes.getString(n.wire[offs[i]:]); a != nil && a.cut {
				n.below = true
				break
			}
		}
	})
	z.nodes = b.nodes
	z.plainRoot = z.root && !wild && !z.hasCuts && !z.hasDNAME && z.nodes.getString(z.wire) != nil
	z.nxdomain = response{kind: NXDomain, rcode: dns.RcodeNameError, aa: true, ns: z.negSOA, minTTL: z.negTTL, counts: [3]uint16{0, 1, 0}}
	b.forEach(func(n *node) {
		if !n.below {
			c.precompute(z, n)
		}
	})
}

// precompute builds the answers of one node that depend neither on the
// client nor on the question's spelling, each with its wire encoding.
func (c *compiler) precompute(z *zone, n *node) {
	if n.cut {
		ns := n.set(dns.TypeNS).records(n)
		n.referral = &response{kind: Referral, ns: ns, extra: z.additional(ns)}
		n.referral.wire = c.pack(n.name(), nil, n.referral.ns, n.referral.extra)
		n.referral.minTTL = minTTL(n.referral.ns, n.referral.extra)
		n.referral.counts = [3]uint16{0, uint16(len(n.referral.ns)), uint16(len(n.referral.extra))}
	}
	n.nodata = c.nodataWire(z, n)
	if n.views {
		for i := range n.sets {
			if s := &n.sets[i]; compactType(s.rtype) {
				s.minTTL = be32(s.wire[6:])
			}
		}
		return
	}
	for i := range n.sets {
		s := &n.sets[i]
		if n.cut && s.rtype != dns.TypeDS {
			continue
		}
		if compactType(s.rtype) {
			// The wire is the answer already; all records share the TTL.
			s.minTTL = be32(s.wire[6:])
			continue
		}
		rrs := s.records(n)
		var extra []dns.RR
		switch s.rtype {
		case dns.TypeMX, dns.TypeSRV, dns.TypeNS:
			if extra = z.additional(rrs); len(extra) > 0 {
				s.more = &rrsetMore{extra: extra}
			}
		}
		s.minTTL = minTTL(rrs, extra)
		if extra == nil && s.rtype == dns.TypeTXT {
			s.wire = c.packSimple(rrs)
			continue
		}
		s.wire = c.pack(n.name(), rrs, nil, extra)
	}
}

// nodataWire encodes the SOA authority section after the question n.name.
// Its bytes depend on the question only through its length, unless the
// SOA's mname or rname shares a label below the apex with the question (then
// compression may point into that label), so blobs are shared by length.
func (c *compiler) nodataWire(z *zone, n *node) uint32 {
	shared := n.wire != z.wire && !z.underSOATop(n.wire)
	if shared {
		if i, ok := z.nodataByLen[len(n.wire)]; ok {
			return i
		}
	}
	i := uint32(len(z.nodata))
	z.nodata = append(z.nodata, c.pack(n.name(), nil, z.negSOA, nil))
	if shared {
		z.nodataByLen[len(n.wire)] = i
	}
	return i
}

// underSOATop reports whether name is at or below a label right below the
// apex that the SOA's mname or rname uses.
func (z *zone) underSOATop(name string) bool {
	for _, t := range z.soaTops {
		if len(name) >= len(t)+len(z.wire) && name[len(name)-len(z.wire)-len(t):len(name)-len(z.wire)] == t && topLabel(name, z.wire) == t {
			return true
		}
	}
	return false
}

// topLabel is the wire label of name directly below apex, "" if none.
func topLabel(name, apex string) string {
	if len(name) <= len(apex) || !isSubWire(name, apex) {
		return ""
	}
	var offs [maxLabels]uint8
	k := labelOffsets([]byte(name), &offs)
	for i := 0; i+1 < k; i++ {
		if len(name)-int(offs[i+1]) == len(apex) {
			return name[offs[i]:offs[i+1]]
		}
	}
	return ""
}

// packSimple encodes records whose data holds no names exactly as miekg/dns
// does after a question for their owner: the owner compresses to a pointer
// at offset 12 and the rest is copied.
func (c *compiler) packSimple(rrs []dns.RR) []byte {
	if cap(c.packBuf) < 65535 {
		c.packBuf = make([]byte, 65535)
	}
	buf := c.packBuf[:65535]
	out := c.alloc(0)
	size := 0
	for _, rr := range rrs {
		end, err := dns.PackRR(rr, buf, 0, nil, false)
		if err != nil {
			return nil
		}
		nl := wireLen(rr.Header().Name)
		size += 2 + end - nl
		if size > maxBlob {
			return nil
		}
		out = append(out, 0xc0, 0x0c)
		out = append(out, buf[nl:end]...)
	}
	return c.commit(out)
}

// pack encodes sections with miekg/dns after a question for qname and keeps
// the bytes after the question.
func (c *compiler) pack(qname string, answer, ns, extra []dns.RR) []byte {
	m := dns.Msg{Compress: true}
	m.Question = []dns.Question{{Name: qname, Qtype: dns.TypeA, Qclass: dns.ClassINET}}
	m.Answer, m.Ns, m.Extra = answer, ns, extra
	if cap(c.packBuf) < 65535 {
		c.packBuf = make([]byte, 65535)
	}
	out, err := m.PackBuffer(c.packBuf)
	if err != nil {
		return nil // served through the slow path, which reports the error
	}
	return c.commit(append(c.alloc(0), out[12+wireLen(qname)+4:]...))
}

// alloc returns an empty slice at the arena's free space; commit carves what
// was appended to it out of the arena (copying if it outgrew the space).
func (c *compiler) alloc(int) []byte {
	if cap(c.arena) < 512 {
		c.arena = make([]byte, 0, 64<<10)
	}
	return c.arena[:0]
}

func (c *compiler) commit(b []byte) []byte {
	b = b[:len(b):len(b)]
	if len(b) > 0 && cap(c.arena) >= len(b) && &c.arena[:1][0] == &b[0] {
		c.arena = c.arena[len(b):cap(c.arena)]
	}
	return b
}

// additional returns the in-zone A and AAAA records of the names that MX,
// SRV and NS records point to (RFC 1034 4.3.2 step 6), skipping view records.
func (z *zone) additional(rrs []dns.RR) []dns.RR {
	var out []dns.RR
	var seen []string
	for _, rr := range rrs {
		var target string
		switch r := rr.(type) {
		case *dns.MX:
			target = r.Mx
		case *dns.SRV:
			target = r.Target
		case *dns.NS:
			target = r.Ns
		default:
			continue
		}
		w, _, err := canonicalName(target)
		if err != nil || !isSubWire(w, z.wire) || slices.Contains(seen, w) {
			continue
		}
		seen = append(seen, w)
		n := z.nodes.getString(w)
		if n == nil {
			continue
		}
		for _, t := range [2]uint16{dns.TypeA, dns.TypeAAAA} {
			if s := n.set(t); s != nil {
				views := s.views()
				for i, r := range s.records(n) {
					if views == nil || views[i] == "" {
						out = append(out, r)
					}
				}
			}
		}
	}
	return slices.Clip(out)
}

// wireLen is the uncompressed wire length of a presentation name.
func wireLen(name string) int {
	var buf [256]byte
	n, _ := dns.PackDomainName(name, buf[:], 0, nil, false)
	return n
}

func minTTL(sections ...[]dns.RR) uint32 {
	m, any := uint32(0), false
	for _, s := range sections {
		for _, rr := range s {
			if rr.Header().Rrtype == dns.TypeOPT {
				continue
			}
			if t := rr.Header().Ttl; !any || t < m {
				m, any = t, true
			}
		}
	}
	return m
}
