// Package wire reads and writes the few parts of DNS messages the fast path
// needs (header, question, OPT, resource-record TTL positions) straight from
// wire bytes, without allocating.
package wire

import (
	"encoding/binary"
	"errors"
	"slices"
	"time"
)

// Header flag bits (RFC 1035 4.1.1, RFC 4035 for AD and CD).
const (
	FlagQR = 1 << 15
	FlagAA = 1 << 10
	FlagTC = 1 << 9
	FlagRD = 1 << 8
	FlagRA = 1 << 7
	FlagAD = 1 << 5
	FlagCD = 1 << 4
)

// HeaderLen is the fixed size of a DNS header.
const HeaderLen = 12

// MaxNameLen is the longest wire-format name (RFC 1035 3.1).
const MaxNameLen = 255

// TypeOPT is the EDNS(0) pseudo record type.
const TypeOPT = 41

// Errors returned by the parsers; they are values so checking them allocates nothing.
var (
	ErrShort       = errors.New("wire: message too short")
	ErrLabel       = errors.New("wire: bad label")
	ErrNameTooLong = errors.New("wire: name longer than 255 bytes")
	ErrPointer     = errors.New("wire: bad compression pointer")
	ErrMultipleOPT = errors.New("wire: more than one OPT record")
	ErrOPT         = errors.New("wire: malformed OPT record")
)

// Header is the fixed 12-byte message header.
type Header struct {
	ID, Flags      uint16
	QD, AN, NS, AR uint16
}

// Opcode returns the 4-bit opcode.
func (h Header) Opcode() uint8 { return uint8(h.Flags>>11) & 0xF }

// Rcode returns the low 4 bits of the response code.
func (h Header) Rcode() uint8 { return uint8(h.Flags & 0xF) }

// ParseHeader reads the header at the start of b.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderLen {
		return Header{}, ErrShort
	}
	return Header{
		ID:    binary.BigEndian.Uint16(b[0:]),
		Flags: binary.BigEndian.Uint16(b[2:]),
		QD:    binary.BigEndian.Uint16(b[4:]),
		AN:    binary.BigEndian.Uint16(b[6:]),
		NS:    binary.BigEndian.Uint16(b[8:]),
		AR:    binary.BigEndian.Uint16(b[10:]),
	}, nil
}

// PutHeader writes h into the first 12 bytes of b.
func PutHeader(b []byte, h Header) {
	_ = b[11]
	binary.BigEndian.PutUint16(b[0:], h.ID)
	binary.BigEndian.PutUint16(b[2:], h.Flags)
	binary.BigEndian.PutUint16(b[4:], h.QD)
	binary.BigEndian.PutUint16(b[6:], h.AN)
	binary.BigEndian.PutUint16(b[8:], h.NS)
	binary.BigEndian.PutUint16(b[10:], h.AR)
}

// Question is a parsed question entry. Name aliases the message buffer;
// Lower holds the lower-cased copy written into the caller's array.
type Question struct {
	Name  []byte // wire bytes as received (case preserved, uncompressed)
	Lower []byte // lower-cased wire bytes, used for lookups
	Type  uint16
	Class uint16
	End   int // offset just after the question
}

// ParseQuestion reads an uncompressed question at off, lower-casing the
// name into lower (which must hold MaxNameLen bytes). A compressed question
// name returns ErrPointer: legal but so rare that callers use a full parser.
func ParseQuestion(b []byte, off int, lower *[MaxNameLen]byte) (Question, error) {
	start := off
	n := 0
	for {
		if off >= len(b) {
			return Question{}, ErrShort
		}
		l := int(b[off])
		if l == 0 {
			lower[n] = 0
			n++
			off++
			break
		}
		if l&0xC0 != 0 {
			if l&0xC0 == 0xC0 {
				return Question{}, ErrPointer
			}
			return Question{}, ErrLabel
		}
		if n+1+l+1 > MaxNameLen {
			return Question{}, ErrNameTooLong
		}
		if off+1+l > len(b) {
			return Question{}, ErrShort
		}
		lower[n] = byte(l)
		n++
		for _, c := range b[off+1 : off+1+l] {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			lower[n] = c
			n++
		}
		off += 1 + l
	}
	if off+4 > len(b) {
		return Question{}, ErrShort
	}
	return Question{
		Name:  b[start:off],
		Lower: lower[:n],
		Type:  binary.BigEndian.Uint16(b[off:]),
		Class: binary.BigEndian.Uint16(b[off+2:]),
		End:   off + 4,
	}, nil
}

// SkipName returns the offset after the (possibly compressed) name at off.
func SkipName(b []byte, off int) (int, error) {
	total := 0
	for {
		if off >= len(b) {
			return 0, ErrShort
		}
		l := int(b[off])
		switch {
		case l == 0:
			return off + 1, nil
		case l&0xC0 == 0xC0:
			if off+2 > len(b) {
				return 0, ErrShort
			}
			// A pointer ends the name in this position.
			return off + 2, nil
		case l&0xC0 != 0:
			return 0, ErrLabel
		}
		total += l + 1
		if total > MaxNameLen {
			return 0, ErrNameTooLong
		}
		off += 1 + l
	}
}

// EDNS describes the OPT record of a request (RFC 6891).
type EDNS struct {
	Present    bool
	UDPSize    uint16
	ExtRcode   uint8
	Version    uint8
	DO         bool
	HasOptions bool // an option the fast path leaves to the full parser
	Padding    bool // a Padding option (RFC 7830)
	// An edns-tcp-keepalive option (RFC 7828): without data, as clients
	// send it (Keepalive), or with a TIMEOUT, which only servers send
	// (KeepaliveData).
	Keepalive, KeepaliveData bool
	// ECS is the EDNS Client Subnet option (RFC 7871); ECSBad marks one
	// that is malformed or sent twice, which is answered with FORMERR.
	ECS    ECS
	ECSBad bool
}

// optionCookie is the EDNS(0) Cookie option (RFC 7873).
const optionCookie = 10

// scanOptions looks at the options of an OPT record's data. The fast path
// takes a client cookie (this server sets no server cookies, so it answers
// as without one), padding (answered in kind on encrypted transports),
// edns-tcp-keepalive (answered with the idle timeout over TCP and DoT) and
// EDNS Client Subnet (echoed in the answer; cluster DNS forwarders add it
// to every query) as they are; any other option, or one of the first three
// malformed, sets HasOptions and sends the query to the full parser.
func scanOptions(rdata []byte, e *EDNS) {
	for len(rdata) > 0 {
		if len(rdata) < 4 {
			e.HasOptions = true
			return
		}
		code, n := binary.BigEndian.Uint16(rdata), int(binary.BigEndian.Uint16(rdata[2:]))
		if 4+n > len(rdata) {
			e.HasOptions = true
			return
		}
		switch {
		case code == OptionPadding:
			e.Padding = true
		case code == optionCookie && (n == 8 || n >= 16 && n <= 40):
		case code == OptionTCPKeepalive && n == 0:
			e.Keepalive = true
		case code == OptionTCPKeepalive:
			e.KeepaliveData = true
		case code == OptionECS:
			ecs, err := ParseECS(rdata[4 : 4+n])
			if err != nil || e.ECS.Present || e.ECSBad {
				e.ECSBad, ecs = true, ECS{}
			}
			e.ECS = ecs
		default:
			e.HasOptions = true
		}
		rdata = rdata[4+n:]
	}
}

// ParseRecords walks an, ns and ar records starting at off and returns the
// EDNS data of the one OPT record, if any. It rejects more than one OPT
// and OPT with a non-root owner (RFC 6891 6.1.1).
func ParseRecords(b []byte, off int, an, ns, ar uint16) (EDNS, int, error) {
	var e EDNS
	end, err := ParseRecordsInto(b, off, an, ns, ar, &e)
	return e, end, err
}

// ParseRecordsInto is ParseRecords writing the EDNS fields into *e, which
// it clears first; on an error *e holds what was read before it. Returned
// by value, the 40-byte EDNS written byte by byte was then copied in
// 16-byte loads that stalled on those stores, on every query.
func ParseRecordsInto(b []byte, off int, an, ns, ar uint16, e *EDNS) (int, error) {
	*e = EDNS{}
	total := int(an) + int(ns) + int(ar)
	for i := 0; i < total; i++ {
		nameStart := off
		fixed, next, err := skipRecord(b, off)
		if err != nil {
			return 0, err
		}
		if binary.BigEndian.Uint16(b[fixed:]) == TypeOPT {
			if i < int(an)+int(ns) || fixed-nameStart != 1 {
				return 0, ErrOPT
			}
			if e.Present {
				return 0, ErrMultipleOPT
			}
			e.Present = true
			e.UDPSize = binary.BigEndian.Uint16(b[fixed+2:])
			e.ExtRcode = b[fixed+4]
			e.Version = b[fixed+5]
			e.DO = b[fixed+6]&0x80 != 0
			scanOptions(b[fixed+10:next], e)
		}
		off = next
	}
	return off, nil
}

// skipRecord returns the offset of the fixed part (type, class, TTL,
// RDLENGTH) of the resource record at off and the offset after the record,
// both within b.
func skipRecord(b []byte, off int) (fixed, next int, err error) {
	if fixed, err = SkipName(b, off); err != nil {
		return 0, 0, err
	}
	if fixed+10 > len(b) {
		return 0, 0, ErrShort
	}
	next = fixed + 10 + int(binary.BigEndian.Uint16(b[fixed+8:]))
	if next > len(b) {
		return 0, 0, ErrShort
	}
	return fixed, next, nil
}

// OPTLen is the size of the OPT record AppendOPT writes.
const OPTLen = 11

// AppendOPT appends an OPT record without options.
func AppendOPT(b []byte, udpSize uint16, extRcode uint8, do bool) []byte {
	var flags byte
	if do {
		flags = 0x80
	}
	return append(b, 0, 0, TypeOPT, byte(udpSize>>8), byte(udpSize), extRcode, 0, flags, 0, 0, 0)
}

// TTLOffsets appends to dst the offset of the TTL field of each of count
// records starting at off, and returns the offset after them.
func TTLOffsets(b []byte, off, count int, dst []uint16) ([]uint16, int, error) {
	for i := 0; i < count; i++ {
		fixed, next, err := skipRecord(b, off)
		if err != nil {
			return dst, 0, err
		}
		if fixed+4 > 0xFFFF {
			return dst, 0, ErrShort
		}
		dst = append(dst, uint16(fixed+4))
		off = next
	}
	return dst, off, nil
}

// EqualFoldName reports whether two wire names are equal ignoring ASCII case.
func EqualFoldName(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// AppendPresentation appends the presentation form of an uncompressed,
// well-formed wire name ("www.example.com."), escaping as RFC 1035 5.1.
func AppendPresentation(dst, name []byte) []byte {
	if len(name) <= 1 {
		return append(dst, '.')
	}
	for off := 0; off < len(name) && name[off] != 0; {
		l := int(name[off])
		off++
		if off+l > len(name) {
			break
		}
		label := name[off : off+l]
		// Most labels need no escape: they are appended whole.
		for len(label) > 0 {
			i := 0
			for i < len(label) && presentationEscape[label[i]] == 0 {
				i++
			}
			dst = append(dst, label[:i]...)
			if i == len(label) {
				break
			}
			switch c := label[i]; presentationEscape[c] {
			case escapeChar:
				dst = append(dst, '\\', c)
			default:
				dst = append(dst, '\\', '0'+c/100, '0'+(c/10)%10, '0'+c%10)
			}
			label = label[i+1:]
		}
		dst = append(dst, '.')
		off += l
	}
	return dst
}

// Dotted writes a well-formed wire name's labels into buf joined by dots,
// without escapes or the final dot ("www.example.com"), as block lists
// match names, stopping before a label that does not fit. plain reports
// that the whole name was written, no byte needed an escape and none is
// upper case: the text is then
// also AppendPresentation's without its final dot, lower-cased, which is
// how a list stores a rule's name and the query log a domain.
func Dotted(buf *[256]byte, name []byte) (dotted []byte, plain bool) {
	// One pass per label that copies and checks each byte together, the
	// check a table lookup OR-ed into bad instead of a branch per byte: a
	// block decision runs this once per query (issue #27 item 2; 35% less
	// time than a check loop, then copy, per label).
	var bad byte
	n := 0
	for off := 0; off < len(name); {
		l := int(name[off])
		if l == 0 {
			break
		}
		if off+1+l > len(name) || n+l+1 > len(buf) {
			return buf[:n], false // cut short: not the whole name
		}
		if n > 0 {
			buf[n] = '.'
			n++
		}
		label, dst := name[off+1:off+1+l], buf[n:n+l]
		for i, c := range label {
			bad |= notPlain[c]
			dst[i] = c
		}
		n += l
		off += l + 1
	}
	return buf[:n], bad == 0
}

// notPlain is 1 for a byte that keeps Dotted's text from being the
// presentation form: one that needs an escape, or upper case.
var notPlain = func() (t [256]byte) {
	for c := range 256 {
		if presentationEscape[c] != 0 || c >= 'A' && c <= 'Z' {
			t[c] = 1
		}
	}
	return t
}()

// How AppendPresentation writes a byte of a label: as itself (0), after a
// backslash (escapeChar) or as a backslash and three decimal digits
// (escapeDecimal).
const (
	escapeChar    = 1
	escapeDecimal = 2
)

var presentationEscape = func() (t [256]byte) {
	for c := range 256 {
		switch {
		case c == '.' || c == '\\' || c == '"' || c == '(' || c == ')' || c == ';' || c == '@' || c == '$':
			t[c] = escapeChar
		case c < '!' || c > '~':
			t[c] = escapeDecimal
		}
	}
	return t
}()

// IsPresentation reports whether s is name's presentation form
// (AppendPresentation) without its final dot, as the query log writes a
// domain. It may report false for a name with bytes that need escapes
// (never true for one that is not): a hint, compared on bytes still in
// the CPU's caches, that spares the log reading s again.
func IsPresentation(name []byte, s string) bool {
	if len(name) <= 1 {
		return false
	}
	i := 0
	for off := 0; off < len(name) && name[off] != 0; {
		l := int(name[off])
		off++
		if off+l > len(name) {
			return false
		}
		if off > 1 {
			if i >= len(s) || s[i] != '.' {
				return false
			}
			i++
		}
		if i+l > len(s) {
			return false
		}
		for _, c := range name[off : off+l] {
			if c <= ' ' || c > '~' || c == '.' || c == '\\' || c == '"' || c == '(' || c == ')' || c == ';' || c == '@' || c == '$' || c != s[i] {
				return false
			}
			i++
		}
		off += l
	}
	return i == len(s)
}

// OptionPadding is the EDNS(0) Padding option (RFC 7830).
const OptionPadding = 12

// PadBlock is the block length answers over encrypted transports are
// padded to when the query was padded (RFC 8467 4.1: 468 octets).
const PadBlock = 468

// AnswerOptions are the options the server adds to an answer's OPT record.
type AnswerOptions struct {
	// Keepalive adds edns-tcp-keepalive with TIMEOUT KeepaliveUnits
	// (RFC 7828 3.3.2: the server's idle timeout on this connection).
	Keepalive      bool
	KeepaliveUnits uint16
	// PadBlock pads the message with a Padding option to a multiple of
	// PadBlock octets (0: no padding); the padding is zeros (RFC 7830 3).
	PadBlock int
}

// AddOptions appends o's options to the OPT record of message b, walking
// the message once: the keepalive first, then the padding, which counts
// it in. Each is added only when the OPT record is the message's last
// record, does not carry that option yet, and the message still fits in
// max bytes; otherwise, and for anything it cannot walk, b is left as it
// is.
func AddOptions(b []byte, o AnswerOptions, max int) []byte {
	opt, ok := lastOPT(b)
	if !ok {
		return b
	}
	var e EDNS
	scanOptions(b[opt+10:], &e)
	rdlen := int(binary.BigEndian.Uint16(b[opt+8:]))
	if o.Keepalive && !e.Keepalive && !e.KeepaliveData && len(b)+6 <= max && rdlen+6 <= 0xFFFF {
		rdlen += 6
		binary.BigEndian.PutUint16(b[opt+8:], uint16(rdlen))
		b = append(b, 0, OptionTCPKeepalive, 0, 2, byte(o.KeepaliveUnits>>8), byte(o.KeepaliveUnits))
	}
	if o.PadBlock <= 0 || e.Padding {
		return b
	}
	padded := (len(b) + 4 + o.PadBlock - 1) / o.PadBlock * o.PadBlock
	if rdlen += padded - len(b); padded > max || rdlen > 0xFFFF {
		return b
	}
	n := padded - len(b) - 4
	binary.BigEndian.PutUint16(b[opt+8:], uint16(rdlen))
	b = append(b, 0, OptionPadding, byte(n>>8), byte(n))
	start := len(b)
	b = slices.Grow(b, n)[:start+n]
	clear(b[start:]) // the grown part may hold an earlier message's bytes
	return b
}

// lastOPT finds the fixed part of message b's OPT record when it is the
// message's last record and b ends with it (where options can be
// appended); false for anything else or anything it cannot walk.
func lastOPT(b []byte) (int, bool) {
	h, err := ParseHeader(b)
	if err != nil || h.AR == 0 {
		return 0, false
	}
	off := HeaderLen
	for range h.QD {
		if off, err = SkipName(b, off); err != nil || off+4 > len(b) {
			return 0, false
		}
		off += 4
	}
	total := int(h.AN) + int(h.NS) + int(h.AR)
	opt := -1
	for i := 0; i < total; i++ {
		fixed, next, err := skipRecord(b, off)
		if err != nil {
			return 0, false
		}
		if binary.BigEndian.Uint16(b[fixed:]) == TypeOPT && i == total-1 {
			opt = fixed
		}
		off = next
	}
	return opt, opt >= 0 && off == len(b)
}

// OptionTCPKeepalive is the edns-tcp-keepalive option (RFC 7828).
const OptionTCPKeepalive = 11

// KeepaliveUnits is the option's TIMEOUT for an idle timeout: units of
// 100 milliseconds, at most 0xFFFF.
func KeepaliveUnits(idle time.Duration) uint16 {
	return uint16(min(idle/(100*time.Millisecond), 0xFFFF))
}
