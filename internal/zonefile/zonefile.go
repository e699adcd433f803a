// Package zonefile converts between zones (a DNSZone with its record sets) and
// zone files in BIND presentation format (content type text/dns).
//
// Reading goes through authority.ParseZoneFile, the one zone-file reader;
// writing through the compiled table (authority.Table.ZoneFile), so an export
// holds exactly what the data plane serves.
package zonefile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/dataplane/authority"
)

// Endpoint is one name and type with its targets, as in DNSRecordSet.
type Endpoint struct {
	DNSName    string
	RecordType string
	Targets    []string
	TTL        *int64
}

// MaxRecords bounds one import (names and types; the reader stops at
// authority.MaxZoneFileRecords records).
const MaxRecords = authority.MaxZoneFileRecords

// ErrTooMany refuses an import over MaxRecords.
var ErrTooMany = errors.New("zone file has too many records")

// Zone is a zone file read for import.
type Zone struct {
	// Origin is the zone's name, absolute with the final dot.
	Origin string
	// SOA is the apex SOA (nil when the file has none).
	SOA *v1alpha1.SOA
	// NameServers are the targets of the apex NS records, in file order.
	NameServers []string
	// NameServerTTL is the TTL of the apex NS RRset (nil without).
	NameServerTTL *int64
	// Endpoints are every other RRset, one per name, type and TTL, with
	// absolute names without the final dot, in a stable order (name, type).
	Endpoints []Endpoint
	// Records counts the records (targets) of Endpoints.
	Records int
}

func fqdn(name string) string { return dns.Fqdn(strings.TrimSpace(name)) }

// Origin is name as a zone origin: absolute and lower case. ok is false
// when name is not a DNS name (the API names the field and the fix).
func Origin(name string) (origin string, ok bool) {
	if _, valid := dns.IsDomainName(name); !valid || strings.ContainsAny(name, " \t\\") {
		return "", false
	}
	return strings.ToLower(dns.Fqdn(name)), true
}

// Absolute is name with the final dot, as written (no validation).
func Absolute(name string) string { return dns.Fqdn(name) }

// Parse reads a zone file relative to origin through authority.ParseZoneFile,
// the one zone-file reader: it refuses, with the line, names outside origin,
// control bytes in names, oversized record data, $INCLUDE and whatever PUT
// refuses. The apex SOA and NS go to SOA and NameServers; everything else to
// Endpoints.
func Parse(origin string, text []byte) (*Zone, error) {
	iz, err := authority.ParseZoneFile(bytes.NewReader(text), fqdn(origin))
	if err != nil {
		return nil, err
	}
	if len(iz.Endpoints) > MaxRecords {
		return nil, fmt.Errorf("%w: %d names and types, at most %d in one import; split the file", ErrTooMany, len(iz.Endpoints), MaxRecords)
	}
	z := &Zone{Origin: fqdn(origin), SOA: iz.SOA, NameServers: iz.NameServers, NameServerTTL: iz.NameServerTTL}
	abs := func(name string) string {
		return strings.TrimSuffix(strings.ToLower(authority.OwnerName(name, z.Origin)), ".")
	}
	z.Endpoints = make([]Endpoint, 0, len(iz.Endpoints))
	for _, e := range iz.Endpoints {
		z.Endpoints = append(z.Endpoints, Endpoint{DNSName: abs(e.DNSName), RecordType: e.RecordType, Targets: e.Targets, TTL: e.RecordTTL})
		z.Records += len(e.Targets)
	}
	slices.SortStableFunc(z.Endpoints, func(a, b Endpoint) int {
		if c := strings.Compare(a.DNSName, b.DNSName); c != 0 {
			return c
		}
		return strings.Compare(a.RecordType, b.RecordType)
	})
	return z, nil
}

// Import is Parse's endpoints: the records a record set holds (the SOA and
// the apex NS belong to the DNSZone and are not among them).
func Import(origin string, text []byte) ([]Endpoint, error) {
	z, err := Parse(origin, text)
	if err != nil {
		return nil, err
	}
	return z.Endpoints, nil
}

// Limits of one record set that an import fills: the CRD's 1000 endpoints,
// and well under the store's 1.5 MiB object cap for the JSON of the
// endpoints (the rest of the object is small).
const (
	MaxEndpointsPerSet = 1000
	maxSetBytes        = 1 << 20
)

// Chunks splits eps, in order, into groups that each fit one record set.
func Chunks(eps []Endpoint) [][]Endpoint {
	var out [][]Endpoint
	start, size := 0, 0
	for i, e := range eps {
		n := endpointBytes(e)
		if i > start && (i-start >= MaxEndpointsPerSet || size+n > maxSetBytes) {
			out = append(out, eps[start:i])
			start, size = i, 0
		}
		size += n
	}
	if start < len(eps) {
		out = append(out, eps[start:])
	}
	return out
}

// endpointBytes is about the JSON size of e in a record set.
func endpointBytes(e Endpoint) int {
	b, _ := json.Marshal(e.Object())
	return len(b) + 1
}

// Object is e as a DNSRecordSet endpoint (unstructured form).
func (e Endpoint) Object() map[string]any {
	ts := make([]any, len(e.Targets))
	for i, t := range e.Targets {
		ts[i] = t
	}
	m := map[string]any{"dnsName": e.DNSName, "recordType": e.RecordType, "targets": ts}
	if e.TTL != nil {
		m["recordTTL"] = *e.TTL
	}
	return m
}

// Export writes zone as it is served to every client: $ORIGIN, the SOA with
// the serial the data plane gives this content (authority.Serials: status.serial
// when the status writer recorded this content, spec.soa.serial when set),
// the apex NS, then every record in canonical order with absolute names and
// explicit TTLs (authority.Table.ZoneFile). Records that are not served
// (they do not compile, a view limits them, their record set's namespace is
// not admitted) are left out; each problem is written as a comment at the
// end so that nothing is dropped silently. sets may hold other zones' record
// sets; they are ignored.
func Export(zone v1alpha1.DNSZone, sets []v1alpha1.DNSRecordSet, now time.Time) ([]byte, error) {
	var members []v1alpha1.DNSRecordSet
	for _, rs := range sets {
		if rs.Spec.ZoneRef.Name == zone.Name {
			members = append(members, rs)
		}
	}
	zs := []v1alpha1.DNSZone{*zone.DeepCopy()}
	(&authority.Serials{}).Assign(zs, members)
	tab, problems := authority.Compile(zs, members, now)
	text, err := tab.ZoneFile(zone.Name)
	if err != nil {
		// Compile refused the zone itself; its problem says why.
		for _, p := range problems {
			if p.Kind == "DNSZone" {
				return nil, fmt.Errorf("zone %s is not served: %s", zone.Name, p.Reason)
			}
		}
		return nil, err
	}
	var b strings.Builder
	b.WriteString(text)
	for _, p := range problems {
		where := p.Kind + " " + p.Name
		if p.Namespace != "" {
			where = p.Kind + " " + p.Namespace + "/" + p.Name
		}
		if p.Endpoint >= 0 {
			where += fmt.Sprintf(" endpoint %d", p.Endpoint)
		}
		if p.Target >= 0 {
			where += fmt.Sprintf(" target %d", p.Target)
		}
		fmt.Fprintf(&b, "; not served: %s: %s\n", where, strings.ReplaceAll(p.Reason, "\n", " "))
	}
	return []byte(b.String()), nil
}

// SerialNewer reports whether serial a is newer than b in RFC 1982 serial
// number arithmetic (32 bits): a != b and (a - b) mod 2^32 < 2^31.
func SerialNewer(a, b uint32) bool {
	return a != b && a-b < 1<<31
}

// NextSerial is the serial after s (RFC 1982 addition of 1), skipping 0,
// which DNSZone reads as "derive the serial".
func NextSerial(s uint32) uint32 {
	if s+1 == 0 {
		return 1
	}
	return s + 1
}
