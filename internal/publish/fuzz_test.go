package publish

import (
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcdns/svc/api/v1alpha1"
)

// FuzzPlan: endpoints as anyone may write them (dnsName, recordType,
// target) never panic the planner, and what it plans stays inside the
// target's zone with the type it is filed under.
func FuzzPlan(f *testing.F) {
	for _, s := range [][3]string{
		{"www", "A", "192.0.2.1"}, {"@", "MX", "10 mail"}, {"x.example.com.", "TXT", `"a b" c`},
		{"*.w", "CNAME", "t."}, {"a", "TYPE65280", `\# 2 abcd`}, {"n", "NS", "ns.example.net."},
		{"a..b", "A", "1.2.3.4"}, {"a", "A", "1.2.3.4 ; x"}, {"a", "SRV", "0 0 443 ("}, {"\\065", "AAAA", "::1"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	zones := []v1alpha1.DNSZone{{ObjectMeta: metav1.ObjectMeta{Name: "example.com"}}}
	targets := map[string]*Target{"t": {Name: "t", Zone: "example.com.", Server: "192.0.2.53:53"}}
	now := time.Unix(0, 0)
	f.Fuzz(func(t *testing.T, name, typ, target string) {
		rs := set("s", "t", ep(name, typ, target))
		p := buildPlan(targets, zones, []v1alpha1.DNSRecordSet{rs}, now)
		for key, s := range p.rrsets["t"] {
			if !dns.IsSubDomain("example.com.", s.name) || key != rrsetKey(s.name, s.rtype) {
				t.Fatalf("planned %q (%s) for zone example.com.", key, s.name)
			}
			for _, rr := range s.rrs {
				if rr.Header().Rrtype != s.rtype || !strings.EqualFold(rr.Header().Name, s.name) {
					t.Fatalf("record %s filed under %s", rr, key)
				}
			}
		}
	})
}
