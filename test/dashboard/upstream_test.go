package dashboard_test

import (
	"net"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/test/nodetest"
)

// slowUpstream is a DNS server on loopback that answers every A question
// with 192.0.2.1 after delay; stopped when the test ends.
func slowUpstream(t *testing.T, delay time.Duration) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		time.Sleep(delay)
		m := new(dns.Msg)
		m.SetReply(r)
		if len(r.Question) == 1 && r.Question[0].Qtype == dns.TypeA {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: r.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 1}, A: net.IPv4(192, 0, 2, 1)})
		}
		_ = w.WriteMsg(m)
	})}
	done := make(chan error, 1)
	go func() { done <- srv.ActivateAndServe() }()
	t.Cleanup(func() {
		_ = srv.Shutdown()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("the test upstream did not stop")
		}
	})
	return pc.LocalAddr().String()
}

// TestTopUpstreamsLatency: the overview's top upstreams show each
// upstream's average and 95th percentile answer time from the query log: an
// upstream that takes 60 ms shows at least that.
func TestTopUpstreamsLatency(t *testing.T) {
	up := slowUpstream(t, 60*time.Millisecond)
	s := startServer(t, nodetest.SettingsFile(), nodetest.Env("SERVICE_ADMIN_PASSWORD="+adminPassword))
	api := signIn(t, s, "admin", adminPassword)
	api.do(http.MethodPatch, "/settings", map[string]any{"upstreams": map[string]any{"groups": map[string]any{
		"default": map[string]any{"servers": []string{up}, "timeout": "2s"}}}}, nil)
	nodetest.Eventually(t, 15*time.Second, "answers from the test upstream", func() bool {
		return rewriteAnswer(t, s, "warmup.example") == "192.0.2.1"
	})
	for _, n := range []string{"a.example", "b.example", "c.example", "d.example"} {
		dig(t, s, n)
	}

	b := newBrowser(t, s.URL, 1280, 900)
	b.open(s.URL + "/overview?window=1h")
	b.waitText("h1", "Sign in")
	b.login("admin", adminPassword)
	b.waitText("section[aria-label='Top upstreams']", "p95")
	text := evalAs[string](b, `document.querySelector("section[aria-label='Top upstreams'] [data-testid=latency]").innerText`)
	m := regexp.MustCompile(`^([\d.]+) ms · p95 ([\d.]+) ms$`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("upstream latency shown as %q", text)
	}
	avg, _ := strconv.ParseFloat(m[1], 64)
	p95, _ := strconv.ParseFloat(m[2], 64)
	t.Logf("top upstream %s: %s", up, text)
	if avg < 60 || p95 < 60 || avg > 2000 {
		t.Errorf("an upstream that answers after 60 ms shows avg %.1f ms, p95 %.1f ms", avg, p95)
	}
	b.checkA11y("overview with upstream latency")
}
