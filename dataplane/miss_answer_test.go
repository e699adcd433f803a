package dataplane

import (
	"bytes"
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// recordForwarder answers with the records of its table for the question
// (its name lower-cased), the owner names in the question's case as an
// upstream echoes them, plus an OPT record as upstreams add one.
type recordForwarder map[string]func(q dns.Question) *dns.Msg

func (f recordForwarder) Forward(_ context.Context, _ string, req *dns.Msg, _ netip.Addr) (*dns.Msg, string, error) {
	mk := f[strings.ToLower(req.Question[0].Name)]
	if mk == nil {
		m := new(dns.Msg)
		m.SetRcode(req, dns.RcodeNameError)
		return m, "test", nil
	}
	m := mk(req.Question[0])
	m.Id, m.Response, m.Question = req.Id, true, req.Question
	m.SetEdns0(1232, false)
	return m, "test", nil
}

func rrs(t testing.TB, lines ...string) []dns.RR {
	out := make([]dns.RR, 0, len(lines))
	for _, l := range lines {
		out = append(out, mustRR(t, l))
	}
	return out
}

// TestMissAnswerFromCacheBytes: a forwarded answer is written from the
// sections the cache packed (encodeFast) instead of packed again; its
// bytes equal what the packed answer (cache off, so no entry to take them
// from) gives, for answers of every section, TTLs below MinTTL and mixed,
// NXDOMAIN with a SOA, truncation, EDNS, DO, CD, ECS and mixed case.
func TestMissAnswerFromCacheBytes(t *testing.T) {
	fwd := recordForwarder{
		"a.example.net.": func(q dns.Question) *dns.Msg {
			return &dns.Msg{Answer: rrs(t, q.Name+" 1 IN A 192.0.2.1", q.Name+" 300 IN A 192.0.2.2")}
		},
		"cname.example.net.": func(q dns.Question) *dns.Msg {
			return &dns.Msg{Answer: rrs(t, q.Name+" 60 IN CNAME target.example.net.", "target.example.net. 30 IN A 192.0.2.3")}
		},
		"mx.example.net.": func(q dns.Question) *dns.Msg {
			return &dns.Msg{
				Answer: rrs(t, q.Name+" 3600 IN MX 10 mail.example.net."),
				Ns:     rrs(t, "example.net. 86400 IN NS ns1.example.net."),
				Extra:  rrs(t, "mail.example.net. 3600 IN A 192.0.2.25", "ns1.example.net. 3600 IN AAAA 2001:db8::53"),
			}
		},
		"nodata.example.net.": func(q dns.Question) *dns.Msg {
			return &dns.Msg{Ns: rrs(t, "example.net. 900 IN SOA ns1.example.net. host.example.net. 1 3600 600 86400 120")}
		},
		"big.example.net.": func(q dns.Question) *dns.Msg {
			m := &dns.Msg{}
			for i := range 40 {
				m.Answer = append(m.Answer, mustRR(t, q.Name+" 300 IN TXT \"record "+strings.Repeat("x", i)+"\""))
			}
			return m
		},
		"servfail.example.net.": func(q dns.Question) *dns.Msg {
			return &dns.Msg{MsgHdr: dns.MsgHdr{Rcode: dns.RcodeServerFailure}}
		},
	}
	mk := func(cacheOn bool) *Server { return missServer(t, cacheOn, SnapshotInput{Forwarder: fwd}) }
	type tc struct {
		name  string
		qtype uint16
		edns  uint16
		do    bool
		cd    bool
		ecs   bool
	}
	var cases []tc
	for _, name := range []string{"a.example.net.", "A.Example.NET.", "cname.example.net.", "mx.example.net.", "nodata.example.net.", "missing.example.net.", "big.example.net.", "servfail.example.net."} {
		qtype := dns.TypeA
		switch {
		case strings.HasPrefix(name, "mx"):
			qtype = dns.TypeMX
		case strings.HasPrefix(name, "big"):
			qtype = dns.TypeTXT
		}
		cases = append(cases, tc{name: name, qtype: qtype}, tc{name: name, qtype: qtype, edns: 1232},
			tc{name: name, qtype: qtype, edns: 4096, do: true}, tc{name: name, qtype: qtype, cd: true},
			tc{name: name, qtype: qtype, edns: 1232, ecs: true})
	}
	client := netip.MustParseAddrPort("192.0.2.9:5353")
	for _, c := range cases {
		m := query(c.name, c.qtype)
		m.Id = 0x4321
		m.CheckingDisabled = c.cd
		if c.edns > 0 {
			m.SetEdns0(c.edns, c.do)
			if c.ecs {
				o := m.IsEdns0()
				o.Option = append(o.Option, ecs("198.51.100.0/24"))
			}
		}
		pkt := pack(t, m)
		// A fresh pair per case: both miss.
		want, _ := mk(false).ServeWire(pkt, client, TransportUDP, nil)
		s := mk(true)
		got, _ := s.ServeWire(pkt, client, TransportUDP, nil)
		if !bytes.Equal(got, want) {
			t.Errorf("%s %s edns=%d do=%v cd=%v ecs=%v:\n got % x\nwant % x", c.name, dns.TypeToString[c.qtype], c.edns, c.do, c.cd, c.ecs, got, want)
		}
		if len(got) < 12 {
			t.Fatalf("%s: no answer", c.name)
		}
		// And the same over TCP, where nothing truncates.
		want, _ = mk(false).ServeWire(pkt, client, TransportTCP, nil)
		got, _ = mk(true).ServeWire(pkt, client, TransportTCP, nil)
		if !bytes.Equal(got, want) {
			t.Errorf("tcp %s %s edns=%d: got % x\nwant % x", c.name, dns.TypeToString[c.qtype], c.edns, got, want)
		}
	}
}

// startTableUpstream is a miekg/dns upstream answering from a table of
// record lines by lower-cased name (NXDOMAIN otherwise), compressed or not.
func startTableUpstream(t testing.TB, compress bool, table map[string][]string) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	srv := &dns.Server{PacketConn: pc, NotifyStartedFunc: func() { close(started) }, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		m.RecursionAvailable = true
		m.Compress = compress
		lines, ok := table[strings.ToLower(r.Question[0].Name)]
		if !ok {
			m.Rcode = dns.RcodeNameError
		}
		m.AuthenticatedData = strings.HasPrefix(strings.ToLower(r.Question[0].Name), "ad.")
		for _, l := range lines {
			l = strings.ReplaceAll(l, "@", r.Question[0].Name)
			rr := mustRR(t, l)
			switch {
			case strings.HasPrefix(l, "ns:"), rr.Header().Rrtype == dns.TypeSOA:
				m.Ns = append(m.Ns, rr)
			case strings.HasPrefix(l, "glue"):
				m.Extra = append(m.Extra, rr)
			default:
				m.Answer = append(m.Answer, rr)
			}
		}
		if o := r.IsEdns0(); o != nil {
			m.SetEdns0(o.UDPSize(), o.Do())
		}
		_ = w.WriteMsg(m)
	})}
	go func() { _ = srv.ActivateAndServe() }()
	<-started
	t.Cleanup(func() { _ = srv.Shutdown() })
	return pc.LocalAddr().String()
}

// TestMissAnswerFromUpstreamBytes: through upstream.Resolver the cache keeps
// the upstream's bytes (cache.StoreWire) when it can; the answer to the
// miss and the hit after it carry the same records as the packed answer
// (cache off), compressed by the upstream or not, in every section.
func TestMissAnswerFromUpstreamBytes(t *testing.T) {
	table := map[string][]string{
		"a.example.net.":      {"@ 1 IN A 192.0.2.1", "@ 300 IN A 192.0.2.2"},
		"cname.example.net.":  {"@ 60 IN CNAME target.example.net.", "target.example.net. 30 IN A 192.0.2.3"},
		"mx.example.net.":     {"@ 3600 IN MX 10 mail.example.net.", "glue.example.net. 3600 IN A 192.0.2.25", "mail.example.net. 3600 IN A 192.0.2.26"},
		"nodata.example.net.": {"example.net. 900 IN SOA ns1.example.net. host.example.net. 1 3600 600 86400 120"},
		"https.example.net.":  {"@ 300 IN HTTPS 1 svc.example.net. alpn=h2"},
		"ad.example.net.":     {"@ 300 IN A 192.0.2.4"}, // the upstream sets AD
	}
	for _, compress := range []bool{true, false} {
		res := resolverFor(t, startTableUpstream(t, compress, table))
		mk := func(cacheOn bool) *Server {
			return missServer(t, cacheOn, SnapshotInput{Forwarder: res, Router: res})
		}
		records := func(b []byte, ttl bool) string {
			m := new(dns.Msg)
			if err := m.Unpack(b); err != nil {
				t.Fatalf("unpack % x: %v", b, err)
			}
			var out []string
			out = append(out, dns.RcodeToString[m.Rcode], m.MsgHdr.String())
			for _, rr := range append(append(append([]dns.RR{}, m.Answer...), m.Ns...), m.Extra...) {
				if !ttl {
					rr.Header().Ttl = 0
				}
				out = append(out, rr.String())
			}
			return strings.Join(out, "\n")
		}
		client := netip.MustParseAddrPort("192.0.2.9:5353")
		for _, name := range []string{"a.example.net.", "A.eXample.NET.", "cname.example.net.", "mx.example.net.", "nodata.example.net.", "missing.example.net.", "https.example.net.", "ad.example.net."} {
			for _, edns := range []bool{false, true} {
				m := query(name, dns.TypeA)
				if strings.HasPrefix(strings.ToLower(name), "mx") {
					m.Question[0].Qtype = dns.TypeMX
				}
				if strings.HasPrefix(name, "https") {
					m.Question[0].Qtype = dns.TypeHTTPS
				}
				m.Id = 0x2468
				if edns {
					m.SetEdns0(1232, true)
				}
				pkt := pack(t, m)
				want, _ := mk(false).ServeWire(pkt, client, TransportUDP, nil)
				s := mk(true)
				got, _ := s.ServeWire(pkt, client, TransportUDP, nil)
				if records(got, true) != records(want, true) {
					t.Errorf("compress=%v %s edns=%v miss:\n%s\nwant\n%s", compress, name, edns, records(got, true), records(want, true))
				}
				// The hits, in this case and another: the same records as
				// from a packed entry (TTLs aside: at least MinTTL).
				for _, other := range []string{name, strings.ToLower(name), strings.ToUpper(name)} {
					m.Question[0].Name = other
					pkt := pack(t, m)
					hit, _ := s.ServeWire(pkt, client, TransportUDP, nil)
					want, _ := mk(false).ServeWire(pkt, client, TransportUDP, nil)
					if h, w := records(hit, false), records(want, false); h != w {
						t.Errorf("compress=%v %s edns=%v hit as %s:\n%s\nwant\n%s", compress, name, edns, other, h, w)
					}
				}
			}
		}
	}
}

// missServer is a server answering from in (its forwarder), with its cache
// on or off (maxEntries 0).
func missServer(t testing.TB, cacheOn bool, in SnapshotInput) *Server {
	t.Helper()
	cfg := testConfig()
	if !cacheOn {
		cfg.Cache.MaxEntries = 0
	}
	s, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Swap(NewSnapshot(in))
	return s
}
