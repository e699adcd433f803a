package zonefile

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/svcdns/svc/api/v1alpha1"
)

// zoneOf builds the DNSZone and record set an import of z creates (what the
// API's import does with a new zone).
func zoneOf(name string, z *Zone) (v1alpha1.DNSZone, []v1alpha1.DNSRecordSet) {
	dz := v1alpha1.DNSZone{}
	dz.Name = name
	dz.Spec.ZoneName = z.Origin
	dz.Spec.SOA = z.SOA
	dz.Spec.NameServers = z.NameServers
	dz.Spec.DefaultTTL = z.NameServerTTL
	var sets []v1alpha1.DNSRecordSet
	for i, chunk := range Chunks(z.Endpoints) {
		rs := v1alpha1.DNSRecordSet{}
		rs.Namespace, rs.Name = "default", fmt.Sprintf("import-%d", i)
		rs.Spec.ZoneRef.Name = name
		for _, e := range chunk {
			rs.Spec.Endpoints = append(rs.Spec.Endpoints, v1alpha1.Endpoint{DNSName: e.DNSName, RecordType: e.RecordType, Targets: e.Targets, RecordTTL: e.TTL})
		}
		sets = append(sets, rs)
	}
	return dz, sets
}

func export(t *testing.T, name string, z *Zone) []byte {
	t.Helper()
	dz, sets := zoneOf(name, z)
	out, err := Export(dz, sets, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestRoundTrip(t *testing.T) {
	text := []byte("$ORIGIN example.com.\n@ 300 IN A 192.0.2.1\nwww 60 IN AAAA 2001:db8::1\n@ 300 IN SOA ns hostmaster 1 2 3 4 5\n@ 600 IN NS ns\n@ 600 IN NS ns.example.net.\n")
	z, err := Parse("example.com", text)
	if err != nil {
		t.Fatal(err)
	}
	if len(z.Endpoints) != 2 || z.Endpoints[0].DNSName != "example.com" || z.Endpoints[1].RecordType != "AAAA" || z.Records != 2 {
		t.Fatalf("%+v", z.Endpoints)
	}
	if z.SOA == nil || z.SOA.MName != "ns.example.com." || z.SOA.Serial != 1 || *z.SOA.TTL != 300 || z.SOA.Minimum != 5 {
		t.Fatalf("SOA %+v", z.SOA)
	}
	if strings.Join(z.NameServers, ",") != "ns.example.com.,ns.example.net." || *z.NameServerTTL != 600 {
		t.Fatalf("NS %v %v", z.NameServers, z.NameServerTTL)
	}
	out := export(t, "example.com", z)
	for _, want := range []string{"example.com.\t300\tIN\tSOA\tns.example.com. hostmaster.example.com. 1 2 3 4 5\n", "example.com.\t600\tIN\tNS\tns.example.net.\n"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("export lacks %q:\n%s", want, out)
		}
	}
	again, err := Parse("example.com", out)
	if err != nil {
		t.Fatal(err)
	}
	if b := export(t, "example.com", again); !bytes.Equal(b, out) {
		t.Fatalf("round trip differs:\n%s\nvs\n%s", out, b)
	}
}

func FuzzImport(f *testing.F) {
	f.Add([]byte("@ IN A 192.0.2.1\n"))
	f.Add([]byte("$INCLUDE /etc/passwd\n"))
	f.Add([]byte("www IN TXT \"a\" \"b\"\n"))
	f.Add([]byte("@ IN SOA ns hm 1 2 3 4 5\n@ IN NS a.example.net.\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		z, err := Parse("example.com", b)
		if err != nil {
			return
		}
		dz, sets := zoneOf("example.com", z)
		out, err := Export(dz, sets, time.Now())
		if err != nil {
			return // e.g. a name server that is not a name: the zone is not served
		}
		// Whatever parsed exports without panicking and re-imports.
		if _, err := Parse("example.com", out); err != nil {
			t.Fatalf("export of an import does not parse: %v\n%s", err, out)
		}
	})
}

// Record sets written with kubectl hold names relative to the zone ("t1",
// "@"); the export must resolve them against the origin as the data plane
// does, and import(export(x)) must give the same records.
func TestExportResolvesRelativeNames(t *testing.T) {
	ttl := int64(60)
	dz := v1alpha1.DNSZone{}
	dz.Name = "apps.test"
	rs := v1alpha1.DNSRecordSet{}
	rs.Namespace, rs.Name = "default", "apps"
	rs.Spec.ZoneRef.Name = "apps.test"
	rs.Spec.Endpoints = []v1alpha1.Endpoint{
		{DNSName: "t1", RecordType: "A", Targets: []string{"192.0.2.1"}, RecordTTL: &ttl},
		{DNSName: "@", RecordType: "TXT", Targets: []string{`"apex"`}, RecordTTL: &ttl},
		{DNSName: "www.apps.test", RecordType: "CNAME", Targets: []string{"t1.apps.test."}, RecordTTL: &ttl},
		{DNSName: "deep.t1.apps.test.", RecordType: "AAAA", Targets: []string{"2001:db8::1"}, RecordTTL: &ttl},
	}
	out, err := Export(dz, []v1alpha1.DNSRecordSet{rs}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"$ORIGIN apps.test.", "t1.apps.test.\t60\tIN\tA\t192.0.2.1", "apps.test.\t60\tIN\tTXT\t\"apex\"",
		"www.apps.test.\t60\tIN\tCNAME\tt1.apps.test.", "deep.t1.apps.test.\t60\tIN\tAAAA\t2001:db8::1", "apps.test.\t3600\tIN\tNS\tns.apps.test."} {
		if !bytes.Contains(out, []byte(want+"\n")) {
			t.Errorf("export lacks %q:\n%s", want, out)
		}
	}
	if bytes.Contains(out, []byte("\nt1.\t")) || bytes.Contains(out, []byte("\n@")) {
		t.Errorf("export holds a name outside the origin:\n%s", out)
	}
	back, err := Import("apps.test", out)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range back {
		got[e.DNSName+" "+e.RecordType] = e.Targets[0]
	}
	want := map[string]string{"t1.apps.test A": "192.0.2.1", "apps.test TXT": `"apex"`, "www.apps.test CNAME": "t1.apps.test.", "deep.t1.apps.test AAAA": "2001:db8::1"}
	if len(got) != len(want) {
		t.Fatalf("re-import %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("re-import %s = %q, want %q", k, got[k], v)
		}
	}
}

// TestChunks: 2500 endpoints fill three record sets (1000, 1000, 500); big
// TXT records close a set before 1 MiB of JSON.
func TestChunks(t *testing.T) {
	eps := make([]Endpoint, 2500)
	for i := range eps {
		eps[i] = Endpoint{DNSName: fmt.Sprintf("h%d.example.com", i), RecordType: "A", Targets: []string{"192.0.2.1"}}
	}
	c := Chunks(eps)
	if len(c) != 3 || len(c[0]) != 1000 || len(c[1]) != 1000 || len(c[2]) != 500 {
		t.Fatalf("chunks of %d, %d, ...", len(c), len(c[0]))
	}
	big := strings.Repeat("x", 200)
	eps = make([]Endpoint, 900)
	for i := range eps {
		eps[i] = Endpoint{DNSName: fmt.Sprintf("t%d.example.com", i), RecordType: "TXT", Targets: []string{big, big, big, big, big, big, big, big}}
	}
	c = Chunks(eps)
	total := 0
	for _, ch := range c {
		n := 0
		for _, e := range ch {
			n += endpointBytes(e)
		}
		if n > maxSetBytes {
			t.Errorf("a chunk holds %d bytes", n)
		}
		total += len(ch)
	}
	if len(c) < 2 || total != 900 {
		t.Errorf("%d chunks holding %d endpoints", len(c), total)
	}
	if Chunks(nil) != nil {
		t.Error("no endpoints, chunks")
	}
}

func TestSerialArithmetic(t *testing.T) {
	for _, c := range []struct {
		a, b  uint32
		newer bool
	}{{2, 1, true}, {1, 2, false}, {1, 1, false}, {0, 0xffffffff, true}, {5, 0xfffffff0, true}, {0x80000001, 1, false}, {0x7fffffff, 0, true}} {
		if got := SerialNewer(c.a, c.b); got != c.newer {
			t.Errorf("SerialNewer(%d, %d) = %t", c.a, c.b, got)
		}
	}
	if NextSerial(0xffffffff) != 1 || NextSerial(7) != 8 {
		t.Error("NextSerial")
	}
}
