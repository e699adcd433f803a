package cli_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestRecordsZonesAndBackup(t *testing.T) {
	s := startServer(t)
	u := loggedIn(t, s)
	u.ok("apply", "-f", "testdata/manifests/zone.yaml")

	out := u.ok("records", "add", "example.test", "ftp", "A", "192.0.2.7", "192.0.2.8", "--ttl", "120", "--comment", "files")
	if out != "dnsrecordset/api-example.test created\n" {
		t.Errorf("records add: %q", out)
	}
	u.ok("records", "add", "example.test", "@", "TXT", "v=spf1 -all")
	golden(t, "records-list.txt", u.ok("records", "list", "example.test"))
	if out := u.ok("records", "rm", "example.test", "ftp", "A", "192.0.2.8"); !strings.Contains(out, "updated") {
		t.Errorf("records rm one target: %q", out)
	}
	r := u.run("records", "rm", "example.test", "nope", "A")
	if r.Code == 0 || !strings.Contains(r.Stderr, "not found") {
		t.Errorf("records rm missing: %d %q", r.Code, r.Stderr)
	}

	// zones export, then import into another zone gives the same records.
	zf := filepath.Join(t.TempDir(), "example.zone")
	u.ok("zones", "export", "example.test", "--out", zf)
	body, err := os.ReadFile(zf)
	if err != nil || !strings.Contains(string(body), "192.0.2.7") || !strings.Contains(string(body), "www") {
		t.Fatalf("zone file: %v\n%s", err, body)
	}
	out = u.ok("import", "bind", "copy", "-f", zf, "--origin", "example.test")
	if !strings.Contains(out, "dnszone/copy created") || !strings.Contains(out, "dnsrecordset/import-copy created") {
		t.Errorf("import bind: %s", out)
	}
	// The new zone has its own default TTL; every record carries its TTL.
	noTTL := func(s string) string { return regexp.MustCompile(`(?m)^\$TTL .*\n`).ReplaceAllString(s, "") }
	if again := u.ok("zones", "export", "copy"); noTTL(again) != noTTL(string(body)) {
		t.Errorf("round trip differs:\n--- first\n%s\n--- second\n%s", body, again)
	}
	out = u.ok("zones", "import", "copy", "-f", zf)
	if !strings.Contains(out, "import-copy unchanged") {
		t.Errorf("zones import again: %s", out)
	}
	if out := u.ok("zones", "list", "-o", "name"); !strings.Contains(out, "dnszone/copy") || !strings.Contains(out, "dnszone/example.test") {
		t.Errorf("zones list: %s", out)
	}
	if out := u.ok("zones", "delete", "copy", "--dry-run"); !strings.Contains(out, "would be deleted with 1 record sets") {
		t.Errorf("zones delete --dry-run: %s", out)
	}
	u.ok("zones", "get", "copy")

	// backup, then restore into an empty server gives the same objects.
	bf := filepath.Join(t.TempDir(), "backup.yaml")
	u.ok("backup", "--out", bf)
	if st, err := os.Stat(bf); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("backup file: %v %v", err, st)
	}
	before := u.ok("export")

	s2 := startServer(t)
	u2 := loggedIn(t, s2)
	out = u2.ok("restore", "-f", bf)
	if strings.Contains(out, "error") {
		t.Errorf("restore: %s", out)
	}
	if after := u2.ok("export"); after != before {
		t.Errorf("restored objects differ:\n--- before\n%s\n--- after\n%s", before, after)
	}
	out = u2.ok("restore", "-f", bf)
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.HasSuffix(l, " unchanged") {
			t.Errorf("second restore: %q", l)
		}
	}
	if out := u.ok("zones", "delete", "copy"); !strings.Contains(out, "dnszone/copy deleted") {
		t.Errorf("zones delete: %s", out)
	}
	if out := u.ok("audit", "--kind", "DNSZone", "--limit", "5"); !strings.Contains(out, "copy") {
		t.Errorf("audit: %s", out)
	}
}
