package authority

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/api/v1alpha1"
)

// ZoneFile writes a primary zone in BIND presentation format: SOA first, then
// every owner in canonical order (RFC 4034 6.1), absolute names and explicit
// TTLs. It holds what every client is served: records limited to a view are
// left out, glue below delegations is kept. zone is the zone's DNS name or
// its DNSZone object name.
func (t *Table) ZoneFile(zone string) (string, error) {
	z := t.zoneByName(zone)
	if z == nil {
		return "", fmt.Errorf("zone %q is not compiled", zone)
	}
	if z.typ == forward {
		return "", fmt.Errorf("zone %s is a forward zone and holds no records", z.name)
	}
	nodes := make([]*node, 0, z.nodes.len())
	z.nodes.each(func(n *node) {
		if len(n.sets) > 0 {
			nodes = append(nodes, n)
		}
	})
	slices.SortFunc(nodes, func(a, b *node) int { return canonicalCompare(a.wire, b.wire) })
	var b strings.Builder
	fmt.Fprintf(&b, "$ORIGIN %s\n", z.name)
	b.WriteString(z.soa.String())
	b.WriteByte('\n')
	for _, n := range nodes {
		for i := range n.sets {
			s := &n.sets[i]
			if s.rtype == dns.TypeSOA {
				continue
			}
			views := s.views()
			for j, rr := range s.records(n) {
				if views != nil && views[j] != "" {
					continue
				}
				b.WriteString(rrText(rr))
				b.WriteByte('\n')
			}
		}
	}
	return b.String(), nil
}

func (t *Table) zoneByName(name string) *zone {
	if w, _, err := canonicalName(name); err == nil {
		if z := t.zones[w]; z != nil {
			return z
		}
	}
	for _, z := range t.list {
		if z.object == name {
			return z
		}
	}
	return nil
}

// canonicalCompare orders lower-cased wire names by their labels read from
// the root (RFC 4034 6.1).
func canonicalCompare(a, b string) int {
	var oa, ob [maxLabels]uint8
	na := labelOffsets([]byte(a), &oa) - 1 // skip the root label
	nb := labelOffsets([]byte(b), &ob) - 1
	for na > 0 && nb > 0 {
		na, nb = na-1, nb-1
		la := a[int(oa[na])+1 : int(oa[na])+1+int(a[oa[na]])]
		lb := b[int(ob[nb])+1 : int(ob[nb])+1+int(b[ob[nb]])]
		if c := strings.Compare(la, lb); c != 0 {
			return c
		}
	}
	return cmp.Compare(na, nb)
}

// ImportedZone is a zone file turned into DNSZone fields and endpoints.
type ImportedZone struct {
	SOA         *v1alpha1.SOA
	NameServers []string
	// NameServerTTL is the TTL of the first apex NS record (nil without).
	NameServerTTL *int64
	Endpoints     []v1alpha1.Endpoint
}

// MaxZoneFileRecords bounds the records one zone file may hold, so that an
// import's time and memory stay bounded (100,000 records take about 2 s and
// 70 MiB to read).
const MaxZoneFileRecords = 100000

// MaxRecordData is the largest RDATA a record may carry (RFC 1035 RDLENGTH
// is 16 bits); a longer TXT record cannot be served.
const MaxRecordData = 65535

// ParseZoneFile is the one zone-file reader: it reads a zone in BIND
// presentation format (as ZoneFile writes it) for zone import. The SOA and
// the apex NS records become the DNSZone's spec.soa and spec.nameServers;
// every other RRset becomes one endpoint with a relative dnsName ("@" for the
// apex) and an explicit recordTTL. It refuses what every other write path
// refuses, naming the line: $INCLUDE, names outside origin (after $ORIGIN and
// relative-name expansion), control bytes in names, records whose data is
// longer than DNS carries, and whatever CheckRecordSet refuses for the
// endpoints it builds.
func ParseZoneFile(r io.Reader, origin string) (*ImportedZone, error) {
	text, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("zone file: %w", err)
	}
	ow, opres, err := canonicalName(origin)
	if err != nil {
		return nil, fmt.Errorf("origin: %w", err)
	}
	zp := dns.NewZoneParser(strings.NewReader(string(text)), opres, "")
	zp.SetIncludeAllowed(false)
	out := &ImportedZone{}
	type key struct {
		owner string
		rtype uint16
		ttl   uint32
	}
	index := map[key]int{}
	// recordOf[i][j] is the ordinal (1-based) of the record that gave target
	// j of endpoint i, to name its line in a refusal.
	var recordOf [][]int
	at := func(ordinal int) string { return fmt.Sprintf("line %d", lineOfRecord(text, opres, ordinal)) }
	n := 0
	for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
		n++
		if n > MaxZoneFileRecords {
			return nil, fmt.Errorf("%s: more than %d records in one zone file; split it and import the parts into record sets of their own (recordSet)", at(n), MaxZoneFileRecords)
		}
		h := rr.Header()
		if h.Class != dns.ClassINET {
			return nil, fmt.Errorf("%s: %s: class %s is not IN; write IN or leave the class out", at(n), h.Name, dns.Class(h.Class))
		}
		w, pres, err := canonicalName(h.Name)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", at(n), err)
		}
		if i := controlByte(w); i >= 0 {
			return nil, fmt.Errorf("%s: name %s holds a control character (byte 0x%02x); names are letters, digits, '-' and '_'", at(n), pres, w[i])
		}
		if !isSubWire(w, ow) {
			return nil, fmt.Errorf("%s: %s is outside zone %s; write names under %s (check $ORIGIN and names without a final dot)", at(n), pres, opres, opres)
		}
		if l := dns.Len(rr) - len(w) - 10; l > MaxRecordData {
			return nil, fmt.Errorf("%s: %s %s record data is %d bytes; DNS carries at most %d", at(n), pres, dns.TypeToString[h.Rrtype], l, MaxRecordData)
		}
		apex := w == ow
		switch {
		case h.Rrtype == dns.TypeSOA && apex:
			s := rr.(*dns.SOA)
			ttl := int64(h.Ttl)
			out.SOA = &v1alpha1.SOA{MName: s.Ns, RName: s.Mbox, Serial: int64(s.Serial), Refresh: int64(s.Refresh),
				Retry: int64(s.Retry), Expire: int64(s.Expire), Minimum: int64(s.Minttl), TTL: &ttl}
			continue
		case h.Rrtype == dns.TypeSOA:
			return nil, fmt.Errorf("%s: %s: SOA below the apex; a zone has one SOA, at %s", at(n), pres, opres)
		case h.Rrtype == dns.TypeNS && apex:
			out.NameServers = append(out.NameServers, rr.(*dns.NS).Ns)
			if out.NameServerTTL == nil {
				ttl := int64(h.Ttl)
				out.NameServerTTL = &ttl
			}
			continue
		}
		rdata := rdataText(rr)
		k := key{w, h.Rrtype, h.Ttl}
		if i, ok := index[k]; ok {
			out.Endpoints[i].Targets = append(out.Endpoints[i].Targets, rdata)
			recordOf[i] = append(recordOf[i], n)
			continue
		}
		name := "@"
		if !apex {
			name = strings.TrimSuffix(pres, "."+opres)
			if opres == "." || ownerName(name, opres) != pres {
				name = pres // relative form would be read as absolute
			}
		}
		ttl := int64(h.Ttl)
		typ := dns.TypeToString[h.Rrtype]
		if _, generic := rr.(*dns.RFC3597); generic || typ == "" {
			typ = fmt.Sprintf("TYPE%d", h.Rrtype)
		}
		index[k] = len(out.Endpoints)
		out.Endpoints = append(out.Endpoints, v1alpha1.Endpoint{DNSName: name, RecordType: typ, Targets: []string{rdata}, RecordTTL: &ttl})
		recordOf = append(recordOf, []int{n})
	}
	if err := zp.Err(); err != nil {
		return nil, fmt.Errorf("zone file: %w", err)
	}
	// The same per-record checks as PUT and apply, so import refuses exactly
	// what they refuse.
	rs := &v1alpha1.DNSRecordSet{}
	rs.Name = "import"
	rs.Spec.ZoneRef.Name = strings.TrimSuffix(opres, ".")
	rs.Spec.Endpoints = out.Endpoints
	z := &v1alpha1.DNSZone{}
	z.Spec.ZoneName = opres
	if ps := CheckRecordSet(rs, z); len(ps) > 0 {
		p := ps[0]
		ord := recordOf[p.Endpoint][0]
		if p.Target >= 0 && p.Target < len(recordOf[p.Endpoint]) {
			ord = recordOf[p.Endpoint][p.Target]
		}
		ep := out.Endpoints[p.Endpoint]
		msg := fmt.Sprintf("%s: %s %s: %s", at(ord), ep.DNSName, ep.RecordType, p.Reason)
		if len(ps) > 1 {
			msg += fmt.Sprintf(" (and %d more problems)", len(ps)-1)
		}
		return nil, errors.New(msg)
	}
	return out, nil
}

// controlByte is the offset of a control byte (NUL..0x1f, 0x7f) in a wire
// name's labels, or -1. Such names pass the zone-file lexer as \DDD escapes
// but no write path accepts them.
func controlByte(wire string) int {
	for i := 0; i < len(wire) && wire[i] != 0; i += int(wire[i]) + 1 {
		for j := i + 1; j <= i+int(wire[i]) && j < len(wire); j++ {
			if c := wire[j]; c < 0x20 || c == 0x7f {
				return j
			}
		}
	}
	return -1
}

// lineOfRecord is the line on which record number ordinal (1-based) of text
// ends: the smallest prefix of lines that yields that many records. Only
// refusals call it, so re-parsing prefixes (log n times) costs nothing on the
// accepted path; ZoneParser does not say where a record was read.
func lineOfRecord(text []byte, origin string, ordinal int) int {
	lines := strings.SplitAfter(string(text), "\n")
	count := func(k int) int {
		zp := dns.NewZoneParser(strings.NewReader(strings.Join(lines[:k], "")), origin, "")
		zp.SetIncludeAllowed(false)
		c := 0
		for _, ok := zp.Next(); ok && c < ordinal; _, ok = zp.Next() {
			c++
		}
		return c
	}
	k := sort.Search(len(lines), func(k int) bool { return count(k+1) >= ordinal })
	return k + 1
}

// rrText is rr.String() with class IN spelled "IN" also for RFC 3597 records
// (miekg/dns writes CLASS1 there).
func rrText(rr dns.RR) string {
	s := rr.String()
	if _, ok := rr.(*dns.RFC3597); ok {
		s = strings.Replace(s, "\tCLASS1\t", "\tIN\t", 1)
	}
	return s
}

// rdataText is the presentation form of rr's data: rr.String() without the
// four header fields (names escape tabs, so splitting on tabs is safe).
func rdataText(rr dns.RR) string {
	f := strings.SplitN(rr.String(), "\t", 5)
	if len(f) < 5 {
		return ""
	}
	return f[4]
}
