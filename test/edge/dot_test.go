package edge

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/test/freeport"
	"github.com/svcdns/svc/test/nodetest"
	"github.com/svcdns/svc/test/testpki"
)

// edgeTLSDir copies the test server certificate into a --tls-dir
// (tls.crt, tls.key).
func edgeTLSDir(t testing.TB, pki *testpki.PKI) string {
	t.Helper()
	dir := t.TempDir()
	for src, dst := range map[string]string{pki.CertFile: "tls.crt", pki.KeyFile: "tls.key"} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, dst), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// internalTokenFile writes the nodes' internal listener token.
func internalTokenFile(t testing.TB) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(p, []byte(internalToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// askDoT sends name A over DoT from the loopback address src, with the
// TLS server name sni (the certificate covers *.dns.test).
func askDoT(pki *testpki.PKI, src, addr, sni, name string) (*dns.Msg, error) {
	c := &dns.Client{Net: "tcp-tls", Timeout: 3 * time.Second,
		TLSConfig: &tls.Config{RootCAs: pki.Pool, ServerName: sni},
		Dialer:    &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 3 * time.Second}}
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(name), dns.TypeA)
	r, _, err := c.Exchange(q, addr)
	return r, err
}

// queryLog is the node's query log rows for names under domain.
func (n *node) queryLog(t testing.TB, domain string) []map[string]any {
	t.Helper()
	out := n.svc(t, "", "logs", "-o", "json", "--domain", domain, "--domain-match", "substring")
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		var page struct {
			Items []map[string]any `json:"items"`
		}
		if err2 := json.Unmarshal([]byte(out), &page); err2 != nil {
			t.Fatalf("svc logs -o json: %v\n%s", err, out)
		}
		rows = page.Items
	}
	return rows
}

// findRow is the first row whose fields have the wanted values.
func findRow(rows []map[string]any, want map[string]string) map[string]any {
	for _, r := range rows {
		ok := true
		for k, v := range want {
			if fmt.Sprint(r[k]) != v {
				ok = false
				break
			}
		}
		if ok {
			return r
		}
	}
	return nil
}

// TestEdgeDoTClientIDBySNI: the edge terminates DoT and carries the client
// ID of the server name (<id>.--client-id-domain) to the node in PROXY v2
// TLV 0xE1: a client outside the kids' addresses is blocked by the kids'
// policy only when it says it is "tablet", and the node logs the query
// with the client's own address, the client ID and the kids' policy
// (GET /queries?client_id=tablet through `svc logs --client-id`).
func TestEdgeDoTClientIDBySNI(t *testing.T) {
	if _, err := exec.LookPath("dnsdist"); err != nil {
		t.Fatal("dnsdist not found: hack/install-test-deps.sh installs it (Debian package dnsdist)")
	}
	const client = "127.0.0.4" // in no group by address
	pki := testpki.New(t)
	tokenFile := internalTokenFile(t)
	internalPort := freeport.UDPTCP(t)
	n1 := startNode(t, "n1", "127.0.0.11", internalPort, startUpstream(t), pki, tokenFile)

	listen, consolePort, apiPort, dotPort := freeport.UDPTCP(t), freeport.UDPTCP(t), freeport.UDPTCP(t), freeport.UDPTCP(t)
	edgeAddr, dotAddr := fmt.Sprintf("127.0.0.1:%d", listen), fmt.Sprintf("127.0.0.1:%d", dotPort)
	e := startEdge(t, "--backends", "n1="+n1.DNS(),
		"--listen", edgeAddr, "--console", fmt.Sprintf("127.0.0.1:%d", consolePort), "--api", fmt.Sprintf("127.0.0.1:%d", apiPort),
		"--protocols", "do53,dot", "--dot", dotAddr, "--tls-dir", edgeTLSDir(t, pki), "--client-id-domain", testpki.ServerName,
		"--health-address", "127.0.0.1:0", "--config-dir", t.TempDir(), "--internal-port", fmt.Sprint(internalPort),
		"--internal-token-file", tokenFile, "--internal-ca-file", pki.CAFile, "--internal-server-name", testpki.ServerName,
		"--zone-poll", "200ms", "--debounce", "300ms", "--drain", "100ms", "--stop-timeout", "5s", "--require-backends", "1")
	nodetest.Eventually(t, 30*time.Second, "edge ready", func() bool { return e.ready(t).Ready })

	tablet := "tablet." + testpki.ServerName
	nodetest.Eventually(t, 15*time.Second, "DoT as tablet blocked through the edge", func() bool {
		return outcome(askDoT(pki, client, dotAddr, tablet, "dot0.ads.example.")) == "blocked"
	})
	for i := range 5 {
		name := fmt.Sprintf("dot%d.ads.example.", i)
		if got := outcome(askDoT(pki, client, dotAddr, tablet, name)); got != "blocked" {
			t.Errorf("DoT %s with server name %s: %s, want blocked (client ID tablet is in the kids' group)", name, tablet, got)
		}
		if got := outcome(askDoT(pki, client, dotAddr, "phone."+testpki.ServerName, name)); got != "answered" {
			t.Errorf("DoT %s with server name phone.%s: %s, want answered (client ID phone is in no group)", name, testpki.ServerName, got)
		}
		if got := outcome(askDoT(pki, client, dotAddr, testpki.ServerName, name)); got != "answered" {
			t.Errorf("DoT %s with server name %s (no client ID): %s, want answered", name, testpki.ServerName, got)
		}
		if got := outcome(ask(client, edgeAddr, name)); got != "answered" {
			t.Errorf("Do53 %s from %s: %s, want answered", name, client, got)
		}
	}

	// The node logs the tablet's query with the client's own address and
	// the policy its client ID selected; the other client IDs' queries
	// with the same address and no policy.
	var rows []map[string]any
	nodetest.Eventually(t, 15*time.Second, "the DoT queries in the node's query log", func() bool {
		rows = n1.queryLog(t, "ads.example")
		return findRow(rows, map[string]string{"domain": "dot4.ads.example", "client": client, "status": "blocked"}) != nil &&
			len(rows) >= 20
	})
	blocked := findRow(rows, map[string]string{"domain": "dot4.ads.example", "client": client, "status": "blocked"})
	if p := fmt.Sprint(blocked["policy"]); !strings.Contains(p, "kids") {
		t.Errorf("the tablet's blocked query names policy %q, want the kids' policy: %v", p, blocked)
	}
	for _, r := range rows {
		if c := fmt.Sprint(r["client"]); c != client {
			t.Errorf("a query of %s logged with client %s (the edge's address?): %v", client, c, r)
		}
	}
	if id := fmt.Sprint(blocked["client_id"]); id != "tablet" {
		t.Errorf("the tablet's blocked query logged with client_id %q, want tablet: %v", id, blocked)
	}
	t.Logf("tablet's blocked query as the node logged it: %v", blocked)

	// The client_id filter (GET /queries?client_id=) lists the tablet's
	// queries only, with the client's own address.
	var tabletRows []map[string]any
	if err := json.Unmarshal([]byte(n1.svc(t, "", "logs", "-o", "json", "--client-id", "tablet", "--limit", "1000")), &tabletRows); err != nil {
		t.Fatalf("svc logs --client-id tablet -o json: %v", err)
	}
	if len(tabletRows) < 5 {
		t.Errorf("client_id=tablet lists %d rows, want the 5 blocked DoT queries at least", len(tabletRows))
	}
	for _, r := range tabletRows {
		if fmt.Sprint(r["client_id"]) != "tablet" || fmt.Sprint(r["client"]) != client {
			t.Errorf("client_id=tablet listed %v, want client %s with client ID tablet", r, client)
		}
	}
	if findRow(tabletRows, map[string]string{"domain": "dot4.ads.example", "status": "blocked"}) == nil {
		t.Errorf("client_id=tablet does not list the blocked dot4.ads.example: %v", tabletRows)
	}
	// The other server names: client ID phone, and none (the field is
	// left out of the row).
	for _, id := range []string{"phone", "<nil>"} {
		if findRow(rows, map[string]string{"domain": "dot4.ads.example", "status_class": "allowed", "transport": "tcp", "client_id": id}) == nil {
			t.Errorf("no allowed DoT dot4.ads.example with client_id %s in the log: %v", id, rows)
		}
	}
	// -o wide shows the client ID column.
	wide := n1.svc(t, "", "logs", "-o", "wide", "--client-id", "phone", "--domain", "dot4.ads.example")
	lines := strings.Split(strings.TrimSpace(wide), "\n")
	if head := strings.Fields(lines[0]); !slices.Contains(head, "CLIENT-ID") || len(lines) < 2 || !slices.Contains(strings.Fields(lines[1]), "phone") {
		t.Errorf("svc logs -o wide --client-id phone:\n%s", wide)
	}
}
