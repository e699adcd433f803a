package dataplane

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/dataplane/wire"
)

func TestPipelineOrder(t *testing.T) {
	s, err := New(Config{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"ingress", "identify", "control", "local", "authoritative", "blocking", "cache", "upstream", "log"}
	if got := s.StageNames(); !slices.Equal(got, want) {
		t.Fatalf("stages = %v, want %v", got, want)
	}
}

func pack(t testing.TB, m *dns.Msg) []byte {
	t.Helper()
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestIngress(t *testing.T) {
	s, err := New(testConfig(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Swap(NewSnapshot(SnapshotInput{Authority: testTable(t)}))
	www := pack(t, query("www.example.com.", dns.TypeA))
	withOpt := func(version uint8, n int) []byte {
		m := query("www.example.com.", dns.TypeA)
		for range n {
			o := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
			o.SetUDPSize(1232)
			o.SetVersion(version)
			m.Extra = append(m.Extra, o)
		}
		return pack(t, m)
	}
	set := func(b []byte, f func([]byte)) []byte { c := slices.Clone(b); f(c); return c }
	cases := []struct {
		name      string
		in        []byte
		transport Transport
		drop      bool
		rcode     int
		question  bool
	}{
		{name: "short", in: www[:5], drop: true},
		{name: "response dropped", in: set(www, func(b []byte) { b[2] |= 0x80 }), drop: true},
		{name: "update not implemented", in: set(www, func(b []byte) { b[2] |= 5 << 3 }), rcode: dns.RcodeNotImplemented, question: true},
		// RFC 1996 3.2: a NOTIFY names a zone's SOA; anything else is malformed
		{name: "notify without SOA", in: set(www, func(b []byte) { b[2] |= 4 << 3 }), rcode: dns.RcodeFormatError, question: true},
		{name: "no question", in: set(www, func(b []byte) { b[5] = 0 })[:12], rcode: dns.RcodeFormatError},
		{name: "two questions", in: set(www, func(b []byte) { b[5] = 2 }), rcode: dns.RcodeFormatError},
		{name: "cut question", in: www[:len(www)-3], rcode: dns.RcodeFormatError},
		{name: "bad label", in: set(www, func(b []byte) { b[12] = 0x80 }), rcode: dns.RcodeFormatError},
		{name: "edns version 1", in: withOpt(1, 1), rcode: dns.RcodeBadVers, question: true},
		{name: "two OPT", in: withOpt(0, 2), rcode: dns.RcodeFormatError, question: true},
		{name: "axfr over udp", in: pack(t, query("example.com.", dns.TypeAXFR)), rcode: dns.RcodeRefused, question: true},
		{name: "chaos class", in: set(www, func(b []byte) { binary.BigEndian.PutUint16(b[len(b)-2:], dns.ClassCHAOS) }), rcode: dns.RcodeRefused, question: true},
		{name: "ok", in: www, rcode: dns.RcodeSuccess, question: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, ok := s.ServeWire(tc.in, netip.MustParseAddrPort("192.0.2.9:5353"), tc.transport, nil)
			if tc.drop {
				if ok {
					t.Fatalf("answered %x, want drop", out)
				}
				return
			}
			if !ok {
				t.Fatal("dropped")
			}
			m := new(dns.Msg)
			if err := m.Unpack(out); err != nil {
				t.Fatalf("unpack answer: %v", err)
			}
			if m.Rcode != tc.rcode {
				t.Fatalf("rcode %s, want %s", dns.RcodeToString[m.Rcode], dns.RcodeToString[tc.rcode])
			}
			if !m.Response || m.Id != binary.BigEndian.Uint16(tc.in) {
				t.Fatalf("header %+v", m.MsgHdr)
			}
			if got := len(m.Question) == 1; got != tc.question {
				t.Fatalf("question echoed %v, want %v", got, tc.question)
			}
		})
	}
}

func TestAuthoritativeOverSockets(t *testing.T) {
	s := startServer(t, testConfig(), NewSnapshot(SnapshotInput{Authority: testTable(t)}))
	cases := []struct {
		name   string
		qtype  uint16
		rcode  int
		answer int
	}{
		{"www.example.com.", dns.TypeA, dns.RcodeSuccess, 2},
		{"WwW.ExAmple.CoM.", dns.TypeAAAA, dns.RcodeSuccess, 1},
		{"alias.example.com.", dns.TypeA, dns.RcodeSuccess, 3},
		{"nothere.example.com.", dns.TypeA, dns.RcodeNameError, 0},
		{"www.example.com.", dns.TypeMX, dns.RcodeSuccess, 0},
	}
	for _, proto := range []string{"udp", "tcp"} {
		for _, tc := range cases {
			t.Run(proto+"/"+tc.name, func(t *testing.T) {
				r := exchange(t, s, proto, query(tc.name, tc.qtype))
				if r.Rcode != tc.rcode || len(r.Answer) != tc.answer || !r.Authoritative {
					t.Fatalf("got rcode %s answers %d aa %v:\n%v", dns.RcodeToString[r.Rcode], len(r.Answer), r.Authoritative, r)
				}
				if r.Question[0].Name != tc.name {
					t.Fatalf("question %q not echoed as %q", r.Question[0].Name, tc.name)
				}
			})
		}
	}
}

func TestTruncation(t *testing.T) {
	s := startServer(t, testConfig(), NewSnapshot(SnapshotInput{Authority: testTable(t)}))
	// big is ~770 bytes: over 512 without EDNS, fits with EDNS.
	r := exchange(t, s, "udp", query("big.example.com.", dns.TypeTXT))
	if !r.Truncated || len(r.Answer) != 0 || len(r.Question) != 1 {
		t.Fatalf("no EDNS: want minimal TC answer, got %v", r)
	}
	m := query("big.example.com.", dns.TypeTXT)
	m.SetEdns0(4096, false)
	if r = exchange(t, s, "udp", m); r.Truncated || len(r.Answer) != 3 {
		t.Fatalf("EDNS 4096: want full answer, got tc=%v answers=%d", r.Truncated, len(r.Answer))
	}
	// huge is ~1530 bytes: over the 1232 cap even when the client offers 4096.
	m = query("huge.example.com.", dns.TypeTXT)
	m.SetEdns0(4096, false)
	r = exchange(t, s, "udp", m)
	if !r.Truncated || len(r.Answer) != 0 || r.IsEdns0() == nil || r.IsEdns0().UDPSize() != 1232 {
		t.Fatalf("EDNS 4096 huge: want TC with OPT 1232, got %v", r)
	}
	if r = exchange(t, s, "tcp", query("huge.example.com.", dns.TypeTXT)); r.Truncated || len(r.Answer) != 6 {
		t.Fatalf("tcp: want full answer, got %v", r)
	}
}

func TestHealthAndLameduck(t *testing.T) {
	s := startServer(t, testConfig(), nil)
	r := exchange(t, s, "udp", query("health.service.internal.", dns.TypeTXT))
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.Answer[0].(*dns.TXT).Txt[0] != "ok" {
		t.Fatalf("health: %v", r)
	}
	s.SetLameduck(true)
	if r = exchange(t, s, "udp", query("HEALTH.service.internal.", dns.TypeTXT)); r.Rcode != dns.RcodeServerFailure {
		t.Fatalf("lameduck health: %v", r)
	}
	// Listeners keep serving in lameduck.
	if r = exchange(t, s, "tcp", query("health.service.internal.", dns.TypeTXT)); r.Rcode != dns.RcodeServerFailure {
		t.Fatalf("lameduck health over tcp: %v", r)
	}
	s.SetLameduck(false)
	if r = exchange(t, s, "udp", query("health.service.internal.", dns.TypeTXT)); r.Rcode != dns.RcodeSuccess {
		t.Fatalf("after lameduck: %v", r)
	}
}

func TestUpstreamCacheAndStale(t *testing.T) {
	up := startUpstream(t)
	fwd := &testForwarder{addr: up.addr}
	clock := newFakeClock()
	cfg := testConfig()
	cfg.Cache.Now = clock.Now
	cfg.Cache.StaleMaxWait = 200 * time.Millisecond
	s := startServer(t, cfg, NewSnapshot(SnapshotInput{Authority: testTable(t), Forwarder: fwd, Router: suffixRouter{"cond.example.net.", "corp"}}))

	ask := func(name string, qtype uint16) (*dns.Msg, QueryResult) {
		t.Helper()
		res, err := s.Query(context.Background(), QueryRequest{Name: name, Type: qtype, Client: netip.MustParseAddr("192.0.2.7"), Transport: TransportUDP})
		if err != nil {
			t.Fatal(err)
		}
		return res.Msg, res
	}
	m, res := ask("up.example.net", dns.TypeA)
	if res.Status != StatusAnswered || res.Upstream != up.addr || len(m.Answer) != 1 || m.Answer[0].Header().Ttl != 300 {
		t.Fatalf("first: %v %v", res.Status, m)
	}
	clock.Advance(100 * time.Second)
	r := exchange(t, s, "udp", query("UP.example.net.", dns.TypeA))
	if len(r.Answer) != 1 || r.Answer[0].Header().Ttl != 200 || r.Question[0].Name != "UP.example.net." {
		t.Fatalf("cached answer should have TTL 200 and echo case: %v", r)
	}
	if n := up.queries.Load(); n != 1 {
		t.Fatalf("upstream saw %d queries, want 1", n)
	}
	// Negative answer cached with the SOA's minimum (60s).
	ask("nx.example.net", dns.TypeA)
	if _, res = ask("nx.example.net", dns.TypeA); res.Status != StatusCached {
		t.Fatalf("nxdomain second ask: %v", res.Status)
	}
	// Conditional forwarding is never cached.
	before := up.queries.Load()
	ask("a.cond.example.net", dns.TypeA)
	if _, res = ask("a.cond.example.net", dns.TypeA); res.Status != StatusAnswered || up.queries.Load()-before != 2 {
		t.Fatalf("conditional: status %v, upstream queries %d", res.Status, up.queries.Load()-before)
	}
	// Past expiry with the upstream down: serve stale with answerTTL 30.
	clock.Advance(time.Hour)
	fwd.down.Store(true)
	m, res = ask("up.example.net", dns.TypeA)
	if res.Status != StatusStale || len(m.Answer) != 1 || m.Answer[0].Header().Ttl != 30 {
		t.Fatalf("stale: %v %v", res.Status, m)
	}
	// A name never seen fails with SERVFAIL.
	if m, res = ask("new.example.net", dns.TypeA); res.Status != StatusFailed || m.Rcode != dns.RcodeServerFailure {
		t.Fatalf("down, uncached: %v %v", res.Status, m)
	}
	// Flush drops the stale entry.
	if err := s.FlushCache("up.example.net"); err != nil {
		t.Fatal(err)
	}
	if _, res = ask("up.example.net", dns.TypeA); res.Status != StatusFailed {
		t.Fatalf("after flush: %v", res.Status)
	}
}

func TestForwardZoneGroup(t *testing.T) {
	up := startUpstream(t)
	fwd := &testForwarder{addr: up.addr, groups: make(chan string, 1)}
	s := startServer(t, testConfig(), NewSnapshot(SnapshotInput{Authority: testTable(t), Forwarder: fwd}))
	r := exchange(t, s, "udp", query("host.corp.test.", dns.TypeA))
	if len(r.Answer) != 1 {
		t.Fatalf("forward zone: %v", r)
	}
	if g := <-fwd.groups; g != "corp" {
		t.Fatalf("group %q, want corp", g)
	}
}

// TestTCPPipelining sends a slow query then a fast one on one connection:
// the fast answer must come back first (RFC 7766 out-of-order answers).
func TestTCPPipelining(t *testing.T) {
	up := startUpstream(t)
	s := startServer(t, testConfig(), NewSnapshot(SnapshotInput{Authority: testTable(t), Forwarder: &testForwarder{addr: up.addr}}))
	conn, err := net.DialTimeout("tcp", s.TCPAddrs()[0].String(), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var buf []byte
	for i, name := range []string{"slow.example.net.", "www.example.com."} {
		m := query(name, dns.TypeA)
		m.Id = uint16(i + 1)
		b := pack(t, m)
		buf = binary.BigEndian.AppendUint16(buf, uint16(len(b)))
		buf = append(buf, b...)
	}
	if _, err := conn.Write(buf); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	var ids []uint16
	for range 2 {
		var l [2]byte
		if _, err := io.ReadFull(conn, l[:]); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, binary.BigEndian.Uint16(l[:]))
		if _, err := io.ReadFull(conn, b); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, binary.BigEndian.Uint16(b))
	}
	if !slices.Equal(ids, []uint16{2, 1}) {
		t.Fatalf("answer order %v, want [2 1]", ids)
	}
}

func TestTCPIdleTimeout(t *testing.T) {
	cfg := testConfig()
	cfg.TCPIdleTimeout = 100 * time.Millisecond
	s := startServer(t, cfg, nil)
	conn, err := net.Dial("tcp", s.TCPAddrs()[0].String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	var b [1]byte
	if _, err := conn.Read(b[:]); err == nil {
		t.Fatal("idle connection not closed")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("server did not close the idle connection within 3s")
	}
}

func TestWireNameHelpers(t *testing.T) {
	if got := string(wire.AppendPresentation(nil, healthName)); got != "health.service.internal." {
		t.Fatal(got)
	}
}

// recordingForwarder answers every query with 192.0.2.99 and keeps the
// EDNS option codes of the last request it was given.
type recordingForwarder struct {
	mu   sync.Mutex
	opts []uint16
	seen bool
}

func (f *recordingForwarder) Forward(_ context.Context, _ string, req *dns.Msg, _ netip.Addr) (*dns.Msg, string, error) {
	f.mu.Lock()
	f.opts, f.seen = nil, true
	if o := req.IsEdns0(); o != nil {
		for _, x := range o.Option {
			f.opts = append(f.opts, x.Option())
		}
	}
	f.mu.Unlock()
	m := new(dns.Msg)
	m.SetReply(req)
	rr, _ := dns.NewRR(req.Question[0].Name + " 60 IN A 192.0.2.99")
	m.Answer = append(m.Answer, rr)
	return m, "recorder", nil
}

// TestUpstreamRequestDropsHopOptions: a client's cookie and padding are
// per hop and never reach the upstream, whether the query took the fast
// path (cookie only) or the full parser (with NSID, which is passed on).
func TestUpstreamRequestDropsHopOptions(t *testing.T) {
	fwd := &recordingForwarder{}
	s := startServer(t, testConfig(), NewSnapshot(SnapshotInput{Authority: testTable(t), Forwarder: fwd}))
	client := netip.MustParseAddrPort("192.0.2.9:5353")
	for i, tc := range []struct {
		opts []dns.EDNS0
		want []uint16
	}{
		{[]dns.EDNS0{&dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0102030405060708"}}, nil},
		{[]dns.EDNS0{&dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0102030405060708"}, &dns.EDNS0_NSID{Code: dns.EDNS0NSID}, &dns.EDNS0_PADDING{Padding: make([]byte, 8)}}, []uint16{dns.EDNS0NSID}},
		{[]dns.EDNS0{&dns.EDNS0_TCP_KEEPALIVE{Code: dns.EDNS0TCPKEEPALIVE}}, nil},
		{[]dns.EDNS0{&dns.EDNS0_NSID{Code: dns.EDNS0NSID}, &dns.EDNS0_TCP_KEEPALIVE{Code: dns.EDNS0TCPKEEPALIVE}}, []uint16{dns.EDNS0NSID}},
	} {
		m := new(dns.Msg)
		m.SetQuestion(fmt.Sprintf("miss%d.example.org.", i), dns.TypeA)
		m.SetEdns0(1232, false)
		m.IsEdns0().Option = tc.opts
		b, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		out, ok := s.ServeWire(b, client, TransportDoT, nil)
		resp := new(dns.Msg)
		if !ok || resp.Unpack(out) != nil || len(resp.Answer) != 1 {
			t.Fatalf("case %d: no answer: %v", i, resp)
		}
		fwd.mu.Lock()
		seen, got := fwd.seen, fwd.opts
		fwd.mu.Unlock()
		if !seen || !slices.Equal(got, tc.want) {
			t.Errorf("case %d: upstream saw options %v, want %v", i, got, tc.want)
		}
	}
}
