package blocklist

import (
	"net/netip"
	"strings"
)

// outcome of one line.
type outcome uint8

const (
	outSkip        outcome = iota // empty, comment, header, hosts boilerplate
	outInvalid                    // not a rule of the format
	outUnsupported                // valid rule we do not apply
	outRules                      // one or more rules emitted
)

// rule is one parsed rule. name is lower case and without trailing dot for
// name rules; re holds the regular expression (without slashes) otherwise.
type rule struct {
	name  string
	flags uint8 // one of the table flags, or 0 for a regex rule
	plain bool  // came from a hosts or plain-domain line
	re    string
	exc   bool // exception (regex rules; name rules carry it in flags)
}

// text is the rule normalised as the source format writes it; exclude values
// are compared with it.
func (r rule) text() string {
	if r.flags == 0 {
		if r.plain { // regex-format line
			return r.re
		}
		if r.exc {
			return "@@/" + r.re + "/"
		}
		return "/" + r.re + "/"
	}
	return ruleText(r.name, r.flags, r.plain)
}

func ruleText(name string, flag uint8, plain bool) string {
	pre, post := ruleAffixes(flag, plain)
	return joinRule(pre, name, post)
}

// joinRule is a rule's text from its parts (RuleParts); a bare name is
// returned as it is, without a copy.
func joinRule(pre, name, post string) string {
	if pre == "" && post == "" {
		return name
	}
	return pre + name + post
}

// ruleAffixes is the text a rule of flag writes before and after its name
// (none for hosts and plain-domain lines).
func ruleAffixes(flag uint8, plain bool) (pre, post string) {
	switch flag {
	case flagExact, flagSubtree:
		if plain {
			return "", ""
		}
		if flag == flagExact {
			return "|", "^"
		}
		return "||", "^"
	case flagWild:
		return "*.", ""
	case flagExExact:
		return "@@|", "^"
	case flagExSubtree:
		return "@@||", "^"
	case flagExWild:
		return "@@*.", ""
	}
	return "", ""
}

// lineParser turns lines of one format into rules. It reuses its rule slice;
// emitted names alias the line and must be copied before the next line.
type lineParser struct {
	format     Format
	subdomains bool
	rules      []rule
	// extra counts of a hosts line whose other names were rules.
	extraInvalid, extraUnsupported int
}

func (p *lineParser) plainFlag() uint8 {
	if p.subdomains {
		return flagSubtree
	}
	return flagExact
}

// parse classifies one line (without line terminator).
func (p *lineParser) parse(line string) outcome {
	p.rules = p.rules[:0]
	p.extraInvalid, p.extraUnsupported = 0, 0
	line = strings.TrimSpace(line)
	if line == "" {
		return outSkip
	}
	if p.format == FormatRegex {
		return p.parseRegexLine(line)
	}
	switch line[0] {
	case '!', '#':
		return outSkip
	case '[':
		if line[len(line)-1] == ']' { // [Adblock Plus 2.0] header
			return outSkip
		}
	}
	// Inline comments: whitespace followed by '#' or '!'. Not for /regex/
	// rules, whose text may contain them.
	if line[0] != '/' && !strings.HasPrefix(line, "@@/") {
		line = stripInlineComment(line)
	}
	first, rest := cutField(line)
	if rest != "" {
		if addr, err := netip.ParseAddr(first); err == nil {
			if p.format == FormatDomains {
				return outInvalid
			}
			return p.parseHosts(addr, rest)
		}
	}
	switch p.format {
	case FormatHosts:
		return outInvalid
	case FormatDomains:
		return p.parseDomain(line)
	}
	if isNameLine(line) {
		return p.parseDomain(line)
	}
	return p.parseAdblock(line)
}

func stripInlineComment(s string) string {
	for i := 1; i < len(s); i++ {
		if (s[i] == '#' || s[i] == '!') && (s[i-1] == ' ' || s[i-1] == '\t') {
			return strings.TrimSpace(s[:i])
		}
	}
	return s
}

func cutField(s string) (string, string) {
	i := strings.IndexAny(s, " \t")
	if i < 0 {
		return s, ""
	}
	return s[:i], strings.TrimLeft(s[i:], " \t")
}

// isNameLine reports whether the line is a bare name (auto/adblock plain
// domain line).
func isNameLine(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(nameByte(c) || c == '.') {
			return false
		}
	}
	return true
}

func nameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c >= 0x80
}

// normName validates a name and returns it lower-cased (ASCII only, so a
// Unicode rule never equals its punycode form) without one trailing dot.
func normName(s string) (string, bool) {
	s = strings.TrimSuffix(s, ".")
	if len(s) == 0 || len(s) > maxName {
		return "", false
	}
	label := 0
	upper := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '.' {
			if label == 0 {
				return "", false
			}
			label = 0
			continue
		}
		if !nameByte(c) {
			return "", false
		}
		if c >= 'A' && c <= 'Z' {
			upper = true
		}
		label++
		if label > 63 {
			return "", false
		}
	}
	if label == 0 {
		return "", false
	}
	if upper {
		s = asciiLower(s)
	}
	return s, true
}

func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		b[i] = lower(c)
	}
	return string(b)
}

// boilerplate names of hosts files, ignored rather than counted.
var boilerplate = [...]string{
	"localhost", "localhost.localdomain", "local", "broadcasthost",
	"localhost4", "localhost4.localdomain4", "localhost6", "localhost6.localdomain6",
	"ip6-localhost", "ip6-loopback", "ip6-localnet", "ip6-mcastprefix",
	"ip6-allnodes", "ip6-allrouters", "ip6-allhosts", "0.0.0.0",
}

func isBoilerplate(name string) bool {
	for _, b := range boilerplate {
		if name == b {
			return true
		}
	}
	return false
}

// blockingAddr reports whether a hosts line address means "block" rather
// than a rewrite to a real address.
func blockingAddr(a netip.Addr) bool {
	a = a.WithZone("")
	return a.IsUnspecified() || a == netip.AddrFrom4([4]byte{127, 0, 0, 1}) || a == netip.IPv6Loopback()
}

func (p *lineParser) parseHosts(addr netip.Addr, names string) outcome {
	block := blockingAddr(addr)
	bad, unsupported := 0, 0
	for names != "" {
		var f string
		f, names = cutField(names)
		n, ok := normName(f)
		switch {
		case !ok:
			bad++
		case isBoilerplate(n):
		case !block:
			unsupported++
		default:
			p.rules = append(p.rules, rule{name: n, flags: p.plainFlag(), plain: true})
		}
	}
	switch {
	case len(p.rules) > 0:
		p.extraInvalid, p.extraUnsupported = bad, unsupported
		return outRules
	case bad > 0:
		return outInvalid
	case unsupported > 0:
		return outUnsupported
	}
	return outSkip
}

func (p *lineParser) parseDomain(line string) outcome {
	if strings.ContainsAny(line, " \t") {
		return outInvalid
	}
	if rest, ok := strings.CutPrefix(line, "*."); ok {
		n, ok := normName(rest)
		if !ok {
			return outInvalid
		}
		p.rules = append(p.rules, rule{name: n, flags: flagWild})
		return outRules
	}
	n, ok := normName(line)
	if !ok {
		return outInvalid
	}
	if isBoilerplate(n) {
		return outSkip
	}
	p.rules = append(p.rules, rule{name: n, flags: p.plainFlag(), plain: true})
	return outRules
}

func (p *lineParser) parseRegexLine(line string) outcome {
	switch line[0] {
	case '#', '!':
		return outSkip
	}
	re := line
	if len(re) >= 2 && re[0] == '/' && re[len(re)-1] == '/' {
		re = re[1 : len(re)-1]
	}
	if re == "" || !validRegex(re) {
		return outInvalid
	}
	p.rules = append(p.rules, rule{re: re, plain: true})
	return outRules
}

// parseAdblock handles the DNS subset of AdGuard's syntax.
func (p *lineParser) parseAdblock(line string) outcome {
	if strings.Contains(line, "##") || strings.Contains(line, "#@#") ||
		strings.Contains(line, "#?#") || strings.Contains(line, "#$#") {
		return outUnsupported // cosmetic rule
	}
	s, exc := strings.CutPrefix(line, "@@")
	if s == "" {
		return outInvalid
	}
	if s[0] == '/' && len(s) > 1 {
		if s[len(s)-1] == '/' && len(s) > 2 {
			re := s[1 : len(s)-1]
			if !validRegex(re) {
				return outInvalid
			}
			p.rules = append(p.rules, rule{re: re, exc: exc})
			return outRules
		}
		if i := strings.LastIndex(s, "/$"); i > 0 {
			return outUnsupported // regex with modifiers
		}
		return outInvalid
	}
	if strings.ContainsAny(s, " \t") {
		return outInvalid
	}
	if i := strings.IndexByte(s, '$'); i >= 0 {
		if i == 0 || i == len(s)-1 {
			return outInvalid
		}
		return outUnsupported // $important, $client, $dnstype, ...
	}
	var flag uint8
	plain := false
	switch {
	case strings.HasPrefix(s, "||*."):
		s, flag = s[4:], flagWild
	case strings.HasPrefix(s, "||"):
		s, flag = s[2:], flagSubtree
	case strings.HasPrefix(s, "|"):
		s, flag = s[1:], flagExact
	case strings.HasPrefix(s, "*."):
		s, flag = s[2:], flagWild
	default:
		flag, plain = p.plainFlag(), true
	}
	s = strings.TrimSuffix(s, "|")
	s = strings.TrimSuffix(s, "^")
	if s == "" {
		return outInvalid
	}
	if strings.ContainsAny(s, "*^|") {
		return outUnsupported // mid-pattern wildcard or separator
	}
	if strings.ContainsAny(s, "/:?=&") {
		return outUnsupported // URL rule: path, port or query
	}
	n, ok := normName(s)
	if !ok {
		return outInvalid
	}
	if exc {
		flag <<= 3 // flagExact..flagWild map onto flagExExact..flagExWild
	}
	p.rules = append(p.rules, rule{name: n, flags: flag, plain: plain && !exc})
	return outRules
}
