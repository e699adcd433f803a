package node

import (
	"net/netip"
	"testing"

	"github.com/svcdns/svc/internal/settings"
)

// TestBlockPageAddrs: the A/AAAA answers of block mode blockPage.
func TestBlockPageAddrs(t *testing.T) {
	a := netip.MustParseAddr
	cases := []struct {
		name        string
		enabled     bool
		ipv4, ipv6  string
		http, https string
		want4       string
		want6       string
	}{
		{"configured wins", true, "192.0.2.80", "", "10.0.0.1:80", "", "192.0.2.80", ""},
		{"listener IPv4", true, "", "", "10.0.0.1:80", "", "10.0.0.1", ""},
		{"listener IPv6", true, "", "", "[2001:db8::1]:80", "", "", "2001:db8::1"},
		{"one of each", true, "", "", "10.0.0.1:80", "[2001:db8::1]:443", "10.0.0.1", "2001:db8::1"},
		{"http first", true, "", "", "10.0.0.1:80", "10.0.0.2:443", "10.0.0.1", ""},
		{"unspecified skipped", true, "", "", ":80", "10.0.0.2:443", "10.0.0.2", ""},
		{"0.0.0.0 skipped", true, "", "", "0.0.0.0:80", "", "", ""},
		{"mapped IPv4", true, "", "", "[::ffff:10.0.0.3]:80", "", "10.0.0.3", ""},
		{"off: configured only", false, "", "", "10.0.0.1:80", "", "", ""},
		{"off: configured", false, "192.0.2.80", "2001:db8::80", "", "", "192.0.2.80", "2001:db8::80"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := &settings.Config{}
			cfg.BlockPage.Enabled = c.enabled
			if c.ipv4 != "" {
				cfg.BlockPage.IPv4 = a(c.ipv4)
			}
			if c.ipv6 != "" {
				cfg.BlockPage.IPv6 = a(c.ipv6)
			}
			cfg.Listeners.BlockPage.HTTP, cfg.Listeners.BlockPage.HTTPS = c.http, c.https
			v4, v6 := blockPageAddrs(cfg)
			str := func(x netip.Addr) string {
				if !x.IsValid() {
					return ""
				}
				return x.String()
			}
			if str(v4) != c.want4 || str(v6) != c.want6 {
				t.Errorf("got %q %q, want %q %q", str(v4), str(v6), c.want4, c.want6)
			}
		})
	}
}
