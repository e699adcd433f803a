package wire

import (
	"encoding/binary"
	"net"
	"testing"

	"github.com/miekg/dns"
)

// answerMsg is a typical upstream answer: the question, records of every
// type ScanAnswer reads, compressed, and an OPT record.
func answerMsg(t testing.TB) *dns.Msg {
	t.Helper()
	q := new(dns.Msg)
	q.SetQuestion("www.example.com.", dns.TypeA)
	m := new(dns.Msg)
	m.SetReply(q)
	m.Compress = true
	hdr := func(name string, typ uint16) dns.RR_Header {
		return dns.RR_Header{Name: name, Rrtype: typ, Class: dns.ClassINET, Ttl: 300}
	}
	m.Answer = []dns.RR{
		&dns.CNAME{Hdr: hdr("www.example.com.", dns.TypeCNAME), Target: "edge.example.com."},
		&dns.A{Hdr: hdr("edge.example.com.", dns.TypeA), A: net.IPv4(192, 0, 2, 1)},
		&dns.AAAA{Hdr: hdr("edge.example.com.", dns.TypeAAAA), AAAA: net.ParseIP("2001:db8::1")},
		&dns.TXT{Hdr: hdr("edge.example.com.", dns.TypeTXT), Txt: []string{"v=1", ""}},
		&dns.MX{Hdr: hdr("example.com.", dns.TypeMX), Preference: 10, Mx: "mail.example.com."},
		&dns.PTR{Hdr: hdr("1.2.0.192.in-addr.arpa.", dns.TypePTR), Ptr: "edge.example.com."},
	}
	m.Ns = []dns.RR{
		&dns.NS{Hdr: hdr("example.com.", dns.TypeNS), Ns: "ns1.example.com."},
		&dns.SOA{Hdr: hdr("example.com.", dns.TypeSOA), Ns: "ns1.example.com.", Mbox: "hostmaster.example.com.", Serial: 1, Refresh: 2, Retry: 3, Expire: 4, Minttl: 60},
	}
	m.Extra = []dns.RR{&dns.A{Hdr: hdr("ns1.example.com.", dns.TypeA), A: net.IPv4(192, 0, 2, 53)}}
	opt := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
	opt.SetUDPSize(1232)
	opt.Option = []dns.EDNS0{&dns.EDNS0_NSID{Code: dns.EDNS0NSID, Nsid: "6e73"}, &dns.EDNS0_EDE{InfoCode: 3, ExtraText: "stale"}}
	m.Extra = append(m.Extra, opt)
	return m
}

func packAnswer(t testing.TB, m *dns.Msg) []byte {
	t.Helper()
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestScanAnswer(t *testing.T) {
	full := answerMsg(t)
	b := packAnswer(t, full)
	a, ok := ScanAnswer(b)
	if !ok {
		t.Fatal("a plain answer was refused")
	}
	if a.Counts != [3]int{6, 2, 1} || a.Rcode != 0 || a.Flags&FlagQR == 0 {
		t.Fatalf("ScanAnswer = %+v, want counts 6/2/1 and a response", a)
	}
	noOPT := full.Copy()
	noOPT.Extra = noOPT.Extra[:1]
	nb := packAnswer(t, noOPT)
	if a, ok := ScanAnswer(nb); !ok || a.End != len(nb) || a.Counts[2] != 1 {
		t.Fatalf("without OPT: %+v %v, want End at the message's end", a, ok)
	}
	if a.End != len(b)-(len(b)-len(nb)) {
		t.Fatalf("End %d, want %d (where the OPT record starts)", a.End, len(nb))
	}
	nx := full.Copy()
	nx.Rcode = dns.RcodeNameError
	nx.Answer = nil
	if a, ok := ScanAnswer(packAnswer(t, nx)); !ok || a.Rcode != dns.RcodeNameError {
		t.Fatalf("NXDOMAIN: %+v %v", a, ok)
	}

	refused := []struct {
		name string
		edit func(m *dns.Msg)
		raw  func(b []byte) []byte
	}{
		{name: "extended rcode", edit: func(m *dns.Msg) { m.Rcode = dns.RcodeBadVers }},
		{name: "unknown type", edit: func(m *dns.Msg) {
			m.Answer = append(m.Answer, &dns.SRV{Hdr: dns.RR_Header{Name: "x.example.com.", Rrtype: dns.TypeSRV, Class: dns.ClassINET}, Target: "."})
		}},
		{name: "ECS with scope", edit: func(m *dns.Msg) {
			opt := m.IsEdns0()
			opt.Option = append(opt.Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 24, SourceScope: 24, Address: net.IPv4(192, 0, 2, 0)})
		}},
		{name: "OPT not last", edit: func(m *dns.Msg) { m.Extra[0], m.Extra[1] = m.Extra[1], m.Extra[0] }},
		{name: "OPT in authority", edit: func(m *dns.Msg) { m.Ns = append(m.Ns, m.Extra[1]); m.Extra = m.Extra[:1] }},
		{name: "no question", raw: func(b []byte) []byte { binary.BigEndian.PutUint16(b[4:], 0); return b }},
		{name: "trailing byte", raw: func(b []byte) []byte { return append(b, 0) }},
		{name: "one record short", raw: func(b []byte) []byte { binary.BigEndian.PutUint16(b[6:], 7); return b }},
		{name: "truncated", raw: func(b []byte) []byte { return b[:len(b)-3] }},
		{name: "forward pointer", raw: func(b []byte) []byte {
			// The first answer's owner is a pointer to the question: point
			// it at itself instead.
			off := HeaderLen + len("\x03www\x07example\x03com\x00") + 4
			binary.BigEndian.PutUint16(b[off:], 0xC000|uint16(off))
			return b
		}},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			m := full.Copy()
			if tc.edit != nil {
				tc.edit(m)
			}
			b := packAnswer(t, m)
			if tc.raw != nil {
				b = tc.raw(b)
			}
			if a, ok := ScanAnswer(b); ok {
				t.Fatalf("ScanAnswer accepted it: %+v", a)
			}
		})
	}
}

func TestScanAnswerAllocs(t *testing.T) {
	b := packAnswer(t, answerMsg(t))
	if n := testing.AllocsPerRun(100, func() { ScanAnswer(b) }); n != 0 {
		t.Fatalf("ScanAnswer allocates %v times", n)
	}
}

// FuzzScanAnswer: whatever ScanAnswer accepts, miekg/dns unpacks without
// error, with the same RCODE and the same records per section (the OPT
// record aside), and End is where the OPT record starts.
func FuzzScanAnswer(f *testing.F) {
	f.Add(packAnswer(f, answerMsg(f)))
	m := answerMsg(f)
	m.Extra = m.Extra[:1]
	f.Add(packAnswer(f, m))
	m.Rcode, m.Answer = dns.RcodeNameError, nil
	f.Add(packAnswer(f, m))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, ok := ScanAnswer(b)
		if !ok {
			return
		}
		m := new(dns.Msg)
		if err := m.Unpack(b); err != nil {
			t.Fatalf("ScanAnswer accepted what miekg/dns refuses: %v", err)
		}
		extra := 0
		for _, rr := range m.Extra {
			if rr.Header().Rrtype != dns.TypeOPT {
				extra++
			}
		}
		if a.Counts != [3]int{len(m.Answer), len(m.Ns), extra} || int(a.Rcode) != m.Rcode {
			t.Fatalf("ScanAnswer %+v; miekg: rcode %d, %d/%d/%d records", a, m.Rcode, len(m.Answer), len(m.Ns), extra)
		}
		if extra != len(m.Extra) { // an OPT record, last: End is where it starts
			if a.End >= len(b) || b[a.End] != 0 || binary.BigEndian.Uint16(b[a.End+1:]) != TypeOPT {
				t.Fatalf("End %d is not the OPT record's start", a.End)
			}
		} else if a.End != len(b) {
			t.Fatalf("End %d, want %d", a.End, len(b))
		}
	})
}

func TestTruncateAnswer(t *testing.T) {
	full := packAnswer(t, answerMsg(t))
	b := append([]byte(nil), full...)
	n := TruncateAnswer(b)
	m := new(dns.Msg)
	if err := m.Unpack(b[:n]); err != nil {
		t.Fatalf("cut answer does not parse: %v", err)
	}
	if !m.Truncated || !m.Response || m.Id != binary.BigEndian.Uint16(full) || len(m.Question) != 1 || m.Question[0].Name != "www.example.com." ||
		len(m.Answer)+len(m.Ns)+len(m.Extra) != 0 {
		t.Fatalf("cut answer: %v", m)
	}
	if TruncateAnswer(b[:n]) != n {
		t.Fatal("a cut answer was cut again")
	}
	for name, in := range map[string][]byte{
		"query":          func() []byte { q := new(dns.Msg); q.SetQuestion("a.example.", dns.TypeA); return packAnswer(t, q) }(),
		"short":          full[:11],
		"bad name":       append(append([]byte(nil), full[:12]...), 0xC0),
		"two questions":  func() []byte { c := append([]byte(nil), full...); c[5] = 2; return c }(),
		"question only":  func() []byte { c := append([]byte(nil), full[:n]...); return c }(),
		"truncated name": append(append([]byte(nil), full[:12]...), 3, 'w', 'w'),
	} {
		c := append([]byte(nil), in...)
		if got := TruncateAnswer(c); got != len(in) || string(c) != string(in) {
			t.Errorf("%s: cut to %d of %d, or changed", name, got, len(in))
		}
	}
}

// TruncateAnswer never grows a datagram, and what it cuts is an answer
// miekg/dns reads with TC set and the question of the original.
func FuzzTruncateAnswer(f *testing.F) {
	f.Add(packAnswer(f, answerMsg(f)))
	f.Fuzz(func(t *testing.T, b []byte) {
		orig := append([]byte(nil), b...)
		n := TruncateAnswer(b)
		if n > len(b) {
			t.Fatalf("cut to %d of %d", n, len(b))
		}
		if n == len(b) {
			if string(b) != string(orig) {
				t.Fatal("changed without cutting")
			}
			return
		}
		m := new(dns.Msg)
		if err := m.Unpack(b[:n]); err != nil {
			t.Fatalf("cut answer does not parse: %v", err)
		}
		if !m.Truncated || !m.Response || len(m.Answer)+len(m.Ns)+len(m.Extra) != 0 {
			t.Fatalf("cut answer: %v", m)
		}
	})
}
