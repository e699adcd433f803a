package authority

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/api/v1alpha1"
)

// walking is t with the default zone's shortcut off: every name it does
// not hold is walked up its ancestors, as before the shortcut.
func walking(t *Table) *Table {
	w := t.WithSync(func(string, string) bool { return true })
	for _, z := range w.list {
		z.plainRoot = false
	}
	return w
}

// The default zone answers the names it holds, and a name it does not hold
// the same with the shortcut (no walk up the ancestors, no lookup at all
// for a length no name has) as with the walk.
func TestPlainRootAnswersAsTheWalk(t *testing.T) {
	root := func(eps ...v1alpha1.Endpoint) *Table {
		tab, problems := Compile([]v1alpha1.DNSZone{zoneObj("root", func(z *v1alpha1.DNSZone) { z.Spec.ZoneName = "." })},
			[]v1alpha1.DNSRecordSet{recordSet("default", "lan", "root", eps...)}, fixtureNow)
		if len(problems) > 0 {
			t.Fatal(problems[0])
		}
		return tab
	}
	plain := plainRootTable(t)
	if z := plain.zones["\x00"]; !z.plainRoot {
		t.Fatal("a default zone of plain names does not take the shortcut")
	}
	for _, c := range []struct {
		desc string
		eps  []v1alpha1.Endpoint
	}{
		{"a wildcard", []v1alpha1.Endpoint{ep("*.dev.lan", "A", "192.168.1.2")}},
		{"a delegation", []v1alpha1.Endpoint{ep("sub.lan", "NS", "ns.example.net.")}},
		{"a DNAME", []v1alpha1.Endpoint{ep("old.lan", "DNAME", "lan.")}},
	} {
		if z := root(c.eps...).zones["\x00"]; z.plainRoot {
			t.Errorf("a default zone with %s takes the shortcut", c.desc)
		}
	}

	walk := walking(plain)
	client := Client{Addr: netip.MustParseAddr("192.0.2.7")}
	names := []string{".", "lan.", "home.lan.", "nas.home.lan.", "NAS.Home.LAN.", "x.nas.home.lan.", "router.lan.",
		"tv.lan.", "office.lan.", "printer.office.lan.", "www.example.com.", "c1.example.net.", "com.", "a.b.c.d.e.f.",
		"nas.home.lam.", "routes.lan."}
	for i := range 40 {
		names = append(names, fmt.Sprintf("h%d.example.net.", i*37))
	}
	for _, n := range names {
		q := wireName(t, n)
		for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeTXT, dns.TypeANY, dns.TypeSOA} {
			var got, want Answer
			plain.LookupWire(q, qt, client, &got)
			walk.LookupWire(q, qt, client, &want)
			got.Fill()
			want.Fill()
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s %s: shortcut %v, walk %v", n, dns.TypeToString[qt], got, want)
			}
		}
	}
	q := wireName(t, "c1.example.net.")
	var a Answer
	if n := testing.AllocsPerRun(100, func() { plain.LookupWire(q, dns.TypeA, client, &a) }); n != 0 || a.Kind != 0 {
		t.Errorf("a name the default zone does not hold: %v allocations, kind %v", n, a.Kind)
	}
}

func plainRootTable(tb testing.TB) *Table {
	tab, problems := Compile([]v1alpha1.DNSZone{zoneObj("root", func(z *v1alpha1.DNSZone) { z.Spec.ZoneName = "." })},
		[]v1alpha1.DNSRecordSet{recordSet("default", "lan", "root",
			ep("nas.home.lan", "A", "192.168.1.3"),
			ep("router.lan", "A", "192.168.1.1"),
			ep("router.lan", "TXT", "hello"),
			ep("tv.lan", "CNAME", "nas.home.lan."),
			ep("printer.office.lan", "AAAA", "2001:db8::9"),
		)}, fixtureNow)
	if len(problems) > 0 {
		tb.Fatal(problems[0])
	}
	return tab
}

// BenchmarkDefaultZoneMiss is what every forwarded, cached or blocked
// query pays in the default zone of a node that holds a few local names:
// with the shortcut and with the walk up the ancestors, in one run.
func BenchmarkDefaultZoneMiss(b *testing.B) {
	plain := plainRootTable(b)
	for _, c := range []struct {
		name string
		tab  *Table
	}{{"shortcut", plain}, {"walk", walking(plain)}} {
		for _, n := range []string{"c1.example.net.", "www.google.com."} {
			q := wireName(b, n)
			b.Run(c.name+"/"+n, func(b *testing.B) {
				var a Answer
				for range b.N {
					c.tab.LookupWire(q, dns.TypeA, Client{}, &a)
				}
			})
		}
	}
}
