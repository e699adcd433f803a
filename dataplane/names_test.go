package dataplane

import (
	"testing"

	"github.com/miekg/dns"
)

// TypeString and RcodeString give the library's name for every type and
// rcode it names, from the arrays or the maps, and the generic form for
// the others.
func TestTypeAndRcodeNames(t *testing.T) {
	for typ, want := range dns.TypeToString {
		if got := TypeString(typ); got != want {
			t.Errorf("TypeString(%d) = %q, want %q", typ, got, want)
		}
	}
	for c, want := range dns.RcodeToString {
		if got := RcodeString(c); got != want {
			t.Errorf("RcodeString(%d) = %q, want %q", c, got, want)
		}
	}
	for _, tc := range []struct {
		typ  uint16
		want string
	}{{1, "A"}, {28, "AAAA"}, {255, "ANY"}, {257, "CAA"}, {254, "MAILA"}, {251, "IXFR"}, {200, "TYPE200"}, {65280, "TYPE65280"}, {0, "None"}} {
		if got := TypeString(tc.typ); got != tc.want {
			t.Errorf("TypeString(%d) = %q, want %q", tc.typ, got, tc.want)
		}
	}
	for _, tc := range []struct {
		c    int
		want string
	}{{0, "NOERROR"}, {3, "NXDOMAIN"}, {23, "BADCOOKIE"}, {12, "RCODE12"}, {31, "RCODE31"}, {-1, "RCODE-1"}, {4096, "RCODE4096"}} {
		if got := RcodeString(tc.c); got != tc.want {
			t.Errorf("RcodeString(%d) = %q, want %q", tc.c, got, tc.want)
		}
	}
}
