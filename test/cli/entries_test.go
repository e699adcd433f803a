package cli_test

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/internal/api"
	"github.com/svcdns/svc/test/nodetest"
)

const twoGroups = `apiVersion: service.io/v1alpha1
kind: ClientGroup
metadata: {name: kids}
spec:
  addresses: [127.0.0.2/32]
---
apiVersion: service.io/v1alpha1
kind: ClientGroup
metadata: {name: adults}
spec:
  addresses: [127.0.0.3/32]
`

// blockedFrom asks the node's UDP listener from a loopback source address
// and reports whether the answer is the block answer (zeroIP: A 0.0.0.0).
func blockedFrom(t *testing.T, s *server, from net.IP, name string) (bool, error) {
	t.Helper()
	c := &dns.Client{Net: "udp", Timeout: 2 * time.Second, Dialer: &net.Dialer{LocalAddr: &net.UDPAddr{IP: from}, Timeout: 2 * time.Second}}
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), dns.TypeA)
	r, _, err := c.Exchange(m, s.DNSAddr("udp"))
	if err != nil {
		return false, err
	}
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok && a.A.IsUnspecified() {
			return true, nil
		}
	}
	return false, nil
}

// TestListsDenyForGroup: `svc lists deny --group kids` blocks a name for
// the clients of kids (127.0.0.2) and not for those of adults (127.0.0.3),
// over real DNS queries; GET /entries shows the entry with its groups, an
// unknown group is refused with a did-you-mean, and an entry for everyone
// blocks both.
func TestListsDenyForGroup(t *testing.T) {
	s := startServer(t)
	u := loggedIn(t, s)
	f := filepath.Join(t.TempDir(), "groups.yaml")
	if err := os.WriteFile(f, []byte(twoGroups), 0o644); err != nil {
		t.Fatal(err)
	}
	u.ok("apply", "-f", f)

	if r := u.run("lists", "deny", "games.entries-test.example", "--group", "kid"); r.Code == 0 || !strings.Contains(r.Stderr, `did you mean "default/kids"`) {
		t.Fatalf("unknown group: exit %d\n%s", r.Code, r.Stderr)
	}
	out := u.ok("lists", "deny", "games.entries-test.example", "--group", "kids", "--comment", "homework first")
	if want := "blocklist/ui-deny created (entries for client groups default/kids only)\n"; out != want {
		t.Errorf("lists deny --group: %q, want %q", out, want)
	}
	kids, adults := net.IPv4(127, 0, 0, 2), net.IPv4(127, 0, 0, 3)
	start := time.Now()
	nodetest.Eventually(t, 10*time.Second, "games blocked for kids", func() bool {
		b, err := blockedFrom(t, s, kids, "games.entries-test.example")
		return err == nil && b
	})
	t.Logf("blocked for kids %v after the CLI returned", time.Since(start).Round(time.Millisecond))
	if b, err := blockedFrom(t, s, adults, "games.entries-test.example"); err != nil || b {
		t.Errorf("adults (127.0.0.3) asking games.entries-test.example: blocked=%v err=%v, want not blocked", b, err)
	}

	// The view across lists shows the entry with its group.
	var de api.DomainEntries
	if err := json.Unmarshal([]byte(u.ok("api", "/entries?action=block&group=kids")), &de); err != nil {
		t.Fatal(err)
	}
	if de.Matched != 1 || len(de.Items) != 1 || de.Items[0].Value != "games.entries-test.example" ||
		strings.Join(de.Items[0].Groups, ",") != "default/kids" || de.Items[0].Comment != "homework first" ||
		len(de.Lists) != 1 || de.Lists[0].List != "default/ui-deny" || de.Lists[0].Action != "block" {
		t.Errorf("GET /entries?group=kids: %+v", de)
	}

	// For everyone: both are blocked.
	if out := u.ok("lists", "deny", "all.entries-test.example"); out != "blocklist/ui-deny updated\n" {
		t.Errorf("lists deny: %q", out)
	}
	nodetest.Eventually(t, 10*time.Second, "all blocked for adults", func() bool {
		b, err := blockedFrom(t, s, adults, "all.entries-test.example")
		return err == nil && b
	})
	if b, err := blockedFrom(t, s, kids, "all.entries-test.example"); err != nil || !b {
		t.Errorf("kids asking all.entries-test.example: blocked=%v err=%v", b, err)
	}

	// A cache flush answers a NodeResult per node it reached.
	var fr api.CacheFlushResult
	if err := json.Unmarshal([]byte(u.ok("api", "POST", "/cache/flush", "-d", `{"name":"all.entries-test.example"}`)), &fr); err != nil {
		t.Fatal(err)
	}
	if fr.Name != "all.entries-test.example" || len(fr.Items) != 1 || !fr.Items[0].OK || fr.Items[0].Node == "" {
		t.Errorf("cache flush answer: %+v", fr)
	}
}

// TestClientGroupStatus: on the sqlite store a ClientGroup gets a status:
// member counts, Ready, the policies that select it, and Referenced false
// once the policy is deleted. (Members the schema admits but the data plane
// cannot use are covered by controllers/clientgroups TestDesiredStatus.)
func TestClientGroupStatus(t *testing.T) {
	s := startServer(t)
	u := loggedIn(t, s)
	f := filepath.Join(t.TempDir(), "groups.yaml")
	objs := `apiVersion: service.io/v1alpha1
kind: ClientGroup
metadata: {name: kids}
spec:
  addresses: [127.0.0.2/32, 10.1.0.0/16]
  names: [kid-laptop]
---
apiVersion: service.io/v1alpha1
kind: Policy
metadata: {name: school}
spec:
  clientGroupRefs: [kids]
`
	if err := os.WriteFile(f, []byte(objs), 0o644); err != nil {
		t.Fatal(err)
	}
	u.ok("apply", "-f", f)
	type status struct {
		Members, Addresses, Names, Invalid int64
		Policies                           []string
		Conditions                         []struct{ Type, Status, Reason, Message string }
	}
	get := func() status {
		var obj struct{ Status status }
		if err := json.Unmarshal([]byte(u.ok("get", "clientgroup", "kids", "-o", "json")), &obj); err != nil {
			t.Fatal(err)
		}
		return obj.Status
	}
	cond := func(st status, typ string) string {
		for _, c := range st.Conditions {
			if c.Type == typ {
				return c.Status + "/" + c.Reason + ": " + c.Message
			}
		}
		return ""
	}
	var st status
	start := time.Now()
	nodetest.Eventually(t, 10*time.Second, "status of kids", func() bool {
		st = get()
		return len(st.Policies) == 1
	})
	t.Logf("status written %v after apply", time.Since(start).Round(time.Millisecond))
	if st.Members != 3 || st.Addresses != 2 || st.Names != 1 || st.Invalid != 0 || st.Policies[0] != "default/school" {
		t.Errorf("status: %+v", st)
	}
	if c := cond(st, "Ready"); c != "True/MembersValid: 3 members" {
		t.Errorf("Ready: %s", c)
	}
	if c := cond(st, "Referenced"); !strings.HasPrefix(c, "True/SelectedByPolicies") {
		t.Errorf("Referenced: %s", c)
	}
	if out := u.ok("get", "clientgroups"); !strings.Contains(out, "MEMBERS") || !strings.Contains(out, "True") {
		t.Errorf("get clientgroups:\n%s", out)
	}
	u.ok("delete", "policy", "school")
	nodetest.Eventually(t, 10*time.Second, "kids unreferenced", func() bool {
		st = get()
		return strings.HasPrefix(cond(st, "Referenced"), "False/NoPolicy")
	})
	if len(st.Policies) != 0 {
		t.Errorf("policies after delete: %v", st.Policies)
	}
}
