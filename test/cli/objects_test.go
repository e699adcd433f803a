package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svcdns/svc/test/nodetest"
)

func TestApplyGetDescribeExport(t *testing.T) {
	s := startServer(t)
	u := loggedIn(t, s)

	// Without -R the sub directory is left out.
	out := u.ok("apply", "-f", "testdata/manifests")
	for _, want := range []string{"dnszone/example.test created", "dnsrecordset/hosts created", "clientgroup/kids created", "clientgroup/office created"} {
		if !strings.Contains(out, want) {
			t.Errorf("apply output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "blocklist/ads") {
		t.Errorf("apply without -R read the sub directory:\n%s", out)
	}
	out = u.ok("apply", "-R", "-f", "testdata/manifests")
	for _, want := range []string{"dnszone/example.test unchanged", "blocklist/ads created", "dnsrecordset/extra created"} {
		if !strings.Contains(out, want) {
			t.Errorf("apply -R output lacks %q:\n%s", want, out)
		}
	}

	// The node writes zone and record set status after it compiles them.
	nodetest.Eventually(t, 10*time.Second, "zone and record sets ready", func() bool {
		return strings.Count(u.ok("get", "rrset", "-A"), "True") == 2 && strings.Contains(u.ok("get", "zones", "example.test"), "True")
	})
	// And ClientGroup status from its controller.
	nodetest.Eventually(t, 10*time.Second, "client groups ready", func() bool {
		return strings.Count(u.ok("get", "cg"), "True") == 2
	})
	golden(t, "get-cg.txt", u.ok("get", "cg"))
	golden(t, "get-cg-wide.txt", u.ok("get", "clientgroups", "-o", "wide"))
	golden(t, "get-rrset-all.txt", u.ok("get", "rrset", "-A"))
	golden(t, "get-rrset-all-wide.txt", u.ok("get", "dnsrecordsets", "-A", "-o", "wide"))
	// The BlockList reconciler compiles the inline source; wait for it.
	nodetest.Eventually(t, 10*time.Second, "blocklist ads ready", func() bool {
		return strings.Contains(u.ok("get", "bl", "ads"), "True")
	})
	golden(t, "get-bl.txt", u.ok("get", "bl"))
	golden(t, "get-zone.txt", u.ok("get", "zones", "example.test"))
	golden(t, "get-rrset-name.txt", u.ok("get", "rrsets", "-A", "-o", "name"))
	golden(t, "get-rrset-selector.txt", u.ok("get", "rrset", "-l", "app=web"))
	golden(t, "get-cg-other-ns.txt", u.ok("get", "cg", "-n", "other", "-o", "name"))

	// -o json and -o yaml re-apply verbatim: every object unchanged.
	js := u.ok("get", "rrset", "-A", "-o", "json")
	var list struct {
		Kind  string           `json:"kind"`
		Items []map[string]any `json:"items"`
	}
	if err := json.Unmarshal([]byte(js), &list); err != nil || list.Kind != "List" || len(list.Items) != 2 {
		t.Fatalf("get -o json: %v %s", err, js)
	}
	for _, format := range []string{"json", "yaml"} {
		f := filepath.Join(t.TempDir(), "out."+format)
		if err := os.WriteFile(f, []byte(u.ok("get", "cg", "-o", format)), 0o644); err != nil {
			t.Fatal(err)
		}
		out := u.ok("apply", "-f", f)
		if strings.Count(out, " unchanged") != 2 || strings.Contains(out, "updated") {
			t.Errorf("re-applying -o %s:\n%s", format, out)
		}
	}
	one := u.ok("get", "zone", "example.test", "-o", "yaml")
	if !strings.HasPrefix(one, "apiVersion: service.io/v1alpha1\n") || !strings.Contains(one, "kind: DNSZone") {
		t.Errorf("get one -o yaml:\n%s", one)
	}

	d := u.ok("describe", "rrset", "hosts")
	for _, want := range []string{"Name:         hosts", "Namespace:    default", "Kind:         DNSRecordSet", "app=web", "Spec:", "www.example.test", "Conditions:", "Diagnoses:"} {
		if !strings.Contains(d, want) {
			t.Errorf("describe lacks %q:\n%s", want, d)
		}
	}

	// export, then re-apply: every ApplyResult unchanged.
	exp := u.ok("export")
	if strings.Contains(exp, "resourceVersion") || strings.Contains(exp, "status:") {
		t.Errorf("export keeps server fields:\n%s", exp)
	}
	f := filepath.Join(t.TempDir(), "export.yaml")
	if err := os.WriteFile(f, []byte(exp), 0o644); err != nil {
		t.Fatal(err)
	}
	out = u.ok("apply", "-f", f)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 6 {
		t.Fatalf("re-apply of export: %s", out)
	}
	for _, l := range lines {
		if !strings.HasSuffix(l, " unchanged") {
			t.Errorf("re-applied export: %q is not unchanged", l)
		}
	}

	// delete by name and with -f.
	if out := u.ok("delete", "cg", "kids", "office"); out != "clientgroup/kids deleted\nclientgroup/office deleted\n" {
		t.Errorf("delete: %q", out)
	}
	r := u.run("delete", "cg", "kids")
	if r.Code == 0 || !strings.Contains(r.Stderr, "not found") {
		t.Errorf("deleting a missing object: %d %s", r.Code, r.Stderr)
	}
	u.ok("delete", "cg", "kids", "--ignore-not-found")
	out = u.ok("delete", "-R", "-f", "testdata/manifests/sub")
	if !strings.Contains(out, "blocklist/ads deleted") || !strings.Contains(out, "dnsrecordset/extra deleted") {
		t.Errorf("delete -f: %s", out)
	}
}
