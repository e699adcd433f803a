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
			line := rr.String()
			if _, generic := rr.(*dns.RFC3597); generic {
				line = strings.Replace(line, "\tCLASS1\t", "\tIN\t", 1) // miekg/dns spells IN CLASS1 there
			}
			lines = append(lines, line)
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
// and type (and TTL), in a stable order, through authority.ParseZoneFile, the
// one zone-file reader: it refuses, with the line, names outside origin,
// control bytes in names, oversized record data, $INCLUDE and whatever PUT
// refuses. The SOA is skipped (the DNSZone holds it); apex NS records are
// kept as an "@" NS endpoint. Names are absolute without the final dot.
func Import(origin string, text []byte) ([]Endpoint, error) {
	z, err := authority.ParseZoneFile(bytes.NewReader(text), fqdn(origin))
	if err != nil {
		return nil, err
	}
	apex := strings.TrimSuffix(fqdn(origin), ".")
	abs := func(name string) string {
		return strings.TrimSuffix(strings.ToLower(authority.OwnerName(name, fqdn(origin))), ".")
	}
	out := make([]Endpoint, 0, len(z.Endpoints)+1)
	if len(z.NameServers) > 0 {
		ep := Endpoint{DNSName: apex, RecordType: "NS", Targets: z.NameServers, TTL: z.NameServerTTL}
		out = append(out, ep)
	}
	if len(z.Endpoints) > MaxRecords {
		return nil, ErrTooMany
	}
	for _, e := range z.Endpoints {
		out = append(out, Endpoint{DNSName: abs(e.DNSName), RecordType: e.RecordType, Targets: e.Targets, TTL: e.RecordTTL})
	}
	sort.SliceStable(out, func(a, b int) bool {
		if out[a].DNSName != out[b].DNSName {
			return out[a].DNSName < out[b].DNSName
		}
		return out[a].RecordType < out[b].RecordType
	})
	return out, nil
}
