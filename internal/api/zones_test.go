package api

import (
	"strings"
	"testing"
)

func TestZoneImportExportRoundTrip(t *testing.T) {
	e := newEnv(t)
	c := e.withToken(e.adminToken())
	zone := map[string]any{"apiVersion": "service.io/v1alpha1", "kind": "DNSZone", "metadata": map[string]any{"name": "example"},
		"spec": map[string]any{"zoneName": "example.com", "defaultTTL": 300}}
	if r := c.do("POST", "/apply", zone); r.code != 200 {
		t.Fatalf("apply zone: %d %s", r.code, r.body)
	}
	text := "$ORIGIN example.com.\n$TTL 300\n@ IN A 192.0.2.1\nwww 600 IN A 192.0.2.2\nwww 600 IN A 192.0.2.3\nmail IN MX 10 mx.example.com.\n_x IN TXT \"hello world\"\n"
	r := c.do("POST", "/zones/example/import", text, "Content-Type", "text/dns")
	if r.code != 200 {
		t.Fatalf("import: %d %s", r.code, r.body)
	}
	r = c.do("GET", "/zones/example/export", nil)
	if r.code != 200 || !strings.HasPrefix(r.hdr.Get("Content-Type"), "text/dns") {
		t.Fatalf("export: %d %v %s", r.code, r.hdr, r.body)
	}
	first := string(r.body)
	for _, want := range []string{"www.example.com.\t600\tIN\tA\t192.0.2.3", "mail.example.com.\t300\tIN\tMX\t10 mx.example.com.", "\"hello world\""} {
		if !strings.Contains(first, want) {
			t.Errorf("export lacks %q:\n%s", want, first)
		}
	}
	// Re-importing the export changes nothing.
	if r := c.do("POST", "/zones/example/import", first, "Content-Type", "text/dns"); r.code != 200 || r.json(t)["result"] != "unchanged" {
		t.Fatalf("re-import: %d %s", r.code, r.body)
	}
	if r := c.do("GET", "/zones/example/export", nil); string(r.body) != first {
		t.Errorf("round trip differs:\n%s\nvs\n%s", r.body, first)
	}
	// Records API and dry-run zone delete.
	if r := c.do("POST", "/zones/example/records", map[string]any{"name": "api", "type": "A", "targets": []string{"192.0.2.9"}}); r.code != 200 {
		t.Fatalf("add record: %d %s", r.code, r.body)
	}
	if r := c.do("DELETE", "/zones/example/records?name=api&type=A", nil); r.code != 200 {
		t.Fatalf("remove record: %d %s", r.code, r.body)
	}
	r = c.do("DELETE", "/zones/example?dryRun=true", nil)
	if m := r.json(t); r.code != 200 || m["recordSets"].(float64) != 2 || m["records"].(float64) != 5 {
		t.Fatalf("dry run: %d %s", r.code, r.body)
	}
	if r := c.do("POST", "/zones/example/import", "garbage here (", "Content-Type", "text/dns"); r.code != 400 || r.errKey(t) != KeyInvalid {
		t.Errorf("bad zone file: %d %s", r.code, r.body)
	}
}
