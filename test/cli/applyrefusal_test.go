package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestApplyRefusalReportedPerObject: a multi-object apply with one refused
// object stores nothing (all or nothing, error.objects lists the refusals)
// and svc apply prints one line per object, the refused one with why and
// the others as not applied, and exits non-zero (issue #23 item 12).
func TestApplyRefusalReportedPerObject(t *testing.T) {
	s := startServer(t)
	u := loggedIn(t, s)
	docs := `apiVersion: service.io/v1alpha1
kind: DNSZone
metadata: {name: ok-one.test}
spec: {nameServers: [ns1.ok-one.test.]}
---
apiVersion: service.io/v1alpha1
kind: DNSRecordSet
metadata: {name: bad, namespace: default}
spec:
  zoneRef: {name: ok-one.test}
  endpoints:
    - {dnsName: www.ok-one.test, recordType: a-lowercase, targets: [192.0.2.1]}
---
apiVersion: service.io/v1alpha1
kind: DNSZone
metadata: {name: ok-two.test}
spec: {nameServers: [ns1.ok-two.test.]}
`
	f := filepath.Join(t.TempDir(), "three.yaml")
	if err := os.WriteFile(f, []byte(docs), 0o644); err != nil {
		t.Fatal(err)
	}
	r := u.run("apply", "-f", f)
	if r.Code == 0 {
		t.Fatalf("apply with a refused object exited 0: %s", r.Stdout)
	}
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "dnszone/ok-one.test not applied") ||
		!strings.HasPrefix(lines[1], "dnsrecordset/bad error: ") || !strings.Contains(lines[1], "recordType") ||
		!strings.HasPrefix(lines[2], "dnszone/ok-two.test not applied") {
		t.Errorf("apply output, want one line per object:\n%s\nstderr: %s", r.Stdout, r.Stderr)
	}
	if !strings.Contains(r.Stderr, "nothing applied") {
		t.Errorf("stderr %q does not say nothing was applied", r.Stderr)
	}
	if r := u.run("get", "zone", "ok-one.test"); r.Code == 0 {
		t.Errorf("ok-one.test exists after a refused apply: %s", r.Stdout)
	}
}
