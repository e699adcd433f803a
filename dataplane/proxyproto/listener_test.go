package proxyproto

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"
)

// acceptOne listens on loopback, has send write its bytes from a client
// connection, and returns the server side, wrapped.
func acceptOne(t *testing.T, l *Listener, send []byte) *Conn {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	l.Listener = ln
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Write(send); err != nil {
		t.Fatal(err)
	}
	s, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	_ = s.SetDeadline(time.Now().Add(3 * time.Second))
	return s.(*Conn)
}

// TestHeaderPlacement: a trusted peer's header before the stream, or for a
// TLS listener inside TLS (the connection starts with a handshake record,
// passed on untouched, and the header is read after the handshake).
func TestHeaderPlacement(t *testing.T) {
	client := netip.MustParseAddrPort("198.51.100.7:4242")
	hdr := Append(nil, client, netip.MustParseAddrPort("127.0.0.1:853"), nil)
	// The start of a ClientHello: handshake record, TLS 1.0 record version.
	hello := append([]byte{0x16, 0x03, 0x01, 0x00, 0x40, 0x01}, bytes.Repeat([]byte{0xAB}, 60)...)
	pol := &Policy{From: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	var rejected []error
	onReject := func(_ netip.AddrPort, err error) { rejected = append(rejected, err) }

	t.Run("before", func(t *testing.T) {
		c := acceptOne(t, &Listener{Policy: pol, TLS: true}, append(append([]byte{}, hdr...), hello...))
		if c.HeaderInside() || c.Client() != client {
			t.Fatalf("inside %v, client %v", c.HeaderInside(), c.Client())
		}
		got := make([]byte, len(hello))
		if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, hello) {
			t.Fatalf("stream after the header: %x %v", got, err)
		}
	})
	t.Run("inside", func(t *testing.T) {
		c := acceptOne(t, &Listener{Policy: pol, TLS: true}, hello)
		if !c.HeaderInside() || c.Client() != c.Peer() {
			t.Fatalf("inside %v, client %v before the header", c.HeaderInside(), c.Client())
		}
		got := make([]byte, len(hello)) // what TLS reads: every byte, in order
		if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, hello) {
			t.Fatalf("handshake bytes: %x %v", got, err)
		}
		// The decrypted stream: the header, then the first query.
		dec := bytes.NewReader(append(append([]byte{}, hdr...), 0, 12))
		if err := c.ReadInside(dec); err != nil || c.Client() != client || c.HeaderInside() {
			t.Fatalf("ReadInside: %v, client %v", err, c.Client())
		}
		if rest, _ := io.ReadAll(dec); !bytes.Equal(rest, []byte{0, 12}) {
			t.Errorf("ReadInside read past the header: %x left", rest)
		}
		if got := c.RemoteAddr().String(); got != client.String() {
			t.Errorf("RemoteAddr %s", got)
		}
	})
	t.Run("inside missing", func(t *testing.T) {
		rejected = nil
		c := acceptOne(t, &Listener{Policy: pol, TLS: true, OnReject: onReject}, hello)
		if !c.HeaderInside() {
			t.Fatal("not waiting for a header inside TLS")
		}
		if err := c.ReadInside(bytes.NewReader([]byte{0, 29, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14})); !errors.Is(err, ErrNoHeader) {
			t.Fatalf("a DNS frame where the header belongs: %v", err)
		}
		if len(rejected) != 1 {
			t.Errorf("rejections reported: %v", rejected)
		}
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, ErrNoHeader) {
			t.Errorf("read after the refusal: %v", err)
		}
	})
	t.Run("plain listener", func(t *testing.T) {
		// A listener without TLS (Do53 over TCP) never waits for a header
		// inside: a trusted peer that starts with anything else is refused.
		c := acceptOne(t, &Listener{Policy: pol}, hello)
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, ErrNoHeader) {
			t.Fatalf("read: %v", err)
		}
		if c.HeaderInside() {
			t.Error("plain listener waits for a header inside TLS")
		}
	})
	t.Run("untrusted", func(t *testing.T) {
		// A peer outside From is served as is: its handshake bytes pass and
		// nothing waits for a header.
		c := acceptOne(t, &Listener{Policy: &Policy{From: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}, TLS: true}, hello)
		got := make([]byte, len(hello))
		if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, hello) || c.HeaderInside() {
			t.Fatalf("%x %v inside=%v", got, err, c.HeaderInside())
		}
	})
}
