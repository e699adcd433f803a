package externaldns

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"
	"strings"

	"github.com/svcdns/svc/api/v1alpha1"
)

// toRecord converts an endpoint into a record set endpoint. Every field is
// kept as written (name, target order and case, trailing dots), so
// fromRecord gives back exactly the endpoint external-dns wrote and its next
// plan finds nothing to change.
func toRecord(ep *Endpoint) v1alpha1.Endpoint {
	out := v1alpha1.Endpoint{
		DNSName:       ep.DNSName,
		RecordType:    ep.RecordType,
		Targets:       slices.Clone(ep.Targets),
		SetIdentifier: ep.SetIdentifier,
	}
	if ep.RecordTTL > 0 {
		ttl := ep.RecordTTL
		out.RecordTTL = &ttl
	}
	if len(ep.Labels) > 0 {
		out.Labels = maps.Clone(ep.Labels)
	}
	for _, p := range ep.ProviderSpecific {
		out.ProviderSpecific = append(out.ProviderSpecific, v1alpha1.ProviderSpecificProperty{Name: p.Name, Value: p.Value})
	}
	return out
}

// fromRecord is the inverse of toRecord.
func fromRecord(r *v1alpha1.Endpoint) *Endpoint {
	ep := &Endpoint{
		DNSName:       r.DNSName,
		RecordType:    r.RecordType,
		Targets:       slices.Clone(r.Targets),
		SetIdentifier: r.SetIdentifier,
	}
	if r.RecordTTL != nil {
		ep.RecordTTL = *r.RecordTTL
	}
	if len(r.Labels) > 0 {
		ep.Labels = maps.Clone(r.Labels)
	}
	for _, p := range r.ProviderSpecific {
		ep.ProviderSpecific = append(ep.ProviderSpecific, ProviderProperty{Name: p.Name, Value: p.Value})
	}
	return ep
}

// canonName is the name a record is matched by: lower case, no final dot.
func canonName(n string) string { return strings.ToLower(strings.TrimSuffix(n, ".")) }

// key identifies one endpoint the way external-dns does: name, type and
// set identifier.
type key struct{ name, rtype, setID string }

func keyOf(name, rtype, setID string) key { return key{canonName(name), rtype, setID} }

// objectName is the DNSRecordSet holding the records of one owner name in
// one zone: readable, a valid Kubernetes name, and unique through a hash of
// the exact zone and name.
func objectName(zone, name string) string {
	sum := sha256.Sum256([]byte(zone + "\x00" + canonName(name)))
	var b strings.Builder
	dash := false
	for _, r := range canonName(name) {
		if b.Len() >= 40 {
			break
		}
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
			dash = false
		case r == '*':
			b.WriteString("wildcard")
			dash = false
		default:
			if !dash && b.Len() > 0 {
				b.WriteByte('-')
				dash = true
			}
		}
	}
	readable := strings.Trim(b.String(), "-")
	if readable == "" {
		readable = "apex"
	}
	return "extdns-" + readable + "-" + hex.EncodeToString(sum[:5])
}

// zoneOf picks the longest of zones (canonical names) that holds name, or "".
func zoneOf(zones []string, name string) string {
	n := canonName(name)
	best := ""
	for _, z := range zones {
		if (n == z || strings.HasSuffix(n, "."+z)) && len(z) > len(best) {
			best = z
		}
	}
	return best
}
