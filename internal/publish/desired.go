package publish

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/dataplane/authority"
)

// Label selects the target of a record set.
const Label = "service.io/publish"

// ExternalDNSTarget is the label value a second external-dns instance
// publishes (--label-filter=service.io/publish=external-dns); this service
// writes no status for it.
const ExternalDNSTarget = "external-dns"

// zoneDefaultTTL is the compile step's TTL for a zone without defaultTTL.
const zoneDefaultTTL = 3600

// rrset is one desired (owner, type) at one target.
type rrset struct {
	name  string // canonical: lower case, trailing dot
	rtype uint16
	ttl   uint32
	rrs   []dns.RR
	sets  []string // record sets that contribute, "namespace/name"
}

func rrsetKey(name string, rtype uint16) string { return name + " " + dns.TypeToString[rtype] }

// texts is the comparable form of an RRset: every record in presentation
// form, sorted.
func (s *rrset) texts() []string {
	out := make([]string, 0, len(s.rrs))
	for _, rr := range s.rrs {
		out = append(out, rr.String())
	}
	sort.Strings(out)
	return out
}

// setPlan is what one labelled record set asks of its target.
type setPlan struct {
	namespace, name string
	target          string // the label value
	known           bool   // target is configured
	refused         string // nothing is published, and why
	problems        []string
	keys            []string // its RRsets at the target
}

// plan is the desired state of every target at one moment.
type plan struct {
	rrsets map[string]map[string]*rrset // target -> key -> RRset
	sets   map[string]*setPlan          // "namespace/name" -> plan
	// next is the earliest future expiresAt of an endpoint that is
	// published now: the plan changes then without any object changing.
	next time.Time
}

// buildPlan computes what every target should hold: the eligible endpoints
// of the record sets labelled with its name whose owner names lie in its
// zone. An endpoint is eligible unless disabled, expired, or restricted to
// a ClientGroup view (those are private by intent).
func buildPlan(targets map[string]*Target, zones []v1alpha1.DNSZone, sets []v1alpha1.DNSRecordSet, now time.Time) *plan {
	p := &plan{rrsets: map[string]map[string]*rrset{}, sets: map[string]*setPlan{}}
	for name := range targets {
		p.rrsets[name] = map[string]*rrset{}
	}
	byName := make(map[string]*v1alpha1.DNSZone, len(zones))
	for i := range zones {
		byName[zones[i].Name] = &zones[i]
	}
	for i := range sets {
		rs := &sets[i]
		label, ok := rs.Labels[Label]
		if !ok || label == ExternalDNSTarget {
			continue
		}
		sp := &setPlan{namespace: rs.Namespace, name: rs.Name, target: label}
		p.sets[rs.Namespace+"/"+rs.Name] = sp
		t, ok := targets[label]
		if !ok {
			sp.refused = unknownTarget(label, targets)
			continue
		}
		sp.known = true
		z := byName[rs.Spec.ZoneRef.Name]
		switch {
		case z == nil:
			sp.refused = fmt.Sprintf("DNSZone %q does not exist", rs.Spec.ZoneRef.Name)
			continue
		case z.Spec.Type != "" && z.Spec.Type != "primary":
			sp.refused = fmt.Sprintf("DNSZone %q is a %s zone; only record sets of primary zones are published", z.Name, z.Spec.Type)
			continue
		case !z.Spec.RecordSetNamespaces.Allows(namespaceOf(rs.Namespace)):
			sp.refused = fmt.Sprintf("DNSZone %q does not admit record sets of namespace %q (spec.recordSetNamespaces)", z.Name, namespaceOf(rs.Namespace))
			continue
		}
		zoneName := z.Spec.ZoneName
		if zoneName == "" {
			zoneName = z.Name
		}
		zttl := uint32(zoneDefaultTTL)
		if z.Spec.DefaultTTL != nil {
			zttl = clampTTL(*z.Spec.DefaultTTL)
		}
		for ei := range rs.Spec.Endpoints {
			p.endpoint(t, sp, rs, ei, zoneName, zttl, now)
		}
	}
	p.checkCNAMEs()
	for _, byKey := range p.rrsets {
		for _, s := range byKey {
			for _, rr := range s.rrs {
				rr.Header().Ttl = s.ttl // one TTL per RRset, also in what is sent
			}
		}
	}
	return p
}

func (p *plan) endpoint(t *Target, sp *setPlan, rs *v1alpha1.DNSRecordSet, ei int, zoneName string, zttl uint32, now time.Time) {
	ep := &rs.Spec.Endpoints[ei]
	bad := func(format string, args ...any) {
		sp.problems = append(sp.problems, fmt.Sprintf("endpoint %d: ", ei)+fmt.Sprintf(format, args...))
	}
	if x := ep.Service; x != nil {
		if x.Disabled || (x.View != "" && x.View != "public") {
			return
		}
		if x.ExpiresAt != nil {
			if !x.ExpiresAt.After(now) {
				return
			}
			if p.next.IsZero() || x.ExpiresAt.Time.Before(p.next) {
				p.next = x.ExpiresAt.Time
			}
		}
	}
	typeName := strings.ToUpper(ep.RecordType)
	rtype, ok := dns.StringToType[typeName]
	if !ok {
		n, err := strconv.ParseUint(strings.TrimPrefix(typeName, "TYPE"), 10, 16)
		if !strings.HasPrefix(typeName, "TYPE") || err != nil {
			bad("unknown record type %q", ep.RecordType)
			return
		}
		rtype = uint16(n)
	}
	switch rtype {
	case dns.TypeSOA, dns.TypeANY, dns.TypeAXFR, dns.TypeIXFR, dns.TypeOPT, dns.TypeTSIG, dns.TypeTKEY:
		bad("%s records are not published", typeName)
		return
	}
	if strings.ContainsAny(ep.DNSName, " \t\n\r;()\"") {
		bad("dnsName %q is not a domain name", ep.DNSName)
		return
	}
	owner := dns.CanonicalName(authority.OwnerName(ep.DNSName, zoneName))
	if _, ok := dns.IsDomainName(owner); !ok {
		bad("dnsName %q is not a domain name", ep.DNSName)
		return
	}
	if !dns.IsSubDomain(t.Zone, owner) {
		bad("%s is outside the zone %s of target %s", owner, t.Zone, t.Name)
		return
	}
	if rtype == dns.TypeNS && owner == t.Zone {
		bad("NS at the apex of %s belongs to the target's zone and is not published", t.Zone)
		return
	}
	ttl := zttl
	if ep.RecordTTL != nil {
		ttl = clampTTL(*ep.RecordTTL)
	}
	targets := ep.Targets
	if (rtype == dns.TypeCNAME || rtype == dns.TypeDNAME) && len(targets) > 1 {
		targets = targets[:1] // as the compile step serves it
	}
	key := rrsetKey(owner, rtype)
	byKey := p.rrsets[t.Name]
	set := byKey[key]
	added := false
	for ti, target := range targets {
		if strings.ContainsAny(target, "\n\r") || strings.TrimSpace(target) == "" {
			bad("target %d is empty or spans lines", ti)
			continue
		}
		rr, err := dns.NewRR(fmt.Sprintf("%s %d IN %s %s", owner, ttl, typeName, target))
		if err != nil || rr == nil || rr.Header().Rrtype != rtype {
			bad("target %q is not %s record data", target, typeName)
			continue
		}
		if set == nil {
			set = &rrset{name: owner, rtype: rtype, ttl: ttl}
			byKey[key] = set
		}
		set.ttl = min(set.ttl, ttl) // one TTL per RRset (RFC 2181 5.2)
		if !slices.ContainsFunc(set.rrs, func(o dns.RR) bool { return dns.IsDuplicate(o, rr) }) {
			set.rrs = append(set.rrs, rr)
		}
		added = true
	}
	if added {
		id := rs.Namespace + "/" + rs.Name
		if !slices.Contains(set.sets, id) {
			set.sets = append(set.sets, id)
		}
		if !slices.Contains(sp.keys, key) {
			sp.keys = append(sp.keys, key)
		}
	}
}

// checkCNAMEs drops RRsets that would share a name with a CNAME: a primary
// ignores such an UPDATE silently (RFC 2136 3.4.2.2), so it would look
// published while the server kept something else.
func (p *plan) checkCNAMEs() {
	for _, byKey := range p.rrsets {
		cname := map[string]bool{}
		count := map[string]int{}
		for _, s := range byKey {
			count[s.name]++
			if s.rtype == dns.TypeCNAME {
				cname[s.name] = true
			}
		}
		for key, s := range byKey {
			if !cname[s.name] || count[s.name] == 1 {
				continue
			}
			for _, id := range s.sets {
				if sp := p.sets[id]; sp != nil {
					sp.problems = append(sp.problems, fmt.Sprintf("%s has a CNAME and other records; none of them is published: remove one", strings.TrimSuffix(s.name, ".")))
					sp.keys = slices.DeleteFunc(sp.keys, func(k string) bool { return k == key })
				}
			}
			delete(byKey, key)
		}
	}
	for _, sp := range p.sets {
		sp.problems = dedupe(sp.problems)
	}
}

const unknownTargetPrefix = "unknown publication target "

func unknownTarget(label string, targets map[string]*Target) string {
	if len(targets) == 0 {
		return fmt.Sprintf(unknownTargetPrefix+"%q: no publish.targets are configured", label)
	}
	names := make([]string, 0, len(targets))
	for n := range targets {
		names = append(names, n)
	}
	sort.Strings(names)
	return fmt.Sprintf(unknownTargetPrefix+"%q: publish.targets configures %s", label, strings.Join(names, ", "))
}

func namespaceOf(ns string) string {
	if ns == "" {
		return v1alpha1.DefaultRecordSetNamespace
	}
	return ns
}

func clampTTL(v int64) uint32 { return uint32(min(max(v, 0), 2147483647)) }

func dedupe(l []string) []string {
	seen := map[string]bool{}
	out := l[:0]
	for _, s := range l {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
