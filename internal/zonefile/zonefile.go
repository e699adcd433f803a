// Package zonefile converts between record set endpoints and zone files in
// BIND presentation format (content type text/dns).
package zonefile

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/dataplane/authority"
)

// Endpoint is one name and type with its targets, as in DNSRecordSet.
type Endpoint struct {
	DNSName    string
	RecordType string
	Targets    []string
	TTL        *int64
}

// MaxRecords bounds one import.
const MaxRecords = 100000

// ErrTooMany refuses an import over MaxRecords.
var ErrTooMany = errors.New("zone file has too many records")

func fqdn(name string) string { return dns.Fqdn(strings.TrimSpace(name)) }

// Export writes eps as a zone file for origin; records whose text does not
// parse are written as comments so that nothing is silently lost. Owner
// names are resolved against origin the way the data plane serves them
// ("www" and "www.<origin>" are the same name, "@" the apex) and written
// absolute.
func Export(origin string, defaultTTL int64, eps []Endpoint) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "$ORIGIN %s\n$TTL %d\n", fqdn(origin), defaultTTL)
	var lines []string
	for _, ep := range eps {
		ttl := defaultTTL
		if ep.TTL != nil {
			ttl = *ep.TTL
		}
		for _, t := range ep.Targets {
			owner := authority.OwnerName(ep.DNSName, fqdn(origin))
			rr, err := dns.NewRR(fmt.Sprintf("%s %d IN %s %s", owner, ttl, ep.RecordType, t))
			if err != nil || rr == nil {
				lines = append(lines, fmt.Sprintf("; unparsable %s %s %q", ep.DNSName, ep.RecordType, t))
				continue
			}
			lines = append(lines, rr.String())
		}
	}
	sort.Strings(lines)
	for _, l := range lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// Import parses a zone file relative to origin into endpoints, one per name
// and type, in a stable order. SOA records are skipped (the DNSZone holds
// them); $INCLUDE is refused.
func Import(origin string, text []byte) ([]Endpoint, error) {
	zp := dns.NewZoneParser(bytes.NewReader(text), fqdn(origin), "")
	zp.SetIncludeAllowed(false)
	type key struct{ name, typ string }
	idx := map[key]int{}
	var out []Endpoint
	n := 0
	for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
		h := rr.Header()
		if h.Rrtype == dns.TypeSOA {
			continue
		}
		if n++; n > MaxRecords {
			return nil, ErrTooMany
		}
		typ := dns.TypeToString[h.Rrtype]
		if typ == "" {
			typ = fmt.Sprintf("TYPE%d", h.Rrtype)
		}
		k := key{strings.TrimSuffix(strings.ToLower(h.Name), "."), typ}
		target := strings.TrimPrefix(rr.String(), h.String())
		i, seen := idx[k]
		if !seen {
			ttl := int64(h.Ttl)
			out = append(out, Endpoint{DNSName: k.name, RecordType: typ, TTL: &ttl})
			i = len(out) - 1
			idx[k] = i
		}
		out[i].Targets = append(out[i].Targets, target)
	}
	if err := zp.Err(); err != nil {
		return nil, fmt.Errorf("zone file: %w", err)
	}
	sort.SliceStable(out, func(a, b int) bool {
		if out[a].DNSName != out[b].DNSName {
			return out[a].DNSName < out[b].DNSName
		}
		return out[a].RecordType < out[b].RecordType
	})
	return out, nil
}
