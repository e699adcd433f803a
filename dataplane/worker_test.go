package dataplane

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestWorkersShedAndReuse: with MaxWorkers=1, a cache miss arriving while
// the only worker waits for a slow upstream is dropped and counted; the
// worker then serves later misses, and Shutdown waits for the one in flight.
func TestWorkersShedAndReuse(t *testing.T) {
	up := startUpstream(t)
	cfg := testConfig()
	cfg.Listeners = []ListenerConfig{{Address: "127.0.0.1:0", Protocols: []string{"udp"}}}
	cfg.Sockets = 1
	cfg.MaxWorkers = 1
	s, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Swap(NewSnapshot(SnapshotInput{Authority: testTable(t), Forwarder: &testForwarder{addr: up.addr}}))
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = s.Shutdown(context.Background())
		}
	})
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(s.UDPAddrs()[0]))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	send := func(name string, id uint16) {
		m := query(name, dns.TypeA)
		m.Id = id
		b, _ := m.Pack()
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	recv := func() *dns.Msg {
		buf := make([]byte, 1500)
		_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
		n, err := c.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		m := new(dns.Msg)
		if err := m.Unpack(buf[:n]); err != nil {
			t.Fatal(err)
		}
		return m
	}
	send("slow.example.net.", 1) // holds the only worker for 300ms
	deadline := time.Now().Add(2 * time.Second)
	for testutil.ToFloat64(s.metrics.shed) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no query was shed")
		}
		send("other.example.net.", 2)
		time.Sleep(20 * time.Millisecond)
	}
	// Authoritative answers never need a worker.
	send("www.example.com.", 3)
	if m := recv(); m.Id != 3 || m.Rcode != dns.RcodeSuccess {
		t.Fatalf("authoritative answer while the pool is full: %v", m)
	}
	if m := recv(); m.Id != 1 || m.Rcode != dns.RcodeSuccess || len(m.Answer) != 1 {
		t.Fatalf("slow answer: %v", m)
	}
	// The worker is free again and takes the next miss.
	send("next.example.net.", 4)
	if m := recv(); m.Id != 4 || len(m.Answer) != 1 {
		t.Fatalf("answer after the slow one: %v", m)
	}
	// Shutdown waits for a miss in flight.
	send("slow.again.example.net.", 5) // not cached yet
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	stopped = true
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Errorf("Shutdown returned after %v, before the slow query finished", d)
	}
	s.workers.mu.Lock()
	n := s.workers.n
	s.workers.mu.Unlock()
	if n != 0 {
		t.Errorf("%d workers left after Shutdown", n)
	}
}
