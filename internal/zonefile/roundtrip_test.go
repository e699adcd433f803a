package zonefile

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/dataplane/authority"
)

var update = flag.Bool("update", false, "rewrite testdata/roundtrip.golden")

// TestExportImportEveryType: a zone holding every common record type (the
// examples the API's messages give), an RFC 3597 record, a wildcard, a SOA and
// two name servers exports to the golden file, and importing the export
// gives the same zone back (export(import(export)) == export).
func TestExportImportEveryType(t *testing.T) {
	ttl := int64(120)
	rs := v1alpha1.DNSRecordSet{}
	rs.Namespace, rs.Name = "default", "every"
	rs.Spec.ZoneRef.Name = "example.com"
	for _, typ := range authority.CommonRecordTypes() {
		_, ex := authority.TargetFormat(typ)
		rs.Spec.Endpoints = append(rs.Spec.Endpoints, v1alpha1.Endpoint{DNSName: strings.ToLower(typ) + ".example.com", RecordType: typ, Targets: []string{ex}, RecordTTL: &ttl})
	}
	rs.Spec.Endpoints = append(rs.Spec.Endpoints,
		v1alpha1.Endpoint{DNSName: "generic.example.com", RecordType: "TYPE65534", Targets: []string{`\# 2 abcd`}, RecordTTL: &ttl},
		v1alpha1.Endpoint{DNSName: "*.wild.example.com", RecordType: "A", Targets: []string{"192.0.2.7", "192.0.2.8"}, RecordTTL: &ttl},
	)
	soaTTL, nsTTL := int64(900), int64(7200)
	dz := v1alpha1.DNSZone{}
	dz.Name = "example.com"
	dz.Spec.DefaultTTL = &nsTTL
	dz.Spec.NameServers = []string{"ns1.example.net.", "ns2.example.net."}
	dz.Spec.SOA = &v1alpha1.SOA{MName: "ns1.example.net.", RName: "hostmaster.example.com.", Serial: 2024010101, Refresh: 7200, Retry: 900, Expire: 1209600, Minimum: 120, TTL: &soaTTL}
	out, err := Export(dz, []v1alpha1.DNSRecordSet{rs}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(out, []byte("; not served")) {
		t.Fatalf("export dropped a record:\n%s", out)
	}
	golden := filepath.Join("testdata", "roundtrip.golden")
	if *update {
		if err := os.WriteFile(golden, out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if !bytes.Equal(out, want) {
		t.Fatalf("export differs from %s (go test -update rewrites it):\n%s", golden, out)
	}
	back, err := Parse("example.com", out)
	if err != nil {
		t.Fatalf("the export does not import: %v\n%s", err, out)
	}
	if again := export(t, "example.com", back); !bytes.Equal(again, out) {
		t.Fatalf("import(export) changed the zone:\n%s\nvs\n%s", again, out)
	}
}
