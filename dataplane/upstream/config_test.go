package upstream

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestDefaultConfig(t *testing.T) {
	c := DefaultConfig()
	g := c.Groups[DefaultGroup]
	if strings.Join(g.Servers, ",") != "1.1.1.1:53,9.9.9.9:53" || g.Strategy != ParallelBest || g.Timeout != 2*time.Second {
		t.Errorf("default group %+v", g)
	}
	if strings.Join(c.Bootstrap, ",") != "1.1.1.1:53" {
		t.Errorf("bootstrap %v", c.Bootstrap)
	}
	if c.ECS != (ECSConfig{Mode: ECSStrip, IPv4Prefix: 24, IPv6Prefix: 56}) {
		t.Errorf("ecs %+v", c.ECS)
	}
	// Zero values mean the defaults.
	r, err := New(Config{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	dg := r.groups[DefaultGroup]
	if len(dg.ups) != 2 || dg.strategy != ParallelBest || dg.timeout != DefaultTimeout || r.cfg.ECS.Mode != ECSStrip {
		t.Errorf("zero config gave %+v, ecs %q", dg, r.cfg.ECS.Mode)
	}
}

func TestConfigErrors(t *testing.T) {
	ok := GroupConfig{Servers: []string{"192.0.2.1"}}
	cases := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no servers", Config{Groups: map[string]GroupConfig{"g": {}}}, "no servers"},
		{"bad strategy", Config{Groups: map[string]GroupConfig{"g": {Servers: []string{"192.0.2.1"}, Strategy: "fastest"}}}, "unknown strategy"},
		{"negative timeout", Config{Groups: map[string]GroupConfig{"g": {Servers: []string{"192.0.2.1"}, Timeout: -1}}}, "negative timeout"},
		{"bad server", Config{Groups: map[string]GroupConfig{"g": {Servers: []string{"ftp://x"}}}}, "unknown scheme"},
		{"duplicate server", Config{Groups: map[string]GroupConfig{"g": {Servers: []string{"192.0.2.1", "udp://192.0.2.1:53"}}}}, "twice"},
		{"conditional to unknown group", Config{Groups: map[string]GroupConfig{"g": ok}, Conditional: map[string]string{"corp": "nope"}}, "unknown upstream group"},
		{"bad suffix", Config{Groups: map[string]GroupConfig{"g": ok}, Conditional: map[string]string{"a..b": "g"}}, "not a domain name"},
		{"bad ecs mode", Config{ECS: ECSConfig{Mode: "drop"}}, "ecs.mode"},
		{"v4 prefix", Config{ECS: ECSConfig{IPv4Prefix: 33}}, "ipv4Prefix"},
		{"v6 prefix", Config{ECS: ECSConfig{IPv6Prefix: -1}}, "ipv6Prefix"},
		{"bootstrap name", Config{Bootstrap: []string{"dns.google"}}, "must be an IP"},
		{"bootstrap encrypted", Config{Bootstrap: []string{"tls://1.1.1.1"}}, "plain DNS"},
		{"ca file missing", Config{CAFile: "/nonexistent/ca.pem"}, "CA file"},
	}
	for _, tc := range cases {
		_, err := New(tc.cfg, nil, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

// TestNewTwiceOnOneRegistry: reconfiguration builds a new Resolver on the
// same registerer; it must not fail, and counters carry on.
func TestNewTwiceOnOneRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	servfail := startUDP(t, answerRcode(dns.RcodeServerFailure))
	cfg := group1(Strict, time.Second, servfail)
	cfg.Bootstrap = []string{}
	for i := range 3 {
		r, err := New(cfg, nil, reg)
		if err != nil {
			t.Fatalf("New #%d: %v", i+1, err)
		}
		if _, _, err := r.Forward(context.Background(), "", query("m.example", dns.TypeA), clientAddr); err != nil {
			t.Fatal(err)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
	want := `
# HELP service_upstream_errors_total Failed exchanges with an upstream, by group, upstream and reason.
# TYPE service_upstream_errors_total counter
service_upstream_errors_total{group="default",reason="bootstrap",upstream="` + servfail + `"} 0
service_upstream_errors_total{group="default",reason="http",upstream="` + servfail + `"} 0
service_upstream_errors_total{group="default",reason="malformed",upstream="` + servfail + `"} 0
service_upstream_errors_total{group="default",reason="mismatch",upstream="` + servfail + `"} 0
service_upstream_errors_total{group="default",reason="network",upstream="` + servfail + `"} 0
service_upstream_errors_total{group="default",reason="refused",upstream="` + servfail + `"} 0
service_upstream_errors_total{group="default",reason="servfail",upstream="` + servfail + `"} 3
service_upstream_errors_total{group="default",reason="timeout",upstream="` + servfail + `"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "service_upstream_errors_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(mustGet(t, reg), "service_upstream_request_duration_seconds"); n != 1 {
		t.Errorf("%d latency series, want 1", n)
	}
}

func mustGet(t *testing.T, reg *prometheus.Registry) prometheus.Collector {
	t.Helper()
	m, err := newMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	return m.latency
}
