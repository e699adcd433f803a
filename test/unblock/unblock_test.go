// Package unblock_test runs a whole node (SQLite store) and decides unblock
// requests through its REST API, checking with the real dig what clients
// get: an approval for one client group answers the blocked name for that
// group's client and still blocks another group's client; a timed approval
// for everyone ends by itself and the name is blocked again.
package unblock_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/svcdns/svc/test/fakeupstream"
	"github.com/svcdns/svc/test/nodetest"
	"github.com/svcdns/svc/test/proc"
)

// svcBin is the built svc binary (the CLI verbs are checked with it).
var svcBin string

func TestMain(m *testing.M) { os.Exit(proc.MainWithSvc(m, &svcBin)) }

// cli runs `svc --server URL --token T args...` as an administrator would
// and returns its combined output and whether it exited 0.
func cli(t *testing.T, server string, args ...string) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, svcBin, append([]string{"--server", server, "--token", token}, args...)...)
	cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH"), "SERVICE_KEYRING=file"}
	out, err := cmd.CombinedOutput()
	return string(out), err == nil
}

const (
	token   = "svc_abcdefghij12_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	blocked = "ads.example.com"
	answer  = "192.0.2.55" // what the fake upstream answers for every name
	kidIP   = "127.0.0.2"
	guestIP = "127.0.0.3"
)

// objects are written through the API (manager api), so an approval may
// attach an allow list to a policy; objects.d files would be owned by
// their file.
var objects = []string{
	`{"apiVersion":"service.io/v1alpha1","kind":"BlockList","metadata":{"name":"ads","namespace":"default"},"spec":{"sources":[{"name":"main","inline":["||ads.example.com^"]}]}}`,
	`{"apiVersion":"service.io/v1alpha1","kind":"ClientGroup","metadata":{"name":"kids","namespace":"default"},"spec":{"addresses":["` + kidIP + `/32"]}}`,
	`{"apiVersion":"service.io/v1alpha1","kind":"ClientGroup","metadata":{"name":"guests","namespace":"default"},"spec":{"addresses":["` + guestIP + `/32"]}}`,
	`{"apiVersion":"service.io/v1alpha1","kind":"Policy","metadata":{"name":"kids","namespace":"default"},"spec":{"clientGroupRefs":["kids"],"blockListRefs":["ads"],"blockMode":"zeroIP"}}`,
	`{"apiVersion":"service.io/v1alpha1","kind":"Policy","metadata":{"name":"guests","namespace":"default"},"spec":{"clientGroupRefs":["guests"],"blockListRefs":["ads"],"blockMode":"zeroIP"}}`,
}

type api struct {
	t    *testing.T
	base string
	c    *http.Client
}

func (a api) do(method, path, body string) (int, map[string]any) {
	a.t.Helper()
	req, err := http.NewRequest(method, a.base+"/api/v1"+path, strings.NewReader(body))
	if err != nil {
		a.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.c.Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	if out == nil {
		out = map[string]any{"raw": string(b)}
	}
	return resp.StatusCode, out
}

func (a api) ok(method, path, body string) map[string]any {
	a.t.Helper()
	code, out := a.do(method, path, body)
	if code >= 300 {
		a.t.Fatalf("%s %s: %d %v", method, path, code, out)
	}
	return out
}

// dig asks the node for name A from the loopback address from (-b) and
// returns the +short answer.
func dig(t *testing.T, server, from, name string) string {
	t.Helper()
	host, port, err := net.SplitHostPort(server)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "dig", "-b", from, "@"+host, "-p", port, "+short", "+tries=1", "+time=2", name, "A").CombinedOutput()
	if err != nil {
		t.Fatalf("dig -b %s %s: %v\n%s", from, name, err, out)
	}
	return strings.TrimSpace(string(out))
}

func waitDig(t *testing.T, server, from, name, want string, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	var got string
	for time.Since(start) < within {
		if got = dig(t, server, from, name); got == want {
			return time.Since(start)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("dig -b %s %s: %q after %s, want %q", from, name, got, within, want)
	return 0
}

func fileRequest(a api, name, client, policy string) {
	a.ok(http.MethodPost, "/apply", fmt.Sprintf(`{"apiVersion":"service.io/v1alpha1","kind":"UnblockRequest","metadata":{"name":%q,"namespace":"default"},`+
		`"spec":{"domain":%q,"reason":"homework","policy":%q,"requester":{"ip":%q}}}`, name, blocked, policy, client))
	// the reconciler gives a request filed past the block page its expiry
	nodetest.Eventually(a.t, 10*time.Second, name+" pending with an expiry", func() bool {
		_, r := a.do(http.MethodGet, "/unblockrequests/default/"+name, "")
		return r["phase"] == "pending" && r["expiresAt"] != nil
	})
}

func TestUnblockDecisionsWithDig(t *testing.T) {
	if _, err := exec.LookPath("dig"); err != nil {
		t.Skip("dig not installed (hack/install-test-deps.sh)")
	}
	up := fakeupstream.A(t, answer) // allowed names have a real answer, blocked ones 0.0.0.0
	n := nodetest.Start(t, nodetest.APITLSOff(), nodetest.SettingsFile(), nodetest.Lameduck(50*time.Millisecond), nodetest.Env("SERVICE_BOOTSTRAP_TOKEN="+token))
	a := api{t: t, base: "http://" + n.Addrs.API, c: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}}
	a.ok(http.MethodPatch, "/settings", fmt.Sprintf(`{"upstreams":{"groups":{"default":{"servers":[%q],"timeout":"1s"}}}}`, up))
	for _, o := range objects {
		a.ok(http.MethodPost, "/apply", o)
	}
	dnsAddr := n.DNSAddr("udp")
	waitDig(t, dnsAddr, kidIP, "allowed.example.org", answer, 20*time.Second)
	waitDig(t, dnsAddr, kidIP, blocked, "0.0.0.0", 20*time.Second)
	waitDig(t, dnsAddr, guestIP, blocked, "0.0.0.0", 20*time.Second)

	// approve for the kids group only
	fileRequest(a, "kid-ads", kidIP, "default/kids")
	list := a.ok(http.MethodGet, "/unblockrequests?phase=pending", "")
	if list["pending"] != float64(1) || len(list["items"].([]any)) != 1 {
		t.Fatalf("pending list: %v", list)
	}
	start := time.Now()
	r := a.ok(http.MethodPost, "/unblockrequests/default/kid-ads/approve", `{"scope":"groups","groups":["kids"],"match":"subdomains","comment":"school project"}`)
	approveTook := time.Since(start)
	if r["phase"] != "approved" || r["entry"] != "default/unblocked-kids" || r["decidedBy"] == "" || r["scope"] != "groups" {
		t.Fatalf("approve answer: %v", r)
	}
	// the API answers once this node serves the entry: the next query is answered
	if got := dig(t, dnsAddr, kidIP, blocked); got != answer {
		t.Fatalf("kids client right after the approval (%s): %q, want %q", approveTook, got, answer)
	}
	if got := dig(t, dnsAddr, kidIP, "cdn."+blocked); got != answer {
		t.Fatalf("kids client, subdomain: %q, want %q", got, answer)
	}
	if got := dig(t, dnsAddr, guestIP, blocked); got != "0.0.0.0" {
		t.Fatalf("guests client after an approval for kids: %q, want still blocked", got)
	}
	t.Logf("approval for group kids answered in %s; the next dig from the kids client is answered, the guests client still blocked", approveTook)

	// a second decision is a conflict; deny records who and why
	if code, body := a.do(http.MethodPost, "/unblockrequests/default/kid-ads/deny", `{"comment":"no"}`); code != http.StatusConflict {
		t.Fatalf("deny an approved request: %d %v", code, body)
	}
	// the CLI: list, a refused approval naming the fix, deny, get
	fileRequest(a, "guest-other", guestIP, "default/guests")
	if out, ok := cli(t, a.base, "unblock", "list"); !ok || !strings.Contains(out, "guest-other") || !strings.Contains(out, "1 pending") ||
		!strings.Contains(out, "kid-ads") || !strings.Contains(out, "approved") {
		t.Fatalf("svc unblock list: %v\n%s", ok, out)
	}
	if out, ok := cli(t, a.base, "unblock", "approve", "guest-other", "--group", "guest"); ok || !strings.Contains(out, "ClientGroup default/guest does not exist") || !strings.Contains(out, "default/guests") {
		t.Fatalf("svc unblock approve --group guest (a typo): %v\n%s", ok, out)
	}
	if out, ok := cli(t, a.base, "unblock", "deny", "guest-other", "--comment", "not on the guest network"); !ok || !strings.Contains(out, "unblockrequest/guest-other denied") {
		t.Fatalf("svc unblock deny: %v\n%s", ok, out)
	}
	out, ok := cli(t, a.base, "unblock", "get", "default/guest-other")
	if !ok || !strings.Contains(out, "denied") || !strings.Contains(out, "not on the guest network") || !strings.Contains(out, "Decided by:") {
		t.Fatalf("svc unblock get: %v\n%s", ok, out)
	}
	d := a.ok(http.MethodGet, "/unblockrequests/default/guest-other", "")
	if d["phase"] != "denied" || d["comment"] != "not on the guest network" || d["decidedAt"] == nil || d["decidedBy"] == "" {
		t.Fatalf("denied request: %v", d)
	}

	// a timed approval for everyone: the guests client is answered, then
	// blocked again when the approval ends by itself
	fileRequest(a, "guest-ads", guestIP, "default/guests")
	r = a.ok(http.MethodPost, "/unblockrequests/default/guest-ads/approve", `{"duration":"3s"}`)
	if r["entry"] != "default/unblocked" || r["expiresAt"] == nil {
		t.Fatalf("timed approval: %v", r)
	}
	if got := dig(t, dnsAddr, guestIP, blocked); got != answer {
		t.Fatalf("guests client during the timed approval: %q, want %q", got, answer)
	}
	took := waitDig(t, dnsAddr, guestIP, blocked, "0.0.0.0", 20*time.Second)
	t.Logf("timed approval (3s) ended by itself: blocked again %s after the first answered dig", took)
	if got := dig(t, dnsAddr, kidIP, blocked); got != answer {
		t.Fatalf("kids client after the everyone approval ended: %q, want still answered (its own approval)", got)
	}
	g := a.ok(http.MethodGet, "/unblockrequests/default/guest-ads", "")
	if g["phase"] != "expired" || !strings.Contains(fmt.Sprint(g["message"]), "removed from default/unblocked") {
		t.Fatalf("ended approval: %v", g)
	}
	// the gauge: kid-ads approved, guest-other denied, guest-ads expired
	nodetest.Eventually(t, 10*time.Second, "service_unblock_requests by phase", func() bool {
		resp, err := http.Get("http://" + n.Addrs.Metrics + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		m := string(b)
		return strings.Contains(m, `service_unblock_requests{phase="approved"} 1`) && strings.Contains(m, `service_unblock_requests{phase="denied"} 1`) &&
			strings.Contains(m, `service_unblock_requests{phase="expired"} 1`) && strings.Contains(m, `service_unblock_requests{phase="pending"} 0`)
	})
	// every decision is in the audit trail
	audit := a.ok(http.MethodGet, "/audit?kind=UnblockRequest", "")
	var actions []string
	for _, e := range audit["items"].([]any) {
		ev := e.(map[string]any)
		actions = append(actions, fmt.Sprint(ev["action"], " ", ev["name"]))
	}
	for _, want := range []string{"approve kid-ads", "deny guest-other", "approve guest-ads"} {
		if !strings.Contains(strings.Join(actions, ","), want) {
			t.Errorf("audit lacks %q: %v", want, actions)
		}
	}
}
