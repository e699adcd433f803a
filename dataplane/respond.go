package dataplane

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"time"
	"unsafe"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/dataplane/cache"
	"github.com/svcdns/svc/dataplane/wire"
)

var (
	netipZero4 = netip.IPv4Unspecified()
	netipZero6 = netip.IPv6Unspecified()
)

// minUDPSize is the RFC 1035 limit without EDNS and the floor with it.
const minUDPSize = 512

// newResponse starts a slow-path answer; header bits are rewritten by
// encodeSlow so both paths set them in one place (flags).
func (q *Query) newResponse(rcode int, aa bool) *dns.Msg {
	var nb [4 * wire.MaxNameLen]byte
	return q.newResponseName(rcode, aa, string(wire.AppendPresentation(nb[:0], q.Lower)))
}

// newResponseName is newResponse with q.Lower in presentation form
// already at hand.
func (q *Query) newResponseName(rcode int, aa bool, name string) *dns.Msg {
	m := &dns.Msg{Compress: true}
	m.Rcode, m.Authoritative = rcode, aa
	q.aa = aa
	m.Question = []dns.Question{{Name: name, Qtype: q.Type, Qclass: q.Class}}
	return m
}

// flags computes the response header flags for both paths.
func (s *Server) flags(q *Query, rcode int, tc bool) uint16 {
	f := uint16(wire.FlagQR) | q.Flags&(0xF<<11|wire.FlagRD|wire.FlagCD)
	if q.aa {
		f |= wire.FlagAA
	}
	if tc {
		f |= wire.FlagTC
	}
	if q.ad {
		f |= wire.FlagAD
	}
	if q.snap != nil && q.snap.in.Forwarder != nil {
		f |= wire.FlagRA
	}
	return f | uint16(rcode&0xF)
}

// sizeLimit is the largest answer the client can take: 512 without EDNS,
// else the client's size capped by MaxUDPSize (1232 by default, the DNS
// flag day 2020 value that avoids IP fragmentation), never below 512.
func (s *Server) sizeLimit(q *Query) int {
	if q.Transport != TransportUDP {
		return 65535
	}
	if !q.EDNS.Present {
		return minUDPSize
	}
	return max(minUDPSize, min(int(q.EDNS.UDPSize), s.cfg.MaxUDPSize))
}

// encode writes the answer into q.out; nil means send nothing.
func (s *Server) encode(q *Query) []byte {
	if q.Status == StatusDropped {
		return nil
	}
	out := q.out[:0]
	if q.resp != nil {
		var err error
		out, err = s.encodeSlow(q, out)
		if err != nil {
			s.log.Warn("pack answer", "err", err, "qname", q.resp.Question[0].Name)
			q.Status, q.Rcode, q.resp = StatusFailed, dns.RcodeServerFailure, nil
			q.fast = fastEmpty
			out = s.encodeFast(q, out[:0], false)
		}
	} else {
		out = s.encodeFast(q, out, false)
	}
	if len(out) > s.sizeLimit(q) {
		out = s.encodeFast(q, out[:0], true)
	}
	if q.EDNS.Present && (q.keepalive || q.padding) {
		var o wire.AnswerOptions
		// RFC 7828 3.3.2: over TCP the answer tells the connection's idle
		// timeout; over UDP (and HTTP and QUIC, which manage their own
		// connections) the option is ignored.
		switch {
		case !q.keepalive:
		case q.Transport == TransportTCP:
			o.Keepalive, o.KeepaliveUnits = true, wire.KeepaliveUnits(s.cfg.TCPIdleTimeout)
		case q.Transport == TransportDoT:
			o.Keepalive, o.KeepaliveUnits = true, wire.KeepaliveUnits(s.cfg.DoTIdleTimeout)
		}
		if q.padding && q.Transport.Encrypted() {
			// RFC 8467 4.1: a padded query over an encrypted transport gets
			// an answer padded to a multiple of 468 octets, so its size
			// tells little about the name.
			o.PadBlock = wire.PadBlock
		}
		if o.Keepalive || o.PadBlock > 0 {
			out = wire.AddOptions(out, o, s.sizeLimit(q))
		}
	}
	if q.signed {
		out = s.signAnswer(q.in, out)
	}
	q.out = out
	return out
}

// encodeFast writes header, echoed question, pre-encoded sections and OPT.
// truncated writes the minimal TC=1 answer instead of the sections.
func (s *Server) encodeFast(q *Query, out []byte, truncated bool) []byte {
	rcode := q.Rcode
	if q.resp != nil {
		rcode = q.resp.Rcode
	}
	var h wire.Header
	h.ID = q.ID
	h.Flags = s.flags(q, rcode, truncated)
	out = append(out, make([]byte, wire.HeaderLen)...)
	if q.Name != nil {
		h.QD = 1
		out = append(out, q.Name...)
		out = binary.BigEndian.AppendUint16(out, q.Type)
		out = binary.BigEndian.AppendUint16(out, q.Class)
	}
	if !truncated {
		switch q.fast {
		case fastAuth:
			out = append(out, q.authWire...)
			h.AN, h.NS, h.AR = q.counts[0], q.counts[1], q.counts[2]
		case fastCache:
			out = q.entry.AppendSections(out, q.cacheTime(), q.cache, q.entry == q.stale)
			h.AN, h.NS, h.AR = q.entry.Counts()
		}
	}
	if q.EDNS.Present {
		opt := len(out)
		out = wire.AppendOPT(out, uint16(s.cfg.MaxUDPSize), uint8(rcode>>4), q.EDNS.DO)
		if q.fastEDE && !truncated {
			var pre, rule, post string
			var name [256]byte
			if q.edeRule {
				pre, rule, post = q.RulePre, q.Rule, q.RulePost
				if q.ruleIsName {
					b, _ := wire.Dotted(&name, q.Lower)
					rule = unsafe.String(unsafe.SliceData(b), len(b)) // lives as long as name
				}
			}
			out = appendEDE(out, opt, q.edeCode, q.edeText, pre, rule, post)
		}
		if q.EDNS.ECS.Present {
			out = wire.AppendECS(out, opt, q.EDNS.ECS, q.ecsScope())
		}
		h.AR++
	}
	wire.PutHeader(out, h)
	return out
}

// blockRRLen is the longest record of a fast block answer: an AAAA whose
// owner is a pointer to the question.
const blockRRLen = 2 + 2 + 2 + 4 + 2 + 16

// appendEDE appends an Extended DNS Error option (RFC 8914) to the OPT
// record starting at opt, as miekg/dns packs EDNS0_EDE; its text is text,
// then ruleSep and pre, rule and post when rule is not empty
// (Decision.ExtraText).
func appendEDE(b []byte, opt int, code uint16, text, pre, rule, post string) []byte {
	n := 2 + len(text)
	if rule != "" {
		n += len(ruleSep) + len(pre) + len(rule) + len(post)
	}
	rdlen := binary.BigEndian.Uint16(b[opt+9:])
	binary.BigEndian.PutUint16(b[opt+9:], rdlen+4+uint16(n))
	b = append(b, 0, byte(dns.EDNS0EDE), byte(n>>8), byte(n))
	b = binary.BigEndian.AppendUint16(b, code)
	b = append(b, text...)
	if rule != "" {
		b = append(append(append(append(b, ruleSep...), pre...), rule...), post...)
	}
	return b
}

// encodeSlow packs q.resp with miekg/dns, then sets ID, flags and the
// question's original case exactly as encodeFast does.
func (s *Server) encodeSlow(q *Query, out []byte) ([]byte, error) {
	m := q.resp
	if q.EDNS.Present {
		m.SetEdns0(uint16(s.cfg.MaxUDPSize), q.EDNS.DO)
		opt := m.Extra[len(m.Extra)-1].(*dns.OPT)
		if q.ede != nil {
			opt.Option = append(opt.Option, q.ede)
		}
		if e := q.EDNS.ECS; e.Present {
			// RFC 7871 7.2.2: a query's ECS option is answered with one.
			// Encoded by the same code as the fast path's, so both are
			// byte for byte equal.
			opt.Option = append(opt.Option, &dns.EDNS0_LOCAL{Code: wire.OptionECS, Data: e.AppendData(nil, q.ecsScope())})
		}
	}
	b, err := m.PackBuffer(out[:cap(out)])
	if err != nil {
		return out, fmt.Errorf("pack: %w", err)
	}
	if len(b) < wire.HeaderLen+len(q.Name) {
		return out, fmt.Errorf("pack: short message")
	}
	binary.BigEndian.PutUint16(b[0:], q.ID)
	binary.BigEndian.PutUint16(b[2:], s.flags(q, m.Rcode, false))
	copy(b[wire.HeaderLen:], q.Name)
	return b, nil
}

// cacheTime is the time the cache stage looked the query up (a cache
// entry's remaining TTLs are counted to it), or now.
func (q *Query) cacheTime() time.Time {
	if !q.cacheNow.IsZero() {
		return q.cacheNow
	}
	return q.cache.Now()
}

// entryMsg unpacks a cache entry for the slow path.
func (q *Query) entryMsg(e *cache.Entry) *dns.Msg { return q.entryMsgFor(q.Lower, e) }

// entryMsgFor unpacks a cache entry held for the name lower.
func (q *Query) entryMsgFor(lower []byte, e *cache.Entry) *dns.Msg {
	b := make([]byte, wire.HeaderLen, wire.HeaderLen+len(lower)+4+e.SectionsLen())
	b = append(b, lower...)
	b = binary.BigEndian.AppendUint16(b, q.Type)
	b = binary.BigEndian.AppendUint16(b, q.Class)
	b = e.AppendSections(b, q.cacheTime(), q.cache, e == q.stale)
	h := wire.Header{QD: 1}
	h.AN, h.NS, h.AR = e.Counts()
	h.Flags = uint16(e.Rcode() & 0xF)
	wire.PutHeader(b, h)
	m := new(dns.Msg)
	if err := m.Unpack(b); err != nil {
		return q.newResponse(dns.RcodeServerFailure, false)
	}
	m.Compress = true
	return m
}

func packName(name string) ([]byte, error) {
	b := make([]byte, 256)
	n, err := dns.PackDomainName(dns.Fqdn(name), b, 0, nil, false)
	if err != nil {
		return nil, fmt.Errorf("pack question name: %w", err)
	}
	return b[:n], nil
}

func lowerASCII(b []byte) {
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
}
