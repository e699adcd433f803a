package upstream

import (
	"strings"
	"testing"
)

func TestParseAddress(t *testing.T) {
	cases := []struct {
		in   string
		want string // canonical form; "" means an error
	}{
		{"1.2.3.4", "udp://1.2.3.4:53"},
		{"1.2.3.4:5353", "udp://1.2.3.4:5353"},
		{" 1.2.3.4:53 ", "udp://1.2.3.4:53"},
		{"2001:db8::1", "udp://[2001:db8::1]:53"},
		{"[2001:db8::1]:53", "udp://[2001:db8::1]:53"},
		{"[2001:db8::1]", "udp://[2001:db8::1]:53"},
		{"::ffff:1.2.3.4", "udp://1.2.3.4:53"},
		{"dns.example", "udp://dns.example:53"},
		{"DNS.Example.:53", "udp://dns.example:53"},
		{"udp://dns.example:5353", "udp://dns.example:5353"},
		{"UDP://1.1.1.1", "udp://1.1.1.1:53"},
		{"tcp://1.1.1.1", "tcp://1.1.1.1:53"},
		{"tcp://[2606:4700::1111]:53", "tcp://[2606:4700::1111]:53"},
		{"tls://dns.example", "tls://dns.example:853"},
		{"tls://dns.example:8853", "tls://dns.example:8853"},
		{"tls://1.1.1.1", "tls://1.1.1.1:853"},
		{"quic://dns.example", "quic://dns.example:853"},
		{"quic://[2001:db8::1]:784", "quic://[2001:db8::1]:784"},
		{"https://dns.example/dns-query", "https://dns.example:443/dns-query"},
		{"https://dns.example", "https://dns.example:443/dns-query"},
		{"https://dns.example:8443/custom/path?x=1", "https://dns.example:8443/custom/path?x=1"},
		{"https://1.1.1.1/dns-query", "https://1.1.1.1:443/dns-query"},
		{"https://[2001:db8::1]:443/q", "https://[2001:db8::1]:443/q"},
		{"sdns://AQcAAAAAAAAA", ""},
		{"ftp://1.1.1.1", ""},
		{"", ""},
		{"   ", ""},
		{"1.2.3.4:0", ""},
		{"1.2.3.4:65536", ""},
		{"1.2.3.4:abc", ""},
		{"1.2.3.4:", ""},
		{"2001:db8::1:53:x", ""},
		{"[2001:db8::1", ""},
		{"[1.2.3.4]:53", ""},
		{"[2001:db8::1]x", ""},
		{"fe80::1%eth0", ""},
		{"999.1.1.1", ""},
		{"1.2.3", ""},
		{"bad_host!", ""},
		{"a..b", ""},
		{".", ""},
		{"udp://", ""},
		{"tcp://1.1.1.1/path", ""},
		{"tls://user@dns.example", ""},
		{"https://user@dns.example/q", ""},
		{"https://dns.example/q#frag", ""},
		{"https:///dns-query", ""},
		{"tls://" + strings.Repeat("a", 64) + ".example", ""},
		{strings.Repeat("a", 2000), ""},
	}
	for _, tc := range cases {
		a, err := ParseAddress(tc.in)
		if tc.want == "" {
			if err == nil {
				t.Errorf("ParseAddress(%q) = %v, want an error", tc.in, a)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseAddress(%q): %v", tc.in, err)
			continue
		}
		if got := a.String(); got != tc.want {
			t.Errorf("ParseAddress(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// FuzzParseAddress: the parser never panics, and what it accepts has a
// canonical form that parses back to the same address.
func FuzzParseAddress(f *testing.F) {
	for _, s := range []string{
		"1.2.3.4", "[2001:db8::1]:53", "udp://h:1", "tcp://h", "tls://dns.example:853",
		"https://dns.example/dns-query?a=b", "quic://[::1]:853", "https://h:99/%2F", "a.b:65535",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseAddress(s)
		if err != nil {
			return
		}
		if a.Port == 0 || a.Host == "" {
			t.Fatalf("ParseAddress(%q) = %+v: empty host or port", s, a)
		}
		b, err := ParseAddress(a.String())
		if err != nil {
			t.Fatalf("canonical %q of %q does not parse: %v", a.String(), s, err)
		}
		if a != b {
			t.Fatalf("round trip of %q: %+v then %+v", s, a, b)
		}
	})
}
