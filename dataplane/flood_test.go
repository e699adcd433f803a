package dataplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/svcdns/svc/dataplane/upstream"
)

// startSilentUpstream is a loopback UDP server that reads every query and
// never answers.
func startSilentUpstream(tb testing.TB) string {
	tb.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		tb.Fatal(err)
	}
	_ = c.SetReadBuffer(4 << 20)
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 1500)
		for {
			if _, err := c.Read(buf); errors.Is(err, net.ErrClosed) {
				return
			}
		}
	}()
	tb.Cleanup(func() { c.Close(); <-done })
	return c.LocalAddr().String()
}

// floodResolver forwards by default to a silent upstream and the names
// under good.example. to a responsive one (group "good").
func floodResolver(tb testing.TB) *upstream.Resolver {
	tb.Helper()
	silent, good := startSilentUpstream(tb), startPlainUpstream(tb)
	ucfg := upstream.DefaultConfig()
	ucfg.Groups = map[string]upstream.GroupConfig{
		upstream.DefaultGroup: {Servers: []string{silent}, Timeout: 2 * time.Second},
		"good":                {Servers: []string{good}, Timeout: 2 * time.Second},
	}
	ucfg.Conditional = map[string]string{"good.example.": "good"}
	ucfg.Bootstrap = []string{good}
	return newResolver(tb, ucfg)
}

// udpFrom is a client socket bound to a given loopback address (another
// /24 is another client prefix).
func udpFrom(tb testing.TB, local string, server netip.AddrPort) *net.UDPConn {
	tb.Helper()
	c, err := net.DialUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort(local)), net.UDPAddrFromAddrPort(server))
	if err != nil {
		tb.Skipf("cannot bind %s (loopback /8 not routable here): %v", local, err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// TestFloodFairShedding: one client (127.0.0.0/24) floods uncached names at
// a silent upstream while a second client (127.0.1.0/24) asks for uncached
// names at a responsive group: the flooder holds at most its share of the
// pending budget and the second client gets every answer. Before fair
// shedding the flood took every worker and the second client's misses
// were dropped.
func TestFloodFairShedding(t *testing.T) {
	res := floodResolver(t)
	cfg := testConfig()
	cfg.Listeners = []ListenerConfig{{Address: "127.0.0.1:0", Protocols: []string{"udp"}}}
	cfg.Sockets = 1
	cfg.MaxWorkers = 64
	cfg.UpstreamTimeout = 3 * time.Second
	s := startServer(t, cfg, NewSnapshot(SnapshotInput{Forwarder: res, Router: res}))
	addr := s.UDPAddrs()[0]
	flooder := udpFrom(t, "127.0.0.1:0", addr)
	second := udpFrom(t, "127.0.1.1:0", addr)

	for i := range 400 {
		b, _ := query(fmt.Sprintf("f%d.flood.example.", i), dns.TypeA).Pack()
		if _, err := flooder.Write(b); err != nil {
			t.Fatal(err)
		}
		if i%50 == 49 {
			time.Sleep(5 * time.Millisecond) // let the read loop keep up
		}
	}
	deadline := time.Now().Add(2 * time.Second)
	for { // bounded: until the flood is pending
		if n, _ := s.Pending(); n >= cfg.MaxWorkers/2 {
			break
		}
		if time.Now().After(deadline) {
			n, _ := s.Pending()
			t.Fatalf("flood pending %d, want %d", n, cfg.MaxWorkers/2)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n, b := s.Pending(); n > cfg.MaxWorkers/2+1 || b > defaultMaxPendingBytes {
		t.Errorf("one prefix holds %d pending queries (%d bytes), want at most %d", n, b, cfg.MaxWorkers/2)
	}
	answered := 0
	buf := make([]byte, 1500)
	for i := range 10 {
		m := query(fmt.Sprintf("s%d.good.example.", i), dns.TypeA)
		m.Id = uint16(100 + i)
		b, _ := m.Pack()
		if _, err := second.Write(b); err != nil {
			t.Fatal(err)
		}
		_ = second.SetReadDeadline(time.Now().Add(time.Second))
		n, err := second.Read(buf)
		if err != nil {
			t.Logf("second client, query %d: no answer: %v", i, err)
			continue
		}
		r := new(dns.Msg)
		if err := r.Unpack(buf[:n]); err == nil && r.Id == m.Id && r.Rcode == dns.RcodeSuccess && len(r.Answer) == 1 {
			answered++
		}
	}
	if answered != 10 {
		t.Fatalf("second client answered %d of 10 during the flood, want 10", answered)
	}
}

// TestClientPrefix: the fairness unit is the client's /24 or /56.
func TestClientPrefix(t *testing.T) {
	same := [][2]string{
		{"192.0.2.1", "192.0.2.254"},
		{"::ffff:192.0.2.1", "192.0.2.9"},
		{"2001:db8:0:100::1", "2001:db8:0:1ff:ffff::1"},
	}
	for _, p := range same {
		if prefixOf(netip.MustParseAddr(p[0])) != prefixOf(netip.MustParseAddr(p[1])) {
			t.Errorf("%s and %s should share a prefix", p[0], p[1])
		}
	}
	differ := [][2]string{
		{"192.0.2.1", "192.0.3.1"},
		{"2001:db8:0:100::1", "2001:db8:0:200::1"},
		{"0.0.0.1", "::1"},
	}
	for _, p := range differ {
		if prefixOf(netip.MustParseAddr(p[0])) == prefixOf(netip.MustParseAddr(p[1])) {
			t.Errorf("%s and %s should be different prefixes", p[0], p[1])
		}
	}
}

// TestPendingBudget: admission by count, bytes and prefix share.
func TestPendingBudget(t *testing.T) {
	a, b := prefixOf(netip.MustParseAddr("192.0.2.1")), prefixOf(netip.MustParseAddr("198.51.100.1"))
	w := newWorkers(100, 100*1000)
	n := 0
	for w.admit(a, 1000) { // bounded: admit refuses at the budget
		n++
	}
	if n != 50 {
		t.Fatalf("one prefix admitted %d of 100, want 50 (half, then its quarter is long exceeded)", n)
	}
	// A second flooding prefix gets 17 (it stops at half of the free 33),
	// a third 11, ...: whoever holds nothing is admitted while anything
	// is free.
	for i, want := range []int{17, 11, 7, 5, 3, 2, 2, 1, 1, 1} {
		k := prefixOf(netip.AddrFrom4([4]byte{198, 51, byte(i), 1}))
		got := 0
		for w.admit(k, 1000) { // bounded by the budget
			got++
		}
		if got != want {
			t.Fatalf("flooding prefix %d admitted %d, want %d (pending %d)", i+2, got, want, w.jobs)
		}
	}
	if w.jobs != 100 {
		t.Fatalf("pending %d after eleven flooding prefixes, want the whole 100", w.jobs)
	}
	if w.admit(b, 1000) {
		t.Fatal("admitted past the budget")
	}
	for range 25 {
		w.release(a, 1000)
	}
	if w.jobs != 75 || w.bytes != 75*1000 || w.prefixes[a].jobs != 25 {
		t.Fatalf("after release: %d jobs, %d bytes", w.jobs, w.bytes)
	}
	// The byte budget binds before the count.
	w2 := newWorkers(100, 10*1000)
	k := 0
	for w2.admit(prefixOf(netip.AddrFrom4([4]byte{10, 0, byte(k), 1})), 1000) { // a prefix each
		k++
	}
	if k != 10 {
		t.Fatalf("byte budget of 10 queries admitted %d", k)
	}
}

// TestPendingGauges: the pending-query budget is visible on /metrics while
// queries wait for a silent upstream, and back to zero when they give up.
func TestPendingGauges(t *testing.T) {
	res := floodResolver(t)
	cfg := testConfig()
	cfg.Listeners = []ListenerConfig{{Address: "127.0.0.1:0", Protocols: []string{"udp"}}}
	cfg.Sockets = 1
	cfg.MaxPendingBytes = 8 << 20
	cfg.UpstreamTimeout = 500 * time.Millisecond
	reg := prometheus.NewRegistry()
	s, err := New(cfg, Options{Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	s.Swap(NewSnapshot(SnapshotInput{Forwarder: res, Router: res}))
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	gauges := func() map[string]float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, mf := range mfs {
			if strings.HasPrefix(mf.GetName(), "service_dns_pending_") {
				out[mf.GetName()] = mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		return out
	}
	c := udpFrom(t, "127.0.0.1:0", s.UDPAddrs()[0])
	for i := range 20 {
		b, _ := query(fmt.Sprintf("g%d.flood.example.", i), dns.TypeA).Pack()
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	var g map[string]float64
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(5 * time.Millisecond) { // bounded
		if g = gauges(); g["service_dns_pending_queries"] >= 20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pending gauges during 20 unanswered queries: %v", g)
		}
	}
	if g["service_dns_pending_bytes"] <= 0 || g["service_dns_pending_bytes_limit"] != 8<<20 {
		t.Errorf("gauges %v: want pending bytes > 0 and the limit 8 MiB", g)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) { // bounded
		if g = gauges(); g["service_dns_pending_queries"] == 0 && g["service_dns_pending_bytes"] == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pending gauges after the upstream timeout: %v", g)
		}
	}
}
