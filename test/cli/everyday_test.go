package cli_test

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/test/nodetest"
)

// serveList serves a hosts-format list on loopback until the test ends.
func serveList(t *testing.T, body string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, body)
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String() + "/hosts.txt"
}

// TestListsAddFromURL: `svc lists add` printed help and exited 0; it adds a
// list from a URL and shows what the fetch loaded, and the loopback refusal
// says which setting allows it.
func TestListsAddFromURL(t *testing.T) {
	listURL := serveList(t, "0.0.0.0 ads.cli-test.example\n0.0.0.0 tracker.cli-test.example\n")

	// Default settings: a loopback URL is refused, with the fix named.
	s := startServer(t)
	u := loggedIn(t, s)
	r := u.run("lists", "add", "ads", "--url", listURL, "--wait", "20s")
	if r.Code == 0 {
		t.Fatalf("lists add from a loopback URL: exit 0\n%s", r.Stdout)
	}
	for _, want := range []string{"blocking.allowLocalListURLs", "SERVICE_BLOCKING__ALLOWLOCALLISTURLS=true"} {
		if !strings.Contains(r.Stderr, want) {
			t.Errorf("refusal lacks %q:\n%s", want, r.Stderr)
		}
	}
	// Bad input is refused before any request.
	if r := u.run("lists", "add", "ads", "--url", "example.org/hosts.txt"); r.Code == 0 || !strings.Contains(r.Stderr, "https://example.org/hosts.txt") {
		t.Errorf("lists add with a URL without scheme: exit %d\n%s", r.Code, r.Stderr)
	}
	if r := u.run("lists", "add", "ads", "--url", listURL, "--refresh-interval", "1d"); r.Code == 0 || !strings.Contains(r.Stderr, "24h") {
		t.Errorf("--refresh-interval 1d: exit %d, want a refusal that says days are 24h\n%s", r.Code, r.Stderr)
	}

	// Allowed: the list is fetched, the CLI says how many entries, and the
	// names are blocked.
	s2 := startServerWith(t, nodetest.ExtraYAML("blocking:\n  allowLocalListURLs: true\n"))
	u2 := loggedIn(t, s2)
	out := u2.ok("lists", "add", "ads", "--url", listURL, "--wait", "20s")
	if !strings.Contains(out, "blocklist/ads created") || !strings.Contains(out, "2 entries from "+listURL) {
		t.Errorf("lists add output:\n%s", out)
	}
	nodetest.Eventually(t, 10*time.Second, "ads.cli-test.example blocked", func() bool {
		m, err := s2.Exchange("udp", 2*time.Second, "ads.cli-test.example", dns.TypeA)
		if err != nil {
			return false
		}
		for _, rr := range m.Answer {
			if a, ok := rr.(*dns.A); ok && a.A.IsUnspecified() {
				return true
			}
		}
		return m.Rcode == dns.RcodeNameError
	})
	// The same URL twice: refused with the way to fetch again.
	if r := u2.run("lists", "add", "ads", "--url", listURL); r.Code == 0 || !strings.Contains(r.Stderr, "svc lists refresh ads") {
		t.Errorf("adding the same URL again: exit %d\n%s", r.Code, r.Stderr)
	}
}

// startServerWith is startServer with more node options.
func startServerWith(t *testing.T, opts ...nodetest.Option) *server {
	t.Helper()
	all := append([]nodetest.Option{nodetest.Lameduck(100 * time.Millisecond), nodetest.APITLSOff(), nodetest.SettingsFile(),
		nodetest.Env("SERVICE_ADMIN_PASSWORD=" + adminPassword)}, opts...)
	n := nodetest.Start(t, all...)
	return &server{Node: n, URL: "http://" + n.Addrs.API}
}

const kidsObjects = `apiVersion: service.io/v1alpha1
kind: ClientGroup
metadata: {name: kids}
spec:
  addresses: [127.0.0.2/32]
---
apiVersion: service.io/v1alpha1
kind: Policy
metadata: {name: kids}
spec:
  clientGroupRefs: [kids]
  priority: 10
`

// TestServicesAndSafeSearchPerPolicy: list catalogue services, block and
// unblock them for a policy, and switch safe search, all without YAML.
func TestServicesAndSafeSearchPerPolicy(t *testing.T) {
	s := startServer(t)
	u := loggedIn(t, s)
	f := filepath.Join(t.TempDir(), "kids.yaml")
	if err := os.WriteFile(f, []byte(kidsObjects), 0o644); err != nil {
		t.Fatal(err)
	}
	u.ok("apply", "-f", f)

	ls := u.ok("services", "ls")
	if !strings.HasPrefix(ls, "ID") || !strings.Contains(ls, "youtube") {
		t.Fatalf("services ls:\n%s", ls)
	}
	out := u.ok("services", "block", "youtube", "--policy", "kids")
	if !strings.Contains(out, "policy/kids") {
		t.Errorf("services block output: %q", out)
	}
	if got := u.ok("get", "policy", "kids", "-o", "json"); !strings.Contains(got, `"blockedServices"`) || !strings.Contains(got, `"youtube"`) {
		t.Errorf("policy after block:\n%s", got)
	}
	var row string
	for _, l := range strings.Split(u.ok("services", "ls", "--policy", "kids"), "\n") {
		if strings.HasPrefix(l, "youtube ") {
			row = l
		}
	}
	if !strings.HasSuffix(strings.TrimSpace(row), "blocked") {
		t.Errorf("services ls --policy kids: youtube row %q does not say blocked", row)
	}
	// Typos: a did-you-mean for the service and the policy.
	if r := u.run("services", "block", "youtub", "--policy", "kids"); r.Code == 0 || !strings.Contains(r.Stderr, `did you mean "youtube"`) {
		t.Errorf("block youtub: exit %d\n%s", r.Code, r.Stderr)
	}
	if r := u.run("services", "block", "youtube", "--policy", "kid"); r.Code == 0 || !strings.Contains(r.Stderr, `did you mean "kids"`) {
		t.Errorf("--policy kid: exit %d\n%s", r.Code, r.Stderr)
	}
	if r := u.run("services", "block", "youtube"); r.Code == 0 || !strings.Contains(r.Stderr, "policies: kids") {
		t.Errorf("no --policy: exit %d\n%s", r.Code, r.Stderr)
	}
	u.ok("services", "unblock", "youtube", "--policy", "kids")
	if got := u.ok("get", "policy", "kids", "-o", "json"); strings.Contains(got, `"youtube"`) {
		t.Errorf("policy after unblock still names youtube:\n%s", got)
	}

	u.ok("safesearch", "enable", "--policy", "kids")
	st := u.ok("safesearch", "status")
	if !strings.Contains(st, "kids") || !strings.Contains(st, "on") || !strings.Contains(st, "strict") {
		t.Errorf("safesearch status:\n%s", st)
	}
	if r := u.run("safesearch", "enable", "--policy", "kids", "--mode", "moderat"); r.Code == 0 || !strings.Contains(r.Stderr, `did you mean "moderate"`) {
		t.Errorf("--mode moderat: exit %d\n%s", r.Code, r.Stderr)
	}
	u.ok("safesearch", "disable", "--policy", "kids")
	if st := u.ok("safesearch", "status"); !strings.Contains(st, "off") {
		t.Errorf("safesearch status after disable:\n%s", st)
	}
}
