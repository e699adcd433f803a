package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeManifest(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "m.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const bedtime = `apiVersion: service.io/v1alpha1
kind: Policy
metadata: {name: bedtime, namespace: default}
spec:
`

// The bad inputs of issue 18 make `svc records add` and `svc apply` fail
// (exit 1) with a message naming the field and the fix; before, each exited
// 0 and the problem showed only in describe.
func TestBadInputRefusedByCLI(t *testing.T) {
	s := startServer(t)
	u := loggedIn(t, s)
	u.ok("apply", "-f", "testdata/manifests/zone.yaml")
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"type AA", []string{"records", "add", "example.test", "www2", "AA", "192.0.2.1"},
			[]string{`recordType: Invalid value: "AA"`, `did you mean "A"`}},
		{"A 192.0.2.300", []string{"records", "add", "example.test", "www2", "A", "192.0.2.300"},
			[]string{`Invalid value: "192.0.2.300"`, "not an IPv4 address", `e.g. "192.0.2.10"`}},
		{"MX without preference", []string{"records", "add", "example.test", "@", "MX", "mail.example.test."},
			[]string{"<preference> <mail host>", `"10 mail.example.com."`}},
		{"name with a space", []string{"records", "add", "example.test", "my host", "A", "192.0.2.1"},
			[]string{`dnsName: Invalid value: "my host.example.test"`, "blank"}},
		{"apply unknown service", []string{"apply", "-f", writeManifest(t, bedtime+"  blockedServices: [youtube, tiktokk]\n")},
			[]string{`spec.blockedServices[1]: Invalid value: "tiktokk"`, `did you mean "tiktok"`}},
		{"apply tz Europe/Berln", []string{"apply", "-f", writeManifest(t, bedtime+"  schedule: {start: \"21:00\", end: \"07:00\", tz: Europe/Berln}\n")},
			[]string{`spec.schedule.tz: Invalid value: "Europe/Berln"`, `did you mean "Europe/Berlin"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := u.run(c.args...)
			if r.Code != 1 {
				t.Fatalf("svc %s: exit %d, want 1\nstdout: %s\nstderr: %s", strings.Join(c.args, " "), r.Code, r.Stdout, r.Stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(r.Stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, r.Stderr)
				}
			}
		})
	}
	if out := u.ok("records", "list", "example.test"); strings.Contains(out, "www2") || strings.Contains(out, "my host") || strings.Contains(out, "MX") {
		t.Errorf("a refused record was stored:\n%s", out)
	}
}

// Accepted-but-degraded objects: `svc apply` exits 0 and prints why on
// stderr ("Warning: ..."), -o json carries the warnings, and `svc get` shows
// the reason an object is not Ready.
func TestApplyWarnsAndGetSaysWhy(t *testing.T) {
	s := startServer(t)
	u := loggedIn(t, s)
	f := writeManifest(t, bedtime+"  blockListRefs: [kids-lists]\n")
	r := u.run("apply", "-f", f)
	if r.Code != 0 || r.Stdout != "policy/bedtime created\n" ||
		!strings.Contains(r.Stderr, "Warning: Policy default/bedtime: spec.blockListRefs names BlockList default/kids-lists, which does not exist; nothing is blocked through it until it is created") {
		t.Fatalf("apply: exit %d\nstdout: %s\nstderr: %s", r.Code, r.Stdout, r.Stderr)
	}
	if out := u.ok("apply", "-f", f, "-o", "json"); !strings.Contains(out, `"warnings": [`) || !strings.Contains(out, "kids-lists, which does not exist") {
		t.Errorf("apply -o json lacks the warnings:\n%s", out)
	}

	rs := writeManifest(t, `apiVersion: service.io/v1alpha1
kind: DNSRecordSet
metadata: {name: early, namespace: default}
spec:
  zoneRef: {name: later.test}
  endpoints: [{dnsName: www, recordType: A, targets: [192.0.2.1]}]
`)
	r = u.run("apply", "-f", rs)
	if r.Code != 0 || !strings.Contains(r.Stderr, `Warning: DNSRecordSet default/early: zone "later.test" does not exist`) {
		t.Fatalf("apply record set: exit %d\nstdout: %s\nstderr: %s", r.Code, r.Stdout, r.Stderr)
	}
	deadline := time.Now().Add(15 * time.Second)
	var out string
	for time.Now().Before(deadline) {
		out = u.ok("get", "rrset")
		if strings.Contains(out, "ZoneNotFound") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "READY") || !strings.Contains(lines[0], "REASON") || !strings.Contains(lines[1], "ZoneNotFound") {
		t.Fatalf("get rrset does not say why early is not Ready:\n%s", out)
	}
	wide := u.ok("get", "rrset", "-o", "wide")
	if !strings.Contains(wide, "MESSAGE") || !strings.Contains(wide, `zone "later.test" does not exist`) {
		t.Errorf("get rrset -o wide lacks the message:\n%s", wide)
	}
}
