package node_test

import (
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/dataplane/proxyproto"
	"github.com/svcdns/svc/test/nodetest"
)

// TestNodeRateLimitsUDPBehindProxyProtocol configures the UDP rate limit
// and a PROXY v2 peer in the files a user writes: a load balancer on
// loopback forwards datagrams from 192.0.2.1, which floods, and from
// 192.0.2.2. The limit applies to the address in the header (loopback, the
// peer, is never limited): the flood is cut to the rate (60 per minute per
// /32 here: a burst of 1) with about half the rest answered TC=1, the other
// client is answered, and the health name always passes. Turning the limit
// off in the settings file lets the flood through without a restart.
func TestNodeRateLimitsUDPBehindProxyProtocol(t *testing.T) {
	tn := startNode(t, nodetest.ProxyProtocolFrom("127.0.0.1/32"), nodetest.SettingsFile(),
		nodetest.ExtraYAML("ratelimit:\n  ipv4: {\"32\": 60, \"24\": 0}\n  slip: 50\n"),
		nodetest.Objects(map[string]string{"zone.yaml": zoneDoc}))
	srv := netip.MustParseAddrPort(tn.DNSAddr("udp"))
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// ask sends n queries for name as client src through the PROXY peer and
	// counts full answers and TC=1 answers.
	ask := func(src string, name string, n int) (answered, tc int) {
		hdr := proxyproto.Append(nil, netip.MustParseAddrPort(src), srv, nil)
		for i := range n {
			m := new(dns.Msg)
			m.SetQuestion(name, dns.TypeA)
			m.Id = uint16(i + 1)
			b, _ := m.Pack()
			if _, err := c.WriteToUDPAddrPort(append(append([]byte(nil), hdr...), b...), srv); err != nil {
				t.Fatal(err)
			}
		}
		buf := make([]byte, 1500)
		for {
			_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
			k, err := c.Read(buf)
			if err != nil {
				return answered, tc
			}
			m := new(dns.Msg)
			if err := m.Unpack(buf[:k]); err != nil {
				t.Fatal(err)
			}
			if m.Truncated {
				tc++
			} else {
				answered++
			}
		}
	}
	answered, tc := ask("192.0.2.1:5000", "www.example.test.", 40)
	if answered < 1 || answered > 3 {
		t.Errorf("flood of 40: %d answered, want the burst (1, at most 3 with refills)", answered)
	}
	if limited := 40 - answered; tc < limited/4 || tc > limited*3/4 {
		t.Errorf("flood: %d of %d limited queries answered TC=1, want about half (slip 50)", tc, limited)
	}
	if a, _ := ask("192.0.2.2:5000", "www.example.test.", 1); a != 1 {
		t.Errorf("another client: %d answers, want 1", a)
	}
	if a, _ := ask("192.0.2.1:5000", "health.service.internal.", 3); a != 3 {
		t.Errorf("health name from the limited client: %d of 3 answered", a)
	}
	if err := os.WriteFile(filepath.Join(tn.Dir, "data", "settings.yaml"), []byte("ratelimit:\n  enabled: false\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	nodetest.Eventually(t, 10*time.Second, "the flood answered once the limit is off", func() bool {
		a, _ := ask("192.0.2.1:5000", "www.example.test.", 20)
		return a == 20
	})
}
