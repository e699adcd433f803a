// Package proxyproto parses PROXY protocol version 2 headers (binary form)
// sent by trusted load balancers in front of the DNS listeners, and decides
// which peers may send them.
//
// Only peers inside Policy.From may send a header, and they must: their
// connections and datagrams without one are rejected, as is a header from
// any other peer. A peer that is not loopback must also carry the shared
// secret in TLV 0xE0, compared in constant time.
package proxyproto

import (
	"bytes"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
)

// Signature starts every version 2 header.
var Signature = []byte{0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A}

// TLVSecret is the type of the TLV that carries the shared secret.
const TLVSecret = 0xE0

// TLVClientID is the type of the TLV that carries the client ID of a
// DoT or DoH connection the proxy terminated (svc edge): one DNS label,
// taken only from a trusted peer, like the addresses.
const TLVClientID = 0xE1

// MinSecretLen is the shortest secret accepted.
const MinSecretLen = 32

// MaxHeaderLen bounds a header: 16 fixed bytes plus the length field's
// limit; we accept far less (addresses plus a few TLVs).
const MaxHeaderLen = 16 + 512

const headerFixed = 16

// Errors.
var (
	ErrNoHeader    = errors.New("proxyproto: no PROXY v2 header")
	ErrMalformed   = errors.New("proxyproto: malformed header")
	ErrTooLong     = errors.New("proxyproto: header too long")
	ErrUntrusted   = errors.New("proxyproto: header from a peer not in proxyProtocolFrom")
	ErrBadSecret   = errors.New("proxyproto: missing or wrong secret TLV")
	ErrUnsupported = errors.New("proxyproto: unsupported address family or command")
)

// Header is a parsed header. Local is true for the LOCAL command (health
// checks of the proxy itself): the connection's own peer address stands.
type Header struct {
	Source      netip.AddrPort
	Destination netip.AddrPort
	Local       bool
	// ClientID is the TLVClientID value when it is one valid label.
	ClientID  string
	secret    []byte // aliases the input
	hasSecret bool
}

// Parse reads one header from the start of b (a datagram or buffered
// stream bytes) and returns it with its length. The secret aliases b.
func Parse(b []byte) (Header, int, error) {
	var h Header
	if len(b) < headerFixed || !bytes.Equal(b[:12], Signature) {
		if len(b) < 12 && bytes.HasPrefix(Signature, b) && len(b) > 0 {
			return h, 0, ErrMalformed
		}
		return h, 0, ErrNoHeader
	}
	verCmd, famProto := b[12], b[13]
	n := int(binary.BigEndian.Uint16(b[14:16]))
	if headerFixed+n > MaxHeaderLen {
		return h, 0, ErrTooLong
	}
	if len(b) < headerFixed+n {
		return h, 0, ErrMalformed
	}
	if verCmd>>4 != 2 {
		return h, 0, ErrMalformed
	}
	body := b[headerFixed : headerFixed+n]
	switch verCmd & 0x0F {
	case 0: // LOCAL
		h.Local = true
	case 1: // PROXY
	default:
		return h, 0, ErrUnsupported
	}
	var rest []byte
	switch famProto >> 4 {
	case 0: // AF_UNSPEC
		if !h.Local {
			return h, 0, ErrUnsupported
		}
		rest = body
	case 1: // AF_INET
		if len(body) < 12 {
			return h, 0, ErrMalformed
		}
		src := netip.AddrFrom4([4]byte(body[0:4]))
		dst := netip.AddrFrom4([4]byte(body[4:8]))
		h.Source = netip.AddrPortFrom(src, binary.BigEndian.Uint16(body[8:10]))
		h.Destination = netip.AddrPortFrom(dst, binary.BigEndian.Uint16(body[10:12]))
		rest = body[12:]
	case 2: // AF_INET6
		if len(body) < 36 {
			return h, 0, ErrMalformed
		}
		src := netip.AddrFrom16([16]byte(body[0:16])).Unmap()
		dst := netip.AddrFrom16([16]byte(body[16:32])).Unmap()
		h.Source = netip.AddrPortFrom(src, binary.BigEndian.Uint16(body[32:34]))
		h.Destination = netip.AddrPortFrom(dst, binary.BigEndian.Uint16(body[34:36]))
		rest = body[36:]
	default: // AF_UNIX and others carry no IP address
		if !h.Local {
			return h, 0, ErrUnsupported
		}
		rest = nil
	}
	if p := famProto & 0x0F; !h.Local && p != 1 && p != 2 {
		return h, 0, ErrUnsupported
	}
	for len(rest) > 0 {
		if len(rest) < 3 {
			return h, 0, ErrMalformed
		}
		t, l := rest[0], int(binary.BigEndian.Uint16(rest[1:3]))
		if len(rest) < 3+l {
			return h, 0, ErrMalformed
		}
		switch t {
		case TLVSecret:
			h.secret, h.hasSecret = rest[3:3+l], true
		case TLVClientID:
			if v := rest[3 : 3+l]; validLabel(v) {
				h.ClientID = string(v)
			}
		}
		rest = rest[3+l:]
	}
	return h, headerFixed + n, nil
}

// Read reads one header from a stream, at most MaxHeaderLen bytes and never
// past the header.
func Read(r io.Reader) (Header, error) {
	var buf [MaxHeaderLen]byte
	if _, err := io.ReadFull(r, buf[:headerFixed]); err != nil {
		return Header{}, fmt.Errorf("proxyproto: read header: %w", err)
	}
	return readRest(r, &buf)
}

// readRest reads the rest of a header whose fixed part is in buf.
func readRest(r io.Reader, buf *[MaxHeaderLen]byte) (Header, error) {
	if !bytes.Equal(buf[:12], Signature) {
		return Header{}, ErrNoHeader
	}
	n := int(binary.BigEndian.Uint16(buf[14:16]))
	if headerFixed+n > MaxHeaderLen {
		return Header{}, ErrTooLong
	}
	if _, err := io.ReadFull(r, buf[headerFixed:headerFixed+n]); err != nil {
		return Header{}, fmt.Errorf("proxyproto: read header: %w", err)
	}
	h, _, err := Parse(buf[:headerFixed+n])
	if err != nil {
		return Header{}, err
	}
	h.secret = slices.Clone(h.secret)
	return h, nil
}

// Append writes a version 2 PROXY header for src->dst with the optional
// secret TLV (tests and tools use it).
func Append(b []byte, src, dst netip.AddrPort, secret []byte) []byte {
	b = append(b, Signature...)
	var body []byte
	fam := byte(0x11) // AF_INET, STREAM
	if src.Addr().Is4() && dst.Addr().Is4() {
		a, d := src.Addr().As4(), dst.Addr().As4()
		body = append(append(body, a[:]...), d[:]...)
	} else {
		fam = 0x21
		a, d := src.Addr().As16(), dst.Addr().As16()
		body = append(append(body, a[:]...), d[:]...)
	}
	body = binary.BigEndian.AppendUint16(body, src.Port())
	body = binary.BigEndian.AppendUint16(body, dst.Port())
	if secret != nil {
		body = append(body, TLVSecret)
		body = binary.BigEndian.AppendUint16(body, uint16(len(secret)))
		body = append(body, secret...)
	}
	b = append(b, 0x21, fam)
	b = binary.BigEndian.AppendUint16(b, uint16(len(body)))
	return append(b, body...)
}

// Policy says which peers send headers and what secret they carry. The
// zero value (and nil) trusts nobody: every peer is served directly.
type Policy struct {
	From   []netip.Prefix
	Secret []byte
}

// LoadSecret reads listeners.proxyProtocolSecretFile; trailing newlines are
// not part of the secret.
func LoadSecret(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("proxyproto secret: %w", err)
	}
	b = bytes.TrimRight(b, "\r\n")
	if len(b) < MinSecretLen {
		return nil, fmt.Errorf("proxyproto secret %s: %d bytes, want at least %d", path, len(b), MinSecretLen)
	}
	return b, nil
}

// Validate checks that a secret exists when a non-loopback peer is trusted.
func (p *Policy) Validate() error {
	if p == nil {
		return nil
	}
	for _, pr := range p.From {
		if !pr.IsValid() {
			return fmt.Errorf("proxyproto: invalid prefix %v", pr)
		}
		if !(pr.Addr().IsLoopback() && pr.Bits() >= loopbackBits(pr.Addr())) && len(p.Secret) < MinSecretLen {
			return fmt.Errorf("proxyproto: peer %v is not loopback: proxyProtocolSecretFile with at least %d bytes required", pr, MinSecretLen)
		}
	}
	return nil
}

func loopbackBits(a netip.Addr) int {
	if a.Is4() {
		return 8
	}
	return 128
}

// Trusted reports whether peer must send a header.
func (p *Policy) Trusted(peer netip.Addr) bool {
	if p == nil {
		return false
	}
	peer = peer.Unmap()
	for _, pr := range p.From {
		if pr.Contains(peer) {
			return true
		}
	}
	return false
}

// Client returns the real client address carried by h from a trusted peer,
// checking the secret. For a LOCAL header the peer itself is the client.
func (p *Policy) Client(peer netip.AddrPort, h Header) (netip.AddrPort, error) {
	if h.Local {
		// A LOCAL header (dnsdist's health checks) claims no other
		// client: the peer is served as itself, so no secret is needed.
		return peer, nil
	}
	if !peer.Addr().Unmap().IsLoopback() {
		if len(p.Secret) == 0 || !h.hasSecret || subtle.ConstantTimeCompare(h.secret, p.Secret) != 1 {
			return netip.AddrPort{}, ErrBadSecret
		}
	}
	return netip.AddrPortFrom(h.Source.Addr().Unmap(), h.Source.Port()), nil
}

// Datagram handles one UDP datagram from peer: from a trusted peer it
// strips the header and returns the real client and the payload; from any
// other peer it returns the datagram as is, unless it starts with a header
// (rejected).
func (p *Policy) Datagram(peer netip.AddrPort, b []byte) (netip.AddrPort, []byte, error) {
	c, _, payload, err := p.DatagramID(peer, b)
	return c, payload, err
}

// DatagramID is Datagram that also returns the client ID the header
// carries ("" for none).
func (p *Policy) DatagramID(peer netip.AddrPort, b []byte) (netip.AddrPort, string, []byte, error) {
	if !p.Trusted(peer.Addr()) {
		if len(b) >= 12 && bytes.Equal(b[:12], Signature) {
			return peer, "", nil, ErrUntrusted
		}
		return peer, "", b, nil
	}
	h, n, err := Parse(b)
	if err != nil {
		return peer, "", nil, err
	}
	c, err := p.Client(peer, h)
	if err != nil {
		return peer, "", nil, err
	}
	return c, h.ClientID, b[n:], nil
}

// validLabel: a client ID is one DNS label of letters, digits and hyphens.
func validLabel(b []byte) bool {
	if len(b) == 0 || len(b) > 63 {
		return false
	}
	for _, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// LooksLikeHeader reports whether b starts like a v2 header (for streams
// from untrusted peers whose first bytes were read as a DNS length).
func LooksLikeHeader(b []byte) bool {
	n := min(len(b), 12)
	return n > 0 && bytes.Equal(b[:n], Signature[:n])
}
