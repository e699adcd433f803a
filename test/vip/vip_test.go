// Package vip_test runs svc vip end to end: real nodes (svc serve, SQLite)
// and keepalived under svc vip run, each in its own network namespace on
// one bridged segment, and a client namespace that queries the VIPs.
package vip_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/svcdns/svc/internal/vip"
	"github.com/svcdns/svc/test/proc"
)

var svcBin string

func TestMain(m *testing.M) { os.Exit(proc.MainWithSvc(m, &svcBin)) }

const (
	vipA = "10.213.0.53"
	vipB = "10.213.0.54"
	// Both VIPs on eth0; VRIDs 53 and 54. dns-a prefers the first node in
	// address order, dns-b the second.
	vipFlagA = "dns-a=" + vipA + "/24@eth0#53"
	vipFlagB = "dns-b=" + vipB + "/24@eth0#54"
)

// node is one "machine": a namespace with svc serve and svc vip run.
type node struct {
	name, ns, addr string
	dir, runDir    string
	peersFile      string
	serve          *proc.Server
	vip            *proc.Supervised
}

// nodeConfig binds DNS to every address, as the chart does, and to each
// VIP, which ip_nonlocal_bind allows before the VIP arrives: the wildcard
// UDP socket alone would answer VIP queries from the node's own address,
// which clients drop; the VIP's own socket answers from the VIP.
func nodeConfig(dir, name string) string {
	return fmt.Sprintf(`node:
  name: %[2]s
  dataDir: %[1]s/data
  lameduck: 0s
listeners:
  dns:
    - {address: "0.0.0.0:53", protocols: [udp, tcp]}
    - {address: "%[3]s:53", protocols: [udp, tcp]}
    - {address: "%[4]s:53", protocols: [udp, tcp]}
  api:
    address: 127.0.0.1:0
    tls:
      auto: "off"
  ops:
    address: 127.0.0.1:0
  metrics:
    address: 127.0.0.1:0
  internal:
    address: 127.0.0.1:0
  blockPage:
    http: ""
upstreams:
  groups:
    default:
      servers: [127.0.0.1:1]
      timeout: 200ms
objectsDir: %[1]s/objects.d
auth:
  adminSocket:
    path: %[1]s/data/service.sock
`, dir, name, vipA, vipB)
}

// startServe starts svc serve in the node's namespace.
func (n *node) startServe(t *testing.T) {
	t.Helper()
	for _, d := range []string{"data", "objects.d"} {
		if err := os.MkdirAll(filepath.Join(n.dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg := filepath.Join(n.dir, "service.yaml")
	if err := os.WriteFile(cfg, []byte(nodeConfig(n.dir, n.name)), 0o644); err != nil {
		t.Fatal(err)
	}
	n.serve = proc.Serve(t, proc.ServeConfig{Bin: "ip", Args: []string{"netns", "exec", n.ns, svcBin, "serve", "--config", cfg},
		Dir: n.dir, Env: []string{"HOME=" + n.dir, "PATH=" + os.Getenv("PATH")}})
}

var opsRE = regexp.MustCompile(`listener=ops address=(\S+)`)

// ops is the node's ops listener (svc health reads /healthz/live there).
func (n *node) ops(t *testing.T) string {
	t.Helper()
	m := opsRE.FindStringSubmatch(n.serve.Log())
	if m == nil {
		t.Fatalf("no ops listener in %s's log", n.name)
	}
	return m[1]
}

// killServe kills the node's DNS process (SIGKILL: a crash, no lameduck).
func (n *node) killServe(t *testing.T) {
	t.Helper()
	for _, pid := range nsPIDs(n.ns) {
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if strings.Contains(string(cmd), "serve\x00--config") {
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("no svc serve process in %s", n.ns)
}

// startVIP runs svc vip run (or any svc vip verb) in a namespace, stopped
// with SIGTERM (then SIGKILL after 20 s) when the test ends.
func startVIP(t *testing.T, ns string, args ...string) *proc.Supervised {
	t.Helper()
	return proc.StartSupervised(t, "svc vip run in "+ns, nil, "ip", append([]string{"netns", "exec", ns, svcBin, "vip", "run"}, args...)...)
}

// svcIn runs an svc command in a namespace (at most 60 s).
func svcIn(t *testing.T, ns string, args ...string) proc.Result {
	t.Helper()
	return proc.Run(t, []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, "", "ip", append([]string{"netns", "exec", ns, svcBin}, args...)...)
}

// cluster starts n nodes at 10.213.0.11.. with the same key and waits
// until every VIP has an owner.
func cluster(t *testing.T, seg *segment, count int, key string) []*node {
	t.Helper()
	var nodes []*node
	var peers []string
	for i := range count {
		n := &node{name: fmt.Sprintf("n%d", i+1), addr: fmt.Sprintf("10.213.0.%d", 11+i), dir: t.TempDir()}
		n.ns = seg.host(n.name, n.addr)
		n.runDir = filepath.Join(n.dir, "run")
		nodes = append(nodes, n)
		peers = append(peers, n.addr)
	}
	var wg sync.WaitGroup
	for _, n := range nodes {
		// Node starts are slow on a loaded machine: start them together.
		wg.Go(func() { n.startServe(t) })
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for _, n := range nodes {
		// A peers file, so that a test can change the peers of a running node.
		n.peersFile = filepath.Join(n.dir, "peers")
		if err := os.WriteFile(n.peersFile, []byte(strings.Join(peers, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		n.vip = startVIP(t, n.ns, "--vip", vipFlagA, "--vip", vipFlagB, "--peers-file", n.peersFile,
			"--hmac-key-file", key, "--run-dir", n.runDir, "--health-address", "127.0.0.1:0", "--preempt-delay", "1s",
			"--stop-timeout", "10s")
	}
	return nodes
}

// owner is the node holding addr now, or nil.
func owner(t *testing.T, nodes []*node, addr string) *node {
	t.Helper()
	// A preempting master adds the address a moment before the old one,
	// on its advert, drops it: VRRP overlaps for milliseconds on every
	// handover, and for over 500 ms once in CI, where this package starts
	// three nodes while `go test ./...` loads both cores. A split brain
	// (peers that cannot hear each other) lasts until one side stops:
	// two holders for longer than splitBrain is an error.
	const splitBrain = 2 * time.Second
	var start time.Time // when two holders were first seen
	for {
		var holders []*node
		for _, n := range nodes {
			if hasAddr(t, n.ns, addr) {
				holders = append(holders, n)
			}
		}
		if len(holders) < 2 {
			if d := time.Since(start); !start.IsZero() && d > 200*time.Millisecond {
				t.Logf("%s was on two nodes for %s", addr, d.Round(time.Millisecond))
			}
			if len(holders) == 0 {
				return nil
			}
			return holders[0]
		}
		if start.IsZero() {
			start = time.Now()
		}
		if time.Since(start) > splitBrain {
			t.Errorf("%s is on %s and %s at once for over %s", addr, holders[0].name, holders[1].name, splitBrain)
			return holders[len(holders)-1]
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitOwner waits (at most d) until addr is on want; it returns how long
// that took.
func waitOwner(t *testing.T, nodes []*node, addr string, want *node, d time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < d {
		if o := owner(t, nodes, addr); o == want {
			return time.Since(start)
		}
		time.Sleep(20 * time.Millisecond)
	}
	o := owner(t, nodes, addr)
	name := "nobody"
	if o != nil {
		name = o.name
	}
	t.Fatalf("%s is on %s after %s, want %s", addr, name, d, want.name)
	return 0
}

func writeKey(t *testing.T, dir, secret string) string {
	t.Helper()
	path := filepath.Join(dir, "vrrp_hmac_{vrid}")
	for _, vrid := range []string{"53", "54"} {
		if err := os.WriteFile(strings.ReplaceAll(path, "{vrid}", vrid), []byte(secret+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

// TestVIPFailoverDrainRebalance is the story on three nodes: the
// VIPs spread (dns-a on n1, dns-b on n2); killing n1's DNS moves dns-a
// within 3 s while a client keeps querying it; drain empties n2 and
// rebalance brings its VIPs back; svc health --vrrp reports the states;
// and a peer whose key differs cannot make the owner step down.
func TestVIPFailoverDrainRebalance(t *testing.T) {
	requireTools(t)
	seg := newSegment(t)
	keys := t.TempDir()
	key := writeKey(t, keys, "the shared VRRP key of the test cluster")
	nodes := cluster(t, seg, 3, key)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	client := seg.host("client", "10.213.0.100")

	// Spread: each VIP on its first choice once every node's DNS answers.
	took := waitOwner(t, nodes, vipA, n1, 30*time.Second)
	waitOwner(t, nodes, vipB, n2, 10*time.Second)
	t.Logf("VIPs spread: %s on n1, %s on n2, %s after the supervisors started", vipA, vipB, took.Round(time.Millisecond))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var pa prober
	go pa.run(ctx, udpIn(t, client), vipA, 20*time.Millisecond, 200*time.Millisecond)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, _, ok := pa.snapshot(); !ok.IsZero() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the client gets no answer from %s on n1", vipA)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// Failover: n1's DNS dies; dns-a must reach n2 (priority 199) within 3 s.
	killedAt := time.Now()
	n1.killServe(t)
	moved := waitOwner(t, nodes, vipA, n2, 3*time.Second)
	// The client's answers resume from the new owner.
	for time.Since(killedAt) < 5*time.Second {
		if _, _, last := pa.snapshot(); last.After(killedAt.Add(moved)) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	_, _, last := pa.snapshot()
	if !last.After(killedAt.Add(moved)) {
		t.Fatalf("no answer from %s after it moved to n2", vipA)
	}
	time.Sleep(300 * time.Millisecond)
	lost, span := pa.lostSince(killedAt)
	sent, _, _ := pa.snapshot()
	t.Logf("failover: n1's DNS killed, %s on n2 after %s; client (a query every 20ms, 200ms timeout): %d queries lost over %s",
		vipA, moved.Round(time.Millisecond), lost, span.Round(time.Millisecond))
	if span > 3*time.Second {
		t.Errorf("the client lost answers for %s after the kill, want under 3s", span)
	}
	if lost > 3000/20 {
		t.Errorf("%d of %d queries lost", lost, sent)
	}

	// svc health --vrrp on n2 reports both VIPs as MASTER.
	r := svcIn(t, n2.ns, "health", "--ops-address", n2.ops(t), "--vrrp", "--vip-run-dir", n2.runDir)
	if r.Code != 0 || strings.Count(r.Stdout, "MASTER") != 2 {
		t.Errorf("svc health --vrrp on n2: exit %d, want both VIPs MASTER\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	// On n1, whose DNS is dead, the VIPs are in FAULT and health fails.
	r = svcIn(t, n1.ns, "health", "--ops-address", "127.0.0.1:1", "--vrrp", "--vip-run-dir", n1.runDir)
	if r.Code == 0 {
		t.Errorf("svc health on n1 (DNS killed) exits 0:\n%s", r.Stdout)
	}
	st, err := vip.ReadStatus(n1.runDir)
	if err != nil || len(st.Instances) != 2 || st.Instances[0].State != "FAULT" || !strings.Contains(st.ProbeFailure, "127.0.0.1:53") {
		t.Errorf("n1's VIP status after its DNS died: %+v, %v; want both FAULT and the probe failure", st, err)
	}

	// Drain n2: both VIPs go to n3 (n1's DNS is dead), the client keeps
	// its answers.
	drainAt := time.Now()
	r = svcIn(t, n2.ns, "vip", "drain", "--run-dir", n2.runDir, "--timeout", "10s")
	if r.Code != 0 {
		t.Fatalf("svc vip drain: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	waitOwner(t, nodes, vipA, n3, 3*time.Second)
	waitOwner(t, nodes, vipB, n3, 3*time.Second)
	time.Sleep(300 * time.Millisecond)
	lostDrain, _ := pa.lostSince(drainAt)
	t.Logf("drain of n2: %s in %s, both VIPs on n3; client lost %d queries", strings.TrimSpace(r.Stdout), time.Since(drainAt).Round(time.Millisecond), lostDrain)

	// Rebalance n2: its VIPs come back (n2 outranks n3 for both).
	rebAt := time.Now()
	r = svcIn(t, n2.ns, "vip", "rebalance", "--run-dir", n2.runDir, "--timeout", "20s")
	if r.Code != 0 {
		t.Fatalf("svc vip rebalance: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	waitOwner(t, nodes, vipB, n2, 3*time.Second)
	waitOwner(t, nodes, vipA, n2, 3*time.Second)
	lostReb, _ := pa.lostSince(rebAt)
	t.Logf("rebalance of n2: %q after %s; client lost %d queries", strings.TrimSpace(r.Stdout), time.Since(rebAt).Round(time.Millisecond), lostReb)

	// svc doctor on n2: keepalived's config test passes, keepalived runs.
	r = svcIn(t, n2.ns, "doctor", "--config", filepath.Join(n2.dir, "service.yaml"), "--skip-api", "--skip-ports",
		"--keepalived-config", filepath.Join(n2.runDir, "keepalived.conf"), "--vip-run-dir", n2.runDir)
	if r.Code != 0 || !regexp.MustCompile(`(?m)^vrrp\s+ok\s+.*passes keepalived --config-test`).MatchString(r.Stdout) ||
		!regexp.MustCompile(`(?m)^vrrp/run-dir\s+ok\s+keepalived runs .*MASTER for `+regexp.QuoteMeta(vipA+", "+vipB)).MatchString(r.Stdout) {
		t.Errorf("svc doctor on n2: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}

	// A rogue with another key claims to be the first choice for both VIPs
	// (priority 200 over n2's 199 for dns-a): n2 must stay MASTER, even
	// with the rogue among its peers. Adding it to n2's peers file reloads
	// n2's keepalived (same process, new config).
	const rogueAddr = "10.213.0.99"
	pid, err := vip.KeepalivedPID(n2.runDir)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(n2.peersFile, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(f, rogueAddr)
	f.Close()
	for start := time.Now(); !strings.Contains(n2.vip.Log(), "Reload complete"); time.Sleep(50 * time.Millisecond) {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("n2's keepalived did not reload within 10s of the peers file change:\n%s", grepLines(n2.vip.Log(), "vip:"))
		}
	}
	conf, _ := os.ReadFile(filepath.Join(n2.runDir, "keepalived.conf"))
	if pid2, err := vip.KeepalivedPID(n2.runDir); err != nil || pid2 != pid || !strings.Contains(string(conf), rogueAddr) {
		t.Fatalf("after the peers change: keepalived pid %d (was %d, %v), config has %s: %v", pid2, pid, err, rogueAddr, strings.Contains(string(conf), rogueAddr))
	}
	t.Logf("peers file change: n2 reloaded keepalived (pid %d kept) with %s as a peer", pid, rogueAddr)

	rogue := seg.host("rogue", rogueAddr)
	rogueDir := t.TempDir()
	rogueKey := writeKey(t, rogueDir, "not the key of the test cluster!")
	startVIP(t, rogue, "--vip", vipFlagA, "--vip", vipFlagB,
		"--peers", strings.Join([]string{n1.addr, n2.addr, n3.addr, rogueAddr}, ","), "--priority-index", "0",
		"--hmac-key-file", rogueKey, "--run-dir", filepath.Join(rogueDir, "run"), "--health-address", "127.0.0.1:0",
		"--preempt-delay", "0s", "--dns", n3.addr+":53")
	// keepalived logs each advert whose AH HMAC fails; n2 must see them
	// (they arrive) and stay MASTER for 3 s after the first, well past the
	// moment a valid higher-priority advert makes a master step down.
	const badAH = "IPSEC-AH : invalid IPSEC HMAC-MD5"
	var firstBad time.Time
	for start := time.Now(); time.Since(start) < 15*time.Second; time.Sleep(100 * time.Millisecond) {
		if firstBad.IsZero() && strings.Contains(n2.vip.Log(), badAH) {
			firstBad = time.Now()
		}
		st, err := vip.ReadStatus(n2.runDir)
		if err != nil || len(st.Masters()) != 2 {
			t.Fatalf("n2 stepped down while a peer with the wrong key advertised: %+v %v\nn2 keepalived:\n%s", st, err, grepLines(n2.vip.Log(), "dns-a"))
		}
		if !firstBad.IsZero() && time.Since(firstBad) > 3*time.Second {
			break
		}
	}
	if firstBad.IsZero() {
		t.Fatalf("n2's keepalived never rejected an advert of the rogue: did they arrive?\n%s", grepLines(n2.vip.Log(), "keepalived"))
	}
	rst, _ := vip.ReadStatus(filepath.Join(rogueDir, "run"))
	t.Logf("wrong key: n2 rejected the rogue's adverts (%d log lines %q) and stayed MASTER of both VIPs; the rogue itself is MASTER of %v (it can still answer ARP for them: docs/vip.md)",
		strings.Count(n2.vip.Log(), badAH), badAH, rst.Masters())

	// keepalived dies on n3: svc vip run starts it again and counts it.
	old, err := vip.KeepalivedPID(n3.runDir)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var restarted int
	for start := time.Now(); ; time.Sleep(100 * time.Millisecond) {
		if pid, err := vip.KeepalivedPID(n3.runDir); err == nil && pid != old {
			restarted = pid
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("keepalived on n3 was not restarted within 10s of its death:\n%s", grepLines(n3.vip.Log(), "vip:"))
		}
	}
	m := regexp.MustCompile(`address=(127\.0\.0\.1:\d+)`).FindStringSubmatch(grepLines(n3.vip.Log(), "health listening"))
	if m == nil {
		t.Fatalf("no health address in n3's log")
	}
	out := run(t, "ip", "netns", "exec", n3.ns, "curl", "-sS", "--max-time", "5", "http://"+m[1]+"/metrics")
	if !strings.Contains(out, "svc_vip_keepalived_restarts_total 1") || !strings.Contains(out, "svc_vip_keepalived_up 1") {
		t.Errorf("n3's /metrics after the restart:\n%s", out)
	}
	t.Logf("keepalived killed on n3 (pid %d): restarted as pid %d; /metrics counts it", old, restarted)
}
