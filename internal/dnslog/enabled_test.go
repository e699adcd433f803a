package dnslog_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/dataplane"
	"github.com/svcdns/svc/internal/dnslog"
	"github.com/svcdns/svc/internal/querylog"
)

// querylog.enabled switched off at run time, as an admin does: a data plane
// on a UDP listener, logging through dnslog into a real querylog.db, keeps
// answering a real client and writes no row while off; switched on again,
// the next answers are in the log.
func TestQueryLogSwitchedOffAndOn(t *testing.T) {
	tab := wwwZone(t, "example.com")
	w := openWriter(t)
	lg := dnslog.New(w)
	defer lg.Close()
	s, err := dataplane.New(dataplane.Config{Node: "n", Listeners: []dataplane.ListenerConfig{{Address: "127.0.0.1:0"}}}, dataplane.Options{QueryLogger: lg})
	if err != nil {
		t.Fatal(err)
	}
	s.Swap(dataplane.NewSnapshot(dataplane.SnapshotInput{Authority: tab}))
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	}()
	addr := net.UDPAddrFromAddrPort(s.UDPAddrs()[0]).String()
	ctx := context.Background()
	ask := func(name string) {
		t.Helper()
		m := new(dns.Msg)
		m.SetQuestion(name, dns.TypeA)
		r, _, err := (&dns.Client{Net: "udp", Timeout: 2 * time.Second}).Exchange(m, addr)
		if err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
			t.Fatalf("%s: answer %v, %v", name, r, err)
		}
	}
	logged := func(name string) int {
		t.Helper()
		if err := lg.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		p, err := w.List(ctx, querylog.Filter{Domain: name})
		if err != nil {
			t.Fatal(err)
		}
		return len(p.Items)
	}
	setEnabled := func(on bool) {
		t.Helper()
		cfg := querylog.DefaultConfig()
		cfg.Enabled = on
		if err := w.Update(cfg); err != nil {
			t.Fatal(err)
		}
	}

	ask("www.example.com.")
	if n := logged("www.example.com"); n != 1 {
		t.Fatalf("on: %d rows, want 1", n)
	}
	setEnabled(false)
	for range 3 {
		ask("www.example.com.")
	}
	if n := logged("www.example.com"); n != 1 {
		t.Fatalf("off: %d rows, want still 1", n)
	}
	setEnabled(true)
	ask("www.example.com.")
	if n := logged("www.example.com"); n != 2 {
		t.Fatalf("on again: %d rows, want 2", n)
	}
}
