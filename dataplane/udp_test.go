package dataplane

import (
	"net"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestUDPBurstAnswersEachPeer sends bursts from several sockets at once, so
// the batched loop reads many datagrams per recvmmsg, and checks every
// client gets exactly its own answers, on IPv4 and dual-stack IPv6 sockets,
// batched and unbatched.
func TestUDPBurstAnswersEachPeer(t *testing.T) {
	for _, tc := range []struct {
		name, listen, dial string
		single             bool
	}{
		{"v4", "127.0.0.1:0", "127.0.0.1", false},
		{"v4-single", "127.0.0.1:0", "127.0.0.1", true},
		{"v6", "[::1]:0", "::1", false},
		{"dualstack-v4", "[::]:0", "127.0.0.1", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.Listeners = []ListenerConfig{{Address: tc.listen, Protocols: []string{"udp"}}}
			cfg.Sockets = 1
			cfg.DisableUDPBatch = tc.single
			s, err := New(cfg, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Start(t.Context()); err != nil {
				t.Skipf("listen %s: %v", tc.listen, err)
			}
			t.Cleanup(func() { _ = s.Shutdown(t.Context()) })
			s.Swap(NewSnapshot(SnapshotInput{Authority: testTable(t)}))
			port := s.UDPAddrs()[0].Port()
			const clients, burst = 4, 48
			conns := make([]*net.UDPConn, clients)
			for i := range conns {
				c, err := net.DialUDP("udp", nil, &net.UDPAddr{IP: net.ParseIP(tc.dial), Port: int(port)})
				if err != nil {
					t.Skipf("dial %s: %v", tc.dial, err)
				}
				defer c.Close()
				conns[i] = c
			}
			for i, c := range conns {
				for j := range burst {
					m := query("www.example.com.", dns.TypeA)
					m.Id = uint16(i<<8 | j)
					b, _ := m.Pack()
					if _, err := c.Write(b); err != nil {
						t.Fatal(err)
					}
				}
			}
			for i, c := range conns {
				seen := map[uint16]bool{}
				buf := make([]byte, 1500)
				for len(seen) < burst {
					_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
					n, err := c.Read(buf)
					if err != nil {
						t.Fatalf("client %d: %d of %d answers: %v", i, len(seen), burst, err)
					}
					r := new(dns.Msg)
					if err := r.Unpack(buf[:n]); err != nil || int(r.Id>>8) != i || len(r.Answer) != 2 || !r.Authoritative {
						t.Fatalf("client %d: bad answer %v %v", i, r, err)
					}
					seen[r.Id] = true
				}
			}
		})
	}
}

// TestUDPLoopAllocs checks the socket loop adds no heap allocation per
// authoritative query: the client writes and reads prebuilt bytes on a
// connected socket (allocation-free), so the process-wide count is the
// server's.
func TestUDPLoopAllocs(t *testing.T) {
	cfg := testConfig()
	cfg.Listeners = []ListenerConfig{{Address: "127.0.0.1:0", Protocols: []string{"udp"}}}
	cfg.Sockets = 1
	s := startServer(t, cfg, NewSnapshot(SnapshotInput{Authority: testTable(t)}))
	allocs := udpAllocsPerQuery(t, s.UDPAddrs()[0])
	if allocs > 0.05 {
		t.Errorf("%.3f allocations per UDP query, want 0", allocs)
	}
}
