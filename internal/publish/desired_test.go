package publish

import (
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcdns/svc/api/v1alpha1"
)

func set(name, label string, eps ...v1alpha1.Endpoint) v1alpha1.DNSRecordSet {
	rs := v1alpha1.DNSRecordSet{Spec: v1alpha1.DNSRecordSetSpec{ZoneRef: v1alpha1.ZoneRef{Name: "example.com"}, Endpoints: eps}}
	rs.Name, rs.Namespace = name, "default"
	if label != "" {
		rs.Labels = map[string]string{Label: label}
	}
	return rs
}

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

// TestPlan: which endpoints of which record sets a target is given, and
// why the others are not.
func TestPlan(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ttl := int64(60)
	zones := []v1alpha1.DNSZone{{ObjectMeta: metav1.ObjectMeta{Name: "example.com"}, Spec: v1alpha1.DNSZoneSpec{DefaultTTL: &ttl}}}
	targets := map[string]*Target{"pub": {Name: "pub", Zone: "pub.example.com.", Server: "192.0.2.53:53"}}
	soon := metav1.NewTime(now.Add(time.Hour))
	past := metav1.NewTime(now.Add(-time.Hour))
	sets := []v1alpha1.DNSRecordSet{
		set("web", "pub",
			ep("www.pub", "A", "192.0.2.1", "192.0.2.2"),
			withExt(ep("public.pub", "A", "198.51.100.1"), v1alpha1.EndpointExtension{View: "public", ExpiresAt: &soon}),
			withExt(ep("lan.pub", "A", "10.0.0.1"), v1alpha1.EndpointExtension{View: "office"}),
			withExt(ep("off.pub", "A", "10.0.0.2"), v1alpha1.EndpointExtension{Disabled: true}),
			withExt(ep("old.pub", "A", "10.0.0.3"), v1alpha1.EndpointExtension{ExpiresAt: &past}),
			ep("www", "A", "192.0.2.9"),         // outside pub.example.com
			ep("pub", "NS", "ns1.example.net."), // the target zone's apex NS
			ep("mail.pub", "MX", "10 mx"),
		),
		set("more", "pub", withTTL(ep("www.pub", "A", "192.0.2.2", "192.0.2.3"), 30)),
		set("clash", "pub", ep("c.pub", "CNAME", "www.pub.example.com."), ep("c.pub", "TXT", "x")),
		set("typo", "pbu", ep("x.pub", "A", "192.0.2.4")),
		set("elsewhere", ExternalDNSTarget, ep("y.pub", "A", "192.0.2.5")),
		set("unlabelled", "", ep("z.pub", "A", "192.0.2.6")),
	}
	other := set("other-ns", "pub", ep("o.pub", "A", "192.0.2.7"))
	other.Namespace = "team"
	sets = append(sets, other)

	p := buildPlan(targets, zones, sets, now)
	var keys []string
	for k, s := range p.rrsets["pub"] {
		keys = append(keys, k+" "+strings.Join(s.texts(), "|"))
	}
	sort.Strings(keys)
	want := []string{
		"mail.pub.example.com. MX mail.pub.example.com.\t60\tIN\tMX\t10 mx.",
		"public.pub.example.com. A public.pub.example.com.\t60\tIN\tA\t198.51.100.1",
		"www.pub.example.com. A www.pub.example.com.\t30\tIN\tA\t192.0.2.1|www.pub.example.com.\t30\tIN\tA\t192.0.2.2|www.pub.example.com.\t30\tIN\tA\t192.0.2.3",
	}
	if !slices.Equal(keys, want) {
		t.Errorf("RRsets:\n%s\nwant\n%s", strings.Join(keys, "\n"), strings.Join(want, "\n"))
	}
	if !p.next.Equal(soon.Time) {
		t.Errorf("next = %v, want the expiry %v", p.next, soon.Time)
	}
	web := p.sets["default/web"]
	for _, w := range []string{"www.example.com. is outside the zone pub.example.com.", "NS at the apex"} {
		if !slices.ContainsFunc(web.problems, func(s string) bool { return strings.Contains(s, w) }) {
			t.Errorf("web problems %q lack %q", web.problems, w)
		}
	}
	if len(web.problems) != 2 {
		t.Errorf("web problems: %q", web.problems)
	}
	if c := p.sets["default/clash"]; len(c.keys) != 0 || len(c.problems) != 1 || !strings.Contains(c.problems[0], "CNAME and other records") {
		t.Errorf("clash = %+v", c)
	}
	if ty := p.sets["default/typo"]; ty.known || ty.refused != `unknown publication target "pbu": publish.targets configures pub` {
		t.Errorf("typo = %+v", ty)
	}
	if o := p.sets["team/other-ns"]; !strings.Contains(o.refused, `does not admit record sets of namespace "team"`) {
		t.Errorf("other namespace = %+v", o)
	}
	for _, id := range []string{"default/elsewhere", "default/unlabelled"} {
		if p.sets[id] != nil {
			t.Errorf("%s planned: %+v", id, p.sets[id])
		}
	}
}
