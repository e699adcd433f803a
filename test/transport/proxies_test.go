package transport_test

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/dataplane"
	"github.com/svcdns/svc/dataplane/proxyproto"
	"github.com/svcdns/svc/test/freeport"
)

// The proxies real deployments put in front of a DNS server, sending PROXY
// v2 headers the server must honour: dnsdist (the DNS load balancer) over
// UDP, TCP, DoT and DoH backends, and HAProxy in TCP mode passing DoT and
// DoH through. The clients ask from 127.0.0.x addresses other than the
// proxies' 127.0.0.1, so the query log shows whether the header's client
// or the proxy's own address reached the pipeline.

// loopbackDialer binds the client side of a query to src.
func loopbackDialer(network, src string) *net.Dialer {
	ip := net.ParseIP(src)
	if strings.HasPrefix(network, "tcp") {
		return &net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}, Timeout: 3 * time.Second}
	}
	return &net.Dialer{LocalAddr: &net.UDPAddr{IP: ip}, Timeout: 3 * time.Second}
}

// askFromUntilAnswered asks addr from src over network until an answer
// comes (the proxy may still be starting), for at most wait.
func askFromUntilAnswered(network, src, addr, name string, wait time.Duration) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	c := &dns.Client{Net: network, Timeout: 3 * time.Second, Dialer: loopbackDialer(network, src)}
	deadline := time.Now().Add(wait)
	for {
		r, _, err := c.Exchange(m, addr)
		if (err == nil && r.Rcode != dns.RcodeServerFailure) || time.Now().After(deadline) {
			return r, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func proxiedStack(t *testing.T) *stack {
	pol := &proxyproto.Policy{From: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	return newStack(t, stackOpts{proxy: pol})
}

// TestDnsdistProxyProtocol puts dnsdist in front of the server with
// useProxyProtocol on each kind of backend it has: Do53 (UDP and TCP), DoT
// and DoH (HTTP/2, with a client ID in the path). Clients ask dnsdist over
// UDP and TCP from their own addresses; each answer must come back through
// dnsdist over that backend and the query log must show the client's
// address, not dnsdist's. dnsdist checks the certificate against the test
// CA, and its health checks (sent with a header as well) must keep the
// backend up.
func TestDnsdistProxyProtocol(t *testing.T) {
	st := proxiedStack(t)
	bin := tool(t, "dnsdist")
	port := func(k string) int { return int(st.addr(k).Port()) }
	cases := []struct {
		name    string
		backend string
		tr      dataplane.Transport
		id      string
	}{
		{"do53", fmt.Sprintf(`address="127.0.0.1:%d"`, port("udp")), 0, ""}, // the data plane's own listeners: not recorded
		{"dot", fmt.Sprintf(`address="127.0.0.1:%d", tls="openssl", subjectName=%q, caStore=%q`, port("dot"), serverName, st.pki.CAFile), dataplane.TransportDoT, ""},
		{"doh", fmt.Sprintf(`address="127.0.0.1:%d", tls="openssl", subjectName=%q, caStore=%q, dohPath="/dns-query/edge1"`, port("doh"), serverName, st.pki.CAFile), dataplane.TransportDoH, "edge1"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			listen := freeport.UDPTCP(t)
			conf := filepath.Join(t.TempDir(), "dnsdist.conf")
			body := fmt.Sprintf("setLocal(\"127.0.0.1:%d\")\nsetSecurityPollSuffix(\"\")\nnewServer({%s, useProxyProtocol=true, checkInterval=1})\n", listen, tc.backend)
			if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			p := startProcess(t, bin, "--supervised", "--disable-syslog", "-C", conf)
			addr := fmt.Sprintf("127.0.0.1:%d", listen)
			for j, network := range []string{"udp", "tcp"} {
				src := fmt.Sprintf("127.0.0.%d", 10+2*i+j)
				r, err := askFromUntilAnswered(network, src, addr, "www.example.com.", 10*time.Second)
				if err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || !strings.Contains(r.Answer[0].String(), "192.0.2.1") {
					t.Fatalf("%s from %s through dnsdist: %v %v\n%s", network, src, r, err, p.Log())
				}
				waitClient(t, st, src)
			}
			// dnsdist's health checks (every second, with a header too)
			// must keep the backend up.
			time.Sleep(3500 * time.Millisecond)
			if r, err := askFromUntilAnswered("udp", "127.0.0.9", addr, "www.example.com.", 0); err != nil || r.Rcode != dns.RcodeSuccess {
				t.Fatalf("after health checks: %v %v\n%s", r, err, p.Log())
			}
			if tc.tr != 0 && !st.rec.seenTransport(tc.tr) {
				t.Errorf("no query reached the pipeline over %v", tc.tr)
			}
			if tc.id != "" && !st.rec.seen(tc.tr, tc.id) {
				t.Errorf("client ID %q from dnsdist's DoH path not passed to the pipeline", tc.id)
			}
		})
	}
}

// TestHAProxyProxyProtocol puts HAProxy in TCP mode with send-proxy-v2 in
// front of the DoT and DoH listeners, passing TLS through (the header
// comes before the handshake). kdig asks through it from its own address;
// the query log must show kdig's address, not HAProxy's.
func TestHAProxyProxyProtocol(t *testing.T) {
	st := proxiedStack(t)
	bin, kdig := tool(t, "haproxy"), tool(t, "kdig")
	front := map[string]int{"dot": freeport.UDPTCP(t), "doh": freeport.UDPTCP(t)}
	conf := "defaults\n  mode tcp\n  timeout connect 3s\n  timeout client 10s\n  timeout server 10s\n"
	for _, k := range []string{"dot", "doh"} {
		conf += fmt.Sprintf("listen %s\n  bind 127.0.0.1:%d\n  server s1 %s send-proxy-v2\n", k, front[k], st.addr(k))
	}
	path := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startProcess(t, bin, "-db", "-f", path)
	ca := st.pki.CAFile
	cases := []struct {
		kind, src string
		args      []string
	}{
		{"dot", "127.0.0.20", []string{"+tls", "+tls-ca=" + ca, "+tls-hostname=" + serverName}},
		{"doh", "127.0.0.21", []string{"+https=/dns-query", "+tls-ca=" + ca, "+tls-hostname=" + serverName}},
	}
	for _, tc := range cases {
		args := append([]string{"@127.0.0.1", "-p", fmt.Sprint(front[tc.kind]), "-b", tc.src, "+retry=0", "+timeout=3"}, tc.args...)
		args = append(args, "www.example.com", "A")
		var out string
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			b, err := exec.Command(kdig, args...).CombinedOutput()
			out = string(b)
			if err == nil && strings.Contains(out, "192.0.2.1") || time.Now().After(deadline) {
				break
			}
		}
		if !strings.Contains(out, "192.0.2.1") {
			t.Fatalf("%s through HAProxy: %s\n%s", tc.kind, out, p.Log())
		}
		waitClient(t, st, tc.src)
	}
}
