package dataplane

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestFastPathAllocs pins the zero-allocation promise of the fast path.
func TestFastPathAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under the race detector (sync.Pool drops values)")
	}
	fast, _ := goldenServers(t)
	client := netip.MustParseAddrPort("192.0.2.9:5353")
	cases := []goldenCase{goldenCases[0], goldenCases[1], goldenCases[3], goldenCases[10], goldenCases[11]}
	// Client cookies and padding (dig, kdig, browsers) stay on the fast
	// path, padded answers included.
	cases = append(cases, goldenCaseNamed(t, "auth-a-cookie"), goldenCaseNamed(t, "cache-a-cookie-padding-dot"), goldenCaseNamed(t, "auth-mx-padding-doh"),
		goldenCaseNamed(t, "auth-a-keepalive-tcp"), goldenCaseNamed(t, "cache-a-keepalive-padding-dot"),
		// ECS, as cluster DNS forwarders add it to every query: echoed, and
		// from a trusted forwarder the client it names is identified.
		goldenCaseNamed(t, "auth-a-ecs-trusted"), goldenCaseNamed(t, "cache-a-ecs6-trusted"),
		goldenCaseNamed(t, "auth-a-ecs-untrusted"), goldenCaseNamed(t, "auth-a-ecs-cookie-padding-dot"))
	for _, tc := range cases {
		pkt := tc.packet(t)
		out := make([]byte, 0, 4096)
		client := client
		if tc.peer != "" {
			client = tc.client()
		}
		allocs := testing.AllocsPerRun(200, func() {
			out, _ = fast.ServeWire(pkt, client, tc.tr, out[:0])
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per query, want 0", tc.name, allocs)
		}
	}
}

func benchServeWire(b *testing.B, tc goldenCase) {
	fast, _ := goldenServers(b)
	pkt := tc.packet(b)
	client := netip.MustParseAddrPort("192.0.2.9:5353")
	out := make([]byte, 0, 4096)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		out, _ = fast.ServeWire(pkt, client, TransportUDP, out[:0])
	}
}

func goldenCaseNamed(t testing.TB, name string) goldenCase {
	for _, c := range goldenCases {
		if c.name == name {
			return c
		}
	}
	t.Fatalf("no golden case %s", name)
	return goldenCase{}
}

func BenchmarkServeWireAuthoritative(b *testing.B) { benchServeWire(b, goldenCases[0]) }

// BenchmarkServeWireECS is the authoritative query with the ECS option a
// cluster DNS forwarder adds, from a trusted forwarder.
func BenchmarkServeWireECS(b *testing.B) { benchServeWire(b, goldenCaseNamed(b, "auth-a-ecs-trusted")) }

// BenchmarkServeWireCookie is the authoritative query with a client cookie,
// as dig sends it.
func BenchmarkServeWireCookie(b *testing.B)   { benchServeWire(b, goldenCaseNamed(b, "auth-a-cookie")) }
func BenchmarkServeWireCacheHit(b *testing.B) { benchServeWire(b, goldenCases[11]) }

// BenchmarkServeWireSlowPath is the same authoritative query through miekg/dns.
func BenchmarkServeWireSlowPath(b *testing.B) {
	_, slow := goldenServers(b)
	pkt := goldenCases[0].packet(b)
	client := netip.MustParseAddrPort("192.0.2.9:5353")
	out := make([]byte, 0, 4096)
	b.ReportAllocs()
	for b.Loop() {
		out, _ = slow.ServeWire(pkt, client, TransportUDP, out[:0])
	}
}

// loadUDP sends n queries to addr from workers sockets, each keeping window
// queries outstanding, and returns queries per second. Lost packets are
// re-sent after a short read timeout so the loop is bounded.
func loadUDP(tb testing.TB, addr string, pkt []byte, n int) float64 {
	const workers, window = 4, 8
	var wg sync.WaitGroup
	start := time.Now()
	per := (n + workers - 1) / workers
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("udp", addr)
			if err != nil {
				tb.Error(err)
				return
			}
			defer c.Close()
			buf := make([]byte, 1500)
			sent, got := 0, 0
			for ; sent < min(window, per); sent++ {
				_, _ = c.Write(pkt)
			}
			for got < per {
				_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
				if _, err := c.Read(buf); err != nil {
					// Lost in the kernel: refill the window.
					for range min(window, per-got) {
						_, _ = c.Write(pkt)
					}
					continue
				}
				got++
				if sent < per {
					_, _ = c.Write(pkt)
					sent++
				}
			}
		}()
	}
	wg.Wait()
	return float64(n) / time.Since(start).Seconds()
}

// BenchmarkUDPSocketVsMiekg measures our UDP listener against miekg/dns's
// default dns.Server answering one fixed record, in the same run.
func BenchmarkUDPSocketVsMiekg(b *testing.B) {
	cfg := testConfig()
	cfg.Sockets = 1
	s := startServer(b, cfg, NewSnapshot(SnapshotInput{Authority: testTable(b)}))
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	rr := mustRR(b, "www.example.com. 3600 IN A 192.0.2.1")
	ref := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		m.Authoritative = true
		m.Answer = []dns.RR{rr}
		_ = w.WriteMsg(m)
	})}
	go func() { _ = ref.ActivateAndServe() }()
	defer func() { _ = ref.ShutdownContext(context.Background()) }()
	pkt := goldenCases[0].packet(b)
	b.ResetTimer()
	ours := loadUDP(b, s.UDPAddrs()[0].String(), pkt, b.N)
	theirs := loadUDP(b, pc.LocalAddr().String(), pkt, b.N)
	b.ReportMetric(ours, "svc-qps")
	b.ReportMetric(theirs, "miekg-qps")
	b.ReportMetric(ours/theirs, "ratio")
}
