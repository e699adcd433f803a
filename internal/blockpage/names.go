package blockpage

import (
	"net"
	"net/netip"
	"strings"
	"unicode/utf8"
)

// validHostname accepts what a browser sends as Host or SNI for a DNS name:
// lower-case ASCII labels of letters, digits, '-' and '_' (names in lists
// carry underscores), 1 to 63 characters each, at most 253 in all.
// Internationalised names arrive in their xn-- form.
func validHostname(name string) bool {
	if name == "" || len(name) > 253 {
		return false
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// hostKind is what the Host header of a request names.
type hostKind int

const (
	hostNone   hostKind = iota // missing or not a host name
	hostIP                     // an address: the block page was opened directly
	hostDomain                 // a name: the browser was sent here for it
)

// parseHost splits the Host header into the lower-case name without port
// or trailing dot and says what it is.
func parseHost(h string) (string, hostKind) {
	if h == "" || len(h) > 300 {
		return "", hostNone
	}
	host := h
	if hh, _, err := net.SplitHostPort(h); err == nil {
		host = hh
	}
	host = strings.Trim(host, "[]")
	if a, err := netip.ParseAddr(host); err == nil {
		return a.Unmap().String(), hostIP
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if !validHostname(host) {
		return "", hostNone
	}
	return host, hostDomain
}

// truncate cuts s to at most n bytes on a rune boundary (for messages
// that quote user input).
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
