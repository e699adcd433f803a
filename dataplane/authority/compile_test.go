package authority

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/api/v1alpha1"
)

func TestCompileProblems(t *testing.T) {
	_, problems := fixtureTable()
	var got []string
	for _, p := range problems {
		got = append(got, p.String())
	}
	golden(t, "problems.golden", strings.Join(got, "\n")+"\n")
	// The bad target is reported by index and its siblings still serve
	// (checked by the partly-bad lookup case).
	found := false
	for _, p := range problems {
		if p.Name == "example" && p.Target == 1 && strings.Contains(p.Reason, "not-an-address") {
			found = true
		}
	}
	if !found {
		t.Errorf("no problem names target 1 of partly-bad: %v", got)
	}
}

func TestCompileRejects(t *testing.T) {
	zones := []v1alpha1.DNSZone{zoneObj("example.com"), zoneObj("zz-dup", func(z *v1alpha1.DNSZone) { z.Spec.ZoneName = "Example.COM." })}
	cases := []struct {
		ep   v1alpha1.Endpoint
		want string
	}{
		{ep("x", "BOGUS", "1"), "unknown record type"},
		{ep("x", "SOA", "a. b. 1 2 3 4 5"), "spec.soa"},
		{ep("@", "NS", "ns.other."), "spec.nameServers"},
		{ep("@", "CNAME", "x.example.com."), "apex"},
		{ep("www.example.net.", "A", "192.0.2.1"), "outside zone"},
		{ep("x", "A", "2001:db8::1"), "not an IPv4"},
		{ep("x", "AAAA", "192.0.2.1"), "not an IPv6"},
		{ep("x", "MX", "ten mail."), "MX target"},
		{ep("x", "CNAME", "a.", "b."), "holds one target"},
		{ep("x", "TXT", "line\nbreak"), "line break"},
		{ep("x", "A", `"$INCLUDE /etc/passwd"`), "not an IPv4"},
		{ep("x", "TYPE65534", `\# 2 abcdef`), "TYPE65534"},
	}
	for _, c := range cases {
		rs := recordSet("default", "rs", "example.com", c.ep)
		_, problems := Compile(zones, []v1alpha1.DNSRecordSet{rs}, time.Now())
		var all []string
		for _, p := range problems {
			all = append(all, p.String())
		}
		joined := strings.Join(all, "; ")
		if !strings.Contains(joined, c.want) || !strings.Contains(joined, "already declared") {
			t.Errorf("%s %s %q: problems %q, want one containing %q", c.ep.DNSName, c.ep.RecordType, c.ep.Targets, joined, c.want)
		}
	}
}

func TestCNAMEAndOtherData(t *testing.T) {
	rs := recordSet("default", "rs", "example.com", ep("x", "A", "192.0.2.1"), ep("x", "CNAME", "www.example.com."))
	tab, problems := Compile([]v1alpha1.DNSZone{zoneObj("example.com")}, []v1alpha1.DNSRecordSet{rs}, time.Now())
	if len(problems) != 1 || !strings.Contains(problems[0].Reason, "CNAME and other data") || problems[0].Endpoint != 1 {
		t.Fatalf("problems = %v", problems)
	}
	a := tab.Lookup(wireName(t, "x.example.com."), dns.TypeA, Client{})
	if a.Kind != Answered || len(a.Answer) != 1 || a.Answer[0].Header().Rrtype != dns.TypeA {
		t.Errorf("x A answered %v", render(a))
	}
}

func TestZonesAndSerial(t *testing.T) {
	tab, _ := fixtureTable()
	var got []string
	for _, z := range tab.Zones() {
		got = append(got, fmt.Sprintf("%s object=%s type=%s serial=%d records=%d synced=%t forward=%s", z.Name, z.Object, z.Type, z.Serial, z.Records, z.Synced, z.ForwardGroup))
	}
	golden(t, "zones.golden", strings.Join(got, "\n")+"\n")

	// A derived serial grows with any record set's resourceVersion; an
	// explicit one is kept.
	z := zoneObj("example.com")
	z.ResourceVersion = "10"
	rs := recordSet("default", "a", "example.com", ep("www", "A", "192.0.2.1"))
	rs.ResourceVersion = "12"
	t1, _ := Compile([]v1alpha1.DNSZone{z}, []v1alpha1.DNSRecordSet{rs}, time.Now())
	rs.ResourceVersion = "17"
	t2, _ := Compile([]v1alpha1.DNSZone{z}, []v1alpha1.DNSRecordSet{rs}, time.Now())
	if s1, s2 := t1.Zones()[0].Serial, t2.Zones()[0].Serial; s1 != 12 || s2 != 17 {
		t.Errorf("derived serials %d, %d; want 12, 17", s1, s2)
	}
	z.Spec.SOA = &v1alpha1.SOA{Serial: 2026010101}
	t3, _ := Compile([]v1alpha1.DNSZone{z}, []v1alpha1.DNSRecordSet{rs}, time.Now())
	if s := t3.Zones()[0].Serial; s != 2026010101 {
		t.Errorf("explicit serial %d", s)
	}
}

func TestNextChangeAndExpiry(t *testing.T) {
	zones, sets := fixture()
	tab, _ := Compile(zones, sets, fixtureNow)
	if want := fixtureNow.Add(time.Hour); !tab.NextChange().Equal(want) {
		t.Fatalf("NextChange = %v, want %v", tab.NextChange(), want)
	}
	q := wireName(t, "expiring.example.com.")
	if a := tab.Lookup(q, dns.TypeA, Client{}); a.Kind != Answered {
		t.Fatalf("before expiry: %s", a.Kind)
	}
	later, _ := Compile(zones, sets, tab.NextChange())
	if a := later.Lookup(q, dns.TypeA, Client{}); a.Kind != NXDomain {
		t.Errorf("after expiry: %s", a.Kind)
	}
	if !later.NextChange().IsZero() {
		t.Errorf("NextChange after the last expiry = %v", later.NextChange())
	}
}

func TestZoneFileRoundTrip(t *testing.T) {
	tab, _ := fixtureTable()
	text, err := tab.ZoneFile("example.com")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "example.com.zone", text)

	imp, err := ParseZoneFile(strings.NewReader(text), "example.com.")
	if err != nil {
		t.Fatal(err)
	}
	z := zoneObj("example.com")
	z.Spec.SOA, z.Spec.NameServers = imp.SOA, imp.NameServers
	back, problems := Compile([]v1alpha1.DNSZone{z}, []v1alpha1.DNSRecordSet{recordSet("default", "imported", "example.com", imp.Endpoints...)}, fixtureNow)
	if len(problems) > 0 {
		t.Fatalf("re-import problems: %v", problems)
	}
	again, err := back.ZoneFile("example.com.")
	if err != nil {
		t.Fatal(err)
	}
	if again != text {
		t.Errorf("zone file changed on export/import/export:\n%s", diffLines(text, again))
	}
	if _, err := tab.ZoneFile("fwd"); err == nil {
		t.Error("forward zone exported")
	}
	if _, err := tab.ZoneFile("nope."); err == nil {
		t.Error("unknown zone exported")
	}
}

func TestParseZoneFileErrors(t *testing.T) {
	for _, text := range []string{
		"www.example.net. 60 IN A 192.0.2.1\n",
		"$INCLUDE /etc/passwd\n",
		"www 60 IN A 300.1.1.1\n",
		"sub 60 IN SOA a. b. 1 2 3 4 5\n",
	} {
		if _, err := ParseZoneFile(strings.NewReader(text), "example.com"); err == nil {
			t.Errorf("%q parsed without error", text)
		}
	}
}

func FuzzParseZoneFile(f *testing.F) {
	f.Add("$ORIGIN example.com.\n@ 60 IN SOA ns hm 1 2 3 4 5\nwww 60 IN A 192.0.2.1\n*.w 60 IN TXT \"x\"\n")
	f.Add("a 60 IN TYPE65534 \\# 2 abcd\nb 60 IN CNAME a\nc 60 IN DNAME x.\n")
	f.Fuzz(func(t *testing.T, text string) {
		imp, err := ParseZoneFile(strings.NewReader(text), "example.com.")
		if err != nil {
			return
		}
		z := zoneObj("example.com")
		z.Spec.SOA, z.Spec.NameServers = imp.SOA, imp.NameServers
		tab, _ := Compile([]v1alpha1.DNSZone{z}, []v1alpha1.DNSRecordSet{recordSet("default", "f", "example.com", imp.Endpoints...)}, fixtureNow)
		if _, err := tab.ZoneFile("example.com."); err != nil {
			t.Fatal(err)
		}
		for _, ep := range imp.Endpoints {
			w := wireName(t, ownerName(ep.DNSName, "example.com."))
			tab.Lookup(w, dns.TypeA, Client{})
		}
	})
}

func FuzzLookup(f *testing.F) {
	tab, _ := fixtureTable()
	f.Add([]byte("\x03www\x07example\x03com\x00"), uint16(1))
	f.Add([]byte("\x01x\x03old\x07example\x03com\x00"), uint16(1))
	f.Add([]byte("\x3fxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\x06legacy\x07example\x03com\x00"), uint16(28))
	f.Fuzz(func(t *testing.T, q []byte, qtype uint16) {
		lowerWire(q)
		a := tab.Lookup(q, qtype, Client{Addr: netip.MustParseAddr("10.0.0.1")})
		if a.Wire != nil && int(a.Counts[0])+int(a.Counts[1])+int(a.Counts[2]) == 0 {
			t.Fatal("blob without records")
		}
	})
}

func FuzzParseTarget(f *testing.F) {
	for _, s := range []string{"192.0.2.1", `\# 4 c0000201`, `"a" "b"`, "10 mail.example.com.", "1 . alpn=h2"} {
		f.Add("A", s)
		f.Add("TXT", s)
		f.Add("MX", s)
	}
	f.Fuzz(func(t *testing.T, typ, target string) {
		rt, err := recordType(typ)
		if err != nil || unservable(rt) != "" {
			return
		}
		rr, err := parseTarget("x.example.com.", 60, rt, strings.ToUpper(typ), target)
		if err != nil {
			return
		}
		buf := make([]byte, 65535)
		if _, err := dns.PackRR(rr, buf, 0, nil, false); err != nil {
			t.Fatalf("parsed %s %q does not pack: %v", typ, target, err)
		}
	})
}

// bigZone builds n A records at n names in record sets of 1000 endpoints.
func bigZone(n int) ([]v1alpha1.DNSZone, []v1alpha1.DNSRecordSet) {
	z := zoneObj("example.com")
	var sets []v1alpha1.DNSRecordSet
	for i := 0; i < n; i += 1000 {
		eps := make([]v1alpha1.Endpoint, 0, 1000)
		for j := i; j < min(i+1000, n); j++ {
			eps = append(eps, ep(fmt.Sprintf("host%d", j), "A", fmt.Sprintf("10.%d.%d.%d", j>>16&255, j>>8&255, j&255)))
		}
		sets = append(sets, recordSet("default", fmt.Sprintf("set%d", i/1000), "example.com", eps...))
	}
	return []v1alpha1.DNSZone{z}, sets
}

func BenchmarkLookup(b *testing.B) {
	tab, _ := fixtureTable()
	cl := Client{Addr: netip.MustParseAddr("192.0.2.1")}
	for _, c := range []struct{ name, q string }{
		{"exact", "www.example.com."},
		{"nodata", "www.example.com."},
		{"nxdomain", "nothere.example.com."},
		{"referral", "host.sub.example.com."},
		{"rootMiss", "www.google.com."},
		{"wildcard", "foo.wild.example.com."},
		{"cname", "alias.example.com."},
	} {
		q := wireName(b, c.q)
		qt := dns.TypeA
		if c.name == "nodata" {
			qt = dns.TypeMX
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				tab.Lookup(q, qt, cl)
			}
		})
	}
}

// BenchmarkLookupSpread asks the names of a zone larger than the CPU's
// caches in turn, as the authoritative workload of make bench does: the
// cost of a lookup is then its cache misses.
func BenchmarkLookupSpread(b *testing.B) {
	for _, n := range []int{10_000, 1_000_000} {
		zones, sets := bigZone(n)
		tab, problems := Compile(zones, sets, fixtureNow)
		if len(problems) > 0 {
			b.Fatal(problems[0])
		}
		qs := make([][]byte, n)
		for i := range qs {
			qs[i] = wireName(b, fmt.Sprintf("host%d.example.com.", i))
		}
		// Asked in a shuffled order: in turn, neighbours in the zone's
		// slices would share cache lines.
		rand.New(rand.NewPCG(1, 2)).Shuffle(len(qs), func(i, j int) { qs[i], qs[j] = qs[j], qs[i] })
		cl := Client{Addr: netip.MustParseAddr("192.0.2.1")}
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if a := tab.Lookup(qs[i], dns.TypeA, cl); a.Rcode != dns.RcodeSuccess {
					b.Fatalf("rcode %d", a.Rcode)
				}
				if i++; i == len(qs) {
					i = 0
				}
			}
		})
	}
}

func BenchmarkCompile(b *testing.B) {
	zones, sets := fixture()
	b.ReportAllocs()
	for b.Loop() {
		Compile(zones, sets, fixtureNow)
	}
}

// BenchmarkCompileMillion loads a 1,000,000-record zone (target: under 5 s)
// and reports the heap it keeps per record.
func BenchmarkCompileMillion(b *testing.B) {
	zones, sets := bigZone(1_000_000)
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		start, cpu0 := time.Now(), cpuTime()
		tab, problems := Compile(zones, sets, fixtureNow)
		elapsed, cpu := time.Since(start), cpuTime()-cpu0
		runtime.GC()
		runtime.ReadMemStats(&after)
		if len(problems) > 0 || tab.Zones()[0].Records != 1_000_000+2 {
			b.Fatalf("problems %v records %d", problems[:min(3, len(problems))], tab.Zones()[0].Records)
		}
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/1e6, "heapB/record")
		b.ReportMetric(elapsed.Seconds(), "s/load")
		// CPU time (GC included) is what the target means on a shared machine.
		b.ReportMetric(cpu.Seconds(), "cpu-s/load")
		runtime.KeepAlive(tab)
	}
}

// cpuTime is the process's user plus system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
