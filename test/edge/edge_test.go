// Package edge runs `svc edge run` (the built binary, supervising
// Debian's dnsdist) in front of two real nodes on loopback and checks what
// clients and operators see: each client keeps its own policy through the
// edge, the nodes log the client's own address, a stopped node leaves the
// rotation, a new zone moves to the authoritative pool, a blocking toggle
// flushes the edge's cache, and a killed dnsdist comes back.
package edge

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/test/fakeupstream"
	"github.com/svcdns/svc/test/freeport"
	"github.com/svcdns/svc/test/nodetest"
	"github.com/svcdns/svc/test/proc"
	"github.com/svcdns/svc/test/testpki"
)

var svcBin string

func TestMain(m *testing.M) {
	os.Exit(proc.MainWithSvc(m, &svcBin))
}

const (
	adminPassword = "correct horse battery staple"
	upstreamIP    = "192.0.2.10"
	adult, kid    = "127.0.0.2", "127.0.0.3"
	internalToken = "edge-test-internal-token-0123456789abcdef"
)

// policies: the ad list blocks only for the kids' group (127.0.0.3) and
// for client ID "tablet" (carried from DoH through the edge).
const policies = `apiVersion: service.io/v1alpha1
kind: BlockList
metadata: {name: ads, namespace: default}
spec:
  global: false
  sources:
    - name: mine
      inline: ["||ads.example^"]
---
apiVersion: service.io/v1alpha1
kind: ClientGroup
metadata: {name: kids, namespace: default}
spec:
  addresses: [127.0.0.3/32]
  clientIDs: [tablet]
---
apiVersion: service.io/v1alpha1
kind: Policy
metadata: {name: kids, namespace: default}
spec:
  clientGroupRefs: [kids]
  blockListRefs: [ads]
  blockMode: nxdomain
`

const zoneDocs = `apiVersion: service.io/v1alpha1
kind: DNSZone
metadata: {name: edge.test}
spec:
  defaultTTL: 300
  nameServers: [ns1.edge.test.]
---
apiVersion: service.io/v1alpha1
kind: DNSRecordSet
metadata: {name: hosts, namespace: default}
spec:
  zoneRef: {name: edge.test}
  endpoints:
    - {dnsName: www.edge.test, recordType: A, targets: [192.0.2.99]}
    - {dnsName: kids.edge.test, recordType: A, targets: [192.0.2.77], service: {view: kids}}
`

// startUpstream answers every A query with upstreamIP.
func startUpstream(t testing.TB) string { return fakeupstream.A(t, upstreamIP) }

type node struct {
	*proc.Server
	name, ip string
	user     []string // environment of the CLI logged in to this node
	serve    proc.ServeConfig
	owner    testing.TB
}

// nodeSpec says how to run one node.
type nodeSpec struct {
	name, ip     string
	internalPort int
	dnsPort      int // 0: any free port (fixed when the node must come back on the same address)
	upstream     string
	pki          *testpki.PKI
	tokenFile    string
}

// startNode runs svc serve on ip (127.0.0.11, .12): DNS on a free port
// with PROXY v2 from the edge on 127.0.0.1, the internal listener on
// internalPort with the test token and certificate.
func startNode(t testing.TB, name, ip string, internalPort int, upstream string, pki *testpki.PKI, tokenFile string) *node {
	t.Helper()
	return startNodeSpec(t, nodeSpec{name: name, ip: ip, internalPort: internalPort, upstream: upstream, pki: pki, tokenFile: tokenFile})
}

func startNodeSpec(t testing.TB, s nodeSpec) *node {
	t.Helper()
	dir := t.TempDir()
	objects := filepath.Join(dir, "objects.d")
	if err := os.MkdirAll(objects, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(objects, "policies.yaml"), []byte(policies), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "service.yaml")
	body := fmt.Sprintf(`node:
  name: %[1]s
  dataDir: %[2]s/data
  lameduck: 50ms
listeners:
  dns:
    - address: %[3]s:%[12]d
      protocols: [udp, tcp]
  proxyProtocolFrom: [127.0.0.1/32]
  api:
    address: 127.0.0.1:0
    tls:
      auto: "off"
  ops:
    address: 127.0.0.1:0
  metrics:
    address: 127.0.0.1:0
  internal:
    address: %[3]s:%[4]d
    tokenFile: %[5]s
    tls:
      certFile: %[6]s
      keyFile: %[7]s
      caFile: %[8]s
      serverName: %[9]s
  blockPage:
    http: ""
upstreams:
  groups:
    default:
      servers: [%[10]s]
      timeout: 1s
objectsDir: %[11]s
auth:
  adminSocket:
    path: %[2]s/data/service.sock
`, s.name, dir, s.ip, s.internalPort, s.tokenFile, s.pki.CertFile, s.pki.KeyFile, s.pki.CAFile, testpki.ServerName, s.upstream, objects, s.dnsPort)
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	sc := proc.ServeConfig{Bin: svcBin, Config: cfg, Dir: dir, Ready: proc.AllListeners,
		Env: []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH"), "SERVICE_ADMIN_PASSWORD=" + adminPassword}}
	n := &node{Server: proc.Serve(t, sc), name: s.name, ip: s.ip, serve: sc, owner: t}
	home := t.TempDir()
	n.user = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "SERVICE_KEYRING=file", "SERVICE_CLI_CONFIG=" + filepath.Join(home, "config.yaml")}
	n.svc(t, adminPassword+"\n", "login", "--server", "http://"+n.API(), "-u", "admin", "--password-stdin", "--name", s.name)
	return n
}

// restart runs the stopped node again on the same configuration and data
// and logs the CLI in again.
func (n *node) restart(t testing.TB) {
	t.Helper()
	sc := n.serve
	sc.Owner = n.owner // stopped with the test that started the node
	n.Server = proc.Serve(t, sc)
	// The API listens on a new port.
	n.svc(t, adminPassword+"\n", "login", "--server", "http://"+n.API(), "-u", "admin", "--password-stdin", "--name", n.name)
}

var opsRE = regexp.MustCompile(`listener=ops address=(\S+)`)

// ops is the node's ops listener (lameduck, readiness).
func (n *node) ops(t testing.TB) string {
	t.Helper()
	m := opsRE.FindAllStringSubmatch(n.Log(), -1)
	if m == nil {
		t.Fatalf("no ops listener in the log of %s", n.name)
	}
	return m[len(m)-1][1]
}

// svc runs the CLI against this node; a non-zero exit fails the test.
func (n *node) svc(t testing.TB, stdin string, args ...string) string {
	t.Helper()
	r := proc.Run(t, n.user, stdin, svcBin, args...)
	if r.Code != 0 {
		t.Fatalf("svc %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.Code, r.Stdout, r.Stderr)
	}
	return r.Stdout
}

// edgeProc is `svc edge run`, stopped with SIGTERM when the test ends.
type edgeProc struct{ *proc.Supervised }

var (
	healthRE  = regexp.MustCompile(`msg="edge: health listening" address=(\S+)`)
	startedRE = regexp.MustCompile(`msg="edge: dnsdist started" pid=(\d+)`)
)

func startEdge(t testing.TB, args ...string) *edgeProc {
	t.Helper()
	return startEdgeEnv(t, nil, args...)
}

// startEdgeEnv runs svc edge run with env added to the test's environment.
func startEdgeEnv(t testing.TB, env []string, args ...string) *edgeProc {
	t.Helper()
	return &edgeProc{proc.StartSupervised(t, "svc edge run", append(os.Environ(), env...), svcBin,
		append([]string{"edge", "run", "--log-format", "text"}, args...)...)}
}

func (e *edgeProc) match(re *regexp.Regexp) []string {
	all := re.FindAllStringSubmatch(e.Log(), -1)
	if len(all) == 0 {
		return nil
	}
	return all[len(all)-1]
}

type readiness struct {
	Ready      bool   `json:"ready"`
	BackendsUp int    `json:"backendsUp"`
	Reason     string `json:"reason"`
}

func (e *edgeProc) ready(t testing.TB) readiness {
	m := e.match(healthRE)
	var r readiness
	if m == nil {
		return r
	}
	res, err := http.Get("http://" + m[1] + "/healthz/ready")
	if err != nil {
		r.Reason = err.Error()
		return r
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	_ = json.Unmarshal(b, &r)
	return r
}

// ask sends name A from the loopback address src to addr over UDP.
func ask(src, addr, name string) (*dns.Msg, error) {
	c := &dns.Client{Net: "udp", Timeout: 2 * time.Second,
		Dialer: &net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP(src)}, Timeout: 2 * time.Second}}
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(name), dns.TypeA)
	r, _, err := c.Exchange(q, addr)
	return r, err
}

// outcome is what a user sees: "blocked", "answered", an address, or an
// error.
func outcome(r *dns.Msg, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	if r.Rcode == dns.RcodeNameError {
		return "blocked"
	}
	if len(r.Answer) == 1 {
		if a, ok := r.Answer[0].(*dns.A); ok {
			if a.A.String() == upstreamIP {
				return "answered"
			}
			return a.A.String()
		}
	}
	return fmt.Sprintf("%s %v", dns.RcodeToString[r.Rcode], r.Answer)
}

func TestEdgeInFrontOfTwoNodes(t *testing.T) {
	if _, err := exec.LookPath("dnsdist"); err != nil {
		t.Fatal("dnsdist not found: hack/install-test-deps.sh installs it (Debian package dnsdist)")
	}
	pki := testpki.New(t)
	tokenFile := internalTokenFile(t)
	upstream := startUpstream(t)
	internalPort := freeport.UDPTCP(t)
	n1 := startNode(t, "n1", "127.0.0.11", internalPort, upstream, pki, tokenFile)
	n2 := startNode(t, "n2", "127.0.0.12", internalPort, upstream, pki, tokenFile)

	listen, consolePort, apiPort, dohPort := freeport.UDPTCP(t), freeport.UDPTCP(t), freeport.UDPTCP(t), freeport.UDPTCP(t)
	edgeAddr := fmt.Sprintf("127.0.0.1:%d", listen)
	tlsDir := edgeTLSDir(t, pki)
	configDir := t.TempDir()
	e := startEdge(t, "--backends", "n1="+n1.DNS()+",n2="+n2.DNS(),
		"--listen", edgeAddr, "--console", fmt.Sprintf("127.0.0.1:%d", consolePort), "--api", fmt.Sprintf("127.0.0.1:%d", apiPort),
		"--protocols", "do53,doh", "--doh", fmt.Sprintf("127.0.0.1:%d", dohPort), "--tls-dir", tlsDir,
		"--health-address", "127.0.0.1:0", "--config-dir", configDir, "--internal-port", fmt.Sprint(internalPort),
		"--internal-token-file", tokenFile, "--internal-ca-file", pki.CAFile, "--internal-server-name", testpki.ServerName,
		"--zone-poll", "200ms", "--debounce", "300ms", "--drain", "100ms", "--stop-timeout", "5s", "--require-backends", "2")
	nodetest.Eventually(t, 30*time.Second, "edge ready with both backends up", func() bool {
		r := e.ready(t)
		return r.Ready && r.BackendsUp == 2
	})
	// The keys are generated, never logged.
	key, err := os.ReadFile(filepath.Join(configDir, "api-key"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(e.Log(), strings.TrimSpace(string(key))) {
		t.Error("the API key is in the edge's log")
	}

	t.Run("svc health and svc doctor see the edge", func(t *testing.T) {
		env := append(append([]string{}, n1.user...), "SERVICE_EDGE_CONFIG_DIR="+configDir)
		health := e.match(healthRE)[1]
		r := proc.Run(t, env, "", svcBin, "health", "--ops-address", health, "--ready",
			"--dnsdist-api", fmt.Sprintf("127.0.0.1:%d", apiPort), "--require-backends", "2")
		if r.Code != 0 || !strings.Contains(r.Stdout, "2 backends up") {
			t.Errorf("svc health --dnsdist-api: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
		}
		r = proc.Run(t, env, "", svcBin, "health", "--ops-address", health, "--dnsdist-api", fmt.Sprintf("127.0.0.1:%d", apiPort), "--require-backends", "3")
		if r.Code == 0 || !strings.Contains(r.Stderr, "2 backends up, 3 required") {
			t.Errorf("svc health --require-backends 3 with 2 up: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
		}
		r = proc.Run(t, env, "", svcBin, "doctor", "--skip-api", "--skip-ports", "--edge-config", filepath.Join(configDir, "dnsdist.conf"))
		if !strings.Contains(r.Stdout, "dnsdist 1.") || !strings.Contains(r.Stdout, "accepts") {
			t.Errorf("svc doctor --edge-config: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
		}
	})

	t.Run("each client keeps its own policy", func(t *testing.T) {
		// The kids are blocked once the nodes compiled the policy.
		nodetest.Eventually(t, 15*time.Second, "kid blocked through the edge on both nodes", func() bool {
			for i := range 3 {
				if outcome(ask(kid, edgeAddr, fmt.Sprintf("q%d.ads.example.", i))) != "blocked" {
					return false
				}
			}
			return true
		})
		// Interleaved, many times, so any cache or pinning shared between
		// the two clients would show.
		for i := range 20 {
			name := fmt.Sprintf("q%d.ads.example.", i%3)
			if got := outcome(ask(adult, edgeAddr, name)); got != "answered" {
				t.Fatalf("adult %s through the edge: %s, want answered", name, got)
			}
			if got := outcome(ask(kid, edgeAddr, name)); got != "blocked" {
				t.Fatalf("kid %s through the edge: %s, want blocked", name, got)
			}
		}
		// The nodes log each client's own address, not the edge's.
		logged := n1.svc(t, "", "logs", "-o", "json", "--domain", "ads.example", "--domain-match", "substring") +
			n2.svc(t, "", "logs", "-o", "json", "--domain", "ads.example", "--domain-match", "substring")
		nodetest.Eventually(t, 15*time.Second, "queries of both clients in the nodes' query logs", func() bool {
			logged = n1.svc(t, "", "logs", "-o", "json", "--domain", "ads.example", "--domain-match", "substring") +
				n2.svc(t, "", "logs", "-o", "json", "--domain", "ads.example", "--domain-match", "substring")
			return strings.Contains(logged, `"client": "`+adult+`"`) && strings.Contains(logged, `"client": "`+kid+`"`) ||
				strings.Contains(logged, `"client":"`+adult+`"`) && strings.Contains(logged, `"client":"`+kid+`"`)
		})
		if strings.Contains(logged, `"client": "127.0.0.1"`) || strings.Contains(logged, `"client":"127.0.0.1"`) {
			t.Errorf("a node logged the edge's address instead of the client's:\n%s", logged)
		}
	})

	t.Run("client ID from DoH reaches the nodes", func(t *testing.T) {
		doh := func(path string) string {
			q := new(dns.Msg)
			q.SetQuestion("id.ads.example.", dns.TypeA)
			b, _ := q.Pack()
			tr := &http.Transport{TLSClientConfig: pki.ClientTLS()}
			defer tr.CloseIdleConnections()
			req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("https://127.0.0.1:%d%s", dohPort, path), strings.NewReader(string(b)))
			req.Header.Set("Content-Type", "application/dns-message")
			res, err := (&http.Client{Transport: tr, Timeout: 3 * time.Second}).Do(req)
			if err != nil {
				return "error: " + err.Error()
			}
			defer res.Body.Close()
			body, _ := io.ReadAll(res.Body)
			m := new(dns.Msg)
			if err := m.Unpack(body); err != nil {
				return fmt.Sprintf("HTTP %d: %v", res.StatusCode, err)
			}
			return outcome(m, nil)
		}
		if got := doh("/dns-query/tablet"); got != "blocked" {
			t.Errorf("DoH /dns-query/tablet through the edge: %s, want blocked (client ID tablet is in the kids' group)", got)
		}
		if got := doh("/dns-query"); got != "answered" {
			t.Errorf("DoH /dns-query through the edge: %s, want answered", got)
		}
	})

	t.Run("a new zone moves to the authoritative pool", func(t *testing.T) {
		n1.svc(t, zoneDocs, "apply", "-f", "-")
		n2.svc(t, zoneDocs, "apply", "-f", "-")
		nodetest.Eventually(t, 15*time.Second, "edge applied the zone", func() bool {
			return strings.Contains(e.Log(), `msg="edge: zones changed"`)
		})
		if got := outcome(ask(adult, edgeAddr, "www.edge.test.")); got != "192.0.2.99" {
			t.Fatalf("www.edge.test through the edge: %s", got)
		}
		// The authoritative pool is cached at the edge, yet a record in
		// the kids' view is never served to the adult, whoever asks first.
		for i := range 5 {
			if got := outcome(ask(kid, edgeAddr, "kids.edge.test.")); got != "192.0.2.77" {
				t.Fatalf("kid kids.edge.test (round %d): %s, want 192.0.2.77 from the kids' view", i, got)
			}
			if got := outcome(ask(adult, edgeAddr, "kids.edge.test.")); got == "192.0.2.77" {
				t.Fatalf("adult got the kids' view answer through the edge cache (round %d)", i)
			}
		}
		var st struct {
			Rules []struct {
				Action  string `json:"action"`
				Matches int    `json:"matches"`
			} `json:"rules"`
			Pools []struct {
				Name      string `json:"name"`
				CacheHits int    `json:"cacheHits"`
			} `json:"pools"`
		}
		raw := apiGet(t, apiPort, configDir, "/api/v1/servers/localhost")
		if err := json.Unmarshal([]byte(raw), &st); err != nil {
			t.Fatalf("dnsdist API: %v\n%s", err, raw)
		}
		matched, hits := 0, 0
		for _, r := range st.Rules {
			if r.Action == "to pool authoritative" {
				matched = r.Matches
			}
		}
		for _, p := range st.Pools {
			if p.Name == "authoritative" {
				hits = p.CacheHits
			}
		}
		if matched == 0 {
			t.Errorf("no query went to the authoritative pool:\n%s", raw)
		}
		// The kid's repeated question is served from the edge's cache.
		if hits == 0 {
			t.Errorf("no cache hit in the authoritative pool:\n%s", raw)
		}
		t.Logf("authoritative pool: %d queries, %d cache hits", matched, hits)
	})

	t.Run("a blocking toggle flushes the edge", func(t *testing.T) {
		before := strings.Count(e.Log(), `msg="edge: cache flushed"`)
		n1.svc(t, "", "blocking", "disable")
		nodetest.Eventually(t, 10*time.Second, "edge cache flushed", func() bool {
			return strings.Count(e.Log(), `msg="edge: cache flushed"`) > before
		})
		n1.svc(t, "", "blocking", "enable")
	})

	t.Run("a stopped node leaves the rotation", func(t *testing.T) {
		start := time.Now()
		n2.Stop() // SIGTERM: lameduck, then the listeners close
		nodetest.Eventually(t, 5*time.Second, "n2 marked down", func() bool {
			return strings.Contains(e.Log(), "Marking downstream n2 (") && strings.Contains(e.Log(), "as 'down'")
		})
		t.Logf("n2 out of rotation %v after it stopped", time.Since(start).Round(10*time.Millisecond))
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("n2 taken out after %v, want within the 1s health interval (plus a check)", d)
		}
		failed := 0
		for i := range 50 {
			if got := outcome(ask(adult, edgeAddr, fmt.Sprintf("after%d.example.", i))); got != "answered" {
				failed++
				t.Errorf("query %d after n2 left: %s", i, got)
			}
		}
		if r := e.ready(t); r.Ready || r.BackendsUp != 1 {
			t.Errorf("with 1 of 2 required backends: ready %v, up %d (%s)", r.Ready, r.BackendsUp, r.Reason)
		}
	})

	t.Run("a killed dnsdist is restarted", func(t *testing.T) {
		// svc edge run keeps dnsdist's pid in its config dir.
		pidOf := func() string {
			b, _ := os.ReadFile(filepath.Join(configDir, "dnsdist.pid"))
			return strings.TrimSpace(string(b))
		}
		first := pidOf()
		if m := e.match(startedRE); m == nil || m[1] != first {
			t.Fatalf("pid file %q, started log %v", first, m)
		}
		var pid int
		fmt.Sscan(first, &pid)
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		nodetest.Eventually(t, 15*time.Second, "dnsdist started again", func() bool {
			m2 := e.match(startedRE)
			return m2 != nil && m2[1] != first && pidOf() == m2[1]
		})
		nodetest.Eventually(t, 10*time.Second, "queries answered again", func() bool {
			return outcome(ask(adult, edgeAddr, "again.example.")) == "answered"
		})
	})
}

// apiGet reads dnsdist's API with the key the edge keeps in its config dir.
func apiGet(t testing.TB, port int, configDir, path string) string {
	t.Helper()
	key, err := os.ReadFile(filepath.Join(configDir, "api-key"))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d%s", port, path), nil)
	req.Header.Set("X-API-Key", strings.TrimSpace(string(key)))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return string(b)
}
