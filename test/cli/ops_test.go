package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svcdns/svc/test/nodetest"
)

func TestDNSSettingsListsAndOps(t *testing.T) {
	s := startServer(t)
	u := loggedIn(t, s)
	u.ok("apply", "-f", "testdata/manifests/zone.yaml")

	// query goes through the node's pipeline.
	nodetest.Eventually(t, 10*time.Second, "www.example.test answered", func() bool {
		return strings.Contains(u.ok("query", "www.example.test", "A"), "192.0.2.1")
	})
	out := u.ok("query", "www.example.test", "-o", "json")
	if !strings.Contains(out, `"rcode": "NOERROR"`) {
		t.Errorf("query -o json: %s", out)
	}

	// blocking toggle and cache flush.
	if out := u.ok("blocking", "disable", "5m"); !strings.Contains(out, "blocking disabled") || !strings.Contains(out, " until ") {
		t.Errorf("blocking disable: %s", out)
	}
	if out := u.ok("blocking", "enable"); !strings.Contains(out, "blocking enabled") {
		t.Errorf("blocking enable: %s", out)
	}
	if out := u.ok("cache", "flush", "www.example.test"); out != "flushed www.example.test\n" {
		t.Errorf("cache flush: %q", out)
	}

	// settings: set a cluster key, read it back, remove the override.
	u.ok("settings", "set", "cache.minTTL=7s", "blockPage.title=Nope here")
	if out := u.ok("settings", "get", "cache.minTTL", "blockPage.title"); out != "blockPage.title=\"Nope here\"\ncache.minTTL=\"7s\"\n" {
		t.Errorf("settings get: %q", out)
	}
	u.ok("settings", "set", "cache.minTTL-")
	if out := u.ok("settings", "get", "cache.minTTL"); out != "cache.minTTL=\"5s\"\n" {
		t.Errorf("settings after removal: %q", out)
	}
	r := u.run("settings", "set", "cache.maxEntries=-5")
	if r.Code == 0 || !strings.Contains(r.Stderr, "cache.maxEntries") {
		t.Errorf("invalid setting: %d %q", r.Code, r.Stderr)
	}

	// lists: allow and deny entries land in ui-allow and ui-deny.
	if out := u.ok("lists", "deny", "ads.example.org", "tracker.example.org"); out != "blocklist/ui-deny created\n" {
		t.Errorf("lists deny: %q", out)
	}
	if out := u.ok("lists", "allow", "ok.example.org"); out != "blocklist/ui-allow created\n" {
		t.Errorf("lists allow: %q", out)
	}
	if out := u.ok("lists", "deny", "more.example.org"); out != "blocklist/ui-deny updated\n" {
		t.Errorf("lists deny again: %q", out)
	}
	if out := u.ok("lists", "search", "sub.ads.example.org"); !strings.Contains(out, "default/ui-deny") {
		t.Errorf("lists search: %s", out)
	}
	if out := u.ok("lists", "list", "-o", "name"); out != "blocklist/ui-allow\nblocklist/ui-deny\n" {
		t.Errorf("lists list: %q", out)
	}

	// health and lameduck on the ops listener.
	if out := u.ok("health", "--ops-address", s.Addrs.Ops); !strings.Contains(out, "/healthz/live: ok") {
		t.Errorf("health: %s", out)
	}
	if out := u.ok("health", "--ops-address", s.Addrs.Ops, "--ready", "--dns", s.DNSAddr("udp")); !strings.Contains(out, "NOERROR") {
		t.Errorf("health --dns: %s", out)
	}
	u.ok("lameduck", "30s", "--ops-address", s.Addrs.Ops)
	if r := u.run("health", "--ops-address", s.Addrs.Ops, "--ready"); r.Code == 0 {
		t.Errorf("ready during lameduck: %s", r.Stdout)
	}
	u.ok("lameduck", "--cancel", "--ops-address", s.Addrs.Ops)
	nodetest.Eventually(t, 5*time.Second, "ready after cancel", func() bool {
		return u.run("health", "--ops-address", s.Addrs.Ops, "--ready").Code == 0
	})

	// doctor: API and token checks pass; a bad config fails.
	cfg := s.ConfigPath
	out = u.ok("doctor", "--config", cfg, "--skip-ports")
	for _, want := range []string{"config", "dataDir", "api", "token", "authenticated as"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor lacks %q:\n%s", want, out)
		}
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	_ = os.WriteFile(bad, []byte("cache:\n  maxEntries: -1\n"), 0o644)
	if r := u.run("doctor", "--config", bad, "--skip-api", "--skip-ports"); r.Code == 0 || !strings.Contains(r.Stdout, "fail") {
		t.Errorf("doctor with a bad config: %d %s %s", r.Code, r.Stdout, r.Stderr)
	}

	// completion: scripts, and dynamic kinds and names.
	if out := u.ok("completion", "bash"); !strings.Contains(out, "__svc") {
		t.Errorf("completion bash: %.200s", out)
	}
	if out := u.ok("__complete", "get", ""); !strings.Contains(out, "dnszones") || !strings.Contains(out, "rrset") {
		t.Errorf("kind completion: %s", out)
	}
	if out := u.ok("__complete", "get", "zones", ""); !strings.Contains(out, "example.test") {
		t.Errorf("name completion: %s", out)
	}

	// audit shows the writes of this test.
	if out := u.ok("audit", "--kind", "BlockList", "--since", "1h"); !strings.Contains(out, "ui-deny") {
		t.Errorf("audit: %s", out)
	}
}
