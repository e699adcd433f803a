package upstream

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// Transport schemes of an upstream address.
const (
	SchemeUDP   = "udp"   // plain DNS over UDP, retried over TCP when truncated
	SchemeTCP   = "tcp"   // plain DNS over TCP
	SchemeTLS   = "tls"   // DNS over TLS (RFC 7858)
	SchemeHTTPS = "https" // DNS over HTTPS (RFC 8484)
	SchemeQUIC  = "quic"  // DNS over QUIC (RFC 9250)
)

// maxAddressLen bounds the configured string; longer values are refused
// rather than parsed.
const maxAddressLen = 1024

// Address is a parsed upstream address.
type Address struct {
	Scheme string // one of the Scheme constants
	Host   string // IP literal (without brackets) or host name (lower case, no trailing dot)
	Port   uint16
	Path   string // request path and query of a DoH URL; empty otherwise
}

// IsIP reports whether Host is an IP literal, which needs no bootstrap lookup.
func (a Address) IsIP() bool {
	_, err := netip.ParseAddr(a.Host)
	return err == nil
}

// HostPort joins host and port, bracketing IPv6 literals.
func (a Address) HostPort() string {
	return joinHostPort(a.Host, a.Port)
}

// String returns the canonical form, which ParseAddress parses back to a.
func (a Address) String() string {
	return a.Scheme + "://" + a.HostPort() + a.Path
}

func joinHostPort(host string, port uint16) string {
	p := strconv.Itoa(int(port))
	if strings.IndexByte(host, ':') >= 0 {
		return "[" + host + "]:" + p
	}
	return host + ":" + p
}

func defaultPort(scheme string) uint16 {
	switch scheme {
	case SchemeTLS, SchemeQUIC:
		return 853
	case SchemeHTTPS:
		return 443
	default:
		return 53
	}
}

// ParseAddress parses an upstream address: "1.2.3.4", "1.2.3.4:53",
// "2001:db8::1", "[2001:db8::1]:53", "host:53", "udp://host:port",
// "tcp://host:port", "tls://host:853", "https://host/dns-query" and
// "quic://host:853". A missing port is the scheme's default (53, 853, 443).
func ParseAddress(s string) (Address, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Address{}, errors.New("empty upstream address")
	}
	if len(s) > maxAddressLen {
		return Address{}, fmt.Errorf("upstream address longer than %d bytes", maxAddressLen)
	}
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return parseHostPort(SchemeUDP, s)
	}
	scheme = strings.ToLower(scheme)
	switch scheme {
	case SchemeUDP, SchemeTCP, SchemeTLS, SchemeQUIC:
		if strings.ContainsAny(rest, "/?#@") {
			return Address{}, fmt.Errorf("upstream %q: %s address takes no path, query or user", s, scheme)
		}
		return parseHostPort(scheme, rest)
	case SchemeHTTPS:
		return parseDoH(s)
	default:
		return Address{}, fmt.Errorf("upstream %q: unknown scheme %q (want udp, tcp, tls, https or quic)", s, scheme)
	}
}

func parseDoH(s string) (Address, error) {
	u, err := url.Parse(s)
	if err != nil {
		return Address{}, fmt.Errorf("upstream %q: %w", s, err)
	}
	if u.User != nil || u.Fragment != "" || u.Opaque != "" {
		return Address{}, fmt.Errorf("upstream %q: DoH URL takes no user, fragment or opaque part", s)
	}
	a, err := parseHostPort(SchemeHTTPS, u.Host)
	if err != nil {
		return Address{}, fmt.Errorf("upstream %q: %w", s, err)
	}
	a.Path = u.EscapedPath()
	if a.Path == "" || a.Path == "/" {
		a.Path = "/dns-query"
	}
	if u.RawQuery != "" {
		a.Path += "?" + u.RawQuery
	}
	// The canonical form must parse back to the same address.
	if strings.ContainsAny(a.Path, "#") || !strings.HasPrefix(a.Path, "/") {
		return Address{}, fmt.Errorf("upstream %q: bad DoH path", s)
	}
	return a, nil
}

func parseHostPort(scheme, hp string) (Address, error) {
	a := Address{Scheme: scheme, Port: defaultPort(scheme)}
	if hp == "" {
		return Address{}, errors.New("upstream address has no host")
	}
	// A bare IPv6 literal has colons but no brackets and no port.
	if ip, err := netip.ParseAddr(hp); err == nil {
		if ip.Zone() != "" {
			return Address{}, fmt.Errorf("upstream %q: zoned IPv6 addresses are not supported", hp)
		}
		a.Host = ip.Unmap().String()
		return a, nil
	}
	host := hp
	if strings.HasPrefix(hp, "[") {
		end := strings.IndexByte(hp, ']')
		if end < 0 {
			return Address{}, fmt.Errorf("upstream %q: missing ]", hp)
		}
		host = hp[1:end]
		tail := hp[end+1:]
		ip, err := netip.ParseAddr(host)
		if err != nil || !ip.Is6() || ip.Zone() != "" {
			return Address{}, fmt.Errorf("upstream %q: bracketed host must be an IPv6 address", hp)
		}
		host = ip.String()
		if tail != "" {
			if !strings.HasPrefix(tail, ":") {
				return Address{}, fmt.Errorf("upstream %q: unexpected text after ]", hp)
			}
			p, err := parsePort(tail[1:])
			if err != nil {
				return Address{}, fmt.Errorf("upstream %q: %w", hp, err)
			}
			a.Port = p
		}
		a.Host = host
		return a, nil
	}
	if i := strings.LastIndexByte(hp, ':'); i >= 0 {
		host = hp[:i]
		p, err := parsePort(hp[i+1:])
		if err != nil {
			return Address{}, fmt.Errorf("upstream %q: %w", hp, err)
		}
		a.Port = p
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if !ip.Is4() && !ip.Is4In6() {
			return Address{}, fmt.Errorf("upstream %q: IPv6 address with a port needs brackets", hp)
		}
		a.Host = ip.Unmap().String()
		return a, nil
	}
	name, err := checkHostName(host)
	if err != nil {
		return Address{}, fmt.Errorf("upstream %q: %w", hp, err)
	}
	a.Host = name
	return a, nil
}

func parsePort(s string) (uint16, error) {
	if s == "" || len(s) > 5 {
		return 0, fmt.Errorf("bad port %q", s)
	}
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("bad port %q", s)
	}
	return uint16(n), nil
}

// checkHostName accepts letters, digits, '-' and '_' in labels of 1 to 63
// bytes, and returns the name in lower case without a trailing dot.
func checkHostName(h string) (string, error) {
	h = strings.TrimSuffix(h, ".")
	if h == "" || len(h) > 253 {
		return "", fmt.Errorf("bad host name %q", h)
	}
	labelLen := 0
	digitsOnly := true
	for i := 0; i < len(h); i++ {
		c := h[i]
		switch {
		case c == '.':
			if labelLen == 0 {
				return "", fmt.Errorf("bad host name %q: empty label", h)
			}
			labelLen = 0
			continue
		case c >= '0' && c <= '9':
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '-', c == '_':
			digitsOnly = false
		default:
			return "", fmt.Errorf("bad host name %q: character %q", h, c)
		}
		labelLen++
		if labelLen > 63 {
			return "", fmt.Errorf("bad host name %q: label longer than 63", h)
		}
	}
	if labelLen == 0 {
		return "", fmt.Errorf("bad host name %q: empty label", h)
	}
	// "1.2.3" or "999.1.1.1" look like broken IPs, not names.
	if digitsOnly {
		return "", fmt.Errorf("bad host name %q: looks like an invalid IP address", h)
	}
	return strings.ToLower(h), nil
}
