package querylog

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"regexp"
	"strings"
)

// NormalizeDomain lower-cases a name and drops the trailing dot ("." stays).
func NormalizeDomain(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	if len(s) > 1 {
		s = strings.TrimSuffix(s, ".")
	}
	return s
}

// domainMatcher matches names against querylog.exclude.domains.
type domainMatcher struct {
	exact    map[string]struct{}
	suffixes []string // ".example.com": strict subdomains
	regexps  []*regexp.Regexp
}

// compileDomainPatterns parses exact names, `*.suffix` (strict subdomains of
// suffix, not suffix itself) and `/regex/` (matched against the normalised
// name without trailing dot).
func compileDomainPatterns(patterns []string) (*domainMatcher, error) {
	m := &domainMatcher{exact: map[string]struct{}{}}
	for _, p := range patterns {
		p = strings.TrimSpace(p)
		switch {
		case p == "":
			return nil, fmt.Errorf("empty domain pattern")
		case len(p) >= 2 && p[0] == '/' && p[len(p)-1] == '/':
			re, err := regexp.Compile(p[1 : len(p)-1])
			if err != nil {
				return nil, fmt.Errorf("domain pattern %q: %w", p, err)
			}
			m.regexps = append(m.regexps, re)
		case strings.HasPrefix(p, "*."):
			s := NormalizeDomain(p[2:])
			if s == "" || s == "." || strings.ContainsAny(s, "*/ ") {
				return nil, fmt.Errorf("domain pattern %q: bad suffix", p)
			}
			m.suffixes = append(m.suffixes, "."+s)
		default:
			s := NormalizeDomain(p)
			if strings.ContainsAny(s, "*/ ") {
				return nil, fmt.Errorf("domain pattern %q: want name, *.suffix or /regex/", p)
			}
			m.exact[s] = struct{}{}
		}
	}
	return m, nil
}

func (m *domainMatcher) match(name string) bool {
	if _, ok := m.exact[name]; ok {
		return true
	}
	for _, s := range m.suffixes {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	for _, re := range m.regexps {
		if re.MatchString(name) {
			return true
		}
	}
	return false
}

// clientMatcher matches clients against querylog.exclude.clients.
type clientMatcher struct {
	prefixes []netip.Prefix
	names    map[string]struct{}
}

func compileClientPatterns(patterns []string) (*clientMatcher, error) {
	m := &clientMatcher{names: map[string]struct{}{}}
	for _, p := range patterns {
		p = strings.TrimSpace(p)
		if p == "" {
			return nil, fmt.Errorf("empty client pattern")
		}
		if a, err := netip.ParseAddr(p); err == nil {
			a = a.Unmap()
			m.prefixes = append(m.prefixes, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		if pr, err := netip.ParsePrefix(p); err == nil {
			if pr.Addr().Is4In6() {
				pr = netip.PrefixFrom(pr.Addr().Unmap(), max(pr.Bits()-96, 0))
			}
			m.prefixes = append(m.prefixes, pr.Masked())
			continue
		}
		if strings.ContainsAny(p, " \t/") {
			return nil, fmt.Errorf("client pattern %q: want an IP, CIDR or client name", p)
		}
		m.names[strings.ToLower(p)] = struct{}{}
	}
	return m, nil
}

func (m *clientMatcher) match(addr netip.Addr, name string) bool {
	addr = addr.Unmap()
	for _, p := range m.prefixes {
		if p.Contains(addr) {
			return true
		}
	}
	if name != "" && len(m.names) > 0 {
		_, ok := m.names[strings.ToLower(name)]
		return ok
	}
	return false
}

// sudnSuffixes are the special-use names not logged when exclude.sudn is on:
// localhost and invalid (RFC 6761), local (RFC 6762), home.arpa (RFC 8375),
// resolver.arpa (RFC 9462) and the reverse zones of loopback, private
// (RFC 1918), link-local and unique-local addresses. Public reverse lookups
// and test/example names are kept: they say something about the network.
var sudnSuffixes = func() []string {
	s := []string{"localhost", "invalid", "local", "home.arpa", "resolver.arpa",
		"10.in-addr.arpa", "127.in-addr.arpa", "168.192.in-addr.arpa", "254.169.in-addr.arpa",
		"c.f.ip6.arpa", "d.f.ip6.arpa", "8.e.f.ip6.arpa", "9.e.f.ip6.arpa", "a.e.f.ip6.arpa", "b.e.f.ip6.arpa",
		"1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.ip6.arpa"}
	for i := 16; i < 32; i++ {
		s = append(s, fmt.Sprintf("%d.172.in-addr.arpa", i))
	}
	return s
}()

// IsSpecialUse reports whether a normalised name is a special-use name
// excluded by querylog.exclude.sudn.
func IsSpecialUse(name string) bool {
	// Every suffix ends in one of four top-level labels: most names are
	// settled by their last label without walking the list (this runs for
	// every logged query).
	tld := name[strings.LastIndexByte(name, '.')+1:]
	if tld != "arpa" && tld != "localhost" && tld != "invalid" && tld != "local" {
		return false
	}
	for _, s := range sudnSuffixes {
		if name == s || (len(name) > len(s) && name[len(name)-len(s)-1] == '.' && strings.HasSuffix(name, s)) {
			return true
		}
	}
	return false
}

// policy is a compiled Config: exclusions and privacy applied to each row.
type policy struct {
	cfg     Config
	domains *domainMatcher
	clients *clientMatcher
	key     []byte
}

func compilePolicy(cfg Config, key []byte) (*policy, error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	d, err := compileDomainPatterns(cfg.ExcludeDomains)
	if err != nil {
		return nil, fmt.Errorf("querylog exclude.domains: %w", err)
	}
	c, err := compileClientPatterns(cfg.ExcludeClients)
	if err != nil {
		return nil, fmt.Errorf("querylog exclude.clients: %w", err)
	}
	if len(cfg.PseudonymKey) > 0 {
		key = cfg.PseudonymKey
	}
	return &policy{cfg: cfg, domains: d, clients: c, key: key}, nil
}

// excluded reports whether the row must leave no trace.
func (p *policy) excluded(r *Row) bool {
	if p.cfg.ExcludeSUDN && IsSpecialUse(r.Domain) {
		return true
	}
	if p.domains.match(r.Domain) {
		return true
	}
	if len(p.clients.prefixes) == 0 && len(p.clients.names) == 0 {
		return false
	}
	a, _ := netip.ParseAddr(r.Client)
	return p.clients.match(a, r.ClientName)
}

// apply rewrites the row according to the privacy mode. It returns false
// when no raw row may be kept (privacy nothing).
func (p *policy) apply(r *Row) bool {
	switch p.cfg.Privacy {
	case PrivacyNothing:
		return false
	case PrivacyAnonymizeClient:
		r.Client, r.ClientName, r.ClientID = p.anonymize(r.Client), "", ""
	case PrivacyHideDomains:
		r.Domain, r.Rule = "", ""
	case PrivacyHideDomainsClients:
		r.Domain, r.Rule, r.Client, r.ClientName, r.ClientID = "", "", "", "", ""
	}
	return true
}

// anonymize returns the client's /24 (IPv4) or /48 (IPv6) network address,
// or a keyed pseudonym "anon-<16 hex>" stable for one key.
func (p *policy) anonymize(client string) string {
	a, err := netip.ParseAddr(client)
	if err != nil {
		return ""
	}
	a = a.Unmap()
	if p.cfg.Anonymize == AnonymizePseudonym {
		h := hmac.New(sha256.New, p.key)
		b := a.AsSlice()
		h.Write(b)
		return "anon-" + hex.EncodeToString(h.Sum(nil)[:8])
	}
	bits := 24
	if a.Is6() {
		bits = 48
	}
	pr, _ := a.Prefix(bits)
	return pr.Addr().String()
}
