package wire

import (
	"bytes"
	"testing"

	"github.com/miekg/dns"
)

func packMsg(t testing.TB, m *dns.Msg) []byte {
	t.Helper()
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// pad and addKeepalive are AddOptions with one option.
func pad(b []byte, block, max int) []byte {
	return AddOptions(b, AnswerOptions{PadBlock: block}, max)
}

func addKeepalive(b []byte, units uint16, max int) []byte {
	return AddOptions(b, AnswerOptions{Keepalive: true, KeepaliveUnits: units}, max)
}

// TestPad: a message whose last record is its OPT grows to a multiple of
// the block with a zero-filled Padding option and still unpacks; every
// message the padding must not touch comes back byte for byte.
func TestPad(t *testing.T) {
	answer := func(extra ...dns.RR) *dns.Msg {
		m := new(dns.Msg)
		m.SetQuestion("www.example.com.", dns.TypeA)
		m.Response = true
		rr, _ := dns.NewRR("www.example.com. 300 IN A 192.0.2.1")
		m.Answer = append(m.Answer, rr)
		m.Extra = append(m.Extra, extra...)
		return m
	}
	withOPT := func(opts ...dns.EDNS0) *dns.Msg {
		m := answer()
		m.SetEdns0(1232, false)
		o := m.IsEdns0()
		o.Option = append(o.Option, opts...)
		return m
	}
	tsig := &dns.TSIG{Hdr: dns.RR_Header{Name: "key.", Rrtype: dns.TypeTSIG, Class: dns.ClassANY}, Algorithm: dns.HmacSHA256, Fudge: 300, OrigId: 1}
	optFirst := withOPT()
	optFirst.Extra = append(optFirst.Extra, tsig)

	t.Run("padded", func(t *testing.T) {
		for _, m := range []*dns.Msg{withOPT(), withOPT(&dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0102030405060708"})} {
			b := packMsg(t, m)
			p := pad(bytes.Clone(b), PadBlock, 65535)
			if len(p)%PadBlock != 0 {
				t.Fatalf("padded to %d bytes, not a multiple of %d", len(p), PadBlock)
			}
			if !bytes.Equal(p[:HeaderLen], b[:HeaderLen]) {
				t.Fatal("header changed")
			}
			got := new(dns.Msg)
			if err := got.Unpack(p); err != nil {
				t.Fatalf("padded message does not unpack: %v", err)
			}
			var pad *dns.EDNS0_PADDING
			for _, o := range got.IsEdns0().Option {
				if x, ok := o.(*dns.EDNS0_PADDING); ok {
					pad = x
				}
			}
			if pad == nil || len(pad.Padding) != len(p)-len(b)-4 || !bytes.Equal(pad.Padding, make([]byte, len(pad.Padding))) {
				t.Fatalf("padding option %v", pad)
			}
			if len(got.Answer) != 1 || got.Answer[0].String() != m.Answer[0].String() || len(got.IsEdns0().Option) != len(m.IsEdns0().Option)+1 {
				t.Fatalf("records changed: %v", got)
			}
		}
	})
	for _, tc := range []struct {
		name  string
		b     []byte
		block int
		max   int
	}{
		{"no OPT", packMsg(t, answer()), PadBlock, 65535},
		{"OPT not last", packMsg(t, optFirst), PadBlock, 65535},
		{"already padded", packMsg(t, withOPT(&dns.EDNS0_PADDING{Padding: make([]byte, 10)})), PadBlock, 65535},
		{"over max", packMsg(t, withOPT()), PadBlock, 100},
		{"short", []byte{1, 2, 3}, PadBlock, 65535},
		{"truncated record", packMsg(t, withOPT())[:40], PadBlock, 65535},
		{"bad block", packMsg(t, withOPT()), 0, 65535},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if p := pad(bytes.Clone(tc.b), tc.block, tc.max); !bytes.Equal(p, tc.b) {
				t.Fatalf("changed: %d -> %d bytes", len(tc.b), len(p))
			}
		})
	}
}

// FuzzPad: any bytes; Pad never panics, and what it changes is a message
// miekg/dns could read before and still reads, a multiple of the block.
func FuzzPad(f *testing.F) {
	m := new(dns.Msg)
	m.SetQuestion("example.com.", dns.TypeA)
	m.SetEdns0(1232, true)
	f.Add(packMsg(f, m))
	f.Add([]byte{0, 0, 0x81, 0x80, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 1, 0, 1, 0, 0, 41, 4, 0xd0, 0, 0, 0, 0, 0, 4, 0, 12, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		orig := bytes.Clone(b)
		p := pad(b, PadBlock, 65535)
		if bytes.Equal(p, orig) {
			return
		}
		if len(p)%PadBlock != 0 || len(p) <= len(orig) {
			t.Fatalf("padded %d -> %d bytes", len(orig), len(p))
		}
		if new(dns.Msg).Unpack(orig) == nil {
			if err := new(dns.Msg).Unpack(p); err != nil {
				t.Fatalf("a message that unpacked no longer does after padding: %v", err)
			}
		}
	})
}
