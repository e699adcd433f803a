package wire

import (
	"bytes"
	"net"
	"net/netip"
	"testing"

	"github.com/miekg/dns"
)

func TestParseECS(t *testing.T) {
	cases := []struct {
		name   string
		data   []byte
		ok     bool
		prefix string // "" for the zero Prefix
		full   bool
	}{
		{"ipv4 /32", []byte{0, 1, 32, 0, 127, 0, 0, 2}, true, "127.0.0.2/32", true},
		{"ipv4 /24", []byte{0, 1, 24, 0, 192, 0, 2}, true, "192.0.2.0/24", false},
		{"ipv4 /25", []byte{0, 1, 25, 0, 192, 0, 2, 0x80}, true, "192.0.2.128/25", false},
		{"ipv4 /0", []byte{0, 1, 0, 0}, true, "0.0.0.0/0", false},
		{"ipv6 /128", append([]byte{0, 2, 128, 0}, netip.MustParseAddr("2001:db8::7").AsSlice()...), true, "2001:db8::7/128", true},
		{"ipv6 /56", []byte{0, 2, 56, 0, 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0x12}, true, "2001:db8:0:1200::/56", false},
		{"ipv4-mapped /128 is the IPv4 address", append([]byte{0, 2, 128, 0}, netip.MustParseAddr("::ffff:10.1.2.3").AsSlice()...), true, "10.1.2.3/32", true},
		{"family 0 (dig +subnet=0)", []byte{0, 0, 0, 0}, true, "", false},
		{"short", []byte{0, 1, 32}, false, "", false},
		{"unknown family", []byte{0, 3, 0, 0}, false, "", false},
		{"family 0 with a prefix", []byte{0, 0, 8, 0, 10}, false, "", false},
		{"ipv4 prefix over 32", []byte{0, 1, 33, 0, 1, 2, 3, 4, 5}, false, "", false},
		{"ipv6 prefix over 128", append([]byte{0, 2, 129, 0}, make([]byte, 17)...), false, "", false},
		{"address longer than the prefix needs", []byte{0, 1, 24, 0, 192, 0, 2, 0}, false, "", false},
		{"address shorter than the prefix needs", []byte{0, 1, 32, 0, 192, 0, 2}, false, "", false},
		{"bits beyond the prefix", []byte{0, 1, 25, 0, 192, 0, 2, 0x81}, false, "", false},
		{"scope in a query", []byte{0, 1, 32, 24, 127, 0, 0, 2}, false, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, err := ParseECS(tc.data)
			if (err == nil) != tc.ok {
				t.Fatalf("err %v, want ok %v", err, tc.ok)
			}
			if !tc.ok {
				if err != ErrECS || e.Present {
					t.Fatalf("got %+v, %v; want ErrECS and nothing", e, err)
				}
				return
			}
			want := netip.Prefix{}
			if tc.prefix != "" {
				want = netip.MustParsePrefix(tc.prefix)
			}
			if got := e.Prefix(); got != want || e.FullLength() != tc.full {
				t.Fatalf("prefix %v full %v; want %v %v", got, e.FullLength(), want, tc.full)
			}
			// Echoed as received, with the scope asked for.
			echo := e.AppendData(nil, 7)
			if len(echo) != e.DataLen() || !bytes.Equal(echo[:3], tc.data[:3]) || echo[3] != 7 || !bytes.Equal(echo[4:], tc.data[4:]) {
				t.Fatalf("echo %x of %x", echo, tc.data)
			}
		})
	}
}

// TestECSAgreesWithMiekg checks the parser against miekg/dns on what both
// accept: the options CoreDNS's rewrite plugin and dig build.
func TestECSAgreesWithMiekg(t *testing.T) {
	for _, s := range []struct {
		family uint16
		bits   uint8
		addr   string
	}{{1, 32, "127.0.0.2"}, {1, 24, "198.51.100.0"}, {2, 128, "2001:db8::1"}, {2, 56, "2001:db8:0:100::"}, {1, 0, "0.0.0.0"}} {
		m := new(dns.Msg)
		m.SetQuestion("example.com.", dns.TypeA)
		m.SetEdns0(1232, false)
		o := m.IsEdns0()
		o.Option = append(o.Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: s.family, SourceNetmask: s.bits, Address: net.ParseIP(s.addr)})
		b, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		e, ok, err := FindECS(b)
		if !ok || err != nil {
			t.Fatalf("%v: FindECS %v %v", s, ok, err)
		}
		want := netip.PrefixFrom(netip.MustParseAddr(s.addr), int(s.bits))
		if e.Prefix() != want {
			t.Fatalf("prefix %v, want %v", e.Prefix(), want)
		}
	}
}

func TestFindECS(t *testing.T) {
	m := new(dns.Msg)
	m.SetQuestion("example.com.", dns.TypeA)
	b, _ := m.Pack()
	if _, ok, err := FindECS(b); ok || err != nil {
		t.Fatalf("no OPT: %v %v", ok, err)
	}
	m.SetEdns0(1232, false)
	o := m.IsEdns0()
	o.Option = append(o.Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0102030405060708"})
	b, _ = m.Pack()
	if _, ok, err := FindECS(b); ok || err != nil {
		t.Fatalf("cookie only: %v %v", ok, err)
	}
	ecs := &dns.EDNS0_LOCAL{Code: OptionECS, Data: []byte{0, 1, 32, 0, 10, 0, 0, 1}}
	o.Option = append(o.Option, ecs)
	b, _ = m.Pack()
	e, ok, err := FindECS(b)
	if !ok || err != nil || e.Prefix() != netip.MustParsePrefix("10.0.0.1/32") {
		t.Fatalf("ECS after a cookie: %+v %v %v", e, ok, err)
	}
	// Two ECS options are one too many: nobody can tell which is meant.
	o.Option = append(o.Option, ecs)
	b, _ = m.Pack()
	if _, ok, err := FindECS(b); ok || err != ErrECS {
		t.Fatalf("two options: %v %v", ok, err)
	}
	o.Option = []dns.EDNS0{&dns.EDNS0_LOCAL{Code: OptionECS, Data: []byte{0, 1, 32, 0, 10}}}
	b, _ = m.Pack()
	if _, ok, err := FindECS(b); ok || err != ErrECS {
		t.Fatalf("malformed: %v %v", ok, err)
	}
	if _, ok, err := FindECS(b[:len(b)-3]); ok || err != nil {
		t.Fatalf("cut message: %v %v", ok, err)
	}
	// Allocation free: the UDP read loop calls it for trusted forwarders.
	o.Option = []dns.EDNS0{ecs}
	b, _ = m.Pack()
	if n := testing.AllocsPerRun(100, func() { _, _, _ = FindECS(b) }); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}

func TestAppendECS(t *testing.T) {
	b := AppendOPT(make([]byte, HeaderLen), 1232, 0, false)
	PutHeader(b, Header{AR: 1})
	e, err := ParseECS([]byte{0, 2, 128, 0, 0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1})
	if err != nil {
		t.Fatal(err)
	}
	b = AppendECS(b, HeaderLen, e, 128)
	m := new(dns.Msg)
	if err := m.Unpack(b); err != nil {
		t.Fatal(err)
	}
	o := m.IsEdns0()
	if o == nil || len(o.Option) != 1 {
		t.Fatalf("%v", m)
	}
	s, ok := o.Option[0].(*dns.EDNS0_SUBNET)
	if !ok || s.Family != 2 || s.SourceNetmask != 128 || s.SourceScope != 128 || !s.Address.Equal(net.ParseIP("2001:db8::1")) {
		t.Fatalf("%v", o)
	}
}

// FuzzECS: whatever the bytes, the parser does not panic, what it accepts
// miekg/dns accepts too and reads the same, and the echo parses back.
func FuzzECS(f *testing.F) {
	f.Add([]byte{0, 1, 32, 0, 127, 0, 0, 2})
	f.Add([]byte{0, 2, 56, 0, 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0x12})
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{0, 1, 25, 0, 192, 0, 2, 0x81})
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := ParseECS(data)
		if err != nil {
			return
		}
		if p := e.Prefix(); e.Family != 0 && (!p.IsValid() || p.Masked() != p) {
			t.Fatalf("prefix %v of %x not masked", p, data)
		}
		back, err := ParseECS(e.AppendData(nil, 0))
		if err != nil || back != e {
			t.Fatalf("echo of %x parses as %+v, %v", data, back, err)
		}
		var m dns.EDNS0_SUBNET
		mb := new(dns.Msg)
		mb.SetQuestion("a.", dns.TypeA)
		mb.SetEdns0(1232, false)
		mb.IsEdns0().Option = []dns.EDNS0{&dns.EDNS0_LOCAL{Code: OptionECS, Data: data}}
		b, err := mb.Pack()
		if err != nil {
			t.Fatal(err)
		}
		if err := mb.Unpack(b); err != nil {
			t.Fatalf("miekg refuses %x: %v", data, err)
		}
		if s, ok := mb.IsEdns0().Option[0].(*dns.EDNS0_SUBNET); ok {
			m = *s
		}
		if m.Family != e.Family || m.SourceNetmask != e.Source {
			t.Fatalf("miekg reads %x as %+v", data, m)
		}
	})
}
