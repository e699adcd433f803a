package zonefile

import (
	"bytes"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	text := []byte("$ORIGIN example.com.\n@ 300 IN A 192.0.2.1\nwww 60 IN AAAA 2001:db8::1\n@ 300 IN SOA ns hostmaster 1 2 3 4 5\n")
	eps, err := Import("example.com", text)
	if err != nil {
		t.Fatal(err)
	}
	if len(eps) != 2 || eps[0].DNSName != "example.com" || eps[1].RecordType != "AAAA" {
		t.Fatalf("%+v", eps)
	}
	out := Export("example.com", 300, eps)
	again, err := Import("example.com", out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(Export("example.com", 300, again), out) {
		t.Fatalf("round trip differs:\n%s", out)
	}
}

func FuzzImport(f *testing.F) {
	f.Add([]byte("@ IN A 192.0.2.1\n"))
	f.Add([]byte("$INCLUDE /etc/passwd\n"))
	f.Add([]byte("www IN TXT \"a\" \"b\"\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		eps, err := Import("example.com", b)
		if err != nil {
			return
		}
		// Whatever parsed exports without panicking and re-imports.
		if _, err := Import("example.com", Export("example.com", 300, eps)); err != nil {
			t.Fatalf("export of an import does not parse: %v", err)
		}
	})
}

// Record sets written with kubectl hold names relative to the zone ("t1",
// "@"); the export must resolve them against the origin as the data plane
// does, and import(export(x)) must give the same records.
func TestExportResolvesRelativeNames(t *testing.T) {
	ttl := int64(60)
	eps := []Endpoint{
		{DNSName: "t1", RecordType: "A", Targets: []string{"192.0.2.1"}, TTL: &ttl},
		{DNSName: "@", RecordType: "TXT", Targets: []string{`"apex"`}, TTL: &ttl},
		{DNSName: "www.apps.test", RecordType: "CNAME", Targets: []string{"t1.apps.test."}, TTL: &ttl},
		{DNSName: "deep.t1.apps.test.", RecordType: "AAAA", Targets: []string{"2001:db8::1"}, TTL: &ttl},
	}
	out := Export("apps.test", 300, eps)
	for _, want := range []string{"t1.apps.test.\t60\tIN\tA\t192.0.2.1", "apps.test.\t60\tIN\tTXT\t\"apex\"",
		"www.apps.test.\t60\tIN\tCNAME\tt1.apps.test.", "deep.t1.apps.test.\t60\tIN\tAAAA\t2001:db8::1"} {
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
