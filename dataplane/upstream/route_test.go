package upstream

import (
	"context"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func TestRoute(t *testing.T) {
	r := newResolver(t, Config{
		Groups: map[string]GroupConfig{
			DefaultGroup: {Servers: []string{"192.0.2.1"}},
			"corp":       {Servers: []string{"192.0.2.2"}},
			"deep":       {Servers: []string{"192.0.2.3"}},
			"lan":        {Servers: []string{"192.0.2.4"}},
		},
		Conditional: map[string]string{"corp.example": "corp", "A.Corp.Example.": "deep", "lan.": "lan"},
	})
	cases := []struct {
		qname string
		group string
		cond  bool
	}{
		{"corp.example.", "corp", true},
		{"www.corp.example.", "corp", true},
		{"x.a.corp.example.", "deep", true}, // longest suffix wins
		{"a.corp.example.", "deep", true},
		{"X.A.CORP.EXAMPLE.", "deep", true}, // case-insensitive
		{"b.corp.example", "corp", true},    // not fully qualified
		{"notcorp.example.", "", false},     // label boundary
		{"acorp.example.", "", false},
		{"corp.example.org.", "", false},
		{"printer.lan.", "lan", true},
		{"lan.", "lan", true},
		{"example.org.", "", false},
		{".", "", false},
		{"", "", false},
		{`a\.corp.example.`, "", false}, // labels "a.corp" and "example"
		{`x.a\.corp.example.`, "", false},
	}
	for _, tc := range cases {
		g, cond := r.Route(tc.qname)
		if g != tc.group || cond != tc.cond {
			t.Errorf("Route(%q) = %q, %v; want %q, %v", tc.qname, g, cond, tc.group, tc.cond)
		}
	}
}

func TestRouteRootSuffix(t *testing.T) {
	r := newResolver(t, Config{
		Groups:      map[string]GroupConfig{"all": {Servers: []string{"192.0.2.1"}}, "corp": {Servers: []string{"192.0.2.2"}}},
		Conditional: map[string]string{".": "all", "corp.example": "corp"},
	})
	for q, want := range map[string]string{"example.org.": "all", "x.corp.example.": "corp", ".": "all"} {
		if g, ok := r.Route(q); !ok || g != want {
			t.Errorf("Route(%q) = %q, %v; want %q", q, g, ok, want)
		}
	}
}

// TestForwardConditional: with no group named, the conditional group's
// servers answer names under its suffix and the default group the rest;
// a named group overrides routing.
func TestForwardConditional(t *testing.T) {
	def := startUDP(t, answerA("192.0.2.40"))
	corp := startUDP(t, answerA("10.0.0.40"))
	r := newResolver(t, Config{
		Groups: map[string]GroupConfig{
			DefaultGroup: {Servers: []string{def}, Strategy: Strict, Timeout: time.Second},
			"corp":       {Servers: []string{corp}, Strategy: Strict, Timeout: time.Second},
		},
		Conditional: map[string]string{"corp.example": "corp"},
	})
	for _, tc := range []struct{ group, name, want string }{
		{"", "host.CORP.example", "10.0.0.40"},
		{"", "www.example.org", "192.0.2.40"},
		{"default", "host.corp.example", "192.0.2.40"},
		{"corp", "www.example.org", "10.0.0.40"},
	} {
		resp, _, err := r.Forward(context.Background(), tc.group, query(tc.name, dns.TypeA), clientAddr)
		if err != nil {
			t.Fatal(err)
		}
		if got := firstA(t, resp); got != tc.want {
			t.Errorf("group %q name %s: answer %s, want %s", tc.group, tc.name, got, tc.want)
		}
	}
	if _, _, err := r.Forward(context.Background(), "nope", query("x.example", dns.TypeA), clientAddr); err == nil {
		t.Error("unknown group accepted")
	}
}

func BenchmarkRoute(b *testing.B) {
	rt := router{suffixes: map[string]string{"corp.example.": "corp", "lan.": "lan"}}
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := rt.route("www.some.deep.name.example.org."); ok {
			b.Fatal("matched")
		}
	}
}
