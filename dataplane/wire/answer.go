package wire

import "encoding/binary"

// Record types ScanAnswer reads the data of.
const (
	typeA     = 1
	typeNS    = 2
	typeCNAME = 5
	typeSOA   = 6
	typePTR   = 12
	typeMX    = 15
	typeTXT   = 16
	typeAAAA  = 28
)

// EDNS option codes ScanAnswer accepts in an answer's OPT record.
const (
	optionNSID = 3
	optionEDE  = 15
)

// Answer is what ScanAnswer read of an upstream's response.
type Answer struct {
	Rcode uint8 // no extended bits: ScanAnswer refuses those
	Flags uint16
	// Records of the answer, authority and additional sections, the OPT
	// record not counted.
	Counts [3]int
	// End is the offset after the last record before the OPT record (the
	// message's end without one).
	End int
}

// ScanAnswer walks a response of one question and reports whether it is
// plain: every record well formed and of a type whose data it checks (A,
// AAAA, CNAME, NS, PTR, MX, SOA, TXT), names of labels and backward
// compression pointers within 255 bytes, at most one OPT record, last, with
// a root owner, no extended RCODE and only options whose data cannot fail
// to parse, and nothing after the records. What ScanAnswer accepts,
// miekg/dns unpacks without error, so a caller may keep the bytes and
// leave the unpacking for later (the upstream's answer on a cache miss,
// which the cache keeps as it is); anything else goes to the full parser.
// It allocates nothing.
func ScanAnswer(b []byte) (Answer, bool) {
	var a Answer
	if len(b) < HeaderLen || binary.BigEndian.Uint16(b[4:]) != 1 {
		return a, false
	}
	a.Flags = binary.BigEndian.Uint16(b[2:])
	a.Rcode = uint8(a.Flags & 0xF)
	off, ok := scanName(b, HeaderLen)
	if !ok || off+4 > len(b) {
		return a, false
	}
	off += 4
	counts := [3]int{int(binary.BigEndian.Uint16(b[6:])), int(binary.BigEndian.Uint16(b[8:])), int(binary.BigEndian.Uint16(b[10:]))}
	opt := false
	for sec, n := range counts {
		for range n {
			if opt { // the OPT record must be the last one
				return a, false
			}
			start := off
			if off, ok = scanName(b, off); !ok || off+10 > len(b) {
				return a, false
			}
			typ := binary.BigEndian.Uint16(b[off:])
			rd := off + 10
			next := rd + int(binary.BigEndian.Uint16(b[off+8:]))
			if next > len(b) {
				return a, false
			}
			if typ == TypeOPT {
				// In the additional section, owned by the root, no
				// extended RCODE (b[off+4]).
				if sec != 2 || off != start+1 || b[start] != 0 || b[off+4] != 0 || !answerOptions(b[rd:next]) {
					return a, false
				}
				opt = true
				a.End = start
			} else {
				if !scanData(b, typ, rd, next) {
					return a, false
				}
				a.Counts[sec]++
			}
			off = next
		}
	}
	if off != len(b) {
		return a, false
	}
	if !opt {
		a.End = off
	}
	return a, true
}

// maxHops bounds the compression pointers followed in one name, well
// under miekg/dns's 126.
const maxHops = 32

// scanName checks the name at off and returns the offset after it: labels
// of at most 63 bytes, ended by a zero or by a pointer to an earlier offset
// (followed, so a loop is impossible), 255 bytes at most in all.
func scanName(b []byte, off int) (int, bool) {
	end := -1
	total, hops := 0, 0
	for limit := off; ; {
		if off >= len(b) {
			return 0, false
		}
		c := int(b[off])
		switch c & 0xC0 {
		case 0:
			total += c + 1
			if total > MaxNameLen {
				return 0, false
			}
			if c == 0 {
				if end < 0 {
					end = off + 1
				}
				return end, true
			}
			off += 1 + c
		case 0xC0:
			if off+2 > len(b) {
				return 0, false
			}
			ptr := int(binary.BigEndian.Uint16(b[off:]) & 0x3FFF)
			if end < 0 {
				end = off + 2
			}
			// Backward from where this pass through the name started:
			// each hop goes strictly further back, so the walk ends.
			if hops++; ptr >= limit || hops > maxHops {
				return 0, false
			}
			off, limit = ptr, ptr
		default:
			return 0, false
		}
	}
}

// scanData checks the data b[rd:next] of a record of type typ.
func scanData(b []byte, typ uint16, rd, next int) bool {
	var ok bool
	off := rd
	switch typ {
	case typeA:
		return next-rd == 4
	case typeAAAA:
		return next-rd == 16
	case typeTXT:
		// One or more character-strings filling the data exactly.
		if rd == next {
			return false
		}
		for off < next {
			off += 1 + int(b[off])
		}
		return off == next
	case typeCNAME, typeNS, typePTR:
		off, ok = scanName(b[:next], off)
		return ok && off == next
	case typeMX:
		off, ok = scanName(b[:next], off+2)
		return ok && off == next
	case typeSOA:
		if off, ok = scanName(b[:next], off); !ok {
			return false
		}
		if off, ok = scanName(b[:next], off); !ok {
			return false
		}
		return off+20 == next
	}
	return false
}

// answerOptions accepts the options of an answer's OPT record when each fits
// and is one whose data miekg/dns parses without a possible error: NSID,
// a valid ECS, cookie, padding, extended error.
func answerOptions(d []byte) bool {
	for len(d) > 0 {
		if len(d) < 4 {
			return false
		}
		code, n := binary.BigEndian.Uint16(d), int(binary.BigEndian.Uint16(d[2:]))
		if 4+n > len(d) {
			return false
		}
		switch code {
		case optionNSID, optionCookie, OptionPadding:
		case OptionECS:
			if _, err := ParseECS(d[4 : 4+n]); err != nil {
				return false
			}
		case optionEDE:
			if n < 2 {
				return false
			}
		default:
			return false
		}
		d = d[4+n:]
	}
	return true
}

// TruncateAnswer cuts the answer in b to its header and question, with TC
// set and no records, in place, and returns its new length: the answer a
// client gets when the full one cannot leave (a datagram larger than the
// interface's MTU with don't-fragment set), which sends it to TCP as RFC
// 9715 asks. It returns len(b), and leaves b alone, when nothing follows
// the question or b is not an answer it can parse (the caller then drops
// the datagram).
func TruncateAnswer(b []byte) int {
	if len(b) < 12 || b[2]&0x80 == 0 {
		return len(b)
	}
	end := 12
	switch binary.BigEndian.Uint16(b[4:6]) {
	case 0:
	case 1:
		// ParseQuestion refuses a compressed name, which could point
		// past the cut (no server sends one there).
		var lower [MaxNameLen]byte
		q, err := ParseQuestion(b, 12, &lower)
		if err != nil {
			return len(b)
		}
		end = q.End
	default:
		return len(b)
	}
	if end >= len(b) {
		return len(b) // nothing after the question
	}
	b[2] |= 0x02 // TC
	clear(b[6:12])
	return end
}
