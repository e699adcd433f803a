package vip

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func mustVIP(t *testing.T, s string) VIP {
	t.Helper()
	v, err := ParseVIP(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

// testKey stands in for the key files: a fixed key per path, so the
// golden files are stable.
func testKey(path string) ([]byte, error) {
	return []byte("0123456789abcdef-" + filepath.Base(path)), nil
}

// renderings are the golden cases; the svc path and the run dir are made
// up (keepalived's config test is run on a copy pointing at real ones).
func renderings(t *testing.T) map[string]Options {
	base := func() Options {
		return Options{
			VIPs:          []VIP{mustVIP(t, "dns-a=192.0.2.53/24@eth0#53"), mustVIP(t, "dns-b=192.0.2.54/24@eth0#54")},
			Peers:         addrs("192.0.2.11", "192.0.2.12", "192.0.2.13"),
			Self:          netip.MustParseAddr("192.0.2.12"),
			PriorityIndex: -1,
			PreemptDelay:  10 * time.Second,
			KeyFile:       "/run/secrets/vrrp_hmac_{vrid}",
			RunDir:        "/run/service",
			Svc:           "/usr/bin/svc",
			Track:         TrackFile,
			Probe:         Probe{DNS: []string{"127.0.0.1:53"}, Timeout: 900 * time.Millisecond, RequireBackends: 1},
		}
	}
	three := base()
	legacy := base()
	legacy.Legacy = true
	legacy.PriorityIndex = 0
	legacy.PreemptDelay = 0
	script := base()
	script.Track = TrackScript
	script.Probe = Probe{DNS: []string{"127.0.0.1:53", "127.0.0.1:5353"}, Timeout: 1500 * time.Millisecond, RequireBackends: 2}
	v6 := base()
	v6.VIPs = []VIP{mustVIP(t, "dns6=2001:db8::53/64@eth0#60")}
	v6.Peers = addrs("2001:db8::11", "2001:db8::12")
	v6.Self = netip.MustParseAddr("2001:db8::11")
	v6.Legacy = true
	return map[string]Options{"three-nodes": three, "legacy": legacy, "track-script": script, "ipv6": v6}
}

func TestRenderGolden(t *testing.T) {
	for name, o := range renderings(t) {
		t.Run(name, func(t *testing.T) {
			got, _, err := Render(o, testKey)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", name+".conf")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (go test ./internal/vip -run TestRenderGolden -update)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("rendering drifted from %s (go test ./internal/vip -run TestRenderGolden -update):\n%s", path, got)
			}
			checkInNetns(t, o)
		})
	}
}

// checkInNetns runs keepalived's config test on the rendering with the
// run dir and svc binary pointing at real files, in a network namespace
// with a veth eth0 (keepalived checks that the interface exists).
func checkInNetns(t *testing.T, o Options) {
	t.Helper()
	kp, err := exec.LookPath("keepalived")
	if err != nil {
		t.Fatal("keepalived is not installed: run hack/install-test-deps.sh (make test-deps)")
	}
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("keepalived's config test needs root (a network namespace with eth0); CI runs as root")
		}
		t.Skip("not root: keepalived's config test needs a network namespace (CI runs it as root)")
	}
	dir := t.TempDir()
	_ = os.Chmod(dir, 0o755)
	svc := filepath.Join(dir, "svc")
	if err := os.WriteFile(svc, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	o.Svc, o.RunDir = svc, dir
	conf, _, err := Render(o, testKey)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, ConfigFile)
	if err := os.WriteFile(path, conf, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{HealthFile, DrainFile} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("0\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ns := netns(t)
	if out, err := exec.Command("ip", "-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", "eth1").CombinedOutput(); err != nil {
		t.Fatalf("ip link add: %v: %s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := Check(ctx, []string{"ip", "netns", "exec", ns, kp}, path); err != nil {
		t.Fatalf("%v\n%s", err, conf)
	}
}

// netns creates a network namespace with a unique name, deleted when the
// test ends.
func netns(t *testing.T) string {
	t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := "svcvipt-" + hex.EncodeToString(b)
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", name, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	return name
}

// A config keepalived refuses must fail Check, with keepalived's words.
func TestCheckRefusesBrokenConfig(t *testing.T) {
	if _, err := exec.LookPath("keepalived"); err != nil {
		t.Fatal("keepalived is not installed: run hack/install-test-deps.sh (make test-deps)")
	}
	path := filepath.Join(t.TempDir(), "k.conf")
	if err := os.WriteFile(path, []byte("vrrp_instance x {\n  garbage_keyword 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := Check(context.Background(), nil, path)
	if err == nil || !strings.Contains(err.Error(), "garbage_keyword") {
		t.Fatalf("Check of a broken config: %v, want keepalived's complaint about garbage_keyword", err)
	}
}

// Three VIPs over three nodes: each node is the first choice of exactly
// one, whatever the order of the --vip flags.
func TestPrioritiesSpread(t *testing.T) {
	vips := []VIP{mustVIP(t, "c=192.0.2.3/24@eth0#3"), mustVIP(t, "a=192.0.2.1/24@eth0#1"), mustVIP(t, "b=192.0.2.2/24@eth0#2")}
	peers := addrs("192.0.2.11", "192.0.2.12", "192.0.2.13")
	preferred := map[string]string{}
	for _, self := range peers {
		o := Options{VIPs: vips, Peers: peers, Self: self, PriorityIndex: -1, Legacy: true, RunDir: "/run/service",
			Svc: "/usr/bin/svc", Track: TrackFile, Probe: Probe{DNS: []string{"127.0.0.1:53"}, Timeout: time.Second, RequireBackends: 1}}
		_, plan, err := Render(o, nil)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, in := range plan.Instances {
			if in.Preferred {
				n++
				if other, dup := preferred[in.Name]; dup {
					t.Errorf("%s preferred by %s and %s", in.Name, other, self)
				}
				preferred[in.Name] = self.String()
			}
		}
		if n != 1 {
			t.Errorf("node %s is the first choice of %d VIPs, want 1: %+v", self, n, plan.Instances)
		}
	}
}

func TestParseVIPErrors(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.1/24@eth0#1":        "no name",
		"a=192.0.2.1/24@eth0":        "no #vrid",
		"a=192.0.2.1/24#1":           "no @iface",
		"a=192.0.2.1@eth0#1":         "want name=addr/len@iface#vrid",
		"a=192.0.2.1/24@eth0#256":    "1 to 255",
		"Big=192.0.2.1/24@eth0#1":    "lower-case",
		"a=192.0.2.1/24@eth 0#1":     "not an interface name",
		"a=192.0.2.1/24@eth0#twelve": "1 to 255",
	} {
		_, err := ParseVIP(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseVIP(%q) = %v, want an error with %q", in, err, want)
		}
	}
}

func TestRenderRefusals(t *testing.T) {
	ok := renderings(t)["three-nodes"]
	cases := map[string]struct {
		change func(*Options)
		want   string
	}{
		"missing key": {func(o *Options) { o.KeyFile = "/nonexistent/vrrp_{vrid}" }, "--legacy"},
		"short key":   {func(o *Options) {}, "at least 16"},
		"same vrid":   {func(o *Options) { o.VIPs[1].VRID = o.VIPs[0].VRID }, "used twice"},
		"index":       {func(o *Options) { o.PriorityIndex = 3 }, "want 0..2"},
		"no self":     {func(o *Options) { o.Self = netip.Addr{} }, "address family"},
		"track":       {func(o *Options) { o.Track = "both" }, "--track"},
		"ipv6 auth": {func(o *Options) {
			o.VIPs = []VIP{mustVIP(t, "dns6=2001:db8::53/64@eth0#60")}
			o.Peers, o.Self = addrs("2001:db8::11"), netip.MustParseAddr("2001:db8::11")
		}, "VRRPv3"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			o := ok
			o.VIPs = append([]VIP(nil), ok.VIPs...)
			c.change(&o)
			read := ReadKey
			if name == "short key" {
				dir := t.TempDir()
				o.KeyFile = filepath.Join(dir, "k{vrid}")
				for _, v := range o.VIPs {
					_ = os.WriteFile(KeyPath(o.KeyFile, v.VRID), []byte("short"), 0o600)
				}
			}
			_, _, err := Render(o, read)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Render: %v, want an error with %q", err, c.want)
			}
		})
	}
}

// Two VRIDs never share an auth_pass, and another key gives another pass.
func TestAuthPassPerVRID(t *testing.T) {
	k := []byte("0123456789abcdef0123")
	if authPass(k, 1) == authPass(k, 2) {
		t.Error("VRIDs 1 and 2 share an auth_pass")
	}
	if authPass(k, 1) == authPass([]byte("another key of 16+ bytes"), 1) {
		t.Error("two keys give one auth_pass")
	}
	if n := len(authPass(k, 1)); n != 8 {
		t.Errorf("auth_pass of %d characters, keepalived uses 8", n)
	}
}

func TestParseNotify(t *testing.T) {
	for line, want := range map[string]string{
		`INSTANCE "svc_dns-a" MASTER 200`: "svc_dns-a MASTER 200",
		`INSTANCE "svc_dns-a" FAULT 0`:    "svc_dns-a FAULT 0",
		`INSTANCE "x" BACKUP`:             "x BACKUP 0",
	} {
		n, ok := ParseNotify(line)
		if got := fmt.Sprintf("%s %s %d", n.Instance, n.State, n.Priority); !ok || got != want {
			t.Errorf("ParseNotify(%q) = %q %v, want %q", line, got, ok, want)
		}
	}
	if _, ok := ParseNotify(`GROUP "g" MASTER`); ok {
		t.Error("a GROUP line parsed as an instance")
	}
}
