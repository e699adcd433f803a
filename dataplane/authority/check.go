package authority

import (
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/miekg/dns"
	"golang.org/x/net/idna"

	"github.com/svcdns/svc/api/v1alpha1"
)

// CheckRecordSet compiles one record set on its own, exactly as Compile does,
// and returns the problems of its endpoints: what write-time validation
// refuses. zone is the DNSZone the set names; nil when it is not known (then
// the set is compiled under the root zone, so everything but the in-zone rule
// is checked). Disabled, expired and public-view endpoints are checked too:
// they are served once enabled. Whole-set refusals (zone missing, tenancy)
// are not reported: they depend on other objects and stay status.
func CheckRecordSet(rs *v1alpha1.DNSRecordSet, zone *v1alpha1.DNSZone) []Problem {
	set := *rs
	set.Spec.Endpoints = make([]v1alpha1.Endpoint, len(rs.Spec.Endpoints))
	for i, ep := range rs.Spec.Endpoints {
		ep.Service = nil
		set.Spec.Endpoints[i] = ep
	}
	// Never stored: no fingerprint, no reuse.
	set.UID, set.Generation = "", 0
	z := v1alpha1.DNSZone{}
	z.Name = set.Spec.ZoneRef.Name
	if zone != nil {
		z.Spec.ZoneName = zone.Spec.ZoneName
		if z.Spec.ZoneName == "" {
			z.Spec.ZoneName = zone.Name
		}
	}
	if _, _, err := canonicalName(z.Spec.ZoneName); err != nil || z.Spec.ZoneName == "" {
		z.Spec.ZoneName = "."
	}
	z.Spec.RecordSetNamespaces = &v1alpha1.RecordSetNamespaces{From: v1alpha1.NamespacesFromAll}
	_, problems := Compile([]v1alpha1.DNSZone{z}, []v1alpha1.DNSRecordSet{set}, time.Time{})
	var out []Problem
	for _, p := range problems {
		if p.Kind == "DNSRecordSet" && p.Endpoint >= 0 {
			out = append(out, p)
		}
	}
	return out
}

// checkOwnerSyntax refuses owner names the compile step would encode into
// something nobody meant: blanks and control characters (a name with a space
// was served as such), zone-file specials, empty labels and lengths beyond
// RFC 1035. Escapes (\. \DDD) are left to the encoder.
func checkOwnerSyntax(name string) error {
	if name == "" {
		return fmt.Errorf("empty name")
	}
	if name == "@" || name == "." {
		return nil
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '\\':
			i++ // the escaped character is taken as written
		case c <= ' ' || c == 0x7f:
			return fmt.Errorf("holds a blank or control character at byte %d", i)
		case strings.IndexByte(`"();`, c) >= 0:
			return fmt.Errorf("holds %q, which is not allowed in a name", c)
		}
	}
	if !utf8.ValidString(name) {
		return fmt.Errorf("is not valid UTF-8")
	}
	for i := 0; i < len(name); i++ {
		if name[i] >= 0x80 {
			// Resolvers ask for the ASCII form; raw UTF-8 would never match.
			hint := "its ASCII form (xn--...)"
			if a, err := idna.Lookup.ToASCII(name); err == nil {
				hint = fmt.Sprintf("its ASCII form %q", a)
			}
			return fmt.Errorf("holds non-ASCII characters; write an internationalized name in %s", hint)
		}
	}
	trimmed := strings.TrimSuffix(name, ".")
	if strings.HasPrefix(trimmed, ".") || strings.HasSuffix(trimmed, ".") || strings.Contains(trimmed, "..") {
		return fmt.Errorf("has an empty label")
	}
	if !strings.Contains(trimmed, `\`) {
		for _, l := range strings.Split(trimmed, ".") {
			if len(l) > 63 {
				return fmt.Errorf("label %q is %d characters long; at most 63 are allowed", l, len(l))
			}
		}
		if len(trimmed) > 253 {
			return fmt.Errorf("is %d characters long; a name has at most 253", len(trimmed))
		}
	}
	return nil
}

// targetFormats are the presentation forms of the common record types with
// an example each, for messages that tell how to write a target.
var targetFormats = map[string][2]string{
	"A":      {"an IPv4 address", "192.0.2.10"},
	"AAAA":   {"an IPv6 address", "2001:db8::10"},
	"CNAME":  {"one domain name", "target.example.com."},
	"DNAME":  {"one domain name", "example.net."},
	"NS":     {"a name server's domain name", "ns1.example.com."},
	"PTR":    {"a domain name", "host.example.com."},
	"MX":     {"<preference> <mail host>", "10 mail.example.com."},
	"TXT":    {"text (quote several strings)", `v=spf1 -all`},
	"SPF":    {"text", `v=spf1 -all`},
	"SRV":    {"<priority> <weight> <port> <target>", "10 5 5060 sip.example.com."},
	"CAA":    {`<flags> <tag> "<value>"`, `0 issue "letsencrypt.org"`},
	"SSHFP":  {"<algorithm> <fingerprint type> <hex fingerprint>", "4 2 123456789abcdef67890123456789abcdef67890123456789abcdef123456789"},
	"TLSA":   {"<usage> <selector> <matching type> <hex data>", "3 1 1 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},
	"DS":     {"<key tag> <algorithm> <digest type> <hex digest>", "60485 5 1 2BB183AF5F22588179A53B0A98631FAD1A292118"},
	"NAPTR":  {`<order> <preference> "<flags>" "<service>" "<regexp>" <replacement>`, `100 10 "U" "E2U+sip" "!^.*$!sip:info@example.com!" .`},
	"HTTPS":  {"<priority> <target> [params]", `1 . alpn="h2,h3"`},
	"SVCB":   {"<priority> <target> [params]", `1 svc.example.com. port=8443`},
	"HINFO":  {`"<cpu>" "<os>"`, `"x86" "Linux"`},
	"LOC":    {"<latitude> <longitude> <altitude>", "52 22 23.000 N 4 53 32.000 E -2.00m"},
	"URI":    {`<priority> <weight> "<uri>"`, `10 1 "https://example.com/"`},
	"CERT":   {"<type> <key tag> <algorithm> <base64>", "1 0 0 AAAA"},
	"DNSKEY": {"<flags> <protocol> <algorithm> <base64 key>", "257 3 13 O7Eu2jwpjbXeJVl/VNkk8uF+eKJq2JU+2CGO5oLwu76QIeLzAJ0VLJEb8fJexoOpAnFBZnZ6+9jlvQ+wEk7Lig=="},
}

// Expectations the compile step appends to its problems, so status and
// write-time refusals say what to write instead.
const (
	expectType  = "expected a type such as A, AAAA, CNAME, MX, TXT, SRV, CAA, NS or TYPEnnn (RFC 3597)"
	expectOwner = "expected dot-separated labels of letters, digits, '-' and '_' (at most 63 characters each, 253 in all), e.g. www, @ for the apex, or www.example.com."
)

// expectTarget is "; expected <format>, e.g. "<example>"" for a type.
func expectTarget(typeName string) string {
	f, ex := TargetFormat(typeName)
	return fmt.Sprintf("; expected %s, e.g. %q", f, ex)
}

// TargetFormat says how a target of the record type is written, with an
// example; any type may also be written in RFC 3597 form (\# <length> <hex>).
func TargetFormat(recordType string) (format, example string) {
	if f, ok := targetFormats[strings.ToUpper(recordType)]; ok {
		return f[0], f[1]
	}
	return `the type's presentation format, or RFC 3597 \# <length> <hex>`, `\# 4 c0000201`
}

// CommonRecordTypes lists the types a zone usually holds, sorted: the
// candidates of a did-you-mean for an unknown type (every mnemonic of
// miekg/dns would suggest obscure ones).
func CommonRecordTypes() []string {
	out := make([]string, 0, len(targetFormats))
	for s := range targetFormats {
		if t, ok := dns.StringToType[s]; ok && unservable(t) == "" {
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

// RecordTypes lists every type mnemonic a record set may hold, sorted (the
// DNSRecordSet CRD's recordType rule lists the same; a test keeps them equal).
func RecordTypes() []string {
	out := make([]string, 0, len(dns.StringToType))
	for s, t := range dns.StringToType {
		if unservable(t) == "" {
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}
