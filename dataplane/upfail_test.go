package dataplane

import (
	"context"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/dataplane/upstream"
)

// startSilenceableUpstream is a real upstream on loopback answering every
// A query (TTL 300) unless silent is set; then it reads and never answers.
func startSilenceableUpstream(t testing.TB) (addr string, silent *atomic.Bool) {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	silent = new(atomic.Bool)
	started := make(chan struct{})
	srv := &dns.Server{PacketConn: pc, NotifyStartedFunc: func() { close(started) }, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		if silent.Load() {
			return
		}
		m := new(dns.Msg)
		m.SetReply(r)
		rr, _ := dns.NewRR(r.Question[0].Name + " 300 IN A 198.51.100.1")
		m.Answer = append(m.Answer, rr)
		_ = w.WriteMsg(m)
	})}
	go func() { _ = srv.ActivateAndServe() }()
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("upstream did not start")
	}
	t.Cleanup(func() { _ = srv.Shutdown() })
	return pc.LocalAddr().String(), silent
}

// TestStaleAtOnceWhileUpstreamSilent (issue #20 item 5): with a silent
// upstream and a stale entry, the first query may wait the client response
// timer (maxWait, 1800 ms by default), the next ones answer stale at once;
// when the upstream answers again, fresh answers resume. Before, every
// query waited the full maxWait.
func TestStaleAtOnceWhileUpstreamSilent(t *testing.T) {
	addr, silent := startSilenceableUpstream(t)
	ucfg := upstream.DefaultConfig()
	ucfg.Groups = map[string]upstream.GroupConfig{upstream.DefaultGroup: {Servers: []string{addr}, Timeout: time.Second}}
	ucfg.Bootstrap = []string{addr}
	res := newResolver(t, ucfg)
	clock := newFakeClock()
	cfg := testConfig()
	cfg.Cache.Now = clock.Now
	cfg.UpstreamTimeout = 3 * time.Second
	s := startServer(t, cfg, NewSnapshot(SnapshotInput{Forwarder: res, Router: res}))
	ask := func() (QueryResult, time.Duration) {
		t.Helper()
		start := time.Now()
		r, err := s.Query(context.Background(), QueryRequest{Name: "stale.example.net", Type: dns.TypeA, Client: netip.MustParseAddr("192.0.2.7"), Transport: TransportUDP})
		if err != nil {
			t.Fatal(err)
		}
		return r, time.Since(start)
	}
	if r, _ := ask(); r.Status != StatusAnswered {
		t.Fatalf("warm-up: %v", r.Status)
	}
	clock.Advance(time.Hour) // past the TTL of 300 s: stale
	silent.Store(true)
	r, d := ask()
	if r.Status != StatusStale {
		t.Fatalf("first query with the upstream silent: %v, want stale", r.Status)
	}
	t.Logf("first query: stale after %v (the group timeout or maxWait, whichever first)", d.Round(time.Millisecond))
	for i := range 5 {
		r, d := ask()
		if r.Status != StatusStale || d > 50*time.Millisecond {
			t.Fatalf("query %d with the upstream silent: %v after %v, want stale within 50ms", i+2, r.Status, d)
		}
	}
	time.Sleep(200 * time.Millisecond) // the probe in flight meets the silence
	silent.Store(false)
	deadline := time.Now().Add(5 * time.Second)
	for { // bounded: until a probe has refreshed the entry
		r, d := ask()
		if r.Status == StatusCached || r.Status == StatusAnswered {
			t.Logf("fresh again %v after the upstream came back", time.Since(deadline.Add(-5*time.Second)).Round(time.Millisecond))
			if ttl := r.Msg.Answer[0].Header().Ttl; ttl < 290 {
				t.Fatalf("answer after the upstream came back has TTL %d, want a fresh one", ttl)
			}
			break
		}
		if r.Status != StatusStale || d > 50*time.Millisecond {
			t.Fatalf("while the upstream comes back: %v after %v", r.Status, d)
		}
		if time.Now().After(deadline) {
			t.Fatal("no fresh answer 5s after the upstream came back")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
