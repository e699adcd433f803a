package authority

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcdns/svc/api/v1alpha1"
)

// fixtureNow is the compile time of the fixture.
var fixtureNow = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func ep(name, typ string, targets ...string) v1alpha1.Endpoint {
	return v1alpha1.Endpoint{DNSName: name, RecordType: typ, Targets: targets}
}

func withTTL(e v1alpha1.Endpoint, ttl int64) v1alpha1.Endpoint {
	e.RecordTTL = &ttl
	return e
}

func withExt(e v1alpha1.Endpoint, x v1alpha1.EndpointExtension) v1alpha1.Endpoint {
	e.Service = &x
	return e
}

func zoneObj(name string, opts ...func(*v1alpha1.DNSZone)) v1alpha1.DNSZone {
	z := v1alpha1.DNSZone{}
	z.Name = name
	for _, o := range opts {
		o(&z)
	}
	return z
}

func recordSet(ns, name, zone string, eps ...v1alpha1.Endpoint) v1alpha1.DNSRecordSet {
	rs := v1alpha1.DNSRecordSet{}
	rs.Namespace, rs.Name = ns, name
	rs.Spec.ZoneRef.Name = zone
	rs.Spec.Endpoints = eps
	return rs
}

func ptr[T any](v T) *T { return &v }

// fixtureZoneEndpoints is the content of example.com. used by the golden,
// wire and NSD/Knot tests: every case of RFC 1034 4.3.2 and the extensions.
func fixtureZoneEndpoints() []v1alpha1.Endpoint {
	return []v1alpha1.Endpoint{
		ep("@", "MX", "10 mail.example.com.", "20 mail2.example.com"),
		ep("@", "TXT", "v=spf1 -all"),
		ep("ns1", "A", "192.0.2.53"),
		ep("ns1", "AAAA", "2001:db8::53"),
		ep("ns2.example.com", "A", "192.0.2.54"),
		ep("www", "A", "192.0.2.1", "192.0.2.2"),
		ep("www.example.com.", "AAAA", "2001:db8::1"),
		withTTL(ep("mail", "A", "192.0.2.25"), 600),
		ep("mail2", "A", "192.0.2.26"),
		ep("alias", "CNAME", "www.example.com."),
		ep("chain1", "CNAME", "chain2.example.com"),
		ep("chain2", "CNAME", "www.example.com."),
		ep("loop1", "CNAME", "loop2.example.com."),
		ep("loop2", "CNAME", "loop1.example.com."),
		ep("ext", "CNAME", "www.example.net."),
		ep("dangling", "CNAME", "nothere.example.com."),
		ep("sub", "NS", "ns.sub.example.com.", "ns.elsewhere.net."),
		ep("sub", "DS", "12345 8 2 49FD46E6C4B45C55D4AC69CBD3CD34AC1AFE51DE7C8D2A5C3E1CC9E5D5F6A7B8"),
		ep("ns.sub", "A", "192.0.2.100"),
		ep("old", "DNAME", "example.net."),
		ep("legacy", "DNAME", "new.example.com."),
		ep("host.new", "A", "192.0.2.77"),
		ep("*.wild", "A", "192.0.2.50"),
		ep("*.wild", "TXT", `"wild text"`),
		ep("*.wc", "CNAME", "www.example.com."),
		ep("a.b.ent", "A", "192.0.2.60"),
		ep("_sip._tcp", "SRV", "10 5 5060 sip.example.com."),
		ep("sip", "A", "192.0.2.70"),
		ep("generic", "TYPE65534", `\# 3 abcdef`),
		ep("generic-a", "A", `\# 4 c0000207`),
		ep("caa", "CAA", `0 issue "letsencrypt.org"`),
		ep("txt", "TXT", `"quoted one" "two"`, `unquoted text; with "quotes" and \ backslash`),
		ep("Mixed.Case", "A", "192.0.2.80"),
		withExt(ep("office", "A", "10.0.0.1"), v1alpha1.EndpointExtension{View: "office"}),
		ep("office", "TXT", "everyone"),
		withExt(ep("published", "A", "198.51.100.1"), v1alpha1.EndpointExtension{View: "public"}),
		withExt(ep("disabled", "A", "198.51.100.2"), v1alpha1.EndpointExtension{Disabled: true}),
		withExt(ep("expired", "A", "198.51.100.3"), v1alpha1.EndpointExtension{ExpiresAt: &metav1.Time{Time: fixtureNow.Add(-time.Hour)}}),
		withExt(ep("expiring", "A", "198.51.100.4"), v1alpha1.EndpointExtension{ExpiresAt: &metav1.Time{Time: fixtureNow.Add(time.Hour)}}),
		ep("partly-bad", "A", "192.0.2.90", "not-an-address", "192.0.2.91"),
		ep("ptr", "PTR", "www.example.com."),
		ep("hinfo", "HINFO", `"PDP-11" "UNIX"`),
		ep("sshfp", "SSHFP", "1 1 123456789abcdef67890123456789abcdef67890"),
		ep("svc", "HTTPS", `1 . alpn="h2,h3"`),
	}
}

func fixture() ([]v1alpha1.DNSZone, []v1alpha1.DNSRecordSet) {
	zones := []v1alpha1.DNSZone{
		zoneObj("example.com", func(z *v1alpha1.DNSZone) {
			z.ResourceVersion = "4242"
			z.Spec.DefaultTTL = ptr(int64(3600))
			z.Spec.NameServers = []string{"ns1.example.com", "ns2.example.com."}
			z.Spec.SOA = &v1alpha1.SOA{TTL: ptr(int64(7200)), Minimum: 300}
		}),
		zoneObj("root", func(z *v1alpha1.DNSZone) { z.Spec.ZoneName = "." }),
		zoneObj("corp", func(z *v1alpha1.DNSZone) {
			z.Spec.ZoneName = "corp.example."
			z.Spec.QueryAccess = &v1alpha1.QueryAccess{AllowCIDRs: []string{"10.0.0.0/8", "2001:db8::1"}, ClientGroups: []string{"default/staff"}}
		}),
		zoneObj("fwd", func(z *v1alpha1.DNSZone) {
			z.Spec.ZoneName = "fwd.example.org"
			z.Spec.Type = "forward"
			z.Spec.Forward = &v1alpha1.ForwardZone{UpstreamGroup: "internal"}
		}),
		zoneObj("late", func(z *v1alpha1.DNSZone) { z.Spec.ZoneName = "late.example." }),
	}
	sets := []v1alpha1.DNSRecordSet{
		recordSet("default", "example", "example.com", fixtureZoneEndpoints()...),
		recordSet("default", "lan", "root",
			ep("router.lan", "A", "192.168.1.1"),
			ep("*.dev.lan", "A", "192.168.1.2"),
			withExt(ep("nas.lan", "A", "192.168.1.3"), v1alpha1.EndpointExtension{View: "family"}),
			ep("tv.lan", "CNAME", "www.example.com."),
		),
		recordSet("default", "corp", "corp", ep("intranet", "A", "10.1.1.1")),
		recordSet("default", "late", "late", ep("host", "A", "10.2.2.2")),
		recordSet("default", "orphan", "missing", ep("x", "A", "10.3.3.3")),
	}
	return zones, sets
}

// fixtureTable compiles the fixture with zone late.example. unsynced.
func fixtureTable() (*Table, []Problem) {
	zones, sets := fixture()
	t, p := Compile(zones, sets, fixtureNow)
	return t.WithSync(func(name, _ string) bool { return name != "late.example." }), p
}
