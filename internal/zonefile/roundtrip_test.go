package zonefile

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svcdns/svc/dataplane/authority"
)

var update = flag.Bool("update", false, "rewrite testdata/roundtrip.golden")

// TestExportImportEveryType: a zone holding every common record type (the
// examples the API's messages give) plus an RFC 3597 record exports to the
// golden file, and importing the export gives the same records back
// (export(import(export)) == export).
func TestExportImportEveryType(t *testing.T) {
	ttl := int64(120)
	var eps []Endpoint
	for _, typ := range authority.CommonRecordTypes() {
		_, ex := authority.TargetFormat(typ)
		if typ == "DNSKEY" {
			ex = "257 3 13 mdsswUyr3DPW132mOi8V9xESWE8jTo0dxCjjnopKl+GqJxpVXckHAeF+KkxLbxILfDLUT0rAK9iUzy1L53eKGQ==" // the hint's example is not base64
		}
		eps = append(eps, Endpoint{DNSName: strings.ToLower(typ) + ".example.com", RecordType: typ, Targets: []string{ex}, TTL: &ttl})
	}
	eps = append(eps,
		Endpoint{DNSName: "generic.example.com", RecordType: "TYPE65534", Targets: []string{`\# 2 abcd`}, TTL: &ttl},
		Endpoint{DNSName: "*.wild.example.com", RecordType: "A", Targets: []string{"192.0.2.7", "192.0.2.8"}, TTL: &ttl},
		Endpoint{DNSName: "example.com", RecordType: "NS", Targets: []string{"ns1.example.net.", "ns2.example.net."}, TTL: &ttl},
	)
	out := Export("example.com", 300, eps)
	if bytes.Contains(out, []byte("; unparsable")) {
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
	back, err := Import("example.com", out)
	if err != nil {
		t.Fatalf("the export does not import: %v\n%s", err, out)
	}
	if again := Export("example.com", 300, back); !bytes.Equal(again, out) {
		t.Fatalf("import(export) changed the records:\n%s\nvs\n%s", again, out)
	}
}
