package proxyproto

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"
)

var secret = bytes.Repeat([]byte("s"), 32)

func TestParseAndPolicy(t *testing.T) {
	src, dst := netip.MustParseAddrPort("203.0.113.5:1234"), netip.MustParseAddrPort("192.0.2.1:53")
	h := Append(nil, src, dst, secret)
	got, n, err := Parse(append(h, 1, 2, 3))
	if err != nil || n != len(h) || got.Source != src || got.Destination != dst {
		t.Fatalf("%+v %d %v", got, n, err)
	}
	p := &Policy{From: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("127.0.0.1/32")}, Secret: secret}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := (&Policy{From: p.From}).Validate(); err == nil {
		t.Error("non-loopback peer without secret accepted")
	}
	remote := netip.MustParseAddrPort("10.1.1.1:999")
	if c, err := p.Client(remote, got); err != nil || c != src {
		t.Fatalf("%v %v", c, err)
	}
	bad, _, _ := Parse(Append(nil, src, dst, bytes.Repeat([]byte("x"), 32)))
	if _, err := p.Client(remote, bad); !errors.Is(err, ErrBadSecret) {
		t.Errorf("wrong secret: %v", err)
	}
	none, _, _ := Parse(Append(nil, src, dst, nil))
	if _, err := p.Client(remote, none); !errors.Is(err, ErrBadSecret) {
		t.Errorf("missing secret: %v", err)
	}
	if _, err := p.Client(netip.MustParseAddrPort("127.0.0.1:1"), none); err != nil {
		t.Errorf("loopback needs no secret: %v", err)
	}
	if _, _, err := p.Datagram(netip.MustParseAddrPort("192.0.2.9:1"), h); !errors.Is(err, ErrUntrusted) {
		t.Errorf("untrusted header: %v", err)
	}
	if _, _, err := p.Datagram(remote, []byte("not a header at all")); err == nil {
		t.Error("trusted peer without header accepted")
	}
	v6 := Append(nil, netip.MustParseAddrPort("[2001:db8::1]:5"), netip.MustParseAddrPort("[2001:db8::2]:53"), nil)
	if g, _, err := Parse(v6); err != nil || g.Source.Addr() != netip.MustParseAddr("2001:db8::1") {
		t.Fatalf("v6: %+v %v", g, err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add(Append(nil, netip.MustParseAddrPort("1.2.3.4:5"), netip.MustParseAddrPort("5.6.7.8:53"), secret))
	f.Add(Append(nil, netip.MustParseAddrPort("[::1]:5"), netip.MustParseAddrPort("[::2]:53"), nil))
	f.Add(append(append([]byte{}, Signature...), 0x20, 0x00, 0x00, 0x00))
	f.Add([]byte("\x00\x01"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, n, err := Parse(b)
		if err != nil {
			return
		}
		if n < 16 || n > len(b) || n > MaxHeaderLen {
			t.Fatalf("length %d of %d", n, len(b))
		}
		if !h.Local && !h.Source.IsValid() {
			t.Fatal("PROXY without source")
		}
		// Read on a stream gives the same header.
		h2, err := Read(bytes.NewReader(b))
		if err != nil || h2.Source != h.Source || !bytes.Equal(h2.secret, h.secret) {
			t.Fatalf("Read differs: %+v %v", h2, err)
		}
	})
}

// TestClientIDAndLocal: svc edge carries a DoT/DoH client ID in
// TLVClientID (only a valid label counts), and dnsdist's health checks send
// LOCAL headers without TLVs, which a non-loopback trusted peer may send:
// they claim no other client.
func TestClientIDAndLocal(t *testing.T) {
	src, dst := netip.MustParseAddrPort("203.0.113.5:1234"), netip.MustParseAddrPort("192.0.2.1:53")
	withTLV := func(typ byte, v string) []byte {
		h := Append(nil, src, dst, secret)
		h = append(h, typ, 0, byte(len(v)))
		h = append(h, v...)
		l := int(h[14])<<8 | int(h[15])
		l += 3 + len(v)
		h[14], h[15] = byte(l>>8), byte(l)
		return append(h, "dnsquery"...)
	}
	p := &Policy{From: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, Secret: secret}
	remote := netip.MustParseAddrPort("10.1.1.1:999")
	c, id, payload, err := p.DatagramID(remote, withTLV(TLVClientID, "kids-tablet"))
	if err != nil || c != src || id != "kids-tablet" || string(payload) != "dnsquery" {
		t.Fatalf("client ID TLV: %v %q %q %v", c, id, payload, err)
	}
	if _, id, _, err := p.DatagramID(remote, withTLV(TLVClientID, "not.one/label")); err != nil || id != "" {
		t.Errorf("invalid client ID kept: %q %v", id, err)
	}
	local := append(append([]byte{}, Signature...), 0x20, 0x00, 0x00, 0x00)
	if c, _, _, err := p.DatagramID(remote, append(local, "q"...)); err != nil || c != remote {
		t.Errorf("LOCAL from a trusted non-loopback peer without secret: %v %v", c, err)
	}
}
