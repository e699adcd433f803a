package wire

import (
	"encoding/binary"
	"errors"
	"net/netip"
)

// OptionECS is the EDNS Client Subnet option (RFC 7871).
const OptionECS = 8

// ErrECS reports a malformed EDNS Client Subnet option; RFC 7871 7.1.1
// and 7.2.1 ask for FORMERR.
var ErrECS = errors.New("wire: malformed client subnet option")

// ECS is a parsed EDNS Client Subnet option (RFC 7871 6).
type ECS struct {
	Present bool
	// Family is 1 (IPv4) or 2 (IPv6); 0 only with Source 0 and no
	// address, which dig sends for "+subnet=0" (do not use my address).
	Family uint16
	Source uint8 // SOURCE PREFIX-LENGTH
	Scope  uint8 // SCOPE PREFIX-LENGTH (0 in queries)
	// addr holds the address octets sent (ceil(Source/8) of them, the
	// bits beyond Source zero); the rest are zero.
	addr [16]byte
}

// ParseECS reads the data of an ECS option from a query. Beyond what
// miekg/dns checks (family, prefix lengths) it refuses, as BIND and Knot
// do, an address of another length than the source prefix needs, bits set
// beyond the source prefix, and a nonzero scope (RFC 7871 6: "MUST be set
// to 0" in queries), so a forwarder's option means exactly one prefix.
func ParseECS(data []byte) (ECS, error) {
	if len(data) < 4 {
		return ECS{}, ErrECS
	}
	e := ECS{Present: true, Family: binary.BigEndian.Uint16(data), Source: data[2], Scope: data[3]}
	var max int
	switch e.Family {
	case 0:
		max = 0
	case 1:
		max = 32
	case 2:
		max = 128
	default:
		return ECS{}, ErrECS
	}
	addr := data[4:]
	if int(e.Source) > max || e.Scope != 0 || len(addr) != (int(e.Source)+7)/8 {
		return ECS{}, ErrECS
	}
	if rem := e.Source % 8; rem != 0 && addr[len(addr)-1]&(0xFF>>rem) != 0 {
		return ECS{}, ErrECS
	}
	copy(e.addr[:], addr)
	return e, nil
}

// FullLength reports whether the option names one address: a /32 for
// IPv4, a /128 for IPv6.
func (e ECS) FullLength() bool {
	return e.Family == 1 && e.Source == 32 || e.Family == 2 && e.Source == 128
}

// Prefix is the source prefix; IPv4-mapped IPv6 addresses of a /128 are
// unmapped to the IPv4 address, as peer addresses are. The zero Prefix
// for family 0.
func (e ECS) Prefix() netip.Prefix {
	switch e.Family {
	case 1:
		return netip.PrefixFrom(netip.AddrFrom4([4]byte(e.addr[:4])), int(e.Source))
	case 2:
		a := netip.AddrFrom16(e.addr)
		if e.Source == 128 && a.Is4In6() {
			return netip.PrefixFrom(a.Unmap(), 32)
		}
		return netip.PrefixFrom(a, int(e.Source))
	}
	return netip.Prefix{}
}

// AppendData appends the option's data as an answer carries it: family,
// source prefix and address as the query sent them, with scope as the
// SCOPE PREFIX-LENGTH (RFC 7871 7.2.1).
func (e ECS) AppendData(b []byte, scope uint8) []byte {
	b = append(b, byte(e.Family>>8), byte(e.Family), e.Source, scope)
	return append(b, e.addr[:(int(e.Source)+7)/8]...)
}

// DataLen is the length of the data AppendData writes.
func (e ECS) DataLen() int { return 4 + (int(e.Source)+7)/8 }

// AppendECS appends e as an option to the OPT record starting at offset
// opt of b, which must be b's last record (as AppendOPT leaves it), and
// counts it in the record's RDLENGTH.
func AppendECS(b []byte, opt int, e ECS, scope uint8) []byte {
	n := e.DataLen()
	rdlen := binary.BigEndian.Uint16(b[opt+9:])
	binary.BigEndian.PutUint16(b[opt+9:], rdlen+4+uint16(n))
	b = append(b, 0, OptionECS, byte(n>>8), byte(n))
	return e.AppendData(b, scope)
}

// FindECS returns the ECS option of the query in b, walking its records
// without allocating. ok is false when b has none or cannot be walked (the
// pipeline's own parse then answers FORMERR); err is ErrECS for an option
// that is present but malformed.
func FindECS(b []byte) (e ECS, ok bool, err error) {
	h, err := ParseHeader(b)
	if err != nil || h.AR == 0 {
		return ECS{}, false, nil
	}
	off := HeaderLen
	for range h.QD {
		if off, err = SkipName(b, off); err != nil || off+4 > len(b) {
			return ECS{}, false, nil
		}
		off += 4
	}
	edns, _, err := ParseRecords(b, off, h.AN, h.NS, h.AR)
	switch {
	case err != nil:
		return ECS{}, false, nil
	case edns.ECSBad:
		return ECS{}, false, ErrECS
	}
	return edns.ECS, edns.ECS.Present, nil
}
