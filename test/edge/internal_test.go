package edge

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/svcdns/svc/test/freeport"
	"github.com/svcdns/svc/test/nodetest"
	"github.com/svcdns/svc/test/proc"
	"github.com/svcdns/svc/test/testpki"
)

// TestEdgeBackendsFromInternal runs `svc edge run --backends-from
// internal` in front of two nodes: the edge asks each node's
// /internal/status, so a node that reports not ready (lameduck) or is
// stopped leaves the rotation, and comes back when it is ready again (on
// the same address); a blocking toggle on a node flushes the edge cache.
func TestEdgeBackendsFromInternal(t *testing.T) {
	if _, err := exec.LookPath("dnsdist"); err != nil {
		t.Fatal("dnsdist not found: hack/install-test-deps.sh installs it (Debian package dnsdist)")
	}
	pki := testpki.New(t)
	tokenFile := internalTokenFile(t)
	upstream := startUpstream(t)
	// The backends are <node IP>:--backend-port: both nodes listen for DNS
	// on the same port, so a restarted node comes back where it was.
	internalPort, dnsPort := freeport.UDPTCP(t), freeport.UDPTCP(t)
	spec := nodeSpec{internalPort: internalPort, dnsPort: dnsPort, upstream: upstream, pki: pki, tokenFile: tokenFile}
	s1, s2 := spec, spec
	s1.name, s1.ip, s2.name, s2.ip = "n1", "127.0.0.11", "n2", "127.0.0.12"
	n1, n2 := startNodeSpec(t, s1), startNodeSpec(t, s2)

	listen, consolePort, apiPort := freeport.UDPTCP(t), freeport.UDPTCP(t), freeport.UDPTCP(t)
	edgeAddr := fmt.Sprintf("127.0.0.1:%d", listen)
	e := startEdge(t, "--backends-from", "internal", "--backends", "127.0.0.11,127.0.0.12", "--backend-port", fmt.Sprint(dnsPort),
		"--listen", edgeAddr, "--console", fmt.Sprintf("127.0.0.1:%d", consolePort), "--api", fmt.Sprintf("127.0.0.1:%d", apiPort),
		"--health-address", "127.0.0.1:0", "--config-dir", t.TempDir(), "--internal-port", fmt.Sprint(internalPort),
		"--internal-token-file", tokenFile, "--internal-ca-file", pki.CAFile, "--internal-server-name", testpki.ServerName,
		"--zone-poll", "200ms", "--debounce", "300ms", "--drain", "100ms", "--stop-timeout", "5s", "--require-backends", "1")
	var last readiness
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the edge's last readiness: %+v", last)
		}
	})
	nodetest.Eventually(t, 30*time.Second, "edge ready with both nodes up", func() bool {
		last = e.ready(t)
		return last.Ready && last.BackendsUp == 2
	})
	// The backends are named by the nodes (node.name in /internal/status).
	if !strings.Contains(e.Log(), `backends=2`) {
		t.Errorf("dnsdist did not start with the two nodes from their internal status:\n%s", e.Log())
	}

	removed := func() int { return strings.Count(e.Log(), `msg="edge: backend removed" backend=n2 `) }
	added := func() int { return strings.Count(e.Log(), `msg="edge: backend added" backend=n2 `) }
	allAnswered := func(t *testing.T, prefix string) {
		t.Helper()
		for i := range 30 {
			if got := outcome(ask(adult, edgeAddr, fmt.Sprintf("%s%d.example.", prefix, i))); got != "answered" {
				t.Errorf("query %d with n2 out: %s", i, got)
			}
		}
	}
	// servedByN2 asks names through the edge until one shows in n2's
	// query log: the resolver pool (chashed) spreads names over the nodes.
	servedByN2 := func(t *testing.T, prefix string) {
		t.Helper()
		i := 0
		nodetest.Eventually(t, 20*time.Second, "n2 answering through the edge again", func() bool {
			for range 10 {
				if got := outcome(ask(adult, edgeAddr, fmt.Sprintf("%s%d.example.", prefix, i))); got != "answered" {
					t.Errorf("query %s%d: %s", prefix, i, got)
				}
				i++
			}
			return strings.Contains(n2.svc(t, "", "logs", "-o", "json", "--domain", prefix, "--domain-match", "substring"), prefix)
		})
	}

	t.Run("a node in lameduck leaves the rotation and returns", func(t *testing.T) {
		ops := n2.ops(t)
		r := proc.Run(t, n2.user, "", svcBin, "lameduck", "120s", "--ops-address", ops)
		if r.Code != 0 {
			t.Fatalf("svc lameduck: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
		}
		nodetest.Eventually(t, 15*time.Second, "n2 removed by the edge", func() bool { return removed() == 1 })
		allAnswered(t, "lameduck")
		nodetest.Eventually(t, 10*time.Second, "edge counts one backend", func() bool { return e.ready(t).BackendsUp == 1 })

		r = proc.Run(t, n2.user, "", svcBin, "lameduck", "--cancel", "--ops-address", ops)
		if r.Code != 0 {
			t.Fatalf("svc lameduck --cancel: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
		}
		nodetest.Eventually(t, 15*time.Second, "n2 added back", func() bool { return added() == 1 })
		nodetest.Eventually(t, 15*time.Second, "both backends up", func() bool { return e.ready(t).BackendsUp == 2 })
		servedByN2(t, "back-from-lameduck")
	})

	t.Run("a stopped node leaves the rotation and returns when started", func(t *testing.T) {
		n2.Stop()
		nodetest.Eventually(t, 15*time.Second, "n2 removed by the edge", func() bool { return removed() == 2 })
		allAnswered(t, "stopped")
		n2.restart(t)
		nodetest.Eventually(t, 20*time.Second, "n2 added back", func() bool { return added() == 2 })
		nodetest.Eventually(t, 15*time.Second, "both backends up", func() bool { return e.ready(t).BackendsUp == 2 })
		servedByN2(t, "back-from-restart")
	})

	t.Run("a blocking toggle flushes the edge cache", func(t *testing.T) {
		before := strings.Count(e.Log(), `msg="edge: cache flushed"`)
		n1.svc(t, "", "blocking", "disable")
		nodetest.Eventually(t, 10*time.Second, "edge cache flushed", func() bool {
			return strings.Count(e.Log(), `msg="edge: cache flushed"`) > before
		})
		n1.svc(t, "", "blocking", "enable")
	})

	if n := strings.Count(e.Log(), `msg="edge: dnsdist started"`); n != 1 {
		t.Errorf("dnsdist started %d times: backend changes must not restart it", n)
	}
}
