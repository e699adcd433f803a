package wire

import (
	"bytes"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func TestKeepaliveUnits(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want uint16
	}{{10 * time.Second, 100}, {30 * time.Second, 300}, {150 * time.Millisecond, 1}, {time.Hour * 3, 0xFFFF}} {
		if got := KeepaliveUnits(c.d); got != c.want {
			t.Errorf("KeepaliveUnits(%v) = %d, want %d", c.d, got, c.want)
		}
	}
}

func TestAddKeepalive(t *testing.T) {
	withOPT := func(opts ...dns.EDNS0) *dns.Msg {
		m := new(dns.Msg)
		m.SetQuestion("www.example.com.", dns.TypeA)
		m.Response = true
		rr, _ := dns.NewRR("www.example.com. 300 IN A 192.0.2.1")
		m.Answer = append(m.Answer, rr)
		m.SetEdns0(1232, false)
		o := m.IsEdns0()
		o.Option = append(o.Option, opts...)
		return m
	}
	b := packMsg(t, withOPT(&dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0102030405060708"}))
	k := addKeepalive(bytes.Clone(b), 300, 65535)
	if len(k) != len(b)+6 {
		t.Fatalf("%d -> %d bytes", len(b), len(k))
	}
	got := new(dns.Msg)
	if err := got.Unpack(k); err != nil {
		t.Fatalf("answer with keepalive does not unpack: %v", err)
	}
	opts := got.IsEdns0().Option
	ka, ok := opts[len(opts)-1].(*dns.EDNS0_TCP_KEEPALIVE)
	if len(opts) != 2 || !ok || ka.Timeout != 300 {
		t.Fatalf("options %v", opts)
	}
	// Padding afterwards counts the keepalive option in.
	p := pad(bytes.Clone(k), PadBlock, 65535)
	if len(p)%PadBlock != 0 || new(dns.Msg).Unpack(p) != nil {
		t.Fatalf("padded after keepalive: %d bytes", len(p))
	}
	// Both in one call (one walk of the message) give the same bytes.
	if both := AddOptions(bytes.Clone(b), AnswerOptions{Keepalive: true, KeepaliveUnits: 300, PadBlock: PadBlock}, 65535); !bytes.Equal(both, p) {
		t.Fatalf("AddOptions with both: %x, want %x", both, p)
	}
	plain := new(dns.Msg)
	plain.SetQuestion("www.example.com.", dns.TypeA)
	for _, tc := range []struct {
		name string
		b    []byte
		max  int
	}{
		{"no OPT", packMsg(t, plain), 65535},
		{"already there", packMsg(t, withOPT(&dns.EDNS0_TCP_KEEPALIVE{Code: dns.EDNS0TCPKEEPALIVE, Timeout: 5})), 65535},
		{"over max", b, len(b) + 5},
		{"truncated record", b[:40], 65535},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if k := addKeepalive(bytes.Clone(tc.b), 300, tc.max); !bytes.Equal(k, tc.b) {
				t.Fatalf("changed: %d -> %d bytes", len(tc.b), len(k))
			}
		})
	}
}

// FuzzAddKeepalive: any bytes; AddKeepalive never panics, and a message
// miekg/dns could read before it still reads after, 6 bytes longer.
func FuzzAddKeepalive(f *testing.F) {
	m := new(dns.Msg)
	m.SetQuestion("example.com.", dns.TypeA)
	m.SetEdns0(1232, true)
	f.Add(packMsg(f, m))
	f.Fuzz(func(t *testing.T, b []byte) {
		orig := bytes.Clone(b)
		k := addKeepalive(b, 100, 65535)
		if bytes.Equal(k, orig) {
			return
		}
		if len(k) != len(orig)+6 {
			t.Fatalf("%d -> %d bytes", len(orig), len(k))
		}
		if new(dns.Msg).Unpack(orig) == nil {
			if err := new(dns.Msg).Unpack(k); err != nil {
				t.Fatalf("a message that unpacked no longer does: %v", err)
			}
		}
	})
}
