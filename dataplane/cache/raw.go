package cache

import (
	"encoding/binary"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/dataplane/wire"
)

// rawSections returns the end of the answer, authority and additional
// records of raw (an upstream's answer, already unpacked into the message
// Store was given) when those bytes can be kept as the entry's sections
// as they are, instead of packing the unpacked records again:
//
//   - one question at offset 12 that is name (lower case, as asked), qtype
//     and qclass, so the client's question (same length) takes its place;
//   - an, ns and extra records in the sections, and at most one OPT, the
//     last record (it is left out: the answer gets its own);
//   - every name, owners and the names in the data of the types below,
//     made of labels and pointers to earlier bytes at or after the
//     question (so before the OPT), so it reads the same after the
//     client's header and question, and in the client's case exactly
//     where the packed answer has it (rawName); a record of another type
//     (whose data could hold a compressed name) means no.
//
// ok false means pack as before.
func rawSections(raw []byte, name []byte, qtype, qclass uint16, an, ns, extra int) (end int, ok, exact bool) {
	if len(raw) < wire.HeaderLen || binary.BigEndian.Uint16(raw[4:]) != 1 ||
		int(binary.BigEndian.Uint16(raw[6:])) != an || int(binary.BigEndian.Uint16(raw[8:])) != ns {
		return 0, false, false
	}
	ar := int(binary.BigEndian.Uint16(raw[10:]))
	if ar != extra && ar != extra+1 {
		return 0, false, false
	}
	qend := wire.HeaderLen + len(name) + 4
	if qend > len(raw) || string(raw[wire.HeaderLen:qend-4]) != string(name) ||
		binary.BigEndian.Uint16(raw[qend-4:]) != qtype || binary.BigEndian.Uint16(raw[qend-2:]) != qclass {
		return 0, false, false
	}
	total := an + ns + ar
	if ar == extra+1 {
		// The OPT must be the last record: no name may be read from it
		// (the answer has its own), so names are checked against the
		// bytes before it.
		start := skipRecords(raw, qend, total-1)
		if start < 0 || start+11 > len(raw) || raw[start] != 0 || binary.BigEndian.Uint16(raw[start+1:]) != dns.TypeOPT ||
			skipRecords(raw, start, 1) != len(raw) {
			return 0, false, false
		}
		raw = raw[:start]
		total--
	}
	var qs question // on the stack: rawName and rawData keep no pointer
	q := &qs
	q.init(raw, qend-4)
	exact = q.plain
	off := qend
	for range total {
		n, ok, x := rawName(raw, off, q, true)
		exact = exact && x
		if !ok || n+10 > len(raw) {
			return 0, false, false
		}
		typ := binary.BigEndian.Uint16(raw[n:])
		rdlen := int(binary.BigEndian.Uint16(raw[n+8:]))
		rd := n + 10
		next := rd + rdlen
		if next > len(raw) {
			return 0, false, false
		}
		ok, x = rawData(raw, typ, rd, next, q)
		if !ok {
			return 0, false, false
		}
		exact = exact && x
		off = next
	}
	if off != len(raw) {
		return 0, false, false
	}
	return off, true, exact
}

// lastIsOPT reports whether the last of total records from off is an OPT
// record owned by the root.
func lastIsOPT(raw []byte, off, total int) bool {
	start := skipRecords(raw, off, total-1)
	return start >= 0 && start+3 <= len(raw) && raw[start] == 0 && binary.BigEndian.Uint16(raw[start+1:]) == dns.TypeOPT
}

// skipRecords returns the offset after n records from off, -1 when they
// do not fit.
func skipRecords(raw []byte, off, n int) int {
	for range n {
		for { // the owner, up to its end or pointer
			if off >= len(raw) {
				return -1
			}
			c := int(raw[off])
			if c&0xC0 == 0xC0 {
				off += 2
				break
			}
			if c&0xC0 != 0 {
				return -1
			}
			off += 1 + c
			if c == 0 {
				break
			}
		}
		if off+10 > len(raw) {
			return -1
		}
		off += 10 + int(binary.BigEndian.Uint16(raw[off+8:]))
	}
	if off > len(raw) {
		return -1
	}
	return off
}

// rawData checks the data raw[rd:next] of a record of type typ (see
// rawSections); exact as rawName's.
func rawData(raw []byte, typ uint16, rd, next int, q *question) (ok, exact bool) {
	names := 0  // names at the start of the data...
	skip := 0   // ...after this many bytes
	fixed := -1 // or an exact length, no names
	switch typ {
	case dns.TypeA:
		fixed = 4
	case dns.TypeAAAA:
		fixed = 16
	case dns.TypeTXT:
		return true, true // character-strings: no names; miekg checked them
	case dns.TypeCNAME, dns.TypeNS, dns.TypePTR:
		names = 1
	case dns.TypeMX:
		names, skip = 1, 2
	case dns.TypeSOA:
		names = 2
	default:
		return false, false
	}
	if fixed >= 0 {
		return next-rd == fixed, true
	}
	off := rd + skip
	exact = true
	for range names {
		n, ok, x := rawName(raw[:next], off, q, true)
		if !ok {
			return false, false
		}
		exact = exact && x
		off = n
	}
	if typ == dns.TypeSOA {
		off += 20
	}
	return off == next, exact
}

// question describes the question name of raw for rawName: the offsets
// where its labels start (a bit each, from offset 12), its end (after
// the root label) and its last label's start.
type question struct {
	starts [(wire.MaxNameLen + 63) / 64]uint64
	end    int
	tld    int // -1: the root
	// plain: only lower-case letters, digits, '-' and '_'. miekg/dns
	// compresses by the names' presentation form, and a byte written
	// escaped may be written otherwise than by the cache's question
	// (wire.AppendPresentation), which then matches no name.
	plain bool
	// labels holds the offsets of the labels read so far outside the
	// question (nl of them). A pointer outside the question must land on
	// one: a pointer into a record's fixed fields would read its TTL,
	// which the cache rewrites as the entry ages, and the name would
	// change under the client (FuzzLightMiss found it).
	labels [maxLabels]uint16
	nl     int
}

// maxLabels bounds the labels rawSections remembers; an answer with more
// is packed instead.
const maxLabels = 96

func (q *question) addLabel(off int) bool {
	if q.nl == maxLabels {
		return false
	}
	q.labels[q.nl] = uint16(off)
	q.nl++
	return true
}

func (q *question) isLabel(off int) bool {
	for _, l := range q.labels[:q.nl] {
		if int(l) == off {
			return true
		}
	}
	return false
}

func (q *question) init(raw []byte, end int) {
	*q = question{end: end, tld: -1, plain: true}
	for off := wire.HeaderLen; off < end-1; off += 1 + int(raw[off]) {
		i := off - wire.HeaderLen
		q.starts[i/64] |= 1 << (i % 64)
		q.tld = off
		for _, c := range raw[off+1 : off+1+int(raw[off])] {
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				q.plain = false
			}
		}
	}
}

func (q *question) isStart(off int) bool {
	i := off - wire.HeaderLen
	return i >= 0 && i < wire.MaxNameLen && q.starts[i/64]&(1<<(i%64)) != 0
}

// before returns the start of the question's label that ends at off, -1
// for none.
func (q *question) before(raw []byte, off int) int {
	for s := wire.HeaderLen; s < off; s += 1 + int(raw[s]) {
		if s+1+int(raw[s]) == off {
			return s
		}
	}
	return -1
}

func sameLabel(raw []byte, a, b int) bool {
	return string(raw[a:a+1+int(raw[a])]) == string(raw[b:b+1+int(raw[b])])
}

// rawName checks the name at off in raw, returning the offset after it:
// labels, then a zero or a pointer; every pointer (followed) goes to an
// earlier offset at or after the question (12), so a name read in the
// answer the client gets is made of the same bytes; at most 255 bytes in
// all.
//
// The client's question (its case) replaces the question's bytes, so the
// labels of a name read from the question take the client's case. Packing
// the unpacked records gives exactly those labels the client's case that
// end in a suffix of the question name byte for byte (miekg/dns
// compresses to the first occurrence, case-sensitively, and the question
// comes first): so a name must reach the question by a pointer to one of
// its labels exactly where its own labels start to be a suffix of the
// question name (the label before, read elsewhere, is not the question's
// label before; a name ending outside the question does not end in the
// question's last label). compress says whether the name is one packing
// compresses (owners and the data of CNAME, NS, PTR, MX, SOA); one it
// does not must not reach the question at all. exact reports whether the
// name keeps to that; ok only whether it reads the same bytes.
func rawName(raw []byte, off int, q *question, compress bool) (next int, ok, exact bool) {
	end := -1
	n := 0
	last := -1      // the last label read outside the question
	inQ := false    // reading the question's labels (reached by a pointer)
	jumped := false // reading labels reached by a pointer: already in q.labels
	for {
		if off >= len(raw) {
			return 0, false, false
		}
		if off < q.end && !inQ {
			// A pointer into the question: the rest is its suffix from off
			// when off starts one of its labels.
			inQ = true
			exact = compress && q.isStart(off)
			if exact && last >= 0 {
				if b := q.before(raw, off); b >= 0 && sameLabel(raw, last, b) {
					exact = false
				}
			}
		}
		c := int(raw[off])
		switch c & 0xC0 {
		case 0:
			if c == 0 {
				if end < 0 {
					end = off + 1
				}
				switch {
				case inQ:
				case compress:
					exact = last < 0 || q.tld < 0 || !sameLabel(raw, last, q.tld)
				default:
					exact = true // neither compressed nor in the question
				}
				return end, n+1 <= 255, exact
			}
			n += 1 + c
			if n > 255 || off+1+c > len(raw) {
				return 0, false, false
			}
			if !inQ {
				last = off
				if !jumped && !q.addLabel(off) {
					return 0, false, false
				}
			}
			off += 1 + c
		case 0xC0:
			if off+1 >= len(raw) {
				return 0, false, false
			}
			t := (c&0x3F)<<8 | int(raw[off+1])
			if end < 0 {
				end = off + 2
			}
			if t < wire.HeaderLen || t >= off || t >= q.end && !q.isLabel(t) {
				return 0, false, false
			}
			off, jumped = t, true
		default:
			return 0, false, false
		}
	}
}
