package cache

import (
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/dataplane/wire"
)

func lowerWire(t testing.TB, name string) []byte {
	b := make([]byte, 256)
	n, err := dns.PackDomainName(strings.ToLower(dns.Fqdn(name)), b, 0, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	return b[:n]
}

func extraOf(m *dns.Msg) int {
	n := 0
	for _, rr := range m.Extra {
		if rr.Header().Rrtype != dns.TypeOPT {
			n++
		}
	}
	return n
}

// TestRawSections: an upstream's answer whose names read the same after
// another header and a question in another case is kept as it is, with
// its OPT (last) left out; anything else is packed again.
func TestRawSections(t *testing.T) {
	answer := func(compress bool, edns bool, rrs ...string) (*dns.Msg, []byte) {
		q := new(dns.Msg)
		q.SetQuestion("www.example.org.", dns.TypeA)
		m := new(dns.Msg)
		m.SetReply(q)
		m.Compress = compress
		for _, s := range rrs {
			rr := rr(t, s)
			switch {
			case strings.Contains(s, " SOA "):
				m.Ns = append(m.Ns, rr)
			case strings.HasPrefix(s, "glue"):
				m.Extra = append(m.Extra, rr)
			default:
				m.Answer = append(m.Answer, rr)
			}
		}
		if edns {
			m.SetEdns0(1232, true)
		}
		b, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		u := new(dns.Msg)
		if err := u.Unpack(b); err != nil {
			t.Fatal(err)
		}
		return u, b
	}
	name := lowerWire(t, "www.example.org.")
	// check: want says whether raw is kept, exact whether its names take
	// a mixed-case client's case as the packed ones do.
	check := func(what string, m *dns.Msg, raw []byte, want, wantExact bool) {
		t.Helper()
		end, ok, exact := rawSections(raw, name, dns.TypeA, dns.ClassINET, len(m.Answer), len(m.Ns), extraOf(m))
		if ok != want || (ok && exact != wantExact) {
			t.Fatalf("%s: ok %v exact %v, want %v %v", what, ok, exact, want, wantExact)
		}
		if !ok {
			return
		}
		// The client's answer, from the raw sections and from the packed
		// ones: another ID and flags, the question in the client's case,
		// then the sections. The same records, in the same case.
		var client []byte
		build := func(sections []byte) string {
			b := []byte{0xAB, 0xCD, 0x81, 0x80, 0, 1, 0, byte(len(m.Answer)), 0, byte(len(m.Ns)), 0, byte(extraOf(m))}
			b = append(b, client...)
			b = append(b, 0, 1, 0, 1)
			b = append(b, sections...)
			got := new(dns.Msg)
			if err := got.Unpack(b); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			var out []string
			for _, rr := range append(append(append([]dns.RR{}, got.Answer...), got.Ns...), got.Extra...) {
				out = append(out, rr.String())
			}
			return strings.Join(out, "\n")
		}
		qend := wire.HeaderLen + len(name) + 4
		var extra []dns.RR
		for _, rr := range m.Extra {
			if rr.Header().Rrtype != dns.TypeOPT {
				extra = append(extra, rr)
			}
		}
		bp := make([]byte, 0, 512)
		packed, err := pack(&bp, name, dns.TypeA, dns.ClassINET, m, extra)
		if err != nil {
			t.Fatal(err)
		}
		client = lowerWire(t, "www.example.org.") // a client asking in lower case
		if got, want := build(raw[qend:end]), build(packed[qend:]); got != want {
			t.Errorf("%s: records\n%s\nwant (packed)\n%s", what, got, want)
		}
		copy(client[1:], "wWW") // and in mixed case
		copy(client[5:], "eXAMPLE")
		if got, want := build(raw[qend:end]), build(packed[qend:]); got != want && exact {
			t.Errorf("%s: records in mixed case\n%s\nwant (packed)\n%s", what, got, want)
		}
	}
	for _, compress := range []bool{true, false} {
		for _, edns := range []bool{true, false} {
			// Uncompressed, the names would not take the client's case
			// where the packed answer gives it to them: packed again.
			m, raw := answer(compress, edns, "www.example.org. 60 IN CNAME web.example.org.", "web.example.org. 30 IN A 192.0.2.1")
			check("cname", m, raw, true, compress)
			m, raw = answer(compress, edns, "www.example.org. 60 IN MX 10 mail.example.org.", "glue.example.org. 60 IN A 192.0.2.2")
			check("mx+glue", m, raw, true, compress)
			m, raw = answer(compress, edns, "example.org. 900 IN SOA ns1.example.org. host.example.org. 1 2 3 4 5")
			check("soa", m, raw, true, compress)
			m, raw = answer(compress, edns, "www.example.org. 60 IN TXT \"a\" \"b\"", "www.example.org. 60 IN AAAA 2001:db8::1")
			check("txt+aaaa", m, raw, true, compress)
			m, raw = answer(compress, edns, "www.example.org. 60 IN CNAME cdn.example.net.", "cdn.example.net. 30 IN A 192.0.2.1")
			check("cname elsewhere", m, raw, true, compress)
			m, raw = answer(compress, edns, "other.example.net. 60 IN A 192.0.2.1")
			check("other name", m, raw, true, true)
			// Types whose data may hold names this does not read.
			m, raw = answer(compress, edns, "www.example.org. 60 IN HTTPS 1 svc.example.org. alpn=h2")
			check("https", m, raw, false, false)
		}
	}
	m, raw := answer(true, true, "www.example.org. 60 IN CNAME web.example.org.", "web.example.org. 30 IN A 192.0.2.1")
	qend := wire.HeaderLen + len(name) + 4
	// The CNAME's owner is a pointer to the question (offset 12).
	if raw[qend] != 0xC0 || raw[qend+1] != 12 {
		t.Fatalf("owner % x", raw[qend:qend+2])
	}
	bad := func(what string, mod func(b []byte) []byte) {
		t.Helper()
		check(what, m, mod(append([]byte(nil), raw...)), false, false)
	}
	bad("pointer into the header", func(b []byte) []byte { b[qend+1] = 2; return b })
	bad("pointer forward", func(b []byte) []byte { b[qend+1] = byte(qend + 4); return b })
	bad("pointer to itself", func(b []byte) []byte { b[qend+1] = byte(qend); return b })
	bad("question of another name", func(b []byte) []byte { b[13] = 'x'; return b })
	bad("question type", func(b []byte) []byte { b[qend-3] = 28; return b })
	bad("one record short", func(b []byte) []byte { b[7] = 1; return b })
	bad("trailing byte", func(b []byte) []byte { return append(b, 0) })
	// An OPT before the last additional record.
	om, _ := answer(true, true, "www.example.org. 60 IN MX 10 mail.example.org.")
	om.Extra = append(om.Extra, rr(t, "mail.example.org. 60 IN A 192.0.2.2"))
	ob, err := om.Pack()
	if err != nil {
		t.Fatal(err)
	}
	check("OPT not last", om, ob, false, false)
	// A name looping through pointers.
	loop := append([]byte(nil), raw[:qend]...)
	loop = append(loop, 0xC0, byte(qend+2), 0xC0, byte(qend), 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 1)
	loop[7], loop[11] = 1, 0
	if _, ok, _ := rawSections(loop, name, dns.TypeA, dns.ClassINET, 1, 0, 0); ok {
		t.Error("pointer loop accepted")
	}
}

// FuzzRawSections: whatever upstream answer rawSections keeps reads, after
// a client's header and question, as the records packed again read: the
// same names in the same case for a client asking in lower case, and for
// one asking in mixed case when it says exact.
func FuzzRawSections(f *testing.F) {
	q := new(dns.Msg)
	q.SetQuestion("www.example.org.", dns.TypeA)
	for _, compress := range []bool{true, false} {
		for _, rrs := range [][]string{
			{"www.example.org. 60 IN CNAME web.example.org.", "web.example.org. 30 IN A 192.0.2.1"},
			{"www.example.org. 60 IN MX 10 mail.example.org.", "mail.example.org. 60 IN A 192.0.2.2"},
			{"example.org. 900 IN SOA ns1.example.org. host.example.org. 1 2 3 4 5"},
			{"www.example.org. 60 IN CNAME WWW.Example.ORG.", "www.example.net. 30 IN NS example.org."},
		} {
			m := new(dns.Msg)
			m.SetReply(q)
			m.Compress = compress
			for _, s := range rrs {
				m.Answer = append(m.Answer, rr(f, s))
			}
			m.SetEdns0(1232, false)
			b, err := m.Pack()
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		m := new(dns.Msg)
		if m.Unpack(raw) != nil || len(m.Question) != 1 {
			return
		}
		qn := m.Question[0]
		name := make([]byte, 256)
		n, err := dns.PackDomainName(qn.Name, name, 0, nil, false)
		if err != nil {
			return
		}
		name = name[:n]
		var extra []dns.RR
		for _, rr := range m.Extra {
			if rr.Header().Rrtype != dns.TypeOPT {
				extra = append(extra, rr)
			}
		}
		end, ok, exact := rawSections(raw, name, qn.Qtype, qn.Qclass, len(m.Answer), len(m.Ns), len(extra))
		if !ok {
			return
		}
		bp := make([]byte, 0, 512)
		packed, err := pack(&bp, name, qn.Qtype, qn.Qclass, m, extra)
		if err != nil {
			return
		}
		qend := wire.HeaderLen + len(name) + 4
		read := func(client, sections []byte) string {
			b := []byte{0xAB, 0xCD, 0x81, 0x80, 0, 1}
			b = append(b, byte(len(m.Answer)>>8), byte(len(m.Answer)), byte(len(m.Ns)>>8), byte(len(m.Ns)), byte(len(extra)>>8), byte(len(extra)))
			b = append(b, client...)
			b = append(b, byte(qn.Qtype>>8), byte(qn.Qtype), byte(qn.Qclass>>8), byte(qn.Qclass))
			b = append(b, sections...)
			got := new(dns.Msg)
			if err := got.Unpack(b); err != nil {
				return "unpack: " + err.Error()
			}
			var out []string
			for _, rr := range append(append(append([]dns.RR{}, got.Answer...), got.Ns...), got.Extra...) {
				out = append(out, rr.String())
			}
			return strings.Join(out, "\n")
		}
		if got, want := read(name, raw[qend:end]), read(name, packed[qend:]); got != want {
			t.Fatalf("lower case: kept\n%s\npacked\n%s", got, want)
		}
		mixed := append([]byte(nil), name...)
		for i := range mixed {
			if 'a' <= mixed[i] && mixed[i] <= 'z' && i%2 == 0 {
				mixed[i] -= 'a' - 'A'
			}
		}
		if got, want := read(mixed, raw[qend:end]), read(mixed, packed[qend:]); got != want && exact {
			t.Fatalf("mixed case, exact: kept\n%s\npacked\n%s", got, want)
		}
	})
}
