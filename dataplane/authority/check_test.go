package authority

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcdns/svc/api/v1alpha1"
)

func checkZone() *v1alpha1.DNSZone {
	return &v1alpha1.DNSZone{ObjectMeta: metav1.ObjectMeta{Name: "example-com"}, Spec: v1alpha1.DNSZoneSpec{ZoneName: "example.com"}}
}

func oneSet(name, typ string, targets ...string) *v1alpha1.DNSRecordSet {
	return &v1alpha1.DNSRecordSet{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "s"},
		Spec: v1alpha1.DNSRecordSetSpec{ZoneRef: v1alpha1.ZoneRef{Name: "example-com"},
			Endpoints: []v1alpha1.Endpoint{{DNSName: name, RecordType: typ, Targets: targets}}}}
}

func TestCheckRecordSet(t *testing.T) {
	cases := []struct {
		name, typ, target string
		field, want       string // "" field: no problem
	}{
		{"www", "A", "192.0.2.1", "", ""},
		{"www", "AA", "192.0.2.1", "recordType", "unknown record type"},
		{"www", "A", "192.0.2.300", "targets", "not an IPv4 address"},
		{"@", "MX", "mail.example.com.", "targets", "bad MX Pref"},
		{"@", "MX", "10 mail.example.com.", "", ""},
		{"my host", "A", "192.0.2.1", "dnsName", "blank"},
		{"a..b", "A", "192.0.2.1", "dnsName", "empty label"},
		{strings.Repeat("x", 64), "A", "192.0.2.1", "dnsName", "at most 63"},
		{"www.other.test.", "A", "192.0.2.1", "dnsName", "outside zone"},
		{"@", "CNAME", "x.example.net.", "targets", "CNAME at the zone apex"},
		{"@", "SOA", "x", "recordType", "spec.soa"},
		{"x", "TYPE65534", `\# 4 c0000201`, "", ""},
		{"bücher", "A", "192.0.2.1", "dnsName", `ASCII form "xn--bcher-kva"`},
	}
	for _, c := range cases {
		ps := CheckRecordSet(oneSet(c.name, c.typ, c.target), checkZone())
		if c.field == "" {
			if len(ps) > 0 {
				t.Errorf("%s %s %s: %v", c.name, c.typ, c.target, ps)
			}
			continue
		}
		if len(ps) != 1 || ps[0].Field != c.field || !strings.Contains(ps[0].Reason, c.want) {
			t.Errorf("%s %s %s: %+v, want one %s problem with %q", c.name, c.typ, c.target, ps, c.field, c.want)
		}
	}
	// Disabled records are checked too: they are served once enabled.
	rs := oneSet("www", "A", "192.0.2.300")
	rs.Spec.Endpoints[0].Service = &v1alpha1.EndpointExtension{Disabled: true}
	if ps := CheckRecordSet(rs, checkZone()); len(ps) != 1 {
		t.Errorf("disabled bad record: %v", ps)
	}
	// Without the zone, everything but the in-zone rule is checked.
	if ps := CheckRecordSet(oneSet("www.other.test.", "A", "192.0.2.1"), nil); len(ps) != 0 {
		t.Errorf("zone unknown: %v", ps)
	}
}

// FuzzCheckRecordSet: whatever an endpoint holds, the write-time check does
// not panic, names a valid endpoint and field, and what it lets through is
// what the compile step serves (no problem for the set in a full compile).
func FuzzCheckRecordSet(f *testing.F) {
	for _, s := range [][3]string{{"www", "A", "192.0.2.1"}, {"my host", "A", "1.2.3.4"}, {"@", "MX", "mail."}, {"a..b", "TXT", "x"},
		{"*.x", "SRV", "1 2 3 t."}, {`a\.b`, "CAA", `0 issue "x"`}, {"x.", "TYPE1", `\# 4 01020304`}, {"é", "AAAA", "::1"}} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, name, typ, target string) {
		rs := oneSet(name, typ, target)
		ps := CheckRecordSet(rs, checkZone())
		for _, p := range ps {
			if p.Endpoint != 0 || (p.Field != "dnsName" && p.Field != "recordType" && p.Field != "targets") {
				t.Fatalf("problem %+v", p)
			}
		}
		if len(ps) > 0 {
			return
		}
		z := *checkZone()
		z.Spec.RecordSetNamespaces = &v1alpha1.RecordSetNamespaces{From: v1alpha1.NamespacesFromAll}
		_, problems := Compile([]v1alpha1.DNSZone{z}, []v1alpha1.DNSRecordSet{*rs}, time.Now())
		for _, p := range problems {
			if p.Kind == "DNSRecordSet" {
				t.Fatalf("check passed %q %q %q but the compile step refuses: %v", name, typ, target, p)
			}
		}
	})
}

// Every example a refusal offers ("e.g. ...") must itself be accepted:
// a user who copies it must not be refused again.
func TestTargetExamplesAreAccepted(t *testing.T) {
	for typ, f := range targetFormats {
		name := "x"
		if typ == "NS" || typ == "CNAME" || typ == "DNAME" {
			name = "sub"
		}
		if p := CheckRecordSet(oneSet(name, typ, f[1]), checkZone()); len(p) > 0 {
			t.Errorf("%s example %q refused: %v", typ, f[1], p)
		}
	}
}
