package authority

import (
	"fmt"
	"strings"
	"unsafe"

	"github.com/miekg/dns"
)

// bytesOf is a read-only view of a string's bytes.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// maxLabels bounds the label offsets of one name: 255 bytes hold at most 127
// one-byte labels plus the root.
const maxLabels = 128

// labelOffsets fills offs with the start of every label of the wire name and
// returns how many there are, the root label included (so "\x03www\x00" gives
// [0 4], n=2). A malformed name returns 0.
func labelOffsets(name []byte, offs *[maxLabels]uint8) int {
	n, i := 0, 0
	for i < len(name) && n < maxLabels {
		offs[n] = uint8(i)
		n++
		l := int(name[i])
		if l == 0 {
			return n
		}
		if l > 63 {
			return 0
		}
		i += 1 + l
		if i > 255 {
			return 0
		}
	}
	return 0
}

// lowerWire lower-cases ASCII letters in a wire-format name in place.
func lowerWire(b []byte) {
	i := 0
	for i < len(b) {
		l := int(b[i])
		if l == 0 {
			return
		}
		for j := i + 1; j <= i+l && j < len(b); j++ {
			if c := b[j]; c >= 'A' && c <= 'Z' {
				b[j] = c + ('a' - 'A')
			}
		}
		i += 1 + l
	}
}

// canonicalName turns a presentation-format absolute name into its lower-cased
// wire form and the presentation form of that (escapes normalised).
func canonicalName(name string) (wire string, pres string, err error) {
	name = dns.Fqdn(name)
	var buf [256]byte
	n, err := dns.PackDomainName(name, buf[:], 0, nil, false)
	if err != nil {
		return "", "", fmt.Errorf("name %q: %w", name, err)
	}
	lowerWire(buf[:n])
	if plainLower(name) {
		return string(buf[:n]), name, nil
	}
	pres, _, err = dns.UnpackDomainName(buf[:n], 0)
	if err != nil {
		return "", "", fmt.Errorf("name %q: %w", name, err)
	}
	return string(buf[:n]), pres, nil
}

// plainLower reports whether a presentation name needs no normalising: lower
// case, no escapes.
func plainLower(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == '*') {
			return false
		}
	}
	return true
}

// presentation converts a wire name to presentation format: directly (one
// allocation) for lower-case names of plain characters, else via miekg/dns.
func presentation(wire []byte) string {
	var buf [256]byte
	out, i := buf[:0], 0
	for i < len(wire) {
		l := int(wire[i])
		if l == 0 {
			if len(out) == 0 {
				return "."
			}
			return string(out)
		}
		if l > 63 || i+1+l > len(wire) {
			break
		}
		for _, ch := range wire[i+1 : i+1+l] {
			if !(ch >= 'a' && ch <= 'z' || ch >= '0' && ch <= '9' || ch == '-' || ch == '_' || ch == '*' && l == 1) {
				goto slow
			}
		}
		out = append(append(out, wire[i+1:i+1+l]...), '.')
		i += 1 + l
	}
slow:
	s, _, err := dns.UnpackDomainName(wire, 0)
	if err != nil {
		return "."
	}
	return s
}

// isSubWire reports whether wire name child equals or is below parent.
// Both must be lower-cased wire names; the check is label-aligned.
func isSubWire(child, parent string) bool {
	if len(child) < len(parent) || child[len(child)-len(parent):] != parent {
		return false
	}
	if len(child) == len(parent) {
		return true
	}
	var offs [maxLabels]uint8
	n := labelOffsets(bytesOf(child), &offs)
	cut := len(child) - len(parent)
	for i := 0; i < n; i++ {
		if int(offs[i]) == cut {
			return true
		}
	}
	return false
}

// ownerName resolves an endpoint's dnsName against the zone. A name that ends
// in a dot is absolute; "@" is the apex; a name equal to the zone or ending in
// ".<zone>" is taken as absolute too, because external-dns writes absolute
// names without the trailing dot; anything else is relative to the zone.
func ownerName(dnsName, zone string) string {
	switch {
	case dnsName == "@":
		return zone
	case strings.HasSuffix(dnsName, "."):
		return dnsName
	case zone == ".":
		return dnsName + "."
	}
	bare := strings.TrimSuffix(zone, ".")
	if strings.EqualFold(dnsName, bare) || (len(dnsName) > len(bare) && strings.EqualFold(dnsName[len(dnsName)-len(bare)-1:], "."+bare)) {
		return dnsName + "."
	}
	return dnsName + "." + zone
}

// OwnerName is the absolute owner name (trailing dot) the compile step gives
// an endpoint's dnsName in zone (presentation form, trailing dot optional).
// Zone file export uses it so that what is exported is what is served.
func OwnerName(dnsName, zone string) string {
	return ownerName(strings.TrimSpace(dnsName), dns.Fqdn(zone))
}

// ValidName reports whether n is a domain name the zone compile accepts
// as a target (name servers, MX/CNAME targets): presentation format,
// labels of 1-63 octets, at most 255 octets, no blanks.
func ValidName(n string) bool {
	if n == "" || strings.ContainsAny(n, " \t\r\n") {
		return false
	}
	_, ok := dns.IsDomainName(n)
	return ok
}
