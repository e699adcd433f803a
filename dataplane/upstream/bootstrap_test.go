package upstream

import (
	"context"
	"crypto/tls"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// bootServer answers A queries for dns.test with ip and a TTL, and AAAA
// with no records; it counts A queries.
type bootServer struct {
	aQueries atomic.Int64
	ip       atomic.Value // string
	ttl      atomic.Uint32
}

func (b *bootServer) respond(req *dns.Msg) *dns.Msg {
	m := new(dns.Msg)
	m.SetReply(req)
	q := req.Question[0]
	if !strings.EqualFold(q.Name, "dns.test.") {
		m.Rcode = dns.RcodeNameError
		return m
	}
	if q.Qtype == dns.TypeA {
		m.Answer = append(m.Answer,
			&dns.CNAME{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: 300}, Target: "alias.dns.test."},
			&dns.A{Hdr: dns.RR_Header{Name: "alias.dns.test.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: b.ttl.Load()}, A: net.ParseIP(b.ip.Load().(string))})
		b.aQueries.Add(1) // after reading ip and ttl: tests change them once counted
	}
	return m
}

// TestBootstrapResolvesUpstreamNames: upstreams named by host name are
// reached through addresses from the bootstrap server, with the name as
// TLS server name, over every transport.
func TestBootstrapResolvesUpstreamNames(t *testing.T) {
	pki := newTestPKI(t)
	boot := &bootServer{}
	boot.ttl.Store(300)
	boot.ip.Store("127.0.0.1")
	bootAddr := startUDP(t, boot.respond)
	var sni sync.Map
	udp := startUDP(t, answerA("192.0.2.50"))
	tcp, _ := startTCP(t, answerA("192.0.2.51"))
	dot, _ := startDoT(t, pki, &sni, answerA("192.0.2.52"))
	doh := startDoH(t, pki, &sni, answerA("192.0.2.53"))
	doq := startDoQ(t, pki, &sni, answerA("192.0.2.54"))
	port := func(hp string) string { _, p, _ := net.SplitHostPort(hp); return p }

	for _, tc := range []struct{ server, want string }{
		{"udp://dns.test:" + port(udp), "192.0.2.50"},
		{"dns.test:" + port(udp), "192.0.2.50"},
		{"tcp://dns.test:" + port(tcp), "192.0.2.51"},
		{"tls://dns.test:" + port(dot), "192.0.2.52"},
		{"https://dns.test:" + port(doh.hostPort()) + "/dns-query", "192.0.2.53"},
		{"quic://DNS.test:" + port(doq.hostPort()), "192.0.2.54"},
	} {
		t.Run(tc.server, func(t *testing.T) {
			r := newResolver(t, Config{
				Groups:    map[string]GroupConfig{DefaultGroup: {Servers: []string{tc.server}, Strategy: Strict, Timeout: 2 * time.Second}},
				Bootstrap: []string{bootAddr},
				TLS:       &tls.Config{RootCAs: pki.Pool},
			})
			resp, up, err := r.Forward(context.Background(), "", query("www.example.org", dns.TypeA), clientAddr)
			if err != nil {
				t.Fatal(err)
			}
			if firstA(t, resp) != tc.want || up != tc.server {
				t.Errorf("answer %v from %s", resp.Answer, up)
			}
		})
	}
	if _, ok := sni.Load("dns.test"); !ok {
		t.Error("TLS servers never saw server name dns.test")
	}
}

// TestBootstrapCacheHonoursTTL: within the TTL the bootstrap server is asked
// once; after it expires the name is looked up again and the new address
// used.
func TestBootstrapCacheHonoursTTL(t *testing.T) {
	boot := &bootServer{}
	boot.ttl.Store(1)
	boot.ip.Store("127.0.0.1")
	bootAddr := startUDP(t, boot.respond)
	up := startUDP(t, answerA("192.0.2.60"))
	_, port, _ := net.SplitHostPort(up)
	r := newResolver(t, Config{
		Groups:    map[string]GroupConfig{DefaultGroup: {Servers: []string{"udp://dns.test:" + port}, Strategy: Strict, Timeout: time.Second}},
		Bootstrap: []string{"udp://" + bootAddr},
	})
	ask := func() error {
		_, _, err := r.Forward(context.Background(), "", query("c.example", dns.TypeA), clientAddr)
		return err
	}
	for i := range 5 {
		if err := ask(); err != nil {
			t.Fatalf("query %d: %v", i, err)
		}
	}
	if n := boot.aQueries.Load(); n != 1 {
		t.Fatalf("bootstrap asked %d times within the TTL, want 1", n)
	}
	time.Sleep(1100 * time.Millisecond)
	// The first query after expiry uses the stale address and refreshes.
	if err := ask(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return boot.aQueries.Load() == 2 && cachedFresh(r, "dns.test") })
	// A refreshed answer pointing elsewhere is used from then on.
	boot.ip.Store("127.0.0.2")
	boot.ttl.Store(300)
	time.Sleep(1100 * time.Millisecond)
	_ = ask() // stale, triggers refresh to 127.0.0.2
	waitFor(t, func() bool { return cachedFresh(r, "dns.test") })
	if addrs, err := r.boot.lookup(context.Background(), "dns.test"); err != nil || len(addrs) != 1 || addrs[0].String() != "127.0.0.2" {
		t.Errorf("cached addresses %v, %v; want [127.0.0.2]", addrs, err)
	}
	if n := boot.aQueries.Load(); n != 3 {
		t.Errorf("bootstrap asked %d times, want 3", n)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for range 200 {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("condition not met within 2s")
}

// TestBootstrapFailure: a name the bootstrap server does not know fails
// the query with reason bootstrap, and the next server answers.
func TestBootstrapFailure(t *testing.T) {
	boot := &bootServer{}
	boot.ttl.Store(60)
	boot.ip.Store("127.0.0.1")
	bootAddr := startUDP(t, boot.respond)
	good := startUDP(t, answerA("192.0.2.61"))
	r := newResolver(t, Config{
		Groups:    map[string]GroupConfig{DefaultGroup: {Servers: []string{"udp://unknown.test:53", good}, Strategy: Strict, Timeout: time.Second}},
		Bootstrap: []string{bootAddr},
	})
	resp, up, err := r.Forward(context.Background(), "", query("f.example", dns.TypeA), clientAddr)
	if err != nil || up != good || firstA(t, resp) != "192.0.2.61" {
		t.Fatalf("answer from %s: %v", up, err)
	}
	if got := errorCount(t, r, DefaultGroup, "udp://unknown.test:53", reasonBootstrap); got != 1 {
		t.Errorf("bootstrap errors = %v, want 1", got)
	}
}

// cachedFresh reports whether the bootstrap cache holds an unexpired entry.
func cachedFresh(r *Resolver, host string) bool {
	r.boot.mu.Lock()
	defer r.boot.mu.Unlock()
	e, ok := r.boot.cache[host]
	return ok && time.Now().Before(e.expires)
}
