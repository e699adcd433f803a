package settings

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"
)

func num(s string) json.Number { return json.Number(s) }

// parseKey runs a registry key's parser, range checks included.
func parseKey(t *testing.T, path string, v any) (any, error) {
	t.Helper()
	for _, k := range registry() {
		if k.info.Key == path {
			return k.parse(v)
		}
	}
	t.Fatalf("no key %s", path)
	return nil, nil
}

func TestParseTypes(t *testing.T) {
	cases := []struct {
		key     string
		in      any
		want    any
		wantErr string
	}{
		// string
		{"node.name", "n1", "n1", ""},
		{"node.name", []any{}, nil, "expected a string"},
		// int and ranges
		{"cache.maxEntries", num("0"), 0, ""},
		{"cache.maxEntries", "1000", 1000, ""},
		{"cache.maxEntries", num("-1"), nil, "want >= 0"},
		{"cache.maxEntries", num("1.5"), nil, "invalid integer"},
		{"cache.maxEntries", "lots", nil, "invalid integer"},
		{"upstreams.ecs.ipv4Prefix", num("32"), 32, ""},
		{"upstreams.ecs.ipv4Prefix", num("33"), nil, "want 0 to 32"},
		{"upstreams.ecs.ipv6Prefix", num("128"), 128, ""},
		{"upstreams.ecs.ipv6Prefix", num("129"), nil, "want 0 to 128"},
		{"ratelimit.slip", num("101"), nil, "want 0 to 100"},
		{"blockPage.rateLimit", num("100000"), 100000, ""},
		{"blockPage.rateLimit", num("100001"), nil, "want 0 to 100000"},
		{"unblockRequests.rateLimit", num("0"), nil, "want 1 to 100"},
		{"unblockRequests.maxPending", num("10001"), nil, "want 1 to 10000"},
		{"auth.adminSocket.group", num("-1"), -1, ""},
		{"auth.adminSocket.group", num("-2"), nil, "want >= -1"},
		{"listeners.sockets", num("-1"), nil, "want >= 0"},
		// bool
		{"blocking.enabled", false, false, ""},
		{"blocking.enabled", "true", true, ""},
		{"blocking.enabled", "maybe", nil, "invalid bool"},
		{"blocking.enabled", num("1"), nil, "expected a bool"},
		// duration
		{"cache.minTTL", "5s", 5 * time.Second, ""},
		{"cache.minTTL", "1800ms", 1800 * time.Millisecond, ""},
		{"cache.minTTL", num("0"), time.Duration(0), ""},
		{"cache.minTTL", "0", time.Duration(0), ""},
		{"cache.minTTL", num("5"), nil, "a unit is required"},
		{"cache.minTTL", "5x", nil, `invalid duration "5x"`},
		{"cache.minTTL", "-1s", nil, "negative"},
		{"blocking.refreshInterval", "59s", nil, "want at least 1m"},
		{"blocking.refreshInterval", "1m", time.Minute, ""},
		{"unblockRequests.pendingExpiry", "30m", nil, "want at least 1h"},
		// bytes
		{"querylog.retention.maxDBBytes", "10GiB", int64(10 << 30), ""},
		{"querylog.retention.maxDBBytes", "500MB", int64(500e6), ""},
		{"querylog.retention.maxDBBytes", "2Ki", int64(2048), ""},
		{"querylog.retention.maxDBBytes", num("1024"), int64(1024), ""},
		{"querylog.retention.maxDBBytes", "0", int64(0), ""},
		{"querylog.retention.maxDBBytes", "10XB", nil, "invalid size"},
		{"querylog.retention.maxDBBytes", "-1GiB", nil, "invalid size"},
		{"querylog.retention.maxDBBytes", "9999999999TiB", nil, "too large"},
		// hostport
		{"listeners.api.address", "127.0.0.1:8080", "127.0.0.1:8080", ""},
		{"listeners.api.address", "[::1]:8080", "[::1]:8080", ""},
		{"listeners.api.address", "localhost:80", "localhost:80", ""},
		{"listeners.blockPage.http", ":80", ":80", ""},
		{"listeners.blockPage.http", "", "", ""},
		{"listeners.api.address", "127.0.0.1", nil, "invalid host:port"},
		{"listeners.api.address", "127.0.0.1:99999", nil, "bad port"},
		{"listeners.api.address", "bad host!:80", nil, "bad host"},
		// cidr[]
		{"ratelimit.exempt", []any{"10.0.0.0/8", "192.0.2.1", "2001:db8::/32"}, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.1/32"), netip.MustParsePrefix("2001:db8::/32")}, ""},
		{"ratelimit.exempt", "10.1.2.3/8, 127.0.0.1", []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("127.0.0.1/32")}, ""},
		{"ratelimit.exempt", []any{"10.0.0.0/33"}, nil, "invalid CIDR"},
		{"ratelimit.exempt", []any{num("1")}, nil, "item 0: expected a string"},
		// string[]
		{"querylog.exclude.domains", "a.example, *.b.example,/^ads\\./", []string{"a.example", "*.b.example", `/^ads\./`}, ""},
		{"querylog.exclude.domains", []any{"/([/"}, nil, "invalid pattern"},
		{"querylog.exclude.domains", []any{"bad domain"}, nil, "invalid domain"},
		{"querylog.exclude.clients", []any{"10.0.0.0/8", "laptop"}, []string{"10.0.0.0/8", "laptop"}, ""},
		{"querylog.exclude.clients", []any{"a b"}, nil, "invalid client"},
		// url
		{"blockPage.dashboardURL", "https://dns.example/", "https://dns.example/", ""},
		{"blockPage.dashboardURL", "", "", ""},
		{"blockPage.dashboardURL", "ftp://x", nil, "invalid URL"},
		{"blockPage.dashboardURL", "/relative", nil, "invalid URL"},
		// ipv4, ipv6
		{"blocking.customIP.v4", "192.0.2.1", netip.MustParseAddr("192.0.2.1"), ""},
		{"blocking.customIP.v4", "", netip.Addr{}, ""},
		{"blocking.customIP.v4", "2001:db8::1", nil, "invalid IPv4"},
		{"blocking.customIP.v6", "2001:db8::1", netip.MustParseAddr("2001:db8::1"), ""},
		{"blocking.customIP.v6", "192.0.2.1", nil, "invalid IPv6"},
		{"blocking.customIP.v6", "::ffff:192.0.2.1", nil, "invalid IPv6"},
		// domain
		{"listeners.internal.tls.serverName", "node.svc.example.", "node.svc.example.", ""},
		{"listeners.internal.tls.serverName", "a..b", nil, "invalid domain"},
		{"listeners.internal.tls.serverName", strings.Repeat("a", 64) + ".example", nil, "invalid domain"},
		// enums
		{"store.driver", "kube", "kube", ""},
		{"store.driver", "etcd", nil, "want one of sqlite, kube"},
		{"blocking.defaultResponse", "blockPage", "blockPage", ""},
		{"blocking.defaultResponse", "zeroip", nil, "want one of"},
		{"querylog.privacy", "hide_domains_clients", "hide_domains_clients", ""},
		{"auth.localLogin", "admins-only", "admins-only", ""},
		{"auth.kubernetes.mode", "impersonate", nil, "only sar is supported"},
		{"auth.session.secure", true, "true", ""},
		{"auth.session.secure", "AUTO", "auto", ""},
		{"auth.session.secure", "sometimes", nil, "want auto, true or false"},
		// strings with limits
		{"blockPage.title", strings.Repeat("é", 200), strings.Repeat("é", 200), ""},
		{"blockPage.title", strings.Repeat("x", 201), nil, "at most 200"},
		{"listeners.api.pathPrefix", "/dns", "/dns", ""},
		{"listeners.api.pathPrefix", "dns", nil, "invalid path prefix"},
		// upstream[]
		{"upstreams.bootstrap", "1.1.1.1:53,9.9.9.9", []string{"1.1.1.1:53", "9.9.9.9"}, ""},
		{"upstreams.bootstrap", []any{"tls://1.1.1.1:853"}, []string{"tls://1.1.1.1:853"}, ""},
		{"upstreams.bootstrap", []any{"dns.example:53"}, nil, "must name an IP"},
		{"upstreams.bootstrap", []any{"gopher://1.1.1.1"}, nil, "invalid upstream"},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s=%v", c.key, c.in), func(t *testing.T) {
			got, err := parseKey(t, c.key, c.in)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want containing %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %#v, want %#v", got, c.want)
			}
		})
	}
}

func TestParseLists(t *testing.T) {
	m := func(kv ...any) map[string]any {
		out := map[string]any{}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i].(string)] = kv[i+1]
		}
		return out
	}
	tls := m("certFile", "c.pem", "keyFile", "k.pem")
	cases := []struct {
		key     string
		in      any
		want    any
		wantErr string
	}{
		{"listeners.dns", []any{m("address", "127.0.0.1:53")}, []DNSListener{{Address: "127.0.0.1:53", Protocols: []string{"udp", "tcp"}}}, ""},
		{"listeners.dns", []any{m("address", "127.0.0.1:53", "protocols", []any{"udp"})}, []DNSListener{{Address: "127.0.0.1:53", Protocols: []string{"udp"}}}, ""},
		{"listeners.dns", []any{m("address", "127.0.0.1:53", "protocols", []any{"sctp"})}, nil, `invalid or repeated "sctp"`},
		{"listeners.dns", []any{m("address", "127.0.0.1:53", "protocols", []any{})}, nil, "at least one"},
		{"listeners.dns", []any{m("protocols", []any{"udp"})}, nil, `item 0: field "address" is required`},
		{"listeners.dns", []any{m("address", "127.0.0.1:53", "port", num("53"))}, nil, `unknown field "port"`},
		{"listeners.dns", "0.0.0.0:53", nil, "expected a list"},
		{"listeners.dot", []any{m("address", ":853", "tls", tls)}, []TLSListener{{Address: ":853", TLS: TLSFiles{"c.pem", "k.pem"}}}, ""},
		{"listeners.dot", []any{m("address", ":853")}, nil, `field "tls" is required`},
		{"listeners.doq", []any{m("address", ":853", "tls", m("certFile", "c.pem"))}, nil, `field "keyFile" is required`},
		{"listeners.doh", []any{m("address", ":443", "tls", tls)}, []HTTPSListener{{Address: ":443", TLS: TLSFiles{"c.pem", "k.pem"}, Path: "/dns-query"}}, ""},
		{"listeners.doh3", []any{m("address", ":443", "tls", tls, "path", "/q")}, []HTTPSListener{{Address: ":443", TLS: TLSFiles{"c.pem", "k.pem"}, Path: "/q"}}, ""},
		{"listeners.doh", []any{m("address", ":443", "tls", tls, "path", "q")}, nil, "path"},
		{"tsigKeys", []any{m("name", "xfr.", "algorithm", "hmac-sha256", "secretFile", "/s")}, []TSIGKey{{"xfr.", "hmac-sha256", "/s"}}, ""},
		{"tsigKeys", []any{m("name", "xfr.", "algorithm", "hmac-md5", "secretFile", "/s")}, nil, "algorithm"},
		{"tsigKeys", []any{m("name", "a", "algorithm", "hmac-sha256", "secretFile", "/s"), m("name", "A", "algorithm", "hmac-sha512", "secretFile", "/t")}, nil, "repeated name"},
		{"upstreams.groups", m("corp", m("servers", []any{"10.0.0.1:53", "https://dns.corp.example/dns-query"})), map[string]UpstreamGroup{"corp": {Servers: []string{"10.0.0.1:53", "https://dns.corp.example/dns-query"}, Strategy: "parallel_best", Timeout: 2 * time.Second}}, ""},
		{"upstreams.groups", m("corp", m("servers", []any{"10.0.0.1"}, "strategy", "rtt_weighted", "timeout", "500ms")), map[string]UpstreamGroup{"corp": {Servers: []string{"10.0.0.1"}, Strategy: "rtt_weighted", Timeout: 500 * time.Millisecond}}, ""},
		{"upstreams.groups", m("corp", m("servers", []any{})), nil, "at least one"},
		{"upstreams.groups", m("corp", m("servers", []any{"10.0.0.1"}, "strategy", "fastest")), nil, `strategy: invalid value "fastest"`},
		{"upstreams.groups", m("corp", m("servers", []any{"10.0.0.1"}, "timeout", "0s")), nil, "above 0"},
		{"upstreams.groups", m("-bad", m("servers", []any{"10.0.0.1"})), nil, "invalid group name"},
		{"upstreams.conditional", m("Corp.Example", "corp"), map[string]string{"corp.example.": "corp"}, ""},
		{"upstreams.conditional", m("corp.example", num("1")), nil, "want a group name"},
		{"ratelimit.ipv4", m("16", num("100")), map[int]int{16: 100}, ""},
		{"ratelimit.ipv4", m("33", num("100")), nil, "want 0 to 32"},
		{"ratelimit.ipv6", m("128", num("0")), map[int]int{128: 0}, ""},
		{"ratelimit.ipv6", m("64", num("-5")), nil, "invalid queries per minute"},
		{"objects", []any{m("kind", "DNSZone", "metadata", m("name", "example."))}, []map[string]any{m("kind", "DNSZone", "metadata", m("name", "example."))}, ""},
		{"objects", []any{m("metadata", m())}, nil, `field "kind" is required`},
		{"auth.identityProviders", []any{m("id", "corp"), m("id", "corp")}, nil, `repeated id "corp"`},
		{"rbac.bindings", []any{"admin"}, nil, "expected a map"},
	}
	for i, c := range cases {
		t.Run(fmt.Sprintf("%d_%s", i, c.key), func(t *testing.T) {
			got, err := parseKey(t, c.key, c.in)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want containing %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %#v, want %#v", got, c.want)
			}
		})
	}
}

func TestFormatRoundTrip(t *testing.T) {
	cases := []struct {
		in   time.Duration
		want string
	}{{0, "0s"}, {2 * time.Second, "2s"}, {1800 * time.Millisecond, "1800ms"}, {24 * time.Hour, "24h"}, {90 * time.Minute, "90m"}, {1500 * time.Microsecond, "1.5ms"}}
	for _, c := range cases {
		if got := formatDuration(c.in); got != c.want {
			t.Errorf("formatDuration(%v) = %v, want %s", c.in, got, c.want)
		}
		back, err := parseDuration(formatDuration(c.in))
		if err != nil || back != c.in {
			t.Errorf("round trip of %v: %v, %v", c.in, back, err)
		}
	}
	for _, n := range []int64{0, 1, 1023, 1024, 10 << 30, 1 << 40, 500e6} {
		back, err := parseBytes(formatBytes(n))
		if err != nil || back != n {
			t.Errorf("bytes round trip of %d via %v: %d, %v", n, formatBytes(n), back, err)
		}
	}
	// Every key's default survives format then parse, so defaults written to a
	// file read back the same.
	for _, k := range registry() {
		back, err := k.parse(k.format(k.def))
		if err != nil {
			t.Errorf("%s: default does not parse back: %v", k.info.Key, err)
			continue
		}
		if !reflect.DeepEqual(k.format(back), k.format(k.def)) {
			t.Errorf("%s: default changed in round trip: %#v", k.info.Key, k.format(back))
		}
	}
}

func TestGlobalPolicyNamespacesKey(t *testing.T) {
	v, err := parseKey(t, "blocking.globalPolicyNamespaces", "platform, *")
	if err != nil || !reflect.DeepEqual(v, []string{"platform", "*"}) {
		t.Fatalf("parse: %v %v", v, err)
	}
	for _, bad := range []string{"Platform", "team_a", "-x", strings.Repeat("a", 64)} {
		if _, err := parseKey(t, "blocking.globalPolicyNamespaces", bad); err == nil || !strings.Contains(err.Error(), "namespace") {
			t.Errorf("%q accepted (%v)", bad, err)
		}
	}
}
