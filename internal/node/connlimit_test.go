package node

import (
	"testing"

	"github.com/svcdns/svc/internal/settings"
)

func TestConnLimit(t *testing.T) {
	cases := []struct {
		nofile uint64
		pools  int
		want   int
	}{
		{0, 3, maxConnsPerPool},             // unknown: the maximum
		{1048576, 3, maxConnsPerPool},       // containers' usual limit
		{20000, 3, (20000 - fdReserve) / 3}, // shared evenly
		{20000, 0, 20000 - fdReserve},       // no pools counted: one
		{4096, 1, 4096 - fdReserve},
		{1024, 3, minConnsPerPool}, // below the reserve: the floor
	}
	for _, c := range cases {
		if got := connLimit(c.nofile, c.pools); got != c.want {
			t.Errorf("connLimit(%d, %d) = %d, want %d", c.nofile, c.pools, got, c.want)
		}
	}
}

func TestStreamPools(t *testing.T) {
	tls := settings.TLSListener{Address: "127.0.0.1:853"}
	https := settings.HTTPSListener{Address: "127.0.0.1:443"}
	cases := []struct {
		name string
		cfg  settings.Config
		want int
	}{
		{"udp only", settings.Config{Listeners: settings.Listeners{DNS: []settings.DNSListener{{Address: ":53", Protocols: []string{"udp"}}}}}, 0},
		{"two tcp listeners share one pool", settings.Config{Listeners: settings.Listeners{DNS: []settings.DNSListener{
			{Address: ":53", Protocols: []string{"udp", "tcp"}}, {Address: ":5353", Protocols: []string{"tcp"}}}}}, 1},
		{"dot and doh", settings.Config{Listeners: settings.Listeners{DNS: []settings.DNSListener{{Address: ":53"}},
			DoT: []settings.TLSListener{tls, tls}, DoH: []settings.HTTPSListener{https}}}, 4},
	}
	for _, c := range cases {
		if got := streamPools(&c.cfg); got != c.want {
			t.Errorf("%s: %d pools, want %d", c.name, got, c.want)
		}
	}
}
