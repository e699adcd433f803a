package authority

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/miekg/dns"
)

// recordType resolves a type mnemonic or TYPEnnn (RFC 3597).
func recordType(s string) (uint16, error) {
	switch s {
	case "A":
		return dns.TypeA, nil
	case "AAAA":
		return dns.TypeAAAA, nil
	case "CNAME":
		return dns.TypeCNAME, nil
	case "TXT":
		return dns.TypeTXT, nil
	}
	u := strings.ToUpper(s)
	if t, ok := dns.StringToType[u]; ok {
		return t, nil
	}
	if rest, ok := strings.CutPrefix(u, "TYPE"); ok {
		n, err := strconv.ParseUint(rest, 10, 16)
		if err == nil && n > 0 {
			return uint16(n), nil
		}
	}
	return 0, fmt.Errorf("unknown record type %q", s)
}

// unservable types cannot be held in a zone's record sets.
func unservable(t uint16) string {
	switch t {
	case dns.TypeSOA:
		return "SOA comes from the zone's spec.soa"
	case dns.TypeOPT, dns.TypeTSIG, dns.TypeTKEY, dns.TypeAXFR, dns.TypeIXFR,
		dns.TypeANY, dns.TypeMAILA, dns.TypeMAILB, dns.TypeNone, dns.TypeReserved:
		return fmt.Sprintf("type %s is not a record type", dns.Type(t))
	}
	return ""
}

var errMultiline = errors.New("target holds a line break")

// parseAddress parses the target of an A or AAAA record into its address
// bytes. It returns nil, nil for other types and for RFC 3597 targets, which
// go through parseTarget.
func parseAddress(rtype uint16, target string) ([]byte, error) {
	if !compactType(rtype) {
		return nil, nil
	}
	if strings.ContainsAny(target, "\n\r") {
		return nil, errMultiline
	}
	target = strings.TrimSpace(target)
	if target == "" {
		return nil, errors.New("empty target")
	}
	if strings.HasPrefix(target, `\#`) {
		return nil, nil
	}
	a, err := netip.ParseAddr(target)
	if rtype == dns.TypeA {
		if err != nil || !a.Is4() {
			return nil, fmt.Errorf("A target %q is not an IPv4 address", target)
		}
		b := a.As4()
		return b[:], nil
	}
	if err != nil || !a.Is6() || a.Zone() != "" {
		return nil, fmt.Errorf("AAAA target %q is not an IPv6 address", target)
	}
	b := a.As16()
	return b[:], nil
}

// rdataOf returns the packed rdata of a record.
func rdataOf(rr dns.RR) ([]byte, error) {
	buf := make([]byte, dns.Len(rr)+64)
	end, err := dns.PackRR(rr, buf, 0, nil, false)
	if err != nil {
		return nil, err
	}
	off, err := dns.PackDomainName(rr.Header().Name, buf, 0, nil, false)
	if err != nil {
		return nil, err
	}
	rd := buf[off+10 : end]
	if want := compactLen(rr.Header().Rrtype) - 12; len(rd) != want {
		return nil, fmt.Errorf("rdata is %d bytes, want %d", len(rd), want)
	}
	return rd, nil
}

// parseTarget builds one RR from a target in presentation format. Names in
// targets are absolute whether or not they end in a dot (the external-dns
// convention). The common types skip the zone-file scanner for speed.
func parseTarget(owner string, ttl uint32, rtype uint16, typeName, target string) (dns.RR, error) {
	if strings.ContainsAny(target, "\n\r") {
		return nil, errMultiline
	}
	target = strings.TrimSpace(target)
	if target == "" {
		return nil, errors.New("empty target")
	}
	hdr := dns.RR_Header{Name: owner, Rrtype: rtype, Class: dns.ClassINET, Ttl: ttl}
	generic := strings.HasPrefix(target, `\#`)
	if !generic {
		switch rtype {
		case dns.TypeA:
			a, err := netip.ParseAddr(target)
			if err != nil || !a.Is4() {
				return nil, fmt.Errorf("A target %q is not an IPv4 address", target)
			}
			b := a.As4()
			return &dns.A{Hdr: hdr, A: net.IP(b[:])}, nil
		case dns.TypeAAAA:
			a, err := netip.ParseAddr(target)
			if err != nil || !a.Is6() || a.Zone() != "" {
				return nil, fmt.Errorf("AAAA target %q is not an IPv6 address", target)
			}
			b := a.As16()
			return &dns.AAAA{Hdr: hdr, AAAA: net.IP(b[:])}, nil
		case dns.TypeCNAME, dns.TypeNS, dns.TypePTR, dns.TypeDNAME:
			if _, ok := dns.IsDomainName(target); !ok || strings.ContainsAny(target, " \t;()\"") {
				return nil, fmt.Errorf("%s target %q is not a domain name", typeName, target)
			}
			name := dns.Fqdn(target)
			switch rtype {
			case dns.TypeCNAME:
				return &dns.CNAME{Hdr: hdr, Target: name}, nil
			case dns.TypeNS:
				return &dns.NS{Hdr: hdr, Ns: name}, nil
			case dns.TypePTR:
				return &dns.PTR{Hdr: hdr, Ptr: name}, nil
			default:
				return &dns.DNAME{Hdr: hdr, Target: name}, nil
			}
		case dns.TypeTXT, dns.TypeSPF:
			if !strings.HasPrefix(target, `"`) {
				// Unquoted: the whole target is one text, as external-dns writes it.
				return &dns.TXT{Hdr: hdr, Txt: splitText(target)}, nil
			}
		}
	}
	line := fmt.Sprintf("%s %d IN %s %s\n", owner, ttl, typeName, target)
	zp := dns.NewZoneParser(strings.NewReader(line), ".", "")
	zp.SetIncludeAllowed(false)
	rr, ok := zp.Next()
	if err := zp.Err(); err != nil {
		// The position is of the line built here, not of anything the user wrote.
		msg := strings.TrimPrefix(err.Error(), "dns: ")
		if i := strings.LastIndex(msg, " at line: "); i > 0 {
			msg = msg[:i]
		}
		return nil, fmt.Errorf("%s target %q: %s", typeName, target, msg)
	}
	if !ok || rr == nil {
		return nil, fmt.Errorf("%s target %q: no record", typeName, target)
	}
	if rr.Header().Rrtype != rtype {
		return nil, fmt.Errorf("%s target %q parsed as %s", typeName, target, dns.Type(rr.Header().Rrtype))
	}
	if _, more := zp.Next(); more {
		return nil, fmt.Errorf("%s target %q holds more than one record", typeName, target)
	}
	// Round-trip through the wire so rdata that packs badly is caught here,
	// not on the first query.
	buf := make([]byte, dns.Len(rr)+64)
	if _, err := dns.PackRR(rr, buf, 0, nil, false); err != nil {
		return nil, fmt.Errorf("%s target %q: %w", typeName, target, err)
	}
	return rr, nil
}

// splitText turns one literal text into TXT character-strings of at most 255
// bytes, escaped the way miekg/dns stores them.
func splitText(s string) []string {
	var out []string
	for len(s) > 0 || out == nil {
		n := min(len(s), 255)
		out = append(out, escapeText(s[:n]))
		s = s[n:]
	}
	return out
}

func escapeText(s string) string {
	if !strings.ContainsAny(s, `\"`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' || s[i] == '"' {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
