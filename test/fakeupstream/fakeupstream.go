// Package fakeupstream starts small DNS servers for tests on 127.0.0.1:0
// (UDP): any handler (Serve), a resolver that answers every A query with one
// address so a test can tell a forwarded answer from a blocked one (A), and
// a node as dnsdist sees it behind svc edge (BehindProxy).
package fakeupstream

import (
	"net"
	"net/netip"
	"testing"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/dataplane/proxyproto"
)

// Serve answers UDP queries on 127.0.0.1:0 with h and returns the address
// once the server is reading. It stops when the test ends.
func Serve(t testing.TB, h dns.HandlerFunc) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	start(t, &dns.Server{PacketConn: pc, Handler: h})
	return pc.LocalAddr().String()
}

// start serves srv until the test ends and returns once it reads.
func start(t testing.TB, srv *dns.Server) {
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go func() { _ = srv.ActivateAndServe() }()
	<-started
	t.Cleanup(func() { _ = srv.Shutdown() })
}

// UDPAndTCP answers UDP queries with udp and TCP queries with tcp, on one
// 127.0.0.1 port (as a truncated answer's retry needs), and returns the
// address once both read. They stop when the test ends.
func UDPAndTCP(t testing.TB, udp, tcp dns.Handler) string {
	t.Helper()
	for range 20 { // another process may hold the TCP port: bounded retries
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		l, err := net.Listen("tcp", pc.LocalAddr().String())
		if err != nil {
			pc.Close()
			continue
		}
		start(t, &dns.Server{PacketConn: pc, Handler: udp})
		start(t, &dns.Server{Listener: l, Handler: tcp})
		return pc.LocalAddr().String()
	}
	t.Fatal("fakeupstream: no port free for both UDP and TCP")
	return ""
}

// A starts the resolver and returns its address; it answers every A query
// with ip (TTL 60) and every other query with an empty NOERROR. It stops
// when the test ends.
func A(t testing.TB, ip string) string {
	t.Helper()
	addr, err := netip.ParseAddr(ip)
	if err != nil || !addr.Is4() {
		t.Fatalf("fakeupstream: %q is not an IPv4 address", ip)
	}
	return Serve(t, func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		if q := r.Question; len(q) == 1 && q[0].Qtype == dns.TypeA {
			m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: q[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60},
				A: net.IP(addr.AsSlice())}}
		}
		_ = w.WriteMsg(m)
	})
}

// BehindProxy is a node as dnsdist's health checks and clients see it from
// behind `svc edge`: on a free UDP port of ip it strips the PROXY v2 header
// dnsdist adds, answers every A query with answer (TTL 60) and every TXT
// query (the health name) with "ok". It stops when the test ends.
func BehindProxy(t testing.TB, ip, answer string) netip.AddrPort {
	t.Helper()
	pc, err := net.ListenPacket("udp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 4096)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, hl, err := proxyproto.Parse(buf[:n])
			if err != nil {
				continue
			}
			q := new(dns.Msg)
			if q.Unpack(buf[hl:n]) != nil || len(q.Question) != 1 {
				continue
			}
			m := new(dns.Msg)
			m.SetReply(q)
			rr := q.Question[0].Name + " 60 IN A " + answer
			if q.Question[0].Qtype == dns.TypeTXT {
				rr = q.Question[0].Name + ` 0 IN TXT "ok"`
			}
			r, _ := dns.NewRR(rr)
			m.Answer = append(m.Answer, r)
			b, _ := m.Pack()
			_, _ = pc.WriteTo(b, from)
		}
	}()
	return pc.LocalAddr().(*net.UDPAddr).AddrPort()
}
