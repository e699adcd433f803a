// Package clusterdns_test puts the real CoreDNS in front of a whole node, as
// a Kubernetes cluster forwards a stub domain to this service, and checks
// that per-client policies and the query log see the clients behind it
// (listeners.ecsClientFrom with CoreDNS's "rewrite edns0 subnet set 32 128").
package clusterdns_test

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/internal/querylog"
	"github.com/svcdns/svc/test/freeport"
	"github.com/svcdns/svc/test/nodetest"
	"github.com/svcdns/svc/test/proc"
)

const bootstrapToken = "svc_abcdefghij12_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"

// The pod at 127.0.0.2 is in a ClientGroup whose Policy blocks ads; the
// pod at 127.0.0.3 is in none.
const policyDocs = `apiVersion: service.io/v1alpha1
kind: BlockList
metadata: {name: ads, namespace: default}
spec:
  global: false # only the policies naming it block with it
  sources:
    - name: mine
      inline: ["||ads.example^"]
---
apiVersion: service.io/v1alpha1
kind: ClientGroup
metadata: {name: pod-a, namespace: default}
spec:
  addresses: [127.0.0.2/32]
---
apiVersion: service.io/v1alpha1
kind: Policy
metadata: {name: pod-a, namespace: default}
spec:
  clientGroupRefs: [pod-a]
  blockListRefs: [ads]
  blockMode: nxdomain
`

// startNode runs a node trusting ECS from the given forwarders.
func startNode(t *testing.T, ecsFrom string) *nodetest.Node {
	t.Helper()
	return nodetest.Start(t, nodetest.ReadyWithin(30*time.Second), nodetest.StopWithin(10*time.Second),
		nodetest.Env("SERVICE_BOOTSTRAP_TOKEN="+bootstrapToken, "SERVICE_LISTENERS__ECSCLIENTFROM="+ecsFrom),
		nodetest.Objects(map[string]string{"policy.yaml": policyDocs}))
}

// TestCoreDNSClientsKeepTheirPolicies: pods ask CoreDNS (127.0.0.1, the
// node's only trusted forwarder), which forwards to the node with the
// pod's address in ECS. Only the pod in the group is blocked, over UDP and
// TCP (CoreDNS forwards over the protocol it was asked on), and the query
// log names each pod, not CoreDNS.
func TestCoreDNSClientsKeepTheirPolicies(t *testing.T) {
	tn := startNode(t, "127.0.0.1/32")
	core := startCoreDNS(t, tn.DNSAddr("udp"), "rewrite edns0 subnet set 32 128")
	waitBlocked(t, core, "127.0.0.2")
	for _, proto := range []string{"udp", "tcp"} {
		t.Run(proto, func(t *testing.T) {
			name := proto + ".ads.example."
			r, err := ask(proto, "127.0.0.2", core.addr, name, nil)
			if err != nil || r.Rcode != dns.RcodeNameError {
				t.Fatalf("pod 127.0.0.2 (in the group) through CoreDNS: %v %v, want NXDOMAIN (blocked)\n%s", r, err, core.Log())
			}
			r, err = ask(proto, "127.0.0.3", core.addr, name, nil)
			if err != nil || r.Rcode == dns.RcodeNameError {
				t.Fatalf("pod 127.0.0.3 (in no group) through CoreDNS: %v %v, want not blocked\n%s", r, err, core.Log())
			}
			clients := loggedClients(t, tn, name, 2)
			if clients["127.0.0.2"] != "blocked" || clients["127.0.0.3"] == "" || clients["127.0.0.3"] == "blocked" || len(clients) != 2 {
				t.Fatalf("query log clients for %s: %v; want 127.0.0.2 blocked and 127.0.0.3 not, and not CoreDNS's 127.0.0.1", name, clients)
			}
		})
	}
}

// TestECSFromUntrustedPeerKeepsIdentity: the node trusts only 127.0.0.9.
// The same ECS option from 127.0.0.5 changes nothing: the peer is the
// client (not blocked, logged as itself) and the option is echoed with
// scope 0 (RFC 7871: the answer did not depend on it); from 127.0.0.9 it
// names the client. A CoreDNS the node does not trust (it forwards from
// 127.0.0.1) gets the same treatment as 127.0.0.5: its pods all look like
// CoreDNS.
func TestECSFromUntrustedPeerKeepsIdentity(t *testing.T) {
	tn := startNode(t, "127.0.0.9/32")
	waitBlockedDirect(t, tn)
	sub := ecsOption("127.0.0.2/32")
	for _, proto := range []string{"udp", "tcp"} {
		name := "direct-" + proto + ".ads.example."
		r, err := ask(proto, "127.0.0.5", tn.DNSAddr(proto), name, sub)
		if err != nil || r.Rcode == dns.RcodeNameError {
			t.Fatalf("%s from untrusted 127.0.0.5 with ECS 127.0.0.2/32: %v %v, want not blocked", proto, r, err)
		}
		if e := echoed(r); e == nil || e.SourceScope != 0 || e.SourceNetmask != 32 || !e.Address.Equal(net.ParseIP("127.0.0.2")) {
			t.Fatalf("%s: echoed ECS %v, want 127.0.0.2/32 with scope 0", proto, e)
		}
		// The same option from the trusted forwarder names the client.
		r, err = ask(proto, "127.0.0.9", tn.DNSAddr(proto), name, sub)
		if err != nil || r.Rcode != dns.RcodeNameError {
			t.Fatalf("%s from trusted 127.0.0.9 with ECS 127.0.0.2/32: %v %v, want NXDOMAIN (blocked)", proto, r, err)
		}
		if e := echoed(r); e == nil || e.SourceScope != 32 {
			t.Fatalf("%s: echoed ECS %v, want scope 32", proto, e)
		}
		clients := loggedClients(t, tn, name, 2)
		if clients["127.0.0.5"] == "" || clients["127.0.0.5"] == "blocked" || clients["127.0.0.2"] != "blocked" || len(clients) != 2 {
			t.Fatalf("%s: query log clients %v; want 127.0.0.5 not blocked and 127.0.0.2 blocked", proto, clients)
		}
	}

	untrusted := startCoreDNS(t, tn.DNSAddr("udp"), "rewrite edns0 subnet set 32 128")
	waitAnswered(t, untrusted, "127.0.0.2")
	r, err := ask("udp", "127.0.0.2", untrusted.addr, "untrusted.ads.example.", nil)
	if err != nil || r.Rcode == dns.RcodeNameError {
		t.Fatalf("pod 127.0.0.2 through untrusted CoreDNS: %v %v, want not blocked", r, err)
	}
	if c := loggedClients(t, tn, "untrusted.ads.example.", 1); c["127.0.0.1"] == "" || len(c) != 1 {
		t.Fatalf("query log clients %v, want CoreDNS's 127.0.0.1 only", c)
	}
}

// TestCoreDNSShortSubnetKeepsForwarder: a trusted CoreDNS sending its
// pods' /24 (rewrite edns0 subnet set 24 56) names a network, not a
// client, so CoreDNS stays the client and the node logs a warning
// (documented in docs/kubernetes.md).
func TestCoreDNSShortSubnetKeepsForwarder(t *testing.T) {
	tn := startNode(t, "127.0.0.1/32")
	short := startCoreDNS(t, tn.DNSAddr("udp"), "rewrite edns0 subnet set 24 56")
	waitAnswered(t, short, "127.0.0.2")
	r, err := ask("udp", "127.0.0.2", short.addr, "short.ads.example.", nil)
	if err != nil || r.Rcode == dns.RcodeNameError {
		t.Fatalf("pod 127.0.0.2 through CoreDNS sending /24: %v %v, want not blocked", r, err)
	}
	if c := loggedClients(t, tn, "short.ads.example.", 1); c["127.0.0.1"] == "" || len(c) != 1 {
		t.Fatalf("query log clients %v, want CoreDNS's 127.0.0.1 only", c)
	}
	if !tn.Log.Contains("client subnet shorter than one address") {
		t.Error("no warning about the short client subnet in the node's log")
	}
}

// coreDNS is a running CoreDNS: its address and its output.
type coreDNS struct {
	addr string
	*proc.Process
}

// startCoreDNS runs CoreDNS on 127.0.0.1 forwarding everything to node
// with the given rewrite rule; the test stops it. No cache plugin:
// CoreDNS's cache does not key on ECS, so a cached per-client answer would
// be given to every pod (docs/kubernetes.md says so).
func startCoreDNS(t *testing.T, node, rewrite string) coreDNS {
	t.Helper()
	const host = "127.0.0.1"
	bin := serviceTool(t, "coredns")
	port := freeport.UDPTCP(t)
	corefile := fmt.Sprintf(".:%d {\n    bind %s\n    %s\n    forward . %s\n    errors\n}\n", port, host, rewrite, node)
	path := filepath.Join(t.TempDir(), "Corefile")
	if err := os.WriteFile(path, []byte(corefile), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startProcess(t, bin, "-conf", path)
	return coreDNS{addr: net.JoinHostPort(host, fmt.Sprint(port)), Process: p}
}

// waitAnswered asks c as client until it answers (CoreDNS may still be
// starting), for at most 20 s.
func waitAnswered(t *testing.T, c coreDNS, client string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := ask("udp", client, c.addr, "ready.ads.example.", nil)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("CoreDNS on %s did not answer: %v\n%s", c.addr, err, c.Log())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitBlocked waits until CoreDNS answers and the node has loaded the
// policy (client is blocked through c).
func waitBlocked(t *testing.T, c coreDNS, client string) {
	t.Helper()
	waitAnswered(t, c, client)
	nodetest.Eventually(t, 10*time.Second, "policy loaded", func() bool {
		r, err := ask("udp", client, c.addr, "ready.ads.example.", nil)
		return err == nil && r.Rcode == dns.RcodeNameError
	})
}

// waitBlockedDirect waits until the node blocks 127.0.0.2 asking directly.
func waitBlockedDirect(t *testing.T, tn *nodetest.Node) {
	t.Helper()
	nodetest.Eventually(t, 10*time.Second, "policy loaded", func() bool {
		r, err := ask("udp", "127.0.0.2", tn.DNSAddr("udp"), "ready.ads.example.", nil)
		return err == nil && r.Rcode == dns.RcodeNameError
	})
}

// ask sends an A query for name to server from the loopback address src,
// with the ECS option sub if not nil.
func ask(proto, src, server, name string, sub dns.EDNS0) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	m.SetEdns0(1232, false)
	if sub != nil {
		m.IsEdns0().Option = append(m.IsEdns0().Option, sub)
	}
	var local net.Addr = &net.UDPAddr{IP: net.ParseIP(src)}
	if proto == "tcp" {
		local = &net.TCPAddr{IP: net.ParseIP(src)}
	}
	c := &dns.Client{Net: proto, Timeout: 3 * time.Second, Dialer: &net.Dialer{LocalAddr: local, Timeout: 3 * time.Second}}
	r, _, err := c.Exchange(m, server)
	return r, err
}

func ecsOption(prefix string) dns.EDNS0 {
	p := netip.MustParsePrefix(prefix)
	return &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: uint8(p.Bits()), Address: p.Addr().AsSlice()}
}

func echoed(m *dns.Msg) *dns.EDNS0_SUBNET {
	if o := m.IsEdns0(); o != nil {
		for _, x := range o.Option {
			if s, ok := x.(*dns.EDNS0_SUBNET); ok {
				return s
			}
		}
	}
	return nil
}

// loggedClients waits (at most 10 s) until the query log API holds at least
// want queries for name, and returns each logged client with its status.
func loggedClients(t *testing.T, tn *nodetest.Node, name string, want int) map[string]string {
	t.Helper()
	var page querylog.QueryPage
	nodetest.Eventually(t, 10*time.Second, "queries for "+name+" in the query log", func() bool {
		body := apiGet(t, tn, "/queries?domain="+url.QueryEscape(strings.TrimSuffix(name, "."))+"&limit=100")
		page = querylog.QueryPage{}
		return json.Unmarshal(body, &page) == nil && len(page.Items) >= want
	})
	out := map[string]string{}
	for _, it := range page.Items {
		out[it.Client] = it.Status
	}
	return out
}

func apiGet(t *testing.T, tn *nodetest.Node, path string) []byte {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	req, err := http.NewRequest(http.MethodGet, "https://"+tn.Addrs.API+"/api/v1"+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+bootstrapToken)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %d %s", path, resp.StatusCode, b)
	}
	return b
}

func serviceTool(t *testing.T, name string) string {
	t.Helper()
	return proc.ServiceTool(t, name)
}

func startProcess(t *testing.T, bin string, args ...string) *proc.Process {
	t.Helper()
	return proc.Start(t, bin, args...)
}
