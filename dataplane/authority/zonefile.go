package authority

import (
	"cmp"
	"fmt"
	"io"
	"slices"
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
	Endpoints   []v1alpha1.Endpoint
}

// ParseZoneFile reads a zone in BIND presentation format (as ZoneFile writes
// it) for zone import. The SOA and the apex NS records become the DNSZone's
// spec.soa and spec.nameServers; every other RRset becomes one endpoint with
// a relative dnsName ("@" for the apex) and an explicit recordTTL. $INCLUDE
// is refused; records outside origin are an error.
func ParseZoneFile(r io.Reader, origin string) (*ImportedZone, error) {
	ow, opres, err := canonicalName(origin)
	if err != nil {
		return nil, fmt.Errorf("origin: %w", err)
	}
	zp := dns.NewZoneParser(r, opres, "")
	zp.SetIncludeAllowed(false)
	out := &ImportedZone{}
	type key struct {
		owner string
		rtype uint16
		ttl   uint32
	}
	index := map[key]int{}
	for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
		h := rr.Header()
		if h.Class != dns.ClassINET {
			return nil, fmt.Errorf("%s: class %s is not IN", h.Name, dns.Class(h.Class))
		}
		w, pres, err := canonicalName(h.Name)
		if err != nil {
			return nil, err
		}
		if !isSubWire(w, ow) {
			return nil, fmt.Errorf("%s is outside zone %s", h.Name, opres)
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
			return nil, fmt.Errorf("%s: SOA below the apex", h.Name)
		case h.Rrtype == dns.TypeNS && apex:
			out.NameServers = append(out.NameServers, rr.(*dns.NS).Ns)
			continue
		}
		rdata := rdataText(rr)
		k := key{w, h.Rrtype, h.Ttl}
		if i, ok := index[k]; ok {
			out.Endpoints[i].Targets = append(out.Endpoints[i].Targets, rdata)
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
	}
	if err := zp.Err(); err != nil {
		return nil, fmt.Errorf("zone file: %w", err)
	}
	return out, nil
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
