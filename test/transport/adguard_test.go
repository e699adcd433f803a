package transport_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/svcdns/svc/dataplane"
	"github.com/svcdns/svc/dataplane/upstream"
	"github.com/svcdns/svc/test/fakeupstream"
	"github.com/svcdns/svc/test/freeport"
	"github.com/svcdns/svc/test/testpki"
)

// TestAdGuardDNSProxy puts AdGuard's dnsproxy, the forwarder inside AdGuard
// Home, in front of this server with it as the only upstream, once per
// encrypted transport, and asks dnsproxy over plain UDP. The answer has to
// come back through dnsproxy's own DoT, DoH, DoQ and HTTP/3 clients, the
// query has to reach the pipeline over that transport, and a client ID in
// the DoH path has to arrive. dnsproxy verifies the certificate: Go reads
// SSL_CERT_FILE, and without the test CA it must fail.
func TestAdGuardDNSProxy(t *testing.T) {
	st := newStack(t, stackOpts{})
	bin := serviceTool(t, "dnsproxy")
	port := func(k string) string { return fmt.Sprint(st.addr(k).Port()) }
	cases := []struct {
		name     string
		upstream string
		flags    []string
		tr       dataplane.Transport
		id       string
	}{
		{"dot", "tls://127.0.0.1:" + port("dot"), nil, dataplane.TransportDoT, ""},
		{"doh2", "https://127.0.0.1:" + port("doh") + "/dns-query/agh1", nil, dataplane.TransportDoH, "agh1"},
		{"doq", "quic://127.0.0.1:" + port("doq"), nil, dataplane.TransportDoQ, ""},
		{"doh3", "h3://127.0.0.1:" + port("doh3") + "/dns-query/agh2", nil, dataplane.TransportDoH3, "agh2"},
		// An https:// upstream with --http3 learns HTTP/3 from Alt-Svc or
		// races it against HTTP/2; either way the answer must arrive.
		{"doh-http3", "https://127.0.0.1:" + port("doh") + "/dns-query", []string{"--http3"}, 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			addr := startDNSProxy(t, bin, st.pki.CAFile, append([]string{"-u", tc.upstream}, tc.flags...)...)
			r, err := askUntilAnswered(addr, "www.example.com.", dns.TypeA, 10*time.Second)
			if err != nil {
				t.Fatalf("dnsproxy -u %s: %v\n%s", tc.upstream, err, addr.Log())
			}
			if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || !strings.Contains(r.Answer[0].String(), "192.0.2.1") {
				t.Fatalf("dnsproxy -u %s answered %v", tc.upstream, r)
			}
			if tc.tr != 0 && !st.rec.seenTransport(tc.tr) {
				t.Errorf("no query reached the pipeline over %v", tc.tr)
			}
			if tc.id != "" && !st.rec.seen(tc.tr, tc.id) {
				t.Errorf("client ID %q from the DoH path not passed to the pipeline", tc.id)
			}
			// A name the zone does not have: the NXDOMAIN comes through too.
			r, err = askUntilAnswered(addr, "nosuch.example.com.", dns.TypeA, 5*time.Second)
			if err != nil || r.Rcode != dns.RcodeNameError {
				t.Fatalf("nosuch.example.com via %s: %v %v", tc.upstream, r, err)
			}
		})
	}
	t.Run("untrusted", func(t *testing.T) {
		addr := startDNSProxy(t, bin, "/nonexistent", "-u", "tls://127.0.0.1:"+port("dot"))
		// SERVFAIL also shows dnsproxy is up and asking.
		r, err := askUntilAnswered(addr, "www.example.com.", dns.TypeA, 10*time.Second)
		if err != nil || r.Rcode != dns.RcodeServerFailure || len(r.Answer) > 0 {
			t.Fatalf("dnsproxy without the test CA: %v %v, want SERVFAIL\n%s", r, err, addr.Log())
		}
	})
}

// proxyAddr is a running dnsproxy: its UDP address and its output.
type proxyAddr struct {
	addr string
	*process
}

// startDNSProxy runs dnsproxy on a free loopback port with the given
// upstream flags, trusting only caFile; the test stops it.
func startDNSProxy(t *testing.T, bin, caFile string, args ...string) proxyAddr {
	t.Helper()
	port := freeport.UDPTCP(t)
	env := append(os.Environ(), "SSL_CERT_FILE="+caFile, "SSL_CERT_DIR=/nonexistent")
	p := startProcessEnv(t, env, bin, append([]string{"-l", "127.0.0.1", "-p", fmt.Sprint(port), "--timeout=3s"}, args...)...)
	return proxyAddr{addr: net.JoinHostPort("127.0.0.1", fmt.Sprint(port)), process: p}
}

// askUntilAnswered asks p over UDP until it answers (it may still be
// starting), for at most wait.
func askUntilAnswered(p proxyAddr, name string, qtype uint16, wait time.Duration) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	c := &dns.Client{Net: "udp", Timeout: 4 * time.Second}
	deadline := time.Now().Add(wait)
	for {
		r, _, err := c.Exchange(m, p.addr)
		if err == nil || time.Now().After(deadline) {
			return r, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestForwardToAdGuardDNSProxy is the other direction: dnsproxy serves
// DoT, DoH and DoQ (its servers, with the test certificate) in front of a
// plain origin, and the node's forwarder (dataplane/upstream) asks it over
// each, three queries per transport: every answer must be the origin's and
// carry the client's message ID, and the forwarder must verify the
// certificate against the configured CA.
func TestForwardToAdGuardDNSProxy(t *testing.T) {
	bin := serviceTool(t, "dnsproxy")
	pki := testpki.New(t)
	origin := fakeupstream.A(t, "192.0.2.77")
	dot, doh, doq := freeport.UDPTCP(t), freeport.UDPTCP(t), freeport.UDPTCP(t)
	p := startDNSProxy(t, bin, pki.CAFile, "-p", "0",
		"--tls-port", fmt.Sprint(dot), "--https-port", fmt.Sprint(doh), "--quic-port", fmt.Sprint(doq),
		"--tls-crt", pki.CertFile, "--tls-key", pki.KeyFile, "-u", origin)
	cases := []struct{ name, server string }{
		{"dot", fmt.Sprintf("tls://127.0.0.1:%d", dot)},
		{"doh", fmt.Sprintf("https://127.0.0.1:%d/dns-query", doh)},
		{"doq", fmt.Sprintf("quic://127.0.0.1:%d", doq)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := upstream.New(upstream.Config{
				Groups:    map[string]upstream.GroupConfig{upstream.DefaultGroup: {Servers: []string{tc.server}, Strategy: upstream.Strict, Timeout: 2 * time.Second}},
				Bootstrap: []string{},
				CAFile:    pki.CAFile,
			}, nil, prometheus.NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			for i := range 3 {
				req := new(dns.Msg)
				req.SetQuestion(fmt.Sprintf("q%d.example.org.", i), dns.TypeA)
				req.Id = uint16(4000 + i)
				var resp *dns.Msg
				// dnsproxy may still be binding its listeners: bounded retries.
				for try := 0; ; try++ {
					ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
					resp, _, err = r.Forward(ctx, "", req, netip.MustParseAddr("192.0.2.9"))
					cancel()
					if err == nil || try == 30 {
						break
					}
					time.Sleep(100 * time.Millisecond)
				}
				if err != nil {
					t.Fatalf("query %d via %s: %v\n%s", i, tc.server, err, p.Log())
				}
				if resp.Id != req.Id || len(resp.Answer) != 1 || !strings.Contains(resp.Answer[0].String(), "192.0.2.77") {
					t.Fatalf("query %d via %s: answer %v", i, tc.server, resp)
				}
			}
		})
	}
	// Without the CA the forwarder refuses dnsproxy's certificate.
	r, err := upstream.New(upstream.Config{
		Groups:    map[string]upstream.GroupConfig{upstream.DefaultGroup: {Servers: []string{cases[0].server}, Strategy: upstream.Strict, Timeout: 2 * time.Second}},
		Bootstrap: []string{},
		TLS:       &tls.Config{RootCAs: x509.NewCertPool()},
	}, nil, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	req := new(dns.Msg)
	req.SetQuestion("untrusted.example.org.", dns.TypeA)
	if resp, _, err := r.Forward(context.Background(), "", req, netip.MustParseAddr("192.0.2.9")); err == nil {
		t.Fatalf("forwarded over DoT to an untrusted certificate: %v", resp)
	}
}
