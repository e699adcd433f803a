package dataplane

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestWildcardAnswersFromQueryDestination sends queries on CONNECTED
// sockets (as every stub resolver does) to a secondary loopback address of
// a listener bound to a wildcard address: the kernel drops an answer from
// any other source, so without IP_PKTINFO/IPV6_PKTINFO the client times
// out. Authoritative answers (sent by the read loop) and forwarded ones
// (sent by the detached-answer replier) are checked, batched and unbatched,
// on dual-stack sockets (0.0.0.0 and [::]: Go binds both as IPv6, IPv4
// arrives IPv4-mapped) and on a plain IPv4 socket (IP_PKTINFO).
func TestWildcardAnswersFromQueryDestination(t *testing.T) {
	up := startUpstream(t)
	for _, tc := range []struct {
		name, listen string
		udp4, single bool
		dial         []string
	}{
		{"any4-batch", "0.0.0.0:0", false, false, []string{"127.0.0.2", "127.0.0.1"}},
		{"any4-single", "0.0.0.0:0", false, true, []string{"127.0.0.2", "127.0.0.1"}},
		{"any6-batch", "[::]:0", false, false, []string{"127.0.0.2", "::1"}},
		{"any6-single", "[::]:0", false, true, []string{"127.0.0.2", "::1"}},
		{"udp4-batch", "0.0.0.0:0", true, false, []string{"127.0.0.2", "127.0.0.1"}},
		{"udp4-single", "0.0.0.0:0", true, true, []string{"127.0.0.2", "127.0.0.1"}},
		// A socket bound to one address keeps its path (no control
		// messages) and answers from that address.
		{"bound-batch", "127.0.0.2:0", false, false, []string{"127.0.0.2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.Sockets = 1
			cfg.DisableUDPBatch = tc.single
			cfg.Listeners = []ListenerConfig{{Address: tc.listen, Protocols: []string{"udp"}}}
			if tc.udp4 {
				cfg.Listeners = nil
			}
			snap := NewSnapshot(SnapshotInput{Authority: testTable(t), Forwarder: &testForwarder{addr: up.addr}})
			s := startServer(t, cfg, snap)
			if tc.udp4 {
				serveExtraUDP(t, s, "udp4", tc.listen)
			}
			socks := udpSockets(t, s)
			if len(socks) != 1 {
				t.Fatalf("%d UDP sockets, want 1", len(socks))
			}
			if got := socks[0].pkt; got != (tc.name != "bound-batch") {
				t.Fatalf("wantsPktInfo(%s) = %v", socks[0].local, got)
			}
			port := socks[0].local.Port()
			for _, host := range tc.dial {
				to := netip.AddrPortFrom(netip.MustParseAddr(host), uint16(port))
				c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(to))
				if err != nil {
					if host == "::1" {
						t.Logf("no IPv6 loopback: %v", err)
						continue
					}
					t.Fatal(err)
				}
				defer c.Close()
				for _, name := range []string{"www.example.com.", "fwd.example.net."} {
					m := query(name, dns.TypeA)
					b, _ := m.Pack()
					if _, err := c.Write(b); err != nil {
						t.Fatal(err)
					}
					_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
					buf := make([]byte, 1500)
					n, err := c.Read(buf)
					if err != nil {
						t.Errorf("%s to %s on a connected socket: no answer (the answer left from another address?): %v", name, to, err)
						continue
					}
					r := new(dns.Msg)
					if err := r.Unpack(buf[:n]); err != nil || r.Id != m.Id || len(r.Answer) == 0 {
						t.Fatalf("%s to %s: bad answer %v %v", name, to, r, err)
					}
				}
			}
		})
	}
}

// serveExtraUDP serves one more socket of the given network ("udp4":
// a plain AF_INET socket, which a "udp" wildcard listener never is), the
// way listenOne does.
func serveExtraUDP(t *testing.T, s *Server, network, address string) {
	t.Helper()
	c, err := net.ListenUDP(network, net.UDPAddrFromAddrPort(netip.MustParseAddrPort(address)))
	if err != nil {
		t.Fatal(err)
	}
	if err := enablePktInfo(c); err != nil {
		c.Close()
		t.Fatal(err)
	}
	s.mu.Lock()
	s.udp = append(s.udp, c)
	s.wg.Add(1)
	s.mu.Unlock()
	go s.serveUDP(c)
}

// TestWildcardUDPLoopAllocs is TestUDPLoopAllocs on a wildcard listener,
// where every datagram carries its destination in and out: still no heap
// allocation per query, batched or not.
func TestWildcardUDPLoopAllocs(t *testing.T) {
	for _, single := range []bool{false, true} {
		cfg := testConfig()
		cfg.Listeners = []ListenerConfig{{Address: "0.0.0.0:0", Protocols: []string{"udp"}}}
		cfg.Sockets = 1
		cfg.DisableUDPBatch = single
		s := startServer(t, cfg, NewSnapshot(SnapshotInput{Authority: testTable(t)}))
		to := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.2"), s.UDPAddrs()[0].Port())
		allocs := udpAllocsPerQuery(t, to)
		t.Logf("single=%v: %.4f allocations per query", single, allocs)
		if allocs > 0.05 {
			t.Errorf("single=%v: %.3f allocations per UDP query, want 0", single, allocs)
		}
	}
}
