package authority

import (
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/api/v1alpha1"
)

// A record set may only attach to a zone from a namespace the zone's
// spec.recordSetNamespaces allows; a refused set serves nothing and is
// reported with CodeNamespaceNotAllowed.
func TestRecordSetNamespaces(t *testing.T) {
	cases := []struct {
		name   string
		rules  *v1alpha1.RecordSetNamespaces
		ns     string
		served bool
	}{
		{"default allows default", nil, "default", true},
		{"default refuses others", nil, "intruder", false},
		{"all", &v1alpha1.RecordSetNamespaces{From: "All"}, "intruder", true},
		{"names listed", &v1alpha1.RecordSetNamespaces{From: "Names", Names: []string{"team"}}, "team", true},
		{"names not listed", &v1alpha1.RecordSetNamespaces{From: "Names", Names: []string{"team"}}, "default", false},
		{"names empty", &v1alpha1.RecordSetNamespaces{From: "Names"}, "default", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			z := zoneObj("example.com", func(z *v1alpha1.DNSZone) { z.Spec.RecordSetNamespaces = c.rules })
			rs := recordSet(c.ns, "hijack", "example.com", ep("www", "A", "192.0.2.66"))
			tab, problems := Compile([]v1alpha1.DNSZone{z}, []v1alpha1.DNSRecordSet{rs}, fixtureNow)
			a := tab.Lookup(wireName(t, "www.example.com."), dns.TypeA, Client{})
			if got := a.Kind == Answered; got != c.served {
				t.Fatalf("www.example.com. answered %v (%s), want served=%v", got, a.Kind, c.served)
			}
			if c.served {
				if len(problems) != 0 {
					t.Fatalf("problems %v", problems)
				}
				return
			}
			if len(problems) != 1 || problems[0].Code != CodeNamespaceNotAllowed || problems[0].Namespace != c.ns ||
				!strings.Contains(problems[0].Reason, "spec.recordSetNamespaces") {
				t.Fatalf("problems %+v, want one NamespaceNotAllowed naming spec.recordSetNamespaces", problems)
			}
		})
	}
}
