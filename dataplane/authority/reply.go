package authority

import (
	"encoding/binary"
	"errors"
	"strings"

	"github.com/miekg/dns"
)

// Reply builds the slow-path response to req. The question name is
// lower-cased, as the table's names are, so that compression pointers into
// the question match the pre-encoded Wire; PackReply restores the client's
// spelling after packing. Append an OPT record to Extra before packing if the
// query had one.
func Reply(req *dns.Msg, a *Answer) *dns.Msg {
	m := new(dns.Msg)
	m.SetReply(req)
	if len(m.Question) > 0 {
		m.Question[0].Name = strings.ToLower(m.Question[0].Name)
	}
	m.Authoritative = a.Authoritative
	m.Rcode = a.Rcode
	m.Answer, m.Ns, m.Extra = a.Answer, a.Ns, a.Extra
	m.Compress = true
	return m
}

// PackReply packs Reply(req, a) (plus opt when not nil) and echoes the
// question exactly as the client spelled it (0x20 case): names in the answer
// that compress to the question show the client's case, as with
// header + question + Wire on the fast path.
func PackReply(req *dns.Msg, a *Answer, opt *dns.OPT) ([]byte, error) {
	m := Reply(req, a)
	if opt != nil {
		m.Extra = append(m.Extra[:len(m.Extra):len(m.Extra)], opt)
	}
	b, err := m.Pack()
	if err != nil {
		return nil, err
	}
	if len(req.Question) > 0 {
		var q [256]byte
		n, err := dns.PackDomainName(req.Question[0].Name, q[:], 0, nil, false)
		if err != nil {
			return nil, err
		}
		if len(b) < 12+n || !strings.EqualFold(string(b[12:12+n]), string(q[:n])) {
			return nil, errors.New("authority: question not at offset 12")
		}
		copy(b[12:], q[:n])
	}
	return b, nil
}

// AppendWire appends the fast-path reply to dst: a header derived from the
// query's 12-byte header (ID, opcode, RD and CD copied as miekg's SetReply
// does; QR, AA and RCODE set), the client's question bytes as sent (name,
// type, class) and a.Wire. The caller may then append an OPT record and
// increment ARCOUNT. a.Wire must not be nil.
func AppendWire(dst []byte, queryHeader []byte, question []byte, a *Answer) []byte {
	var h [12]byte
	copy(h[0:2], queryHeader[0:2])
	opcode := queryHeader[2] & 0x78
	h[2] = 0x80 | opcode
	if opcode == 0 {
		h[2] |= queryHeader[2] & 0x01 // RD
		h[3] = queryHeader[3] & 0x10  // CD
	}
	if a.Authoritative {
		h[2] |= 0x04
	}
	h[3] |= byte(a.Rcode & 0x0f)
	binary.BigEndian.PutUint16(h[4:], 1)
	binary.BigEndian.PutUint16(h[6:], a.Counts[0])
	binary.BigEndian.PutUint16(h[8:], a.Counts[1])
	binary.BigEndian.PutUint16(h[10:], a.Counts[2])
	dst = append(dst, h[:]...)
	dst = append(dst, question...)
	return append(dst, a.Wire...)
}
