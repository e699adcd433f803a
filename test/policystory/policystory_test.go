// Package policystory is the story of issue 18, item 1, with the built svc
// binary (serve and CLI) and real DNS queries from two loopback clients:
// an ad list blocks for everyone; a kids policy that blocks a service adds
// to it instead of switching ad blocking off for the kids; naming the ad
// list in the kids policy keeps it for everyone else; `svc lists allow`
// with a catch-all policy allows for everyone; `lists` and `describe` say
// to whom each list applies.
package policystory

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/test/fakeupstream"
	"github.com/svcdns/svc/test/proc"
)

var svcBin string

func TestMain(m *testing.M) {
	os.Exit(proc.MainWithSvc(m, &svcBin))
}

const (
	adminPassword = "correct horse battery staple"
	upstreamIP    = "192.0.2.10" // every name the fake upstream answers
	adult, kid    = "127.0.0.1", "127.0.0.2"
)

type node struct {
	*proc.Server
	api, dns string
}

// startNode runs `svc serve` with every listener on 127.0.0.1:0 and the
// fake upstream; SIGTERM and a wait when the test ends.
func startNode(t *testing.T, upstream string) *node {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "service.yaml")
	body := fmt.Sprintf(`node:
  dataDir: %[1]s/data
  lameduck: 50ms
listeners:
  dns:
    - address: 127.0.0.1:0
      protocols: [udp, tcp]
  api:
    address: 127.0.0.1:0
    tls:
      auto: "off"
  ops:
    address: 127.0.0.1:0
  metrics:
    address: 127.0.0.1:0
  blockPage:
    http: ""
upstreams:
  groups:
    default:
      servers: [%[2]s]
      timeout: 1s
auth:
  adminSocket:
    path: %[1]s/data/service.sock
`, dir, upstream)
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := proc.Serve(t, proc.ServeConfig{Bin: svcBin, Config: cfg, Dir: dir,
		Env: []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH"), "SERVICE_ADMIN_PASSWORD=" + adminPassword}})
	return &node{Server: srv, api: "http://" + srv.API(), dns: srv.DNS()}
}

// answer asks the node for name's A record from the loopback address from
// and says what a user sees: "blocked" (0.0.0.0), "answered" (the
// upstream's address) or the rcode and answer.
func (n *node) answer(t *testing.T, from, name string) string {
	t.Helper()
	c := &dns.Client{Net: "udp", Timeout: 2 * time.Second,
		Dialer: &net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP(from)}, Timeout: 2 * time.Second}}
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(name), dns.TypeA)
	r, _, err := c.Exchange(q, n.dns)
	if err != nil {
		return "error: " + err.Error()
	}
	if len(r.Answer) == 1 {
		if a, ok := r.Answer[0].(*dns.A); ok {
			switch a.A.String() {
			case "0.0.0.0":
				return "blocked"
			case upstreamIP:
				return "answered"
			}
		}
	}
	return fmt.Sprintf("%s %v", dns.RcodeToString[r.Rcode], r.Answer)
}

// expect waits (bounded) until every client sees what want says for each
// name: lists compile and snapshots swap in after a write returns.
func (n *node) expect(t *testing.T, step string, want map[[2]string]string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var bad []string
		for k, w := range want {
			if got := n.answer(t, k[0], k[1]); got != w {
				bad = append(bad, fmt.Sprintf("%s asking %s: %s, want %s", k[0], k[1], got, w))
			}
		}
		if len(bad) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s:\n  %s", step, strings.Join(bad, "\n  "))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

type user struct {
	t   *testing.T
	env []string
}

func (u *user) run(stdin string, args ...string) string {
	u.t.Helper()
	out, _ := u.run2(stdin, args...)
	return out
}

// run2 runs svc and returns its stdout and stderr; a non-zero exit fails
// the test.
func (u *user) run2(stdin string, args ...string) (string, string) {
	u.t.Helper()
	r := proc.Run(u.t, u.env, stdin, svcBin, args...)
	if r.Code != 0 {
		u.t.Fatalf("svc %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.Code, r.Stdout, r.Stderr)
	}
	return r.Stdout, r.Stderr
}

func (u *user) apply(manifest string) string {
	u.t.Helper()
	return u.run(manifest, "apply", "-f", "-")
}

func TestPolicyStory(t *testing.T) {
	n := startNode(t, fakeupstream.A(t, upstreamIP))
	home := t.TempDir()
	u := &user{t: t, env: []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "SERVICE_KEYRING=file",
		"SERVICE_CLI_CONFIG=" + filepath.Join(home, "config.yaml")}}
	u.run(adminPassword+"\n", "login", "--server", n.api, "-u", "admin", "--password-stdin", "--name", "story")

	// 1. an ad list: both clients blocked
	// apply says to whom the list applies
	if out, errOut := u.run2(`apiVersion: service.io/v1alpha1
kind: BlockList
metadata: {name: ads}
spec:
  sources:
    - name: main
      inline: ["||ads.example^"]
`, "apply", "-f", "-"); out != "blocklist/ads created\n" || !strings.Contains(errOut, "blocklist/ads applies to everyone\n") {
		t.Errorf("apply of the ad list does not say to whom it applies:\nstdout: %s\nstderr: %s", out, errOut)
	}
	n.expect(t, "ad list applied", map[[2]string]string{
		{adult, "ads.example"}: "blocked", {kid, "ads.example"}: "blocked",
		{adult, "news.example"}: "answered", {kid, "news.example"}: "answered",
	})

	// 2. a kids policy blocking a service: the kids keep ad blocking and
	// lose the service; the others keep ad blocking only
	kidsPolicy := `apiVersion: service.io/v1alpha1
kind: ClientGroup
metadata: {name: kids}
spec:
  addresses: [127.0.0.2/31]
---
apiVersion: service.io/v1alpha1
kind: Policy
metadata: {name: kids}
spec:
  priority: 10
  clientGroupRefs: [kids]
  blockedServices: [tiktok]
`
	u.apply(kidsPolicy)
	n.expect(t, "kids policy added", map[[2]string]string{
		{kid, "ads.example"}: "blocked", {kid, "tiktok.com"}: "blocked",
		{adult, "ads.example"}: "blocked", {adult, "tiktok.com"}: "answered",
	})

	// 3. the kids policy names the ad list: everyone else keeps it
	u.apply(kidsPolicy + "  blockListRefs: [ads]\n")
	n.expect(t, "ad list named by the kids policy", map[[2]string]string{
		{kid, "ads.example"}: "blocked", {kid, "tiktok.com"}: "blocked",
		{adult, "ads.example"}: "blocked", {adult, "tiktok.com"}: "answered",
	})

	// 4. a catch-all policy, then `svc lists allow`: the name is answered
	// for everyone (the kids too), the rest of the ad list still blocks
	u.apply(`apiVersion: service.io/v1alpha1
kind: Policy
metadata: {name: everyone}
spec:
  priority: 0
`)
	n.expect(t, "catch-all policy added", map[[2]string]string{
		{adult, "x.ads.example"}: "blocked", {kid, "x.ads.example"}: "blocked",
	})
	if out, errOut := u.run2("", "lists", "allow", "x.ads.example"); !strings.Contains(out, "blocklist/ui-allow created") ||
		!strings.Contains(errOut, "blocklist/ui-allow applies to everyone\n") {
		t.Fatalf("lists allow does not say the list applies to everyone:\nstdout: %s\nstderr: %s", out, errOut)
	}
	n.expect(t, "lists allow with a catch-all policy", map[[2]string]string{
		{adult, "x.ads.example"}: "answered", {kid, "x.ads.example"}: "answered",
		{adult, "y.ads.example"}: "blocked", {kid, "y.ads.example"}: "blocked",
		{kid, "tiktok.com"}: "blocked", {adult, "tiktok.com"}: "answered",
	})

	// 5. lists and describe say to whom each list applies
	out := u.run("", "lists", "list")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "APPLIES-TO") {
		t.Fatalf("lists list:\n%s", out)
	}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if (f[1] != "ads" && f[1] != "ui-allow") || f[len(f)-1] != "everyone" {
			t.Errorf("lists list row %q: want ads and ui-allow applying to everyone\n%s", l, out)
		}
	}
	if out := u.run("", "lists", "list", "-o", "json"); strings.Contains(out, "appliesTo") || !strings.Contains(out, `"ui-allow"`) {
		t.Errorf("lists list -o json must print the objects as stored:\n%s", out)
	}
	if out := u.run("", "describe", "blocklist", "ui-allow"); !strings.Contains(out, "Applies to:   everyone\n") {
		t.Errorf("describe blocklist ui-allow does not say it applies to everyone:\n%s", out)
	}
	out = u.run("", "describe", "policy", "kids")
	for _, re := range []string{`default/ads\s+block\s+own\s+true`, `default/ui-allow\s+allow\s+global\s+true`} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("describe policy kids: no effective list matching %q:\n%s", re, out)
		}
	}

	// 6. a list for the kids only (global: false) and an opt-out
	u.apply(`apiVersion: service.io/v1alpha1
kind: BlockList
metadata: {name: games}
spec:
  global: false
  sources:
    - name: main
      inline: ["||games.example^"]
`)
	if _, errOut := u.run2(kidsPolicy+"  blockListRefs: [ads, games]\n  excludeListRefs: [ui-allow]\n", "apply", "-f", "-"); !strings.Contains(errOut, "opted out of ui-allow") {
		t.Errorf("apply of a policy opting out does not say so:\n%s", errOut)
	}
	n.expect(t, "a kids-only list and an opt-out of ui-allow", map[[2]string]string{
		{kid, "games.example"}: "blocked", {adult, "games.example"}: "answered",
		{kid, "x.ads.example"}: "blocked", {adult, "x.ads.example"}: "answered",
	})
	if out := u.run("", "describe", "blocklist", "ui-allow"); !strings.Contains(out, "Applies to:   everyone except policies kids\n") {
		t.Errorf("describe blocklist ui-allow after the opt-out:\n%s", out)
	}
	if out := u.run("", "describe", "blocklist", "games"); !strings.Contains(out, "Applies to:   policies kids\n") {
		t.Errorf("describe blocklist games:\n%s", out)
	}

	// 7. a list the kids opt out of stops being global: there is nothing
	// to opt out of any more, and the policy's status says so
	extra := func(global string) string {
		return `apiVersion: service.io/v1alpha1
kind: BlockList
metadata: {name: extra}
spec:
` + global + `  sources:
    - name: main
      inline: ["||extra.example^"]
`
	}
	u.apply(extra(""))
	n.expect(t, "a second global list", map[[2]string]string{
		{kid, "extra.example"}: "blocked", {adult, "extra.example"}: "blocked",
	})
	u.apply(kidsPolicy + "  blockListRefs: [ads, games]\n  excludeListRefs: [ui-allow, extra]\n")
	n.expect(t, "kids opt out of extra", map[[2]string]string{
		{kid, "extra.example"}: "answered", {adult, "extra.example"}: "blocked",
	})
	if out := u.run("", "describe", "policy", "kids"); strings.Contains(out, "NotGlobalList") {
		t.Fatalf("kids degraded before extra changed:\n%s", out)
	}
	u.apply(extra("  global: false\n"))
	deadline := time.Now().Add(15 * time.Second)
	for {
		out := u.run("", "describe", "policy", "kids")
		if strings.Contains(out, "NotGlobalList") && strings.Contains(out, "default/extra, which is not global") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("describe policy kids does not report the exclusion of a list that is no longer global:\n%s", out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
