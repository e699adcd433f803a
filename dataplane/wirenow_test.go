package dataplane

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/test/forwardtest"
)

type wireResult struct {
	msg *dns.Msg
	ok  bool
}

type chanCallback chan wireResult

func (c chanCallback) AnswerWire(resp []byte, ok bool) {
	m := new(dns.Msg)
	if ok {
		if err := m.Unpack(resp); err != nil {
			ok = false
		}
	}
	c <- wireResult{m, ok}
}

// ServeWireNow answers authoritative names and cache hits on the caller's
// goroutine; a cache miss is finished by a worker and arrives through the
// callback once the upstream answers, and Shutdown waits for it.
func TestServeWireNow(t *testing.T) {
	fwd := forwardtest.New()
	s, err := New(testConfig(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Swap(NewSnapshot(SnapshotInput{Authority: testTable(t), Forwarder: fwd}))
	client := netip.MustParseAddrPort("192.0.2.10:5353")
	pack := func(name string) []byte {
		b, err := query(name, dns.TypeA).Pack()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cb := make(chanCallback, 1)

	out, ok, done := s.ServeWireNow(pack("www.example.com."), client, TransportDoH, "", nil, cb)
	if !done || !ok {
		t.Fatalf("authoritative answer: ok %v done %v", ok, done)
	}
	m := new(dns.Msg)
	if err := m.Unpack(out); err != nil || len(m.Answer) == 0 {
		t.Fatalf("authoritative answer %v %v", m, err)
	}

	out, ok, done = s.ServeWireNow(pack("miss.example.net."), client, TransportDoH, "", nil, cb)
	if done || ok || len(out) != 0 {
		t.Fatalf("cache miss answered at once: ok %v done %v", ok, done)
	}
	select {
	case r := <-cb:
		t.Fatalf("callback before the upstream answered: %v", r)
	case <-time.After(50 * time.Millisecond):
	}
	// Shutdown waits for the detached query.
	stopped := make(chan error, 1)
	go func() { stopped <- s.Shutdown(context.Background()) }()
	select {
	case err := <-stopped:
		t.Fatalf("Shutdown returned with a query in flight: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(fwd.Gate)
	select {
	case r := <-cb:
		if !r.ok || len(r.msg.Answer) != 1 || r.msg.Answer[0].(*dns.A).A.String() != forwardtest.Answer.String() {
			t.Fatalf("detached answer %v", r.msg)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no callback after the upstream answered")
	}
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	// The answer was cached: now it comes at once.
	out, ok, done = s.ServeWireNow(pack("miss.example.net."), client, TransportDoH, "", nil, cb)
	if !done || !ok {
		t.Fatalf("cache hit: ok %v done %v", ok, done)
	}
	_ = out
}
