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

// TestZoneImportRefuses: import refuses what PUT refuses, with the line; a
// body that is not a zone file is 415 with the error body; a huge body 413.
func TestZoneImportRefuses(t *testing.T) {
	e := newEnv(t)
	c := e.withToken(e.adminToken())
	zone := map[string]any{"apiVersion": "service.io/v1alpha1", "kind": "DNSZone", "metadata": map[string]any{"name": "example"},
		"spec": map[string]any{"zoneName": "example.com", "defaultTTL": 300}}
	if r := c.do("POST", "/apply", zone); r.code != 200 {
		t.Fatalf("apply zone: %d %s", r.code, r.body)
	}
	cases := []struct {
		name, body, ct string
		code           int
		key, want      string
	}{
		{"origin outside the zone", "$ORIGIN evil.example.\nwww IN A 192.0.2.1\n", "text/dns", 400, KeyInvalid, "line 2: www.evil.example. is outside zone example.com."},
		{"NUL in a name", "ok IN A 192.0.2.1\na\\000b IN A 192.0.2.1\n", "text/plain; charset=utf-8", 400, KeyInvalid, "line 2: name a\\\\000b.example.com. holds a control character"},
		{"1 MiB TXT", "big IN TXT \"" + strings.Repeat("x", 1<<20) + "\"\n", "text/dns", 400, KeyInvalid, "record data is"},
		{"CNAME and other data", "w IN CNAME t.example.com.\nw IN A 192.0.2.1\n", "text/dns", 400, KeyInvalid, "line "},
		{"JSON content type", "www IN A 192.0.2.1\n", "application/json", 415, KeyInvalid, "text/dns"},
		{"no content type", "www IN A 192.0.2.1\n", "", 415, KeyInvalid, "text/dns"},
		{"body over the bound", "; " + strings.Repeat("x", 9<<20) + "\n", "text/dns", 413, KeyTooLarge, ""},
		{"too many records", strings.Repeat("h IN TXT x\n", 100001), "text/dns", 400, KeyInvalid, "more than 100000 records"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := c.do("POST", "/zones/example/import", tc.body, "Content-Type", tc.ct)
			if r.code != tc.code || r.errKey(t) != tc.key || !strings.Contains(string(r.body), tc.want) {
				t.Fatalf("%d %.300s, want %d %s containing %q", r.code, r.body, tc.code, tc.key, tc.want)
			}
		})
	}
	// Nothing was stored.
	if r := c.do("GET", "/zones/example/export", nil); strings.Contains(string(r.body), "192.0.2.1") {
		t.Fatalf("a refused import was stored:\n%s", r.body)
	}
}
