package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svcdns/svc/test/nodetest"
)

// TestErrorsNameTheFix: each refusal of a wrong word or value says what
// was meant or which flag fixes it.
func TestErrorsNameTheFix(t *testing.T) {
	s := startServerWith(t, nodetest.Objects(map[string]string{"zone.yaml": `apiVersion: service.io/v1alpha1
kind: DNSZone
metadata: {name: files-zone}
spec: {zoneName: files.test.}
`}))
	u := loggedIn(t, s)
	zoneFile := filepath.Join(t.TempDir(), "db.example")
	if err := os.WriteFile(zoneFile, []byte("$ORIGIN new.test.\n@ 300 IN A 192.0.2.1\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"blocking", "disable", "2d"}, []string{"48h", "24h"}},
		{[]string{"blocking", "disable", "5 minutes"}, []string{"5m", "1h30m"}},
		{[]string{"lameduck", "ten", "--ops-address", "127.0.0.1:1"}, []string{"5m", "1h30m"}},
		{[]string{"audit", "--since", "yesterday"}, []string{"RFC 3339", "5m", "24h"}},
		{[]string{"get", "polcies"}, []string{`did you mean "policies"`}},
		{[]string{"logs", "--status", "blokced"}, []string{`did you mean "blocked"`}},
		{[]string{"logs", "--status-class", "alowed"}, []string{`did you mean "allowed"`}},
		{[]string{"settings", "set", "cache.maxentrie=5"}, []string{`did you mean "cache.maxEntries"`}},
		{[]string{"settings", "get", "cache.maxentrie"}, []string{`did you mean "cache.maxEntries"`}},
		{[]string{"admin", "list-users", "--socket", filepath.Join(t.TempDir(), "none.sock")}, []string{"--socket", "SERVICE_ADMIN_SOCKET"}},
		{[]string{"import", "bind", "new-zone", "-f", zoneFile}, []string{"--origin"}},
	} {
		r := u.run(tc.args...)
		if r.Code == 0 {
			t.Errorf("svc %s: exit 0, want a refusal\n%s", strings.Join(tc.args, " "), r.Stdout)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(r.Stderr, w) {
				t.Errorf("svc %s: stderr lacks %q:\n%s", strings.Join(tc.args, " "), w, r.Stderr)
			}
		}
	}
}
