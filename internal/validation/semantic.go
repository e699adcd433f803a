package validation

import (
	"fmt"
	"net/netip"
	"net/url"
	"strings"
	"time"
	_ "time/tzdata" // schedules name IANA zones; a minimal container has no zoneinfo

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/dataplane/authority"
	"github.com/svcdns/svc/internal/listfetch"
	"github.com/svcdns/svc/internal/suggest"
)

// Semantic checks refuse at write time what the data plane's compile step
// would refuse, with the compile step's own code (dataplane/authority for
// records, v1alpha1.ParseSchedule for schedules), so a write that succeeds is
// served as written. They run in Admit after the schema, in both store modes;
// checks that need other objects (the zone of a record set, the loaded
// catalogue) are exported for the API's write path (RecordSetErrors,
// CatalogueErrors).

// semantic returns the semantic errors of an object that passed decoding;
// nil for kinds without semantic rules or objects that do not convert (the
// schema reports those).
func semantic(kind string, obj *unstructured.Unstructured) field.ErrorList {
	switch kind {
	case "DNSRecordSet":
		var rs v1alpha1.DNSRecordSet
		if runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &rs) != nil {
			return nil
		}
		return RecordSetErrors(&rs, nil)
	case "DNSZone":
		var z v1alpha1.DNSZone
		if runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &z) != nil {
			return nil
		}
		return zoneErrors(&z)
	case "Policy":
		var p v1alpha1.Policy
		if runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &p) != nil {
			return nil
		}
		return PolicyErrors(&p.Spec)
	case "BlockList":
		var bl v1alpha1.BlockList
		if runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &bl) != nil {
			return nil
		}
		return BlockListErrors(&bl.Spec)
	}
	return nil
}

// BlockListErrors refuses source URLs the list fetcher would refuse, with
// the fetcher's own rule (listfetch.CheckURL), so a file:// URL fails at
// write time, not at the first fetch. The address rule depends on the
// nodes' blocking.allowLocalListURLs and on DNS, so the fetcher keeps it.
func BlockListErrors(s *v1alpha1.BlockListSpec) field.ErrorList {
	var errs field.ErrorList
	for i, src := range s.Sources {
		if src.URL == "" {
			continue
		}
		if err := listfetch.CheckURL(src.URL, true); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("spec", "sources").Index(i).Child("url"),
				redactURL(src.URL), err.Error()))
		}
	}
	return errs
}

// redactURL hides a password in a URL echoed in an error.
func redactURL(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	return "<unparsable URL>"
}

// Ratchet drops the errors the stored object already had (same kind of
// error, value and message, wherever the record moved to): an object stored
// before a rule existed can still be changed elsewhere, and removing its
// other records is never refused. Its status keeps reporting the old problem.
func Ratchet(errs, stored field.ErrorList) field.ErrorList {
	if len(stored) == 0 {
		return errs
	}
	key := func(e *field.Error) string { return fmt.Sprintf("%s\x00%v\x00%s", e.Type, e.BadValue, e.Detail) }
	had := make(map[string]bool, len(stored))
	for _, e := range stored {
		had[key(e)] = true
	}
	out := errs[:0:0]
	for _, e := range errs {
		if !had[key(e)] {
			out = append(out, e)
		}
	}
	return out
}

// mergeSemantic adds the semantic errors to the schema's; a schema error at
// a path the semantic check also reports is dropped, since the semantic
// message says what is expected (a pattern does not).
func mergeSemantic(schemaErrs, sem field.ErrorList) field.ErrorList {
	if len(sem) == 0 {
		return schemaErrs
	}
	paths := map[string]bool{}
	for _, e := range sem {
		paths[e.Field] = true
	}
	out := make(field.ErrorList, 0, len(schemaErrs)+len(sem))
	for _, e := range schemaErrs {
		if !paths[e.Field] {
			out = append(out, e)
		}
	}
	return append(out, sem...)
}

// RecordSetErrors compiles the record set as the data plane does
// (authority.CheckRecordSet) and turns every record that would not be served
// into a field error naming the field, the value, what is expected and an
// example. zone is the DNSZone the set names (nil: not known, so the in-zone
// rule is not checked).
func RecordSetErrors(rs *v1alpha1.DNSRecordSet, zone *v1alpha1.DNSZone) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	more := 0
	for _, p := range authority.CheckRecordSet(rs, zone) {
		if len(errs) == maxRecordErrors {
			more++
			continue
		}
		ep := rs.Spec.Endpoints[p.Endpoint]
		if t := strings.ToUpper(ep.RecordType); (t == "CNAME" || t == "DNAME") && len(ep.Targets) > 1 {
			continue // the schema's rule refuses it with its own message
		}
		e := problemError(rs, p)
		// One error per field: a bad type makes every target fail too.
		if k := e.Field; !seen[k] {
			seen[k] = true
			errs = append(errs, e)
		}
	}
	if more > 0 {
		errs = append(errs, field.Invalid(field.NewPath("spec", "endpoints"), fmt.Sprintf("%d more", more),
			fmt.Sprintf("%d more records are refused for the same kinds of reasons; fix the ones above and apply again", more)))
	}
	return errs
}

// maxRecordErrors bounds the errors of one record set: a file of 1000 bad
// targets gets a readable answer.
const maxRecordErrors = 10

func problemError(rs *v1alpha1.DNSRecordSet, p authority.Problem) *field.Error {
	// The compile step's message says what is expected, with an example
	// (status shows the same text); a did-you-mean needs the candidates.
	ep := rs.Spec.Endpoints[p.Endpoint]
	path := field.NewPath("spec", "endpoints").Index(p.Endpoint)
	switch p.Field {
	case "recordType":
		msg := p.Reason
		if strings.HasPrefix(p.Reason, "unknown record type") {
			msg += suggest.DidYouMean(ep.RecordType, authority.CommonRecordTypes())
		}
		return field.Invalid(path.Child("recordType"), ep.RecordType, msg)
	case "dnsName":
		return field.Invalid(path.Child("dnsName"), ep.DNSName, p.Reason)
	}
	if p.Target < 0 || p.Target >= len(ep.Targets) {
		return field.Invalid(path.Child("targets"), ep.Targets, p.Reason)
	}
	return field.Invalid(path.Child("targets").Index(p.Target), ep.Targets[p.Target], p.Reason)
}

// zoneErrors checks what the compile step would ignore in a zone: a
// queryAccess CIDR that does not parse (ignored there, failing closed) and
// name servers that are not domain names.
func zoneErrors(z *v1alpha1.DNSZone) field.ErrorList {
	var errs field.ErrorList
	if qa := z.Spec.QueryAccess; qa != nil {
		for i, s := range qa.AllowCIDRs {
			if _, err := netip.ParsePrefix(s); err == nil {
				continue
			}
			if _, err := netip.ParseAddr(s); err == nil {
				continue
			}
			errs = append(errs, field.Invalid(field.NewPath("spec", "queryAccess", "allowCIDRs").Index(i), s,
				"not a CIDR or address; expected e.g. 192.0.2.0/24, 2001:db8::/32 or 192.0.2.7"))
		}
	}
	for i, n := range z.Spec.NameServers {
		if !authority.ValidName(n) {
			errs = append(errs, field.Invalid(field.NewPath("spec", "nameServers").Index(i), n,
				"not a domain name; expected a name server's name, e.g. ns1.example.com."))
		}
	}
	return errs
}

// PolicyErrors checks what the policy compile step parses: the schedule
// (v1alpha1.ParseSchedule: a bad schedule never activates the policy) and
// blockTTL.
func PolicyErrors(s *v1alpha1.PolicySpec) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if s.Schedule != nil {
		if _, err := v1alpha1.ParseSchedule(s.Schedule); err != nil {
			if se, ok := err.(*v1alpha1.ScheduleError); ok {
				p := spec.Child("schedule")
				if name, idx, ok := strings.Cut(se.Field, "["); ok {
					var i int
					fmt.Sscanf(idx, "%d]", &i)
					p = p.Child(name).Index(i)
				} else {
					p = p.Child(se.Field)
				}
				msg := se.Expected
				if se.Field == "tz" {
					msg += suggest.DidYouMean(se.Value, timeZones())
				}
				errs = append(errs, field.Invalid(p, se.Value, msg))
			} else {
				errs = append(errs, field.Invalid(spec.Child("schedule"), s.Schedule, err.Error()))
			}
		}
	}
	if s.BlockTTL != "" {
		if d, err := time.ParseDuration(s.BlockTTL); err != nil || d < 0 {
			errs = append(errs, field.Invalid(spec.Child("blockTTL"), s.BlockTTL, "not a duration; expected e.g. 10s, 5m or 1h"))
		}
	}
	return errs
}

// CatalogueErrors refuses service and category ids the loaded catalogue does
// not know, with the nearest ids. Objects whose ids become unknown later (a
// catalogue update) or that were written past the API (kubectl) are reported
// in status instead (Degraded, UnknownService / UnknownCategory).
func CatalogueErrors(s *v1alpha1.PolicySpec, services, categories []string) field.ErrorList {
	var errs field.ErrorList
	known := func(ids []string) map[string]bool {
		m := make(map[string]bool, len(ids))
		for _, id := range ids {
			m[id] = true
		}
		return m
	}
	svc, cat := known(services), known(categories)
	check := func(name string, ids []string, set map[string]bool, all []string, what string) {
		for i, id := range ids {
			if !set[id] {
				errs = append(errs, field.Invalid(field.NewPath("spec", name).Index(i), id,
					fmt.Sprintf("%s is not in the catalogue%s (svc services list shows the ids)", what, suggest.DidYouMean(id, all))))
			}
		}
	}
	check("blockedServices", s.BlockedServices, svc, services, "service")
	check("allowedServices", s.AllowedServices, svc, services, "service")
	check("blockedCategories", s.BlockedCategories, cat, categories, "category")
	return errs
}

// timeZones are a few common zone names for a did-you-mean; the full
// database has no portable listing.
func timeZones() []string {
	return []string{"UTC", "Europe/Berlin", "Europe/London", "Europe/Paris", "Europe/Madrid", "Europe/Rome",
		"Europe/Amsterdam", "Europe/Brussels", "Europe/Vienna", "Europe/Zurich", "Europe/Stockholm", "Europe/Oslo",
		"Europe/Copenhagen", "Europe/Helsinki", "Europe/Warsaw", "Europe/Prague", "Europe/Lisbon", "Europe/Dublin",
		"Europe/Athens", "Europe/Istanbul", "Europe/Moscow", "Europe/Kiev", "America/New_York", "America/Chicago",
		"America/Denver", "America/Los_Angeles", "America/Toronto", "America/Vancouver", "America/Sao_Paulo",
		"America/Mexico_City", "Asia/Tokyo", "Asia/Shanghai", "Asia/Kolkata", "Asia/Singapore", "Asia/Dubai",
		"Asia/Hong_Kong", "Asia/Seoul", "Australia/Sydney", "Australia/Melbourne", "Pacific/Auckland", "Africa/Johannesburg",
		"Africa/Cairo", "Africa/Lagos"}
}
